"""The one text reader (`common.text`): encodings, byte-order marks, newlines, boilerplate, folders of books."""

from __future__ import annotations

import logging

import pytest

from lm_eval_longmem.booksort.build import load_books
from lm_eval_longmem.common.corpus import load_texts
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.text import book_files, read_book, read_text, strip_gutenberg

BOOK = "\n".join(
    [
        "Title: A Small Book",
        "*** START OF THE PROJECT GUTENBERG EBOOK A SMALL BOOK ***",
        "",
        "CHAPTER I",
        "",
        "Anna walked to the mill.  It was far.",
        "“Is it far?” asked Tom.",
        "",
        "*** END OF THE PROJECT GUTENBERG EBOOK A SMALL BOOK ***",
        "Licence text.",
        "",
    ]
)


def variants(text: str) -> dict[str, bytes]:
    """The same text as LF, CRLF and CR files, each with and without a UTF-8 byte-order mark."""
    lf = text.encode("utf-8")
    endings = {"lf": lf, "crlf": lf.replace(b"\n", b"\r\n"), "cr": lf.replace(b"\n", b"\r")}
    out = {}
    for name, data in endings.items():
        out[name] = data
        out[f"{name}+bom"] = b"\xef\xbb\xbf" + data
    return out


def test_line_endings_and_byte_order_marks_give_the_same_text(tmp_path):
    texts = {}
    for name, data in variants(BOOK).items():
        path = tmp_path / f"{name}.txt"
        path.write_bytes(data)
        texts[name] = read_text(path)
    assert set(texts.values()) == {BOOK}, {k: v[:40] for k, v in texts.items()}
    body = read_book(tmp_path / "crlf+bom.txt")
    assert body == "CHAPTER I\n\nAnna walked to the mill.  It was far.\n“Is it far?” asked Tom."


def test_a_declared_encoding_is_normalised_the_same_way(tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Title: X\r\nCharacter set encoding: ISO-8859-1\r\n\r\nCafé.\r\n".encode("latin-1"))
    assert read_text(latin) == "Title: X\nCharacter set encoding: ISO-8859-1\n\nCafé.\n"


@pytest.mark.parametrize(
    "data,match",
    [
        ("Tom.\n".encode("utf-16"), r"is UTF-16 text .*iconv -f UTF-16 -t UTF-8"),
        (b"Tom\0.\n", r"is not a text file \(it holds NUL bytes\)"),
        (b"Caf\xe9.\n", r"is not UTF-8 text \(byte 3 is 0xe9\) and declares no encoding"),
    ],
)
def test_what_is_not_text_is_one_line_naming_the_file(tmp_path, data, match):
    path = tmp_path / "book.txt"
    path.write_bytes(data)
    with pytest.raises(UsageError, match=rf"{path} {match}"):
        read_text(path)
    with pytest.raises(UsageError, match=rf"{tmp_path / 'missing.txt'}: cannot read it"):
        read_text(tmp_path / "missing.txt")


def test_strip_gutenberg_drops_licence_text():
    text = "Header\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nStory.\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nLicence"
    assert strip_gutenberg(text) == "Story."
    assert strip_gutenberg("  No boilerplate at all.\n") == "No boilerplate at all."


def test_a_folder_of_books_leaves_out_licences_readmes_and_hidden_files_and_says_so(tmp_path, caplog):
    for name in ("b.txt", "a.txt", "the_license_to_kill.txt", "CC0_LICENSE.txt", "README.txt", "LICENSE-MIT.txt",
                 "readme_first.txt", "copying.txt", ".draft.txt", "notes.md", "LICENSE"):  # fmt: skip
        (tmp_path / name).write_text(f"The text of {name}.")
    (tmp_path / "sub.txt").mkdir()
    with caplog.at_level(logging.INFO, logger="lm_eval"):
        books = book_files(tmp_path)
    assert [p.name for p in books] == ["a.txt", "b.txt", "the_license_to_kill.txt"]
    (line,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert line.startswith(f"{tmp_path}: 3 book(s) read; left out: ")
    for name in (".draft.txt", "CC0_LICENSE.txt", "LICENSE-MIT.txt", "README.txt", "copying.txt", "readme_first.txt"):
        assert name in line.split("(licence")[0], name
    assert "LICENSE, notes.md, sub.txt (not .txt files)" in line
    # every reader of a folder of books uses the same rule
    assert load_texts(tmp_path) == ["The text of a.txt.", "The text of b.txt.", "The text of the_license_to_kill.txt."]
    assert [b.book_id for b in load_books([tmp_path])] == ["a", "b", "the_license_to_kill"]
    # a file named on its own is always read
    assert load_texts(tmp_path / "README.txt") == ["The text of README.txt."]


def test_a_folder_of_only_books_logs_nothing(tmp_path, caplog):
    (tmp_path / "a.txt").write_text("A.")
    with caplog.at_level(logging.INFO, logger="lm_eval"):
        assert book_files(tmp_path) == [tmp_path / "a.txt"]
    assert not [r for r in caplog.records if "left out" in r.getMessage()]


def test_the_shared_books_folder_is_nine_books_without_the_cc0_licence(shared_data, caplog):
    with caplog.at_level(logging.INFO, logger="lm_eval"):
        books = book_files(shared_data / "books")
    assert len(books) == 9 and all(p.name.endswith("-0.txt") for p in books)
    assert any("CC0_LICENSE.txt" in r.getMessage() for r in caplog.records)
    texts = load_texts(shared_data / "books")
    assert len(texts) == 9 and not any("Creative Commons" in t for t in texts)


def test_shared_books_as_shipped_read_like_their_lf_copies(shared_data, tmp_path):
    """The nine books ship with CRLF line ends and (eight of them) a byte-order mark: the text is the LF one's."""
    for book in sorted((shared_data / "books").glob("*-0.txt")):
        raw = book.read_bytes()
        plain = raw.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n")
        copy = tmp_path / book.name
        copy.write_bytes(plain)
        text = read_book(book)
        assert text == read_book(copy), book.name
        assert "\r" not in text and "\ufeff" not in text and "PROJECT GUTENBERG" not in text.upper()

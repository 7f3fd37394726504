import logging

import numpy as np
import pytest
from transformers import AutoTokenizer

from lm_eval_longmem.common.corpus import load_texts, token_stream, tokenize_texts
from lm_eval_longmem.common.errors import UsageError


def test_local_directory_keeps_books_apart_and_sorted(tmp_path):
    (tmp_path / "b.txt").write_text("Second book.")
    (tmp_path / "a.txt").write_text("First book.")
    (tmp_path / "notes.md").write_text("not a book")
    assert load_texts(tmp_path) == ["First book.", "Second book."]
    assert load_texts(tmp_path / "b.txt") == ["Second book."]


def test_bad_local_sources_say_what_to_do(tmp_path):
    with pytest.raises(UsageError, match="folder of plain-text books"):
        load_texts(tmp_path)
    with pytest.raises(UsageError, match="hf:OWNER/NAME"):
        load_texts(tmp_path / "missing")


def test_default_hub_source_fails_offline_with_the_local_fix():
    with pytest.raises(UsageError, match="local text"):
        load_texts(None)


def test_shared_books_lose_their_footer(shared_data):
    book = next(iter(sorted((shared_data / "books").glob("*.txt"))))
    raw = book.read_text()
    (text,) = load_texts(book)
    assert "PROJECT GUTENBERG" in raw.upper() and "END OF THE PROJECT GUTENBERG" not in text.upper()


def test_token_stream_is_cached_and_separated(tiny_llama_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path / "cache"))
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    texts = ["ab c", "de"]
    first = tokenize_texts(texts, tok)
    assert [list(a) for a in first] == [
        tok("ab c", add_special_tokens=False).input_ids,
        tok("de", add_special_tokens=False).input_ids,
    ]
    assert len(list((tmp_path / "cache" / "tokens").glob("*.npz"))) == 1
    stream = token_stream(texts, tok, separator_ids=[tok.eos_token_id])
    assert stream.dtype == np.int32
    assert list(stream) == list(first[0]) + [tok.eos_token_id] + list(first[1])


def test_a_truncated_token_cache_is_rebuilt_with_one_log_line(tiny_llama_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path / "cache"))
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    texts = ["ab c " * 50, "de"]
    first = tokenize_texts(texts, tok)
    (entry,) = (tmp_path / "cache" / "tokens").glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:-40])  # an interrupted copy: no longer a whole zip file
    with caplog.at_level(logging.WARNING):
        again = tokenize_texts(texts, tok)
    assert [list(a) for a in again] == [list(a) for a in first]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and entry.name in lines[0] and "rebuilding" in lines[0], lines
    assert tokenize_texts(texts, tok)[0].size == first[0].size  # and the rebuilt entry is served as is


def test_text_that_is_not_utf8_is_refused_or_decoded_as_declared(tmp_path):
    """Never decoded with replacement characters: one line naming the file, or the declared encoding."""
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Café au lait, déjà vu.\n".encode("latin-1"))
    with pytest.raises(UsageError, match=rf"{latin} is not UTF-8 text \(byte 3 is 0xe9\).*iconv -f ISO-8859-1"):
        load_texts(latin)
    binary = tmp_path / "folder" / "image.txt"
    binary.parent.mkdir()
    (binary.parent / "good.txt").write_text("A good book.")
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(UsageError, match=rf"{binary} is not a text file \(it holds NUL bytes\)"):
        load_texts(binary.parent)
    declared = tmp_path / "gutenberg.txt"
    declared.write_bytes("Title: X\r\nCharacter set encoding: ISO-8859-1\r\n\r\nCafé au lait.\r\n".encode("latin-1"))
    (text,) = load_texts(declared)
    assert "Café au lait." in text and "\ufffd" not in text
    wrong = tmp_path / "wrong.txt"
    wrong.write_bytes(b"Character set encoding: KLINGON\n\xe9")
    with pytest.raises(UsageError, match=rf"{wrong} declares the encoding 'KLINGON'"):
        load_texts(wrong)

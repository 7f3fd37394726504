"""The one way local text is read: bytes to text, Project Gutenberg boilerplate, folders of books.

Every local text file any evaluation reads goes through `read_text`:

* decoded as UTF-8, or in the encoding a Project Gutenberg header declares
  (`Character set encoding: ISO-8859-1`); anything else (binary files, UTF-16, undecodable bytes)
  is refused with one line naming the file and the fix, never decoded with replacement characters;
* a leading byte-order mark dropped;
* line endings normalised: ``\\r\\n`` and a lone ``\\r`` become ``\\n``.

So the same book as shipped by Project Gutenberg (CRLF, byte-order mark) and converted to LF
without the mark is the same text, and gives the same docs and numbers in all three evaluations.

Books (a corpus, a folder of background books, the embedded plays)
are then stripped of the Project Gutenberg licence header and footer by `strip_gutenberg`
(`read_book` does both). bAbI task files are read with `read_text` alone: they have no boilerplate.

A folder of books is read as books (`book_files`): its `.txt` files, sorted by name, except hidden
files and files named as notes about the books rather than books (`NOT_A_BOOK`: a stem that begins
or ends with the word LICENSE, LICENCE, COPYING, README, NOTICE, AUTHORS, CHANGELOG or CHANGES, in
any case: `CC0_LICENSE.txt`, `README.txt`, `LICENSE-MIT.txt`). What a folder holds besides its
books is named in one log line; a file given by its own path is always read.

`READER_VERSION` goes into the cache keys of what is built from files, so nothing built with an
earlier reading is reused.
"""

from __future__ import annotations

import codecs
import logging
import re
from pathlib import Path

from lm_eval_longmem.common.errors import UsageError

log = logging.getLogger(f"lm_eval.{__name__}")

READER_VERSION = 2
"""Bump when `read_text`, `strip_gutenberg` or `book_files` give other text for the same files.
1: UTF-8/declared encoding, BOM dropped, newlines kept as in the file (each caller normalised, or not);
2: newlines normalised here for every reader, licence/readme files beside books skipped."""

NOT_A_BOOK = frozenset({"license", "licence", "copying", "readme", "notice", "authors", "changelog", "changes"})
"""Words that, first or last in a file's stem, mark it as a note beside the books (see `book_files`)."""

_BOM = "\ufeff"
_DECLARED_ENCODING = re.compile(rb"^Character set encoding:[ \t]*([^\r\n]+?)[ \t]*\r?$", re.MULTILINE | re.IGNORECASE)
_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.MULTILINE | re.IGNORECASE)
_GUTENBERG_END = re.compile(
    r"^(\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG EBOOK|End of (the )?Project Gutenberg).*$",
    re.MULTILINE | re.IGNORECASE,
)
_STEM_WORDS = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    """`text` without a leading byte-order mark, with ``\\r\\n`` and lone ``\\r`` turned into ``\\n``."""
    return text.removeprefix(_BOM).replace("\r\n", "\n").replace("\r", "\n")


def decode(raw: bytes, name: str | Path) -> str:
    """The text of the bytes of file `name` (see the module docstring); a `UsageError` when they are not text."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UsageError(
            f"{name} is UTF-16 text (its byte-order mark says so): convert it to UTF-8, e.g. `iconv -f UTF-16 -t UTF-8 OLD > NEW`"
        )
    if b"\0" in raw:
        raise UsageError(f"{name} is not a text file (it holds NUL bytes): use plain-text books only")
    try:
        return normalise(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        bad = err
    if declared := _DECLARED_ENCODING.search(raw[:8192]):
        encoding = declared[1].decode("ascii", errors="replace")
        try:
            return normalise(raw.decode(codecs.lookup(encoding.replace(" ", "-")).name))
        except (LookupError, UnicodeDecodeError) as err:
            raise UsageError(
                f"{name} declares the encoding {encoding!r} but cannot be decoded with it ({type(err).__name__}): "
                "convert it to UTF-8 (e.g. `iconv -f OLD -t UTF-8`)"
            ) from err
    raise UsageError(
        f"{name} is not UTF-8 text (byte {bad.start} is 0x{raw[bad.start]:02x}) and declares no encoding: "
        "convert it to UTF-8, e.g. `iconv -f ISO-8859-1 -t UTF-8 OLD > NEW` for a Latin-1 file"
    )


def read_text(path: str | Path) -> str:
    """The text of a local file: decoded, byte-order mark dropped, newlines normalised; a `UsageError` when it is not text."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UsageError(f"{path}: cannot read it ({err.strerror or err}): check the path and its permissions") from err
    return decode(raw, path)


def strip_gutenberg(text: str) -> str:
    """`text` without the Project Gutenberg licence header and footer, when they are present; stripped of outer whitespace."""
    if start := _GUTENBERG_START.search(text):
        text = text[start.end() :]
    if end := _GUTENBERG_END.search(text):
        text = text[: end.start()]
    return text.strip()


def read_book(path: str | Path) -> str:
    """A book's text: `read_text`, then `strip_gutenberg`."""
    return strip_gutenberg(read_text(path))


def not_a_book(path: Path) -> bool:
    """Whether a file in a folder of books is a note about them (licence, readme, ...) or hidden, not a book."""
    if path.name.startswith("."):
        return True
    words = _STEM_WORDS.findall(path.stem.lower())
    return bool(words) and (words[0] in NOT_A_BOOK or words[-1] in NOT_A_BOOK)


def book_files(folder: str | Path) -> list[Path]:
    """The books of `folder` (see the module docstring), sorted by name; one log line names what else it holds.

    An empty list when it holds no book; callers say what to do about that in their own terms.
    """
    folder = Path(folder)
    books, notes, other = [], [], []
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix != ".txt":
            other.append(path.name)
        elif not_a_book(path):
            notes.append(path.name)
        else:
            books.append(path)
    if notes or other:
        parts = []
        if notes:
            parts.append(f"{_names(notes)} (licence, readme or hidden files, not books)")
        if other:
            parts.append(f"{_names(other)} (not .txt files)")
        log.info("%s: %d book(s) read; left out: %s", folder, len(books), "; ".join(parts))
    return books


def _names(names: list[str], shown: int = 8) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more

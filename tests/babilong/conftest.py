"""Fixtures shared by the BABILong tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SMALL_BOOKS = ("macbeth.txt", "tempest.txt")  # two short plays: enough text for 4k samples, quick to split


@pytest.fixture(scope="session")
def books(embedded_books_dir, tmp_path_factory) -> Path:
    """A folder with two of the embedded public-domain plays, as a background corpus."""
    folder = tmp_path_factory.mktemp("books")
    for name in SMALL_BOOKS:
        shutil.copy(embedded_books_dir / name, folder / name)
    return folder

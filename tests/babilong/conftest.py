"""Fixtures shared by the BABILong tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SMALL_BOOKS = ("73017-0.txt", "72958-0.txt")  # 56 kB + 242 kB: enough text for 4k samples, quick to split


@pytest.fixture(scope="session")
def books(shared_data, tmp_path_factory) -> Path:
    """A folder with two of the shared Gutenberg books, as a background corpus."""
    folder = tmp_path_factory.mktemp("books")
    for name in SMALL_BOOKS:
        shutil.copy(shared_data / "books" / name, folder / name)
    return folder

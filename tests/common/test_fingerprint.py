"""Content digests of local inputs: every byte and name counts, locations and timestamps do not."""

from __future__ import annotations

import os
import shutil

import pytest

from lm_eval_longmem.common.fingerprint import content_digest


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "data"
    (root / "books").mkdir(parents=True)
    (root / "manifest.json").write_text('{"n": 2}')
    (root / "books" / "a.txt").write_text("alpha beta gamma")
    (root / "books" / "b.txt").write_text("delta epsilon")
    return root


def test_replacing_a_file_in_place_changes_the_digest(folder):
    before = content_digest([folder])
    target = folder / "books" / "a.txt"
    stat = target.stat()
    target.write_text("alpha BETA gamma")  # same name, same size, different bytes
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old timestamp
    assert target.stat().st_size == stat.st_size
    assert content_digest([folder]) != before
    assert content_digest([target]) != content_digest([folder])


def test_names_and_added_files_count(folder):
    before = content_digest([folder])
    (folder / "books" / "b.txt").rename(folder / "books" / "c.txt")
    renamed = content_digest([folder])
    (folder / "books" / "d.txt").write_text("")
    assert len({before, renamed, content_digest([folder])}) == 3


def test_location_and_timestamps_do_not_count(folder, tmp_path):
    before = content_digest([folder])
    os.utime(folder / "manifest.json", (0, 0))
    moved = shutil.copytree(folder, tmp_path / "elsewhere" / "copy")
    assert content_digest([folder]) == content_digest([moved]) == before


def test_order_of_paths_counts_and_missing_paths_are_named(folder):
    a, b = folder / "books" / "a.txt", folder / "books" / "b.txt"
    assert content_digest([a, b]) != content_digest([b, a])
    # the split between files is part of the digest: "ab"+"c" is not "a"+"bc"
    (folder / "x").write_text("ab")
    (folder / "y").write_text("c")
    first = content_digest([folder / "x", folder / "y"])
    (folder / "x").write_text("a")
    (folder / "y").write_text("bc")
    assert content_digest([folder / "x", folder / "y"]) != first
    with pytest.raises(FileNotFoundError, match="missing"):
        content_digest([folder / "missing"])

"""The package cache: content digests (every byte and name counts, locations and timestamps do not),
atomic writes, entries verified on read and rebuilt when damaged, one build across processes."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import time

import pytest

from lm_eval_longmem.common import cache
from lm_eval_longmem.common.cache import content_digest


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


# --- verified entries, atomic writes, one build across processes -------------------------------------------


def _write_rows(rows):
    def write(tmp):
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return len(rows)

    return write


def test_build_once_builds_then_reads_the_verified_entry(tmp_path):
    entry = tmp_path / "ns" / "key.jsonl"
    calls = []

    def build(tmp):
        calls.append(tmp)
        return _write_rows([1, 2])(tmp)

    assert cache.build_once(entry, build) == entry
    assert cache.build_once(entry, build) == entry
    assert len(calls) == 1 and calls[0] != entry  # written elsewhere, then moved into place
    assert cache.read_manifest(entry)["items"] == 2
    assert cache.verify(entry) == ""
    assert sorted(p.name for p in entry.parent.iterdir()) == ["key.jsonl", "key.jsonl.lock", "key.jsonl.manifest.json"]


@pytest.mark.parametrize(
    "damage,why",
    [
        (lambda e: e.write_text(e.read_text().splitlines()[0] + "\n"), "differs from what was built"),  # a line deleted
        (lambda e: e.write_text(e.read_text().replace("1", "7")), "differs from what was built"),  # same size, edited
        (lambda e: cache.manifest_path(e).unlink(), "has no valid key.jsonl.manifest.json"),  # interrupted or older build
        (lambda e: cache.manifest_path(e).write_text("{"), "has no valid"),
    ],
)
def test_a_damaged_entry_is_rebuilt_with_one_log_line(tmp_path, caplog, damage, why):
    entry = tmp_path / "key.jsonl"
    cache.build_once(entry, _write_rows([1, 2]))
    damage(entry)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=cache.log.name):
        cache.build_once(entry, _write_rows([1, 2]))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(entry) in warnings[0] and why in warnings[0], warnings
    assert entry.read_text() == "1\n2\n" and cache.verify(entry) == ""


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    entry = tmp_path / "key.bin"

    def build(tmp):
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt  # an interrupt mid-write

    with pytest.raises(KeyboardInterrupt):
        cache.build_once(entry, build)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key.bin.lock"]
    assert cache.verify(entry) == "is missing"


def test_folder_entries_are_verified_file_by_file_and_replaced_whole(tmp_path):
    entry = tmp_path / "books"

    def build(tmp):
        tmp.mkdir()
        (tmp / "a.txt").write_text("alpha")
        (tmp / "b.txt").write_text("beta")
        return 2

    cache.build_once(entry, build)
    (entry / "b.txt").write_text("bet")  # truncated
    (entry / "stray.txt").write_text("left by someone")
    assert "differs" in cache.verify(entry)
    cache.build_once(entry, build)
    assert sorted(p.name for p in entry.iterdir()) == ["a.txt", "b.txt"]
    assert (entry / "b.txt").read_text() == "beta"


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    out = tmp_path / "out.csv"
    cache.atomic_write(out, lambda tmp: tmp.write_text("old"))
    with pytest.raises(ValueError):
        cache.atomic_write(out, lambda tmp: (tmp.write_text("new, half"), int("x")))
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_load_or_build_checks_the_item_count_and_loads(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path))
    rows = [{"n": 1}, {"n": 2}]
    dump = lambda value, path: path.write_text("".join(json.dumps(r) + "\n" for r in value))  # noqa: E731
    load = lambda path: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]  # noqa: E731
    assert cache.load_or_build("ns", "k", lambda: rows, dump=dump, load=load, suffix=".jsonl") == rows
    assert cache.load_or_build("ns", "k", lambda: pytest.fail("rebuilt"), dump=dump, load=load, suffix=".jsonl") == rows
    # a loader that reads fewer items than were built (a reader that skips a line) is caught by the count
    short = lambda path: load(path)[:1]  # noqa: E731
    with caplog.at_level(logging.WARNING, logger=cache.log.name):
        assert cache.load_or_build("ns", "k", lambda: rows, dump=dump, load=short, suffix=".jsonl") == rows
    assert "holds 1 items, not the 2 it was built with" in caplog.text


def _build_in_process(entry, counter, ready):
    def build(tmp):
        with open(counter, "a") as fh:
            fh.write("built\n")
        time.sleep(0.3)  # widen the window in which the other processes look for the entry
        tmp.write_text("the data\n")

    ready.wait()
    cache.build_once(entry, build)
    assert entry.read_text() == "the data\n"


def test_several_processes_build_one_entry_once(tmp_path):
    entry, counter = tmp_path / "entry.txt", tmp_path / "builds.log"
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    ready = context.Event()
    workers = [context.Process(target=_build_in_process, args=(entry, counter, ready)) for _ in range(4)]
    for worker in workers:
        worker.start()
    ready.set()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert counter.read_text() == "built\n"
    assert cache.verify(entry) == ""


def test_items_digest_counts_order_and_boundaries():
    assert cache.items_digest([["a", 1], ["b", 2]]) == cache.items_digest(iter([["a", 1], ["b", 2]]))
    assert cache.items_digest([["a", 1], ["b", 2]]) != cache.items_digest([["b", 2], ["a", 1]])
    assert cache.items_digest(["ab", "c"]) != cache.items_digest(["a", "bc"])
    assert cache.items_digest([{"x": 1, "y": 2}]) == cache.items_digest([{"y": 2, "x": 1}])

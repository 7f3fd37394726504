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
        (
            lambda e: cache.manifest_path(e).unlink(),
            "has no valid key.jsonl.manifest.json",
        ),  # interrupted or older build
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


# --- writes never destroy what they did not create ----------------------------------------------------------


def _user_folder(tmp_path):
    mydata = tmp_path / "mydata"
    (mydata / "sub").mkdir(parents=True)
    (mydata / "sub" / "results.json").write_text('{"kept": true}')
    (mydata / "notes.txt").write_text("notes")
    return mydata


def _untouched(mydata):
    return (mydata / "sub" / "results.json").read_text() == '{"kept": true}' and (
        mydata / "notes.txt"
    ).read_text() == "notes"


def test_atomic_write_never_replaces_a_folder_with_a_file(tmp_path):
    mydata = _user_folder(tmp_path)
    with pytest.raises(
        cache.UsageError, match=r"mydata is a folder, and a file is written there: it is never replaced"
    ):
        cache.atomic_write(mydata, lambda tmp: tmp.write_text("2 samples"))
    assert _untouched(mydata) and sorted(p.name for p in tmp_path.iterdir()) == ["mydata"]  # no temporary left


def test_atomic_write_replaces_a_folder_only_when_the_caller_says_it_is_its_own(tmp_path):
    mydata = _user_folder(tmp_path)

    def write(tmp):
        tmp.mkdir()
        (tmp / "manifest.json").write_text("{}")

    with pytest.raises(cache.UsageError, match="did not write"):
        cache.atomic_write(mydata, write)
    with pytest.raises(cache.UsageError, match="did not write"):
        cache.atomic_write(mydata, write, replaces=lambda path: (path / "manifest.json").exists())
    assert _untouched(mydata)
    ours = tmp_path / "build"
    cache.atomic_write(ours, write)
    (ours / "old.txt").write_text("an earlier build's file")
    cache.atomic_write(ours, write, replaces=lambda path: (path / "manifest.json").exists())
    assert sorted(p.name for p in ours.iterdir()) == ["manifest.json"]
    target = tmp_path / "a_file"
    target.write_text("x")
    with pytest.raises(cache.UsageError, match="is a file, and a folder is written there"):
        cache.atomic_write(target, write, replaces=lambda path: True)
    assert target.read_text() == "x"


@pytest.mark.parametrize(
    "make,kind,overwrite,message",
    [
        (None, cache.FILE, False, None),
        ("file", cache.FILE, False, r"exists: pass --overwrite to replace it, or choose another --output_path$"),
        ("file", cache.FILE, True, None),
        (
            "folder",
            cache.FILE,
            True,
            r"is a folder, and a file is written there: it is never replaced, not even with --overwrite",
        ),
        ("link", cache.FILE, True, r"is a symbolic link, and a file is written there"),
        ("folder", cache.FOLDER, True, r"is a folder that lm-eval-longmem did not write .* not even with --overwrite"),
        ("ours", cache.FOLDER, False, r"exists: pass --overwrite"),
        ("ours", cache.FOLDER, True, None),
        ("file", cache.FOLDER, True, r"is a file, and a folder is written there"),
    ],
)
def test_check_target_is_the_one_rule_of_every_command(tmp_path, make, kind, overwrite, message):
    target = tmp_path / "target"
    if make == "file":
        target.write_text("mine")
    elif make in ("folder", "ours"):
        target.mkdir()
        (target / ("manifest.json" if make == "ours" else "notes.txt")).write_text("mine")
    elif make == "link":
        (tmp_path / "elsewhere").write_text("mine")
        target.symlink_to(tmp_path / "elsewhere")

    def check():
        return cache.check_target(
            target, overwrite=overwrite, kind=kind, replaces=lambda p: (p / "manifest.json").exists()
        )

    if message is None:
        check()
    else:
        with pytest.raises(cache.UsageError, match=rf"^--output_path {target} {message}"):
            check()


def test_check_folder_refuses_a_file_on_the_way(tmp_path):
    (tmp_path / "a_file").write_text("x")
    cache.check_folder(tmp_path / "new" / "deeper")
    with pytest.raises(cache.UsageError, match="is not a folder"):
        cache.check_folder(tmp_path / "a_file")
    with pytest.raises(cache.UsageError, match=r"a_file is not a folder: choose another --output_path"):
        cache.check_folder(tmp_path / "a_file" / "below")


# --- input digests are read once per content, and again after an in-place change ---------------------------


def test_input_digest_reads_once_per_content_and_again_after_an_in_place_change(folder, tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path / "cache"))
    reads = []
    real = cache.content_digest
    monkeypatch.setattr(cache, "content_digest", lambda paths: reads.append(1) or real(paths))
    cache.input_digest([folder])
    cache.input_digest([folder])
    assert (
        len(reads) == 2
    )  # files changed a moment ago may change again unseen within one timestamp tick: not remembered
    reads.clear()
    time.sleep(cache.RACY_NS / 1e9 + 0.1)
    first = cache.input_digest([folder])
    assert first == real([folder]) and len(reads) == 1  # the same value as the plain digest
    cache._INPUT_DIGESTS.clear()  # a new process: the memo in the cache answers
    assert cache.input_digest([folder]) == first and len(reads) == 1
    target = folder / "books" / "a.txt"
    stat = target.stat()
    target.write_text("alpha BETA gamma")  # same size, same modification time: only the change time moves
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = cache.input_digest([folder])
    assert changed != first and changed == real([folder]) and len(reads) == 2
    assert cache.input_digest([folder]) == changed and len(reads) == 3  # changed a moment ago: read again

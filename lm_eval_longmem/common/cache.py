"""The one cache of built data (token ids, sentences, generated samples, the embedded books and model),
and the one place that hashes content and writes files atomically.

Location: `$LM_EVAL_LONGMEM_CACHE` if set, else `~/.cache/lm_eval_longmem`. What it guarantees:

* **Keyed by content.** An entry's name is a hash of every input that changes it (`cache_key`,
  `content_digest`), so a stale entry is never looked up.
* **Nothing half-written.** Every entry (a file or a folder) is written under a temporary name in
  its own folder and moved into place with `os.replace` (`atomic_write`); an interrupted run leaves
  at most a hidden temporary file, removed by the next build of that entry.
* **Verified on read.** Each entry has a manifest beside it, `<entry>.manifest.json`, written after
  the entry: the sha256 of its bytes (of every file, for a folder) and, for a list, its item count.
  An entry that is missing its manifest or no longer matches it (truncated, edited, an interrupted
  older version) is rebuilt, with one log line that names it.
* **Built once.** The check and the build run under an exclusive file lock (`<entry>.lock`, beside
  it), so when several processes need the same entry one builds it and the others wait, then read
  the verified entry (`build_once`, `load_or_build`).

It is also the one place every command writes through (`atomic_write`): a write never destroys what
it did not create. A file is replaced only by a file; a folder is replaced only by a folder, and
only when the caller's `replaces(path)` says it is one of ours (a cache entry, an earlier
build, a checkpoint); anything else at the target (a folder where a file goes, a link, a socket) is
refused, `--overwrite` or not. `check_target` is the same rule for the commands' `--output_path`,
asked before any work starts, with `--overwrite` deciding only whether a file (or a folder of ours)
of the kind the command writes may be replaced.

Local inputs that go into cache keys are hashed once per content (`input_digest`): every byte is
read the first time, and the digest is remembered by every file's path, size, modification and
change time and inode, in this process and in the cache (`digests/`), so a multi-GB model folder
is read once, not on every run, and a file changed in place (which always moves its change time,
even after `cp -p` or `touch -d`) is read again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from lm_eval_longmem.common.errors import UsageError

log = logging.getLogger(f"lm_eval.{__name__}")

T = TypeVar("T")
ENV_CACHE_DIR = "LM_EVAL_LONGMEM_CACHE"
MANIFEST_SUFFIX = ".manifest.json"
_MANIFEST_VERSION = 1
_CHUNK = 1 << 20


def cache_dir() -> Path:
    """The cache root (created on first use)."""
    root = Path(os.environ.get(ENV_CACHE_DIR) or Path.home() / ".cache" / "lm_eval_longmem")
    root.mkdir(parents=True, exist_ok=True)
    return root


# --- content hashes ------------------------------------------------------------------------------


def sha256_hex(data: bytes | str) -> str:
    """sha256 hex digest of `data` (a str is hashed as its UTF-8 bytes)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def cache_key(**parts: object) -> str:
    """A stable hex key for `parts` (sorted JSON; values must be JSON-serialisable or str()-able)."""
    return sha256_hex(json.dumps(parts, sort_keys=True, default=str, separators=(",", ":")))[:32]


def texts_digest(texts: Iterable[str]) -> str:
    """sha256 hex digest of a sequence of texts: their order and the split between them count."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(hashlib.sha256(text.encode("utf-8")).digest())
    return digest.hexdigest()


def items_digest(items: Iterable[object]) -> str:
    """sha256 hex digest of a sequence of JSON-able items (each as sorted JSON): their order counts."""
    return texts_digest(json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for item in items)


def input_files(path: Path) -> list[tuple[str, Path]]:
    """(name, file) pairs under `path`: the file itself by its name, or a folder's files by relative name, sorted."""
    if path.is_file():
        return [(path.name, path)]
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist: cannot fingerprint it")
    found = []
    for folder, _, names in os.walk(path):
        for name in names:
            file = Path(folder, name)
            if file.is_file():
                found.append((file.relative_to(path).as_posix(), file))
    return sorted(found)


def content_digest(paths: Iterable[Path | str]) -> str:
    """sha256 hex digest of the bytes and relative names of every file in `paths`.

    A path and a modification time are not enough for a cache key: a file replaced in place (same
    name, same size, even the same mtime after `cp -p`) must give a new key. So every byte is read;
    sha256 runs at several hundred MB/s, a small cost next to reading and tokenizing the same files
    (``benchmarks/content_digest.py`` measures it).

    A file counts by its name and bytes; a folder by every regular file beneath it (all that a
    reader of it could read), named relative to the folder and taken in sorted order. Folder
    locations and timestamps do not count, so a copy of the same data elsewhere gets the same digest;
    the order of `paths` does, since readers may number their inputs by position.
    """
    digest = hashlib.sha256()
    for path in map(Path, paths):
        digest.update(b"dir\0" if path.is_dir() else b"file\0")
        for name, file in input_files(path):
            _update_with_file(digest, file, name)
        digest.update(b"\0end\0")
    return digest.hexdigest()


def _update_with_file(digest: Any, file: Path, name: str) -> None:
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(file, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        digest.update(name.encode("utf-8") + b"\0" + size.to_bytes(8, "little"))
        while n := handle.readinto(buffer):
            digest.update(view[:n])


def _entry_digest(path: Path) -> str:
    """Digest of an entry's content, independent of the entry's own name (so a temporary copy has the same)."""
    if path.is_dir():
        return content_digest([path])
    digest = hashlib.sha256()
    _update_with_file(digest, path, "")
    return digest.hexdigest()


RACY_NS = 2_000_000_000
"""A file changed less than this before it was hashed may change again within the same timestamp tick
(file times are coarse: milliseconds to seconds), unseen by its stat: such a digest is not remembered."""


def _stat_signature(paths: list[Path]) -> tuple[str, int]:
    """(a hash of where and what every file under `paths` is on disk, not its bytes: resolved path,
    device, inode, size, modification and change times; the newest change time). Any write to a file
    changes its change time."""
    parts: list[list[str | int]] = []
    newest = 0
    for path in paths:
        parts.append(["dir" if path.is_dir() else "file", str(path.resolve())])
        for name, file in input_files(path):
            s = file.stat()
            parts.append([name, s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns])
            newest = max(newest, s.st_ctime_ns, s.st_mtime_ns)
    return sha256_hex(json.dumps(parts)), newest


_INPUT_DIGESTS: dict[str, str] = {}
"""`input_digest` results of this process, by stat signature."""


def input_digest(paths: Iterable[Path | str]) -> str:
    """`content_digest(paths)`, read once per content: memoised by the files' stat signature.

    The first call for a content reads every byte; later calls (in this run, or in later runs through
    the memo file `digests/<hash of the paths>.json` in the cache) only `stat` the files. The memo
    is trusted only while the signature (resolved path, device, inode, size, mtime, ctime of every
    file) is unchanged, and it is written only when the files did not change while they were read
    and none changed within `RACY_NS` before (as git treats "racily clean" files: a change within
    one timestamp tick would not show in the stat).
    `benchmarks/content_digest.py` measures both costs on a model folder.
    """
    files = [Path(p) for p in paths]
    started = time.time_ns()
    signature, newest = _stat_signature(files)
    if signature in _INPUT_DIGESTS:
        return _INPUT_DIGESTS[signature]
    memo = cache_dir() / "digests" / f"{sha256_hex(json.dumps([str(p.resolve()) for p in files]))[:32]}.json"
    try:
        stored = json.loads(memo.read_text(encoding="utf-8"))
        if stored.get("signature") == signature and isinstance(stored.get("digest"), str):
            _INPUT_DIGESTS[signature] = stored["digest"]
            return stored["digest"]
    except (OSError, ValueError, AttributeError):
        pass
    digest = content_digest(files)
    # remembered only when nothing changed while it was read and the newest change is older than a timestamp tick
    if _stat_signature(files)[0] == signature and newest < started - RACY_NS:
        _INPUT_DIGESTS[signature] = digest
        record = json.dumps({"signature": signature, "digest": digest, "paths": [str(p) for p in files]})
        atomic_write(memo, lambda tmp: tmp.write_text(record + "\n", encoding="utf-8"))
    return digest


# --- atomic writes and locks ---------------------------------------------------------------------


FILE, FOLDER = "file", "folder"
"""The two kinds of thing a command writes at a target."""


def _kind(path: Path) -> str | None:
    """FILE, FOLDER, None when nothing is there, or what else is there ("a symbolic link", ...)."""
    if not os.path.lexists(path):
        return None
    if path.is_symlink():
        return "a symbolic link"
    if path.is_dir():
        return FOLDER
    return FILE if path.is_file() else "not a regular file"


def replace_problem(path: Path, kind: str, replaces: Callable[[Path], bool] | None = None) -> str:
    """Why a `kind` written at `path` may not replace what is there ("" when nothing is, or it may).

    A file may replace a file. A folder may replace a folder only when `replaces(path)` says it is
    one of ours. Nothing else is ever replaced.
    """
    there = _kind(path)
    if (
        there is None
        or (there == kind == FILE)
        or (there == kind == FOLDER and replaces is not None and replaces(path))
    ):
        return ""
    if there == FOLDER and kind == FOLDER:
        return "is a folder that lm-eval-longmem did not write (or not of this kind), so it is never replaced"
    what = {FILE: "a file", FOLDER: "a folder"}.get(there, there)
    return f"is {what}, and a {kind} is written there: it is never replaced"


def check_target(
    path: Path | str,
    *,
    overwrite: bool,
    kind: str = FILE,
    replaces: Callable[[Path], bool] | None = None,
    flag: str = "--output_path",
    resumes: bool = False,
) -> None:
    """Refuse, before any work, a target a command may not write: one line naming `flag` and the fix.

    Nothing there: fine. A file where the command writes a file, or a folder of ours (`replaces`)
    where it writes a folder: fine with `--overwrite`, refused without (`resumes`: a folder of ours
    is carried on, not replaced, so it needs no `--overwrite`). Anything else (a folder where a
    file goes, a folder that is not ours, a file where a folder goes, a link) is refused even with
    `--overwrite`, since replacing it would destroy what the command did not create.
    """
    path = Path(path)
    problem = replace_problem(path, kind, replaces)
    if problem:
        raise UsageError(f"{flag} {path} {problem}, not even with --overwrite: choose another {flag}")
    if _kind(path) is not None and not overwrite and not resumes:
        raise UsageError(f"{flag} {path} exists: pass --overwrite to replace it, or choose another {flag}")


def check_folder(path: Path | str, *, flag: str = "--output_path") -> None:
    """A folder a command writes files into: absent or a folder (its other files are left alone)."""
    path = Path(path)
    if _kind(path) not in (None, FOLDER):
        raise UsageError(f"{flag} {path} is not a folder: give a folder (it is created when missing)")
    for parent in path.parents:
        if _kind(parent) not in (None, FOLDER):
            raise UsageError(f"{flag} {path}: {parent} is not a folder: choose another {flag}")


def atomic_write(path: Path | str, write: Callable[[Path], T], *, replaces: Callable[[Path], bool] | None = None) -> T:
    """Call `write(tmp)` and move what it wrote at `tmp` (a file, or a folder it creates) onto `path`.

    `tmp` is a fresh hidden name in `path`'s folder, so the final `os.replace` is atomic: readers
    see the old entry or the new one, never a partial one, and a failed `write` leaves nothing
    behind. What is at `path` is replaced only as `replace_problem` allows: a file by a file, a
    folder by a folder that `replaces(path)` says is ours (renamed aside first, so it vanishes at
    once for readers); otherwise a `UsageError` and both are left as they were. Returns what
    `write` returned.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")) / "entry"
    try:
        result = write(tmp)
        if not tmp.exists():
            raise RuntimeError(f"the writer of {path} wrote nothing")
        problem = replace_problem(path, FOLDER if tmp.is_dir() else FILE, replaces)
        if problem:
            raise UsageError(f"{path} {problem}: nothing was written; choose another place")
        if _kind(path) == FOLDER:
            _remove(path)
        os.replace(tmp, path)
        return result
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def _remove(path: Path) -> None:
    """Remove a folder of ours: renamed aside first, so it vanishes at once for readers."""
    aside = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.replace(path, aside / "entry")
    shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def locked(path: Path | str) -> Iterator[None]:
    """Hold an exclusive inter-process lock on the entry `path` (the file `<path>.lock` beside it).

    Locks are advisory: only code that takes the same lock waits. They are `filelock` locks
    (`fcntl.flock` on POSIX), which are per machine on most network file systems: use a cache on a
    local disk, or one cache per node, when several machines share a folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.parent / f"{path.name}.lock")):
        yield


# --- verified entries ----------------------------------------------------------------------------


def manifest_path(path: Path | str) -> Path:
    path = Path(path)
    return path.parent / f"{path.name}{MANIFEST_SUFFIX}"


def read_manifest(path: Path | str) -> dict[str, Any] | None:
    """The manifest of entry `path` (None when it has none or it is not a manifest of ours)."""
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = (
        isinstance(manifest, dict)
        and manifest.get("version") == _MANIFEST_VERSION
        and isinstance(manifest.get("sha256"), str)
    )
    return manifest if ok else None


_VERIFIED: dict[Path, tuple[Any, ...]] = {}
"""Entries this process has hashed, by the stat signature they had then (skips hashing them again)."""


def _signature(path: Path) -> tuple[Any, ...]:
    manifest = manifest_path(path).stat()
    files = input_files(path) if path.is_dir() else [("", path)]
    return (manifest.st_ino, manifest.st_mtime_ns, manifest.st_size) + tuple(
        (name, s.st_ino, s.st_mtime_ns, s.st_size) for name, file in files for s in [file.stat()]
    )


def verify(path: Path | str) -> str:
    """Why the entry `path` cannot be trusted ("" when it matches the manifest written when it was built)."""
    path = Path(path)
    if not path.exists():
        return "is missing"
    manifest = read_manifest(path)
    if manifest is None:
        return f"has no valid {manifest_path(path).name} (an interrupted or older build)"
    try:
        signature = _signature(path)
        if _VERIFIED.get(path) == signature:
            return ""
        if _entry_digest(path) != manifest["sha256"]:
            return "differs from what was built (its sha256 is not the one in its manifest: truncated or edited)"
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    _VERIFIED[path] = signature
    return ""


def _write_manifest(path: Path, digest: str, items: int | None) -> None:
    manifest = {"version": _MANIFEST_VERSION, "sha256": digest, "items": items}
    atomic_write(manifest_path(path), lambda tmp: tmp.write_text(json.dumps(manifest) + "\n", encoding="utf-8"))


def _clear_leftovers(path: Path) -> None:
    """Temporary copies of `path` left by interrupted builds (safe: the caller holds the entry's lock)."""
    for stale in path.parent.glob(f".{path.name}.????????.tmp"):
        shutil.rmtree(stale, ignore_errors=True)


def build_once(
    path: Path | str, build: Callable[[Path], int | None], *, check: Callable[[Path], str] | None = None
) -> Path:
    """The verified entry at `path`, built first when it is missing or does not verify.

    `build(tmp)` writes the entry's content at `tmp` (a file, or a folder it creates) and may return
    an item count, recorded in the manifest with the digest. `check(path)`, when given, is a further
    test of an entry whose digest matches ("" = good, else why not). The check and the build run
    under `locked(path)`: of several processes (ranks of a node, parallel test workers) one builds
    and the others wait, then find the entry verified. A damaged entry is rebuilt with one warning.
    """
    path = Path(path)

    def why_not() -> str:
        return verify(path) or (check(path) if check else "")

    if not why_not():
        return path
    with locked(path):
        why = why_not()
        if not why:
            return path
        if path.exists() or manifest_path(path).exists():
            log.warning("cache entry %s %s; rebuilding it", path, why)
        _clear_leftovers(path)
        manifest_path(path).unlink(missing_ok=True)
        _VERIFIED.pop(path, None)
        # an entry under its content key is ours by construction: a damaged folder entry is replaced
        items, digest = atomic_write(path, lambda tmp: (build(tmp), _entry_digest(tmp)), replaces=lambda _: True)
        _write_manifest(path, digest, items)
    return path


def load_or_build(
    namespace: str,
    key: str,
    build: Callable[[], T],
    *,
    dump: Callable[[T, Path], None],
    load: Callable[[Path], T],
    suffix: str = "",
) -> T:
    """The value cached under (namespace, key), built and stored on a miss (see the module docstring).

    A value with a length (a list of rows, an array) has it recorded at build time and checked at
    load, on top of the digest; an entry that verifies but does not load is rebuilt too.
    """
    path = cache_dir() / namespace / f"{key}{suffix}"
    value: list[T] = []

    def write(tmp: Path) -> int | None:
        value[:] = [build()]
        dump(value[0], tmp)
        return len(value[0]) if isinstance(value[0], Sized) else None

    def check(path: Path) -> str:
        try:
            loaded = load(path)
        except Exception as err:  # any reader error on a verified entry means "rebuild it"
            return f"does not load ({type(err).__name__}: {err})"
        items = (read_manifest(path) or {}).get("items")
        if items is not None and isinstance(loaded, Sized) and len(loaded) != items:
            return f"holds {len(loaded)} items, not the {items} it was built with"
        value[:] = [loaded]
        return ""

    build_once(path, write, check=check)
    return value[0]


# --- tables that grow ----------------------------------------------------------------------------


def _table_path(namespace: str, name: str) -> Path:
    return cache_dir() / namespace / f"{name}.json"


def _load_table(path: Path, *, warn: bool) -> dict[str, Any] | None:
    """The verified table at `path` ({} when there is none), else None (and one log line when `warn`)."""
    if not path.exists() and not manifest_path(path).exists():
        return {}
    why = verify(path)
    if not why:
        try:
            table = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            why = f"does not load ({type(err).__name__})"
        else:
            if isinstance(table, dict):
                return table
            why = "is not a JSON object"
    if warn:
        log.warning("cache entry %s %s; starting it anew", path, why)
    return None


def read_table(namespace: str, name: str) -> dict[str, Any]:
    """The JSON object cached as the table (namespace, name); {} when there is none or it does not verify.

    A table is an entry that grows (`merge_table`), e.g. values looked up by a content digest. A
    damaged table is dropped with one log line and built up again, like any other entry. A table
    that does not verify at once is looked at again under its lock, as a writer may have been
    between writing it and its manifest.
    """
    path = _table_path(namespace, name)
    table = _load_table(path, warn=False)
    if table is None:
        with locked(path):
            table = _load_table(path, warn=True)
    return table or {}


def merge_table(namespace: str, name: str, items: dict[str, Any]) -> None:
    """Add `items` to the table (namespace, name): read, merged and rewritten under the entry's lock.

    Several processes may merge at once (one waits for the other), and each write is atomic with
    its manifest, so a reader sees the old table or the new one, verified.
    """
    if not items:
        return
    path = _table_path(namespace, name)
    with locked(path):
        table = (_load_table(path, warn=True) or {}) | items
        _VERIFIED.pop(path, None)
        manifest_path(path).unlink(missing_ok=True)
        digest = atomic_write(
            path, lambda tmp: (tmp.write_text(json.dumps(table), encoding="utf-8"), _entry_digest(tmp))[1]
        )
        _write_manifest(path, digest, len(table))

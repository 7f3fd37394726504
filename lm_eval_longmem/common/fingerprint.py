"""Exact content digests of local inputs, for cache keys that change when the data change.

A path and a modification time are not enough: a file replaced in place (same name, same size,
even the same mtime after a copy with ``cp -p``) must give a new key, or a cache serves the old
data's results. So the digest reads every byte; sha256 runs at several hundred MB/s, a small cost
next to reading and tokenizing the same files (``benchmarks/content_digest.py`` measures it).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

_CHUNK = 1 << 20


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

    A file counts by its name and bytes; a folder by every regular file beneath it (all that a
    reader of it could read), named relative to the folder and taken in sorted order. Folder
    locations and timestamps do not count, so a copy of the same data elsewhere gets the same digest;
    the order of `paths` does, since readers may number their inputs by position.
    """
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    for path in map(Path, paths):
        digest.update(b"dir\0" if path.is_dir() else b"file\0")
        for name, file in input_files(path):
            with open(file, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                digest.update(name.encode("utf-8") + b"\0" + size.to_bytes(8, "little"))
                while n := handle.readinto(buffer):
                    digest.update(view[:n])
        digest.update(b"\0end\0")
    return digest.hexdigest()

"""One cache directory for built data (token streams, generated samples), written atomically.

Location: `$LM_EVAL_LONGMEM_CACHE` if set, else `~/.cache/lm_eval_longmem`. Every entry is keyed
by a hash of all the inputs that change its content, so a stale entry is never reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
ENV_CACHE_DIR = "LM_EVAL_LONGMEM_CACHE"


def cache_dir() -> Path:
    """The cache root (created on first use)."""
    root = Path(os.environ.get(ENV_CACHE_DIR) or Path.home() / ".cache" / "lm_eval_longmem")
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_key(**parts: object) -> str:
    """A stable hex key for `parts` (sorted JSON; values must be JSON-serialisable or str()-able)."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def load_or_build(
    namespace: str,
    key: str,
    build: Callable[[], T],
    *,
    dump: Callable[[T, Path], None],
    load: Callable[[Path], T],
    suffix: str = "",
) -> T:
    """Return the cached value for (namespace, key), building and storing it on a miss.

    The value is written to a temporary file in the same directory and moved into place with
    `os.replace`, so an interrupted run never leaves a half-written entry behind.
    """
    folder = cache_dir() / namespace
    path = folder / f"{key}{suffix}"
    if path.exists():
        return load(path)
    value = build()
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=suffix)
    os.close(fd)
    try:
        dump(value, Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return value

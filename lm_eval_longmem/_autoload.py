"""Start-up hook that lets `lm_eval` find our tasks with no flags.

lm-eval 0.4.13 has no plugin entry points, so the wheel ships `lm_eval_longmem.pth`, which
imports this module in every Python process. All it does at start-up is put one small finder at
the front of `sys.meta_path`. The finder reacts to a single module name,
`lm_eval.tasks.manager`: when (and only when) that module is first imported, it wraps
`TaskManager.__init__` so that every TaskManager also indexes our `task_configs/`, then removes
itself. A process that never imports lm_eval pays one string comparison per import (see
`benchmarks/startup_hook.py`).

Order of task directories: lm_eval's built-ins, then ours (so our `babilong` group replaces the
built-in one, on purpose), then the user's own `--include_path` (so users can still override us).

Switch it off with `LM_EVAL_LONGMEM_AUTOLOAD=0`; `--include_path "$(python -m
lm_eval_longmem.paths)"` or `lm-eval-longmem run` then bring the tasks back explicitly.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

# Only modules that every interpreter has already loaded at start-up are imported here (no
# typing, pathlib or importlib.abc), so merely arming the hook costs nothing measurable.

ENV_SWITCH = "LM_EVAL_LONGMEM_AUTOLOAD"
_TARGET = "lm_eval.tasks.manager"


def enabled() -> bool:
    """False when the user set `LM_EVAL_LONGMEM_AUTOLOAD` to 0/false/no/off."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def with_our_tasks(include_path: object) -> list:
    """`include_path` (None, one path or a list) with our task directory first, without duplicates."""
    from pathlib import Path

    from lm_eval_longmem.paths import task_configs_dir

    ours = task_configs_dir()
    given = [] if include_path is None else list(include_path) if isinstance(include_path, (list, tuple)) else [include_path]
    rest = [p for p in given if Path(p).expanduser().resolve() != ours]
    return [ours, *rest]


def patch_task_manager(manager_module: object) -> None:
    """Make `TaskManager` index our tasks too (idempotent)."""
    cls = manager_module.TaskManager
    if getattr(cls.__init__, "_lm_eval_longmem", False):
        return
    original_init = cls.__init__

    def __init__(self, *args, **kwargs) -> None:
        # include_path is the second positional parameter (after verbosity).
        if len(args) >= 2:
            args = (args[0], with_our_tasks(args[1]), *args[2:])
        else:
            kwargs["include_path"] = with_our_tasks(kwargs.get("include_path"))
        original_init(self, *args, **kwargs)

    __init__._lm_eval_longmem = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    __init__.__doc__ = original_init.__doc__
    cls.__init__ = __init__


class _PatchAfterImport:
    """Runs the real loader, then patches the freshly executed module."""

    def __init__(self, loader: object) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> object:
        return self._loader.create_module(spec)

    def exec_module(self, module: object) -> None:
        self._loader.exec_module(module)
        patch_task_manager(module)


class _TaskManagerFinder:
    """Finds nothing itself; wraps the loader of `lm_eval.tasks.manager` once, then leaves."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchAfterImport(spec.loader)
        return spec


def arm() -> None:
    """Called from `lm_eval_longmem.pth` at interpreter start-up."""
    if not enabled():
        return
    manager = sys.modules.get(_TARGET)
    if manager is not None:  # lm_eval already imported (e.g. armed late, by hand)
        patch_task_manager(manager)
    elif not any(isinstance(f, _TaskManagerFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TaskManagerFinder())

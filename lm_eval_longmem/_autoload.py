"""Start-up hook that lets `lm_eval` find our tasks with no flags.

lm-eval 0.4.13 has no plugin entry points, so the wheel ships `lm_eval_longmem.pth` at the root
of site-packages. Python runs its one line at every interpreter start: unless
`LM_EVAL_LONGMEM_AUTOLOAD` is 0/false/no/off, it puts a tiny finder (`LmEvalLongmemHook`) at the
front of `sys.meta_path`. That finder answers None for every module except
`lm_eval.tasks.manager`; it imports nothing, not even this module, until that name is imported.
Then `find_spec` below removes the finder, loads the real module and wraps
`TaskManager.__init__` so every TaskManager also indexes our `task_configs/`. A process that never
imports lm_eval pays one string comparison per import (`benchmarks/startup_hook.py` measures it).

Order of task directories: lm_eval's built-ins, then ours (so our `babilong` group replaces the
built-in one, on purpose), then the user's own `--include_path` (so users can still override us).

With the hook off, `--include_path "$(python -m lm_eval_longmem.paths)"`,
`lm_eval_longmem.task_manager()` or `lm-eval-longmem run` bring the tasks in explicitly.
"""

import importlib.machinery
import sys

ENV_SWITCH = "LM_EVAL_LONGMEM_AUTOLOAD"
HOOK_NAME = "LmEvalLongmemHook"
_TARGET = "lm_eval.tasks.manager"


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

    __init__._lm_eval_longmem = True
    __init__.__wrapped__ = original_init
    __init__.__doc__ = original_init.__doc__
    cls.__init__ = __init__


class _PatchAfterImport:
    """Runs the real loader, then patches the freshly executed module."""

    def __init__(self, loader: object) -> None:
        self._loader = loader

    def create_module(self, spec: object) -> object:
        return self._loader.create_module(spec)

    def exec_module(self, module: object) -> None:
        self._loader.exec_module(module)
        patch_task_manager(module)


def find_spec(fullname: str, path: object) -> object:
    """Called by the `.pth` finder for `lm_eval.tasks.manager`: retire the finder, wrap the loader."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != HOOK_NAME]
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is not None and spec.loader is not None:
        spec.loader = _PatchAfterImport(spec.loader)
    return spec

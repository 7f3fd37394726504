"""Start-up hook that lets `lm_eval` find our tasks with no flags.

lm-eval 0.4.x has no plugin entry points for tasks, so the wheel ships `lm_eval_longmem.pth` at
the root of site-packages. Python runs its one line at every interpreter start: unless
`LM_EVAL_LONGMEM_AUTOLOAD` is 0/false/no/off, or a finder named `LmEvalLongmemHook` is already
there (the line ran twice), it puts that tiny finder at the front of `sys.meta_path`. The finder
answers None for every module except `lm_eval.tasks.manager`; it imports nothing, not even this
module, until that name is imported. Then `find_spec` below removes the finder, loads the real
module and hands it to `activate` below, which installs the plugin through `lm_eval_longmem.harness.install`,
the one place that changes lm_eval. A process that never imports lm_eval pays one string comparison per import
(`benchmarks/startup_hook.py` measures it).

With the hook off, `--include_path "$(python -m lm_eval_longmem.paths)"`,
`lm_eval_longmem.task_manager()` or `lm-eval-longmem run` bring the tasks in explicitly.
"""

from __future__ import annotations

import importlib.machinery
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at every start-up
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader
    from types import ModuleType

HOOK_NAME = "LmEvalLongmemHook"


class _ActivateAfterImport:
    """Runs the real loader, then lets `activate` patch the freshly executed module."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        activate(module)


def activate(manager_module: ModuleType | None = None) -> None:
    """The plugin, active in this process (idempotent): every `TaskManager` indexes the task folders of every
    evaluation (`common.evaluations.task_folders`; on `manager_module`, the `lm_eval.tasks.manager` being
    executed, or the one imported now), a `UsageError` that reaches the top prints one line, and a run's inputs are checked before its model loads
    (`preflight.check_run`). Called by the start-up hook and by `lm-eval-longmem run`, which runs lm_eval's
    command line whether or not the hook is on."""
    from lm_eval_longmem.common.errors import UsageError
    from lm_eval_longmem.common.evaluations import refused_folders, task_folders
    from lm_eval_longmem.harness import Plugin, install
    from lm_eval_longmem.preflight import check_run

    plugin = Plugin(
        usage_error=UsageError, before_model=check_run, task_folders=task_folders, refused_folders=refused_folders
    )
    install(plugin, index_our_tasks=True, manager_module=manager_module)


def find_spec(fullname: str, path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
    """Called by the `.pth` finder for `lm_eval.tasks.manager`: retire the finder, wrap the loader."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != HOOK_NAME]
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is not None and spec.loader is not None:
        spec.loader = _ActivateAfterImport(spec.loader)  # type: ignore[assignment]  # a duck-typed Loader: importlib.abc is not imported at start-up
    return spec

"""lm_eval's tasks as ours meet them: the task index, task names and YAML paths, and what a task of ours
asks of `ConfigurableTask` and the evaluator (R1-R3, R7, R8, R11, R16, R18, R20, R22).

Discovery: `patch_task_manager` makes every `TaskManager` index our task folders beside the built-ins
(installed by `harness.install`; the folders are the package's own and those `install_task_folders` was
handed); `new_task_manager` and `load_tasks` build one explicitly. The rest are
what our task base calls while lm_eval builds and runs it: the request-cache key, the aggregation hook
(installed by `harness.install`), the harness's own task YAMLs read as data, the quieted `custom_dataset` notice, docs
dealt to data-parallel ranks, metrics declared on a built task.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_longmem.harness.marks import MARK

SUPPORTED = "lm-eval>=0.4.13,<0.5"
"""The harness versions we support (the pin in pyproject.toml), as a message tells the user to install them."""


INDEX_LOGGER = "lm_eval.tasks._index"
"""R3: the logger that warns when an include path replaces a task name."""

log = logging.getLogger(f"lm_eval.{__name__}")
"""R10: a child of the harness's logger, shown with lm_eval's own lines at lm_eval's level (every
module of the package logs the same way, as `lm_eval.<module>`)."""


# ---------------------------------------------------------------- task discovery (R1, R3)


_task_folders: Callable[[], Sequence[Path]] | None = None
_refuse: Callable[[Sequence[Override]], Sequence[Path]] | None = None


@dataclass(frozen=True)
class Override:
    """A name a task or group YAML of our folders took in the index from an earlier folder (R3's warning)."""

    name: str
    ours: Path
    """The YAML of ours (resolved)."""
    theirs: Path
    """The YAML it replaced (resolved): the harness's own, or one of an earlier folder of ours."""
    builtin: bool
    """Whether `theirs` is one of the harness's own tasks."""


def install_task_folders(
    folders: Callable[[], Sequence[Path]], refuse: Callable[[Sequence[Override]], Sequence[Path]] | None = None
) -> None:
    """Index the folders `folders()` gives (read at each `TaskManager`) as ours, instead of the package's own
    task folder alone (R1): the package's and those of evaluations other packages register. `refuse` gets the
    names our folders took from earlier ones (R3) and gives the folders to index again without."""
    global _task_folders, _refuse
    _task_folders, _refuse = folders, refuse


def our_task_folders() -> list[Path]:
    """The folders of our task YAMLs, resolved: those installed (`install_task_folders`), else the package's own."""
    from lm_eval_longmem.paths import task_configs_dir

    found = _task_folders() if _task_folders is not None else [task_configs_dir()]
    return list(dict.fromkeys(Path(folder).expanduser().resolve() for folder in found))


def with_our_tasks(include_path: str | os.PathLike[str] | list | tuple | None) -> list:
    """`include_path` (None, one path or a list) with our task folders first, without duplicates."""
    ours = our_task_folders()
    given = (
        []
        if include_path is None
        else list(include_path)
        if isinstance(include_path, (list, tuple))
        else [include_path]
    )
    rest = [p for p in given if Path(p).expanduser().resolve() not in ours]
    return [*ours, *rest]


def patch_task_manager(manager_module: Any) -> None:
    """Make `TaskManager` index our tasks beside the built-ins (idempotent).

    Order of task directories: lm_eval's built-ins, then ours (so a built-in name an evaluation takes on
    purpose, `replaces_harness`, is replaced without the harness's override warning), then the user's own
    `include_path` (so users can still override us). `include_defaults=False` asks for the
    user's paths only, so ours are left out too. Arguments are bound to the wrapped signature,
    so positional and keyword calls are treated alike. The index is built as `index_our_tasks` says.
    """
    cls = manager_module.TaskManager
    if getattr(cls.__init__, MARK, False):
        return
    original_init = cls.__init__
    signature = inspect.signature(original_init)
    if not {"include_path", "include_defaults"} <= set(signature.parameters):
        log.warning(
            "lm-eval-longmem: this lm_eval's TaskManager takes no include_path/include_defaults, so our "
            'tasks are not added; pass --include_path "$(python -m lm_eval_longmem.paths)" or install '
            f"{SUPPORTED}"
        )
        return
    builtin_dir = Path(manager_module.__file__).resolve().parent

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        include_defaults = bound.arguments.get("include_defaults", signature.parameters["include_defaults"].default)
        if not include_defaults:
            original_init(*bound.args, **bound.kwargs)
            return

        def build(include_path: list) -> None:
            bound.arguments["include_path"] = include_path
            original_init(*bound.args, **bound.kwargs)

        index_our_tasks(build, with_our_tasks(bound.arguments.get("include_path")), builtin_dir)

    setattr(__init__, MARK, True)
    cls.__init__ = __init__


def index_our_tasks(build: Callable[[list], Any], include_path: list, builtin_dir: Path) -> Any:
    """`build(include_path)` (a TaskManager indexing those folders) with the index's override warnings for names our
    folders take quieted (R3); when the package refuses some of those folders (`install_task_folders`' `refuse`,
    which says why), built again without them, once. Returns what the last `build` returned."""
    with quiet_our_overrides(builtin_dir) as overrides:
        built = build(include_path)
    refused = set(_refuse(overrides)) if _refuse is not None and overrides else set()
    if not refused:
        return built
    kept = [path for path in include_path if Path(path).expanduser().resolve() not in refused]
    with quiet_our_overrides(builtin_dir):
        return build(kept)


class _OurOverrides(logging.Filter):
    """Drops the index's override warning for every name a task of our folders takes, and notes it (R3)."""

    def __init__(self, ours: Sequence[Path], builtin: Path) -> None:
        super().__init__()
        self.ours, self.builtin = ours, builtin
        self.overrides: list[Override] = []

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not (isinstance(args, tuple) and len(args) == 3 and isinstance(args[0], str)):
            return True
        new, old = _resolved(args[1]), _resolved(args[2])
        if new is None or old is None or not any(new.is_relative_to(o) for o in self.ours):
            return True
        self.overrides.append(Override(args[0], new, old, old.is_relative_to(self.builtin)))
        return False


def _resolved(path: Any) -> Path | None:
    try:
        return Path(path).resolve() if path is not None else None
    except (TypeError, OSError):
        return None


@contextlib.contextmanager
def quiet_our_overrides(builtin_dir: Path) -> Iterator[list[Override]]:
    """While indexing, silence "Task X ... overrides existing task" where a task of our folders takes a name (the
    package judges each: `index_our_tasks`). Yields the list of those overrides, filled as the index is built.
    Other override warnings (a user's include path replacing a built-in or one of ours) still reach the log."""
    gate = _OurOverrides(our_task_folders(), builtin_dir.resolve())
    logger = logging.getLogger(INDEX_LOGGER)
    logger.addFilter(gate)
    try:
        yield gate.overrides
    finally:
        logger.removeFilter(gate)


def new_task_manager(**kwargs: Any) -> Any:
    """A TaskManager with our tasks added explicitly (the hook may be off), built as `index_our_tasks` says."""
    import lm_eval.tasks.manager as manager_module

    def build(include_path: list) -> Any:
        return manager_module.TaskManager(**{**kwargs, "include_path": include_path})

    return index_our_tasks(
        build, with_our_tasks(kwargs.get("include_path")), Path(manager_module.__file__).resolve().parent
    )


# ---------------------------------------------------------------- task names, YAML paths, include paths (R16)


def load_tasks(
    names: list[str],
    metadata: dict[str, Any],
    *,
    include_path: list[str] | None = None,
    usage_error: type[Exception] = ValueError,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(leaf tasks, groups) as a run with this metadata (`--model_args` merged with `--metadata`) and
    `--include_path` folders loads them.

    What the harness would skip silently or raise deep inside (R16) is a `usage_error` (the
    package's `UsageError`, handed in: the harness layer imports nothing of ours) naming the flag: an
    include path that does not exist, a name the index does not hold (with the closest one), a
    YAML path the harness cannot read as a task.
    """
    for folder in include_path or []:
        if not Path(folder).expanduser().exists():
            raise usage_error(f"--include_path {folder}: no such file or folder; give the folder of your task YAMLs")
    manager = new_task_manager(metadata=metadata, include_path=list(include_path or []) or None)
    unknown = [name for name in names if name not in manager.all_tasks and not Path(name).is_file()]
    if unknown:
        raise usage_error(unknown_tasks(unknown, manager.all_tasks))
    try:
        loaded = manager.load(names)
    except usage_error:
        raise
    except Exception as err:  # the YAML parser's or the config factory's error about a YAML the user named
        paths = [n for n in names if Path(n).is_file()]
        if not paths:
            raise
        first = (str(err).splitlines() or [""])[0]
        raise usage_error(
            f"--tasks {','.join(paths)}: the harness cannot load it as a task ({type(err).__name__}: {first}); fix the YAML or choose another task"
        ) from err
    return dict(loaded["tasks"]), dict(loaded.get("groups") or {})


def unknown_tasks(names: list[str], known: Iterable[str]) -> str:
    """One line for `--tasks` names the index does not hold, each with the closest name it does."""
    import difflib

    known = list(known)
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = (
            f"did you mean {close[0]}?"
            if close
            else "give a task, group or tag name (lm_eval ls tasks lists them) or a task YAML's path"
        )
        parts.append(f"--tasks {name}: no such task; {hint}")
    return "; ".join(parts) + " (use --include_path for the folder of your own tasks)"


_NOT_FOUND = re.compile(r"Tasks not found: (?P<names>.+)")


def tasks_not_found(err: BaseException) -> list[str]:
    """The names of `lm_eval run`'s own error for `--tasks` names its index does not hold (R26: a ValueError
    "Tasks not found: a, b" from `EvaluatorConfig.process_tasks`, before any model loads); [] for any other."""
    match = _NOT_FOUND.fullmatch(str(err).strip()) if isinstance(err, ValueError) else None
    return [name.strip() for name in match["names"].split(",")] if match else []


# ---------------------------------------------------------------- request cache key (R7)


def request_cache_tokenizer_name(tokenizer_name: str, fingerprint: str) -> str:
    """The `tokenizer_name` to hand `Task.build_all_requests` so `--cache_requests` sees our inputs.

    lm_eval names its request cache after the task, shots, rank, chat template and
    `tokenizer_name` only (R7); `tokenizer_name` is used for nothing else there. Our requests
    also depend on `--metadata` and on local input files, so a task passes their `fingerprint`
    through here: any change of options or data gives a new cache entry instead of stale requests.
    """
    return f"{tokenizer_name}-longmem-{fingerprint}"


# ---------------------------------------------------------------- aggregation of our tasks (R11)


def install_aggregation() -> None:
    """Let a task build its own results row from the per-doc payloads of every rank (idempotent).

    lm_eval aggregates each raw metric key on its own (R11), which cannot turn one payload per doc
    (scores, cells, summary item) into one metric per cell. A task with a method
    ``aggregate_payloads(raw_metrics, harness_default)`` returns its ``(row, sample count)`` itself;
    ``harness_default(raw_metrics)`` is the harness's own aggregation, for keys it should keep. Any
    other task is aggregated by the harness, unchanged. Installed by `harness.install`.
    """
    from lm_eval import evaluator_utils

    original = evaluator_utils._compute_task_aggregations
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def compute(task: Any, raw_metrics: dict, bootstrap_iters: int | None = 100000) -> tuple[dict, int]:
        ours = getattr(task, "aggregate_payloads", None)
        if ours is None:
            return original(task, raw_metrics, bootstrap_iters)
        return ours(raw_metrics, lambda raw: original(task, raw, bootstrap_iters))

    setattr(compute, MARK, True)
    evaluator_utils._compute_task_aggregations = compute


# ---------------------------------------------------------------- the harness's own task YAMLs (R8)


def builtin_task_file(folder: str, task: str) -> Path:
    """The installed harness's YAML of its task `task` in its task folder `folder` (`lm_eval/tasks/<folder>/<task>.yaml`:
    the harness names a task's file after it)."""
    import lm_eval.tasks

    path = Path(lm_eval.tasks.__file__).parent / folder / f"{task}.yaml"
    if not path.is_file():
        raise FileNotFoundError(
            f"the installed lm_eval has no {path.name} (looked in {path.parent}); lm-eval-longmem reads the "
            f"harness's own task {task} from it: install {SUPPORTED}"
        )
    return path


def read_builtin_task_config(folder: str, task: str) -> tuple[Path, dict[str, Any]]:
    """The path and raw config (`!function` tags left unresolved) of the harness's task `task` (`builtin_task_file`)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    path = builtin_task_file(folder, task)
    return path, load_yaml(path, resolve_func=False)


# ---------------------------------------------------------------- the custom_dataset notice (R18)

TASK_LOGGER = "lm_eval.api.task"
"""R18: the logger of `lm_eval.api.task`, which `ConfigurableTask.download` warns through."""

CUSTOM_DATASET_NOTICE = "Custom kwargs can be passed to `--metadata`"
"""R18: how the notice `ConfigurableTask.download` logs for every task with a callable `custom_dataset` begins,
after "<task>: "; its example key, `max_seq_lengths`, is RULER's and no option of ours."""


class _DropNotice(logging.Filter):
    def __init__(self, task: str) -> None:
        super().__init__()
        self.prefix = f"{task}: {CUSTOM_DATASET_NOTICE}"

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


@contextlib.contextmanager
def quiet_custom_dataset_notice(task: str) -> Iterator[None]:
    """While `task` downloads (builds) its data, drop the harness's notice that custom kwargs go to
    `--metadata`, "for example max_seq_lengths": our tasks take the `<prefix>*` keys their cards list, and
    an unknown one is an error, so the notice only names an option that does not exist. Other tasks'
    notices (RULER's, which has that key) still reach the log; should the message change, it comes back."""
    gate = _DropNotice(task)
    logger = logging.getLogger(TASK_LOGGER)
    logger.addFilter(gate)
    try:
        yield
    finally:
        logger.removeFilter(gate)


# ---------------------------------------------------------------- docs dealt to ranks (R20)


def deal_docs(
    docs: Iterable[tuple[int, Any]], *, rank: int, limit: int | None, world_size: int
) -> Iterator[tuple[int, Any]]:
    """`(doc_id, doc)` pairs of `docs` for data-parallel rank `rank`, as `ConfigurableTask.doc_iterator` deals
    them (R20): the first `limit` of all ranks' docs, every `world_size`-th from the `rank`-th."""
    from lm_eval import utils

    return utils.create_iterator(docs, rank=int(rank), limit=int(limit) if limit else None, world_size=int(world_size))


# ---------------------------------------------------------------- metrics a task scores itself (R22)


def declare_metrics(task: Any, metric_list: list[dict[str, Any]]) -> None:
    """Declare `metric_list` on a built task whose own `process_results` returns those names, as
    `ConfigurableTask.__init__` declares them for such a task (R22): aggregation by name (default "mean")
    or a function, `higher_is_better` default True."""
    from lm_eval.api.registry import get_aggregation

    for entry in metric_list:
        name = entry["metric"]
        aggregation = entry.get("aggregation", "mean")
        task._metric_fn_list[name] = None
        task._metric_fn_kwargs[name] = {}
        task._aggregation_list[name] = get_aggregation(aggregation) if isinstance(aggregation, str) else aggregation
        task._higher_is_better[name] = entry.get("higher_is_better", True)

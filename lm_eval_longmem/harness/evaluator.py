"""lm_eval's evaluator as ours meets it: a run's inputs checked before its model loads, results rebuilt from
logged payloads, and runs written as `lm_eval run` writes them (R13, R17, R25).

`install_before_model` (installed by `harness.install`) reads a `simple_evaluate` call from its own frame
when it is about to create the model; `results_from_payloads`, `doc_hash` and `task_hash` are what
`lm-eval-longmem merge` rebuilds one run from; `evaluate_into` and `results_tables` run and print as the CLI.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_longmem.harness import models

# ---------------------------------------------------------------- checks before the model loads (R17)


@dataclass(frozen=True)
class RunRequest:
    """What a `simple_evaluate` call asks for, read when it is about to create its model (R17)."""

    tasks: list[Any]
    """The `tasks` argument: names (the CLI resolves its `--tasks` to names), or configs and Task objects."""
    metadata: dict[str, Any]
    """The metadata its tasks will get: the given TaskManager's, else `model_args` merged with `metadata`
    (what `simple_evaluate` hands the TaskManager it builds)."""
    task_manager: Any | None
    """The TaskManager it was given (the CLI always gives one), or None."""
    limit: float | None = None
    """The `limit` argument (`--limit`): docs per task, or a share of them below 1.0; None: every doc."""
    samples: dict[str, Any] | None = None
    """The `samples` argument (`--samples`): the doc ids each task runs; None: not given."""

    def task_yaml(self, name: str) -> Path | None:
        """The YAML the run's task index holds for `name` (None without a TaskManager, or for an unknown name)."""
        index = getattr(self.task_manager, "task_index", None) or {}
        entry = index.get(name) if isinstance(name, str) else None
        path = getattr(entry, "yaml_path", None)
        return Path(path) if path else None


_before_model: Callable[[RunRequest], None] | None = None


def install_before_model(check: Callable[[RunRequest], None]) -> None:
    """Call `check(run)` whenever `simple_evaluate` is about to create its model (R17; idempotent).

    The harness creates the model before it loads any task, so a task's data problems (an offline hub
    dataset, a missing folder) would otherwise show only after the model loaded, one per run; `check`
    sees every task of the run first and may raise. The CLI and the Python API both pass through here.
    """
    global _before_model
    _before_model = check
    models.before_each_model(_check_pending_run)


def _check_pending_run() -> None:
    if _before_model is not None and (run := pending_run()) is not None:
        _before_model(run)


def pending_run() -> RunRequest | None:
    """The `simple_evaluate` call this LM is being created for, or None (the LM is created some other way).

    `simple_evaluate` creates its model from its own frame (R17): its parameters `tasks`, `task_manager`,
    `model_args` and `metadata` still hold what the caller passed (or, for `model_args`, "" for None). The
    lm_eval CLI imports `simple_evaluate` before our start-up hook runs, so wrapping that function
    would miss it; reading the frame of the running call serves the CLI and the Python API alike.
    """
    evaluator = sys.modules.get("lm_eval.evaluator")
    if evaluator is None:
        return None
    code = inspect.unwrap(evaluator.simple_evaluate).__code__
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    if frame is None:
        return None
    values = frame.f_locals
    task_manager = values.get("task_manager")
    if task_manager is not None and isinstance(getattr(task_manager, "metadata", None), dict):
        metadata = dict(task_manager.metadata)
    else:
        model_args = values.get("model_args") or {}
        if isinstance(model_args, str):
            from lm_eval.utils import simple_parse_args_string

            model_args = simple_parse_args_string(model_args)
        metadata = dict(model_args) | dict(values.get("metadata") or {})
    tasks = values.get("tasks") or []
    limit, samples = values.get("limit"), values.get("samples")
    return RunRequest(
        tasks=list(tasks) if isinstance(tasks, (list, tuple)) else [tasks], metadata=metadata, task_manager=task_manager,
        limit=float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None,
        samples=samples if isinstance(samples, dict) else None,
    )  # fmt: skip


# ---------------------------------------------------------------- results from logged payloads (R13)


def results_from_payloads(
    tasks: dict[str, Any],
    groups: dict[str, Any],
    raw_metrics: dict[str, dict[tuple[str, str], list]],
    bootstrap_iters: int | None,
) -> dict[str, Any]:
    """The harness's results dict (results, groups, configs, versions, n-shot, higher_is_better,
    n-samples) from every task's per-doc payloads, exactly as `evaluate` builds it once the model
    has answered: our tasks' rows come from their aggregation hook (R11), groups from the harness."""
    from collections import defaultdict

    from lm_eval.evaluator_utils import _process_results

    acc = {
        name: {"task": task, "raw_metrics": defaultdict(list, raw_metrics[name]), "logged_samples": []}
        for name, task in tasks.items()
    }
    return dict(_process_results(acc, groups, bootstrap_iters)._to_eval_results(samples=None))


def doc_hash(doc: Any) -> str:
    """The `doc_hash` a `--log_samples` record gives `doc`."""
    import json

    from lm_eval.utils import handle_non_serializable, hash_string

    return hash_string(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False))


def task_hash(records: list[dict[str, Any]]) -> str:
    """The results' `task_hashes` entry of a task whose `--log_samples` records are `records`, in file order."""
    from lm_eval.utils import hash_string

    return hash_string("".join(r["doc_hash"] + r["prompt_hash"] + r["target_hash"] for r in records))


# ---------------------------------------------------------------- runs written as the CLI writes them (R25)


def evaluate_into(output_path: Path | str, **simple_evaluate_kwargs: Any) -> dict[str, Any]:
    """`lm_eval.simple_evaluate(**kwargs)` with `--log_samples`, its results and samples files written under
    `output_path` as `lm_eval run --output_path ... --log_samples` writes them (R25); returns the results
    (without the samples)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(output_path))
    results = lm_eval.simple_evaluate(**simple_evaluate_kwargs, log_samples=True, evaluation_tracker=tracker)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    return results


def results_tables(results: dict[str, Any]) -> str:
    """The tables `lm_eval run` prints after a run: the tasks', then the groups' when there are any (R25)."""
    from lm_eval.utils import make_table

    return make_table(results) + ("\n" + make_table(results, "groups") if "groups" in results else "")

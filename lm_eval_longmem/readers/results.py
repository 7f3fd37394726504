"""The one reader of lm_eval's output files, for `plot`, `report` and each evaluation's own commands.

`lm_eval --output_path OUT` writes, per run, `OUT/<model>/results_<date>.json` and (with
`--log_samples`) one `samples_<task>_<date>.jsonl` per task beside it. A user may point us at
a results file, at a model folder holding several runs, or at `OUT` itself holding several models:

* a file is taken as it is;
* a folder gives the newest `results_*.json` of every folder under it that holds some (one run per
  model folder: an older run of the same model in the same folder is a previous attempt);
* several paths give all of their runs, in the order given.

Every problem with a file is a `ResultsFileError` whose message is one line naming the file and
the fix, so command lines can print it as it is.

A file's run, `Run`, and what a results dict says of one task (`task_metrics`, `facts`, `tasks_of`, ...) are
defined below the registry, in `common.run` (the registry's parts take and give `Run`s), and handed on here with
every registered evaluation's reading of its files (`readings`: `Evaluation.results_reading`): this module is
where evaluations import them from (docs/evaluation-api.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from lm_eval_longmem.common import run as common_run
from lm_eval_longmem.common.evaluations import evaluations
from lm_eval_longmem.common.run import ResultsFileError, Run, facts, n_samples, read_samples_file

__all__ = [
    "RESULTS_GLOB",
    "ResultsFileError",
    "Run",
    "condition_facts",
    "condition_of",
    "evaluation_of",
    "facts",
    "find_results_file",
    "find_results_files",
    "load_run",
    "load_runs",
    "n_samples",
    "read_json",
    "read_samples_file",
    "readings",
    "run_labels",
    "skip_reasons",
    "task_metrics",
    "tasks_of",
]

RESULTS_GLOB = "results_*.json"


def readings() -> common_run.Readings:
    """Every registered evaluation's reading of its results files (`Evaluation.results_reading`), in the registry's
    order: what the functions below read a results dict with."""
    return {entry.name: reading for entry in evaluations() if (reading := entry.results_reading()) is not None}


def task_metrics(results: dict[str, Any], task: str) -> dict[str, Any]:
    """`task`'s metrics under today's names (`common.run.task_metrics`)."""
    return common_run.task_metrics(results, task, readings())


def skip_reasons(results: dict[str, Any], task: str) -> dict[str, dict[str, int]]:
    """{cell: {reason: count}} of `task`'s skipped docs (`common.run.skip_reasons`)."""
    return common_run.skip_reasons(results, task, readings())


def evaluation_of(results: dict[str, Any], task: str) -> str | None:
    """The evaluation `task` belongs to (`common.run.evaluation_of`), None for any other task or group."""
    return common_run.evaluation_of(results, task, readings())


def tasks_of(results: dict[str, Any], evaluation: str) -> list[str]:
    """The tasks (not groups) of `evaluation` in a results dict, in the file's order (`common.run.tasks_of`)."""
    return common_run.tasks_of(results, evaluation, readings())


def condition_of(results: dict[str, Any], task: str) -> str | None:
    """Which condition our `task` ran under (`common.run.condition_of`), None for any other task."""
    return common_run.condition_of(results, task, readings())


def condition_facts(results: dict[str, Any], task: str) -> dict[str, Any]:
    """`task`'s condition and retrieval setting as a task records them today (`common.run.condition_facts`)."""
    return common_run.condition_facts(results, task, readings())


def read_json(path: Path) -> Any:
    """The parsed content of a JSON file, or a `ResultsFileError` saying what is wrong with it."""
    path = Path(path)
    if path.is_dir():
        raise ResultsFileError(f"{path} is a folder: pass a results_*.json file, or use the folder as a whole")
    if not path.is_file():
        raise ResultsFileError(
            f"{path}: no such file; pass a results_*.json file or the folder given to lm_eval --output_path"
        )
    raw = path.read_bytes()
    if not raw.strip():
        raise ResultsFileError(
            f"{path} is empty ({len(raw)} bytes), probably from an interrupted run: rerun lm_eval or pass another results file",
            reason=f"empty ({len(raw)} bytes), probably from an interrupted run",
        )
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ResultsFileError(
            f"{path} is not a text file: pass a results_*.json file that lm_eval wrote", reason="not a text file"
        ) from None
    except json.JSONDecodeError as err:
        where = f"line {err.lineno}, column {err.colno}: {err.msg}"
        raise ResultsFileError(
            f"{path} is not valid JSON ({where}): pass a results_*.json file that lm_eval wrote, or rerun the evaluation",
            reason=f"not valid JSON ({where})",
        ) from None


def say_skipped(line: str) -> None:
    """How a command says it passed over a file of a folder it was given: one line on stderr."""
    print(f"lm-eval-longmem: skipped {line}", file=sys.stderr)


def find_results_files(path: Path, *, on_skip: Callable[[str], None] = say_skipped) -> list[Path]:
    """`path` itself, or the newest lm_eval run (`results_*.json`) of every folder under `path` that holds one.

    In a folder, a `results_*.json` that is not an lm_eval results file (a user's own JSON beside a run, a file left
    empty by an interrupted run) is passed over, named in one line through `on_skip`, and the next newest file of
    its folder is taken; a file given by name is taken as it is (`load_run` says what is wrong with it)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.exists():
        raise ResultsFileError(
            f"{path}: no such file or folder; pass a results_*.json file or the folder given to lm_eval --output_path"
        )
    candidates: dict[Path, list[Path]] = {}
    for found in sorted(path.rglob(RESULTS_GLOB)):
        if found.is_file():
            candidates.setdefault(found.parent, []).append(found)
    chosen = []
    for folder in sorted(candidates):
        for found in sorted(candidates[folder], key=_stamp, reverse=True):
            try:
                load_run(found)
            except ResultsFileError as err:
                on_skip(f"{found}: {err.reason}")
                continue
            chosen.append(found)
            break
    if not chosen:
        what = (
            f"no {RESULTS_GLOB}" if not candidates else f"no {RESULTS_GLOB} that is an lm_eval run (each named above)"
        )
        raise ResultsFileError(
            f"{path}: {what} in this folder or below it; pass the folder given to lm_eval --output_path "
            "(lm_eval writes the file only when a run finishes)"
        )
    return chosen


def find_results_file(path: Path) -> Path:
    """`path` itself, or the single newest `results_*.json` under a folder (for tools that read one run)."""
    return max(find_results_files(path), key=_stamp)


def _stamp(path: Path) -> tuple[str, float]:
    """Sort key of a results file: its date stamp from the name, then its modification time."""
    return path.stem.removeprefix("results_"), path.stat().st_mtime


def _newer(a: Path, b: Path) -> bool:
    return _stamp(a) > _stamp(b)


def load_run(path: Path) -> Run:
    """The run of one results file (a JSON object with lm_eval's `results`)."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ResultsFileError(
            f'{path} is JSON but not an lm_eval results file (no "results" object): pass the results_*.json lm_eval wrote',
            reason='JSON but not an lm_eval results file (no "results" object)',
        )
    return Run(Path(path), data, readings())


def load_runs(paths: Iterable[Path]) -> list[Run]:
    """Every run under `paths` (files and folders, see the module docstring), in the order given."""
    return [load_run(file) for path in paths for file in find_results_files(Path(path))]


def run_labels(runs: Sequence[Run]) -> list[str]:
    """A distinct, short label per run: the model name, with the run's date when a model appears twice."""
    labels = [run.model for run in runs]
    labels = [
        f"{label} [{run.date}]" if labels.count(label) > 1 and run.date else label for label, run in zip(labels, runs)
    ]
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return unique

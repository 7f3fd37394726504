"""One lm_eval run as every reader sees it: `Run` (a parsed results file) and what a results dict says of a task
(its metrics under today's names, its facts, its evaluation and condition, its samples).

These sit below the registry (`common.evaluations`), whose parts take and give `Run`s; reading and finding the
files is `readers.results`, which hands these names on with the registry's `Readings`. A task of ours records its
evaluation's name and its condition in the results (`configs.<task>.longmem`); for a file written before tasks
recorded them, and for names an evaluation spells its own way, these functions ask the `ResultsReading` of each
evaluation they are given (`Evaluation.results_reading`): no evaluation is named here. Whether an evaluation a
file names is registered in this installation is the registry's to say (`report.blocks.is_ours`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.conditions import CONDITIONS, IN_CONTEXT, RETRIEVAL
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.metric_names import CONFIG_KEY


class ResultsFileError(UsageError):
    """A results or samples file that cannot be read; the message names the file and the fix.

    A `UsageError`, so every command line shows it as its one line (no type name, no traceback).
    """

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message
        """What the file is, in a few words (for the line that says it was passed over)."""


class ResultsReading(Protocol):
    """How readers read an evaluation's results files where the metric-name grammar alone does not: files written
    before its tasks recorded their evaluation or condition, and spellings of its own (an evaluation's
    `Evaluation.results_reading`). Subclass it to take the defaults of the optional members."""

    def recognises(self, metrics: Mapping[str, Any]) -> bool:
        """Whether a task of a results file that did not record its evaluation is one of its, from its metrics
        (under the grammar's names, `metric_names.canonical_row`). Default: it recognises none."""
        return False

    def canonical(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """One of its tasks' metrics (under the grammar's names) as readers see them: names and values it spells
        its own way rewritten to today's. Default: as they are."""
        return metrics

    def condition(self, config: Mapping[str, Any]) -> str | None:
        """The condition (`common.conditions.CONDITIONS`) of one of its tasks whose results did not record one,
        from the task's entry of the results' `configs`. Default None: in-context."""
        return None


Readings = Mapping[str, ResultsReading]
"""Each evaluation's `ResultsReading`, by the evaluation's name, in the registry's order
(`readers.results.readings`: every registered one's)."""


@dataclass(frozen=True)
class Run:
    """One lm_eval run: its results file, parsed."""

    path: Path
    """The `results_*.json` file."""
    data: dict[str, Any]
    """Its content: `results`, `groups`, `configs`, `n-samples`, `config`, `model_name`, ..."""
    readings: Readings = field(default_factory=dict, repr=False, compare=False)
    """How each evaluation reads its results files (`readers.results.load_run` gives the registry's); none: the
    metric-name grammar alone, and a task that recorded no evaluation is none's."""

    @property
    def date(self) -> str:
        """The date stamp lm_eval put in the file name (`2026-01-01T00-00-00.123456`), or ""."""
        stem = self.path.stem
        return stem[len("results_") :] if stem.startswith("results_") else ""

    @property
    def model(self) -> str:
        """The evaluated model's short name: the last part of `pretrained` (or of lm_eval's `model_name`)."""
        name = (
            self.model_args.get("pretrained")
            or self.data.get("model_name")
            or (self.data.get("config") or {}).get("model")
        )
        return str(name or "unknown model").rstrip("/").rsplit("/", 1)[-1]

    @property
    def model_args(self) -> dict[str, Any]:
        """`--model_args` of the run as a dict (lm_eval stores a string or a dict)."""
        args = (self.data.get("config") or {}).get("model_args") or {}
        if isinstance(args, str):
            args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
        return args if isinstance(args, dict) else {}

    @property
    def tasks(self) -> list[str]:
        """Every task and group with metrics in the run, in the file's order."""
        return list(self.data.get("results") or {})

    def metrics(self, task: str) -> dict[str, Any]:
        """`task`'s metrics under today's names (`task_metrics`)."""
        return task_metrics(self.data, task, self.readings)

    def facts(self, task: str) -> dict[str, Any]:
        """`task`'s non-metric facts (`facts`)."""
        return facts(self.data, task)

    def skip_reasons(self, task: str) -> dict[str, dict[str, int]]:
        """{cell: {reason: count}} of `task`'s skipped docs (`skip_reasons`)."""
        return skip_reasons(self.data, task, self.readings)

    def evaluation(self, task: str) -> str | None:
        """The evaluation `task` belongs to (`evaluation_of`), None for any other task or group."""
        return evaluation_of(self.data, task, self.readings)

    def condition(self, task: str) -> str | None:
        """Which of `common.conditions.CONDITIONS` our `task` ran under (`condition_of`), None for any other task."""
        return condition_of(self.data, task, self.readings)

    def condition_label(self, task: str) -> str:
        """The condition as headings show it: the condition, or for retrieval its setting ("sentences top-5 bm25")."""
        found = condition_facts(self.data, task, self.readings)
        return str(found.get("retrieval") or found.get("condition") or "-")

    def n_samples(self, task: str) -> int | None:
        """Docs the run evaluated for `task` (`n_samples`)."""
        return n_samples(self.data, task)

    def samples_file(self, task: str) -> Path | None:
        """The `samples_<task>_<date>.jsonl` of this run (same folder, same date stamp), if it was written."""
        candidate = self.path.with_name(f"samples_{task}_{self.date}.jsonl")
        return candidate if self.date and candidate.is_file() else None

    def samples(self, task: str) -> list[dict[str, Any]]:
        """The per-doc records of `task` (needs the run's `--log_samples`)."""
        path = self.samples_file(task)
        if path is None:
            raise ResultsFileError(
                f"{self.path}: no samples_{task}_{self.date}.jsonl beside it; rerun lm_eval with --log_samples"
            )
        return read_samples_file(path)


def task_metrics(results: dict[str, Any], task: str, readings: Readings) -> dict[str, Any]:
    """`task`'s metrics in an lm_eval results dict, without the filter suffix (`acc,none` -> `acc`) and under
    today's names: the unfiltered ones when the task has them, else those of its first filter
    (`exact_match,strict-match`), under the grammar's names (`metric_names.canonical_row`), then as its
    evaluation reads them (`ResultsReading.canonical`)."""
    metrics = _grammar_metrics(results, task)
    reading = readings.get(evaluation_of(results, task, readings) or "")
    return reading.canonical(metrics) if reading is not None else metrics


def _grammar_metrics(results: dict[str, Any], task: str) -> dict[str, Any]:
    """`task`'s metrics under the grammar's names alone (`metric_names.canonical_row`)."""
    table = results.get("results")
    row = table.get(task) if isinstance(table, dict) else None
    return metric_names.canonical_row(row) if isinstance(row, dict) else {}


def n_samples(results: dict[str, Any], task: str) -> int | None:
    """Docs an lm_eval results dict says the run evaluated for `task` (after `--limit`), or None when it does not say."""
    table = results.get("n-samples")
    counts = table.get(task) if isinstance(table, dict) else None
    value = counts.get("effective") if isinstance(counts, dict) else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def facts(results: dict[str, Any], task: str) -> dict[str, Any]:
    """Our non-metric facts about `task` (`configs.<task>.longmem`: skip reasons, length names ...), or {}."""
    configs = results.get("configs")
    config = configs.get(task) if isinstance(configs, dict) else None
    found = config.get(CONFIG_KEY) if isinstance(config, dict) else None
    return found if isinstance(found, dict) else {}


def skip_reasons(results: dict[str, Any], task: str, readings: Readings) -> dict[str, dict[str, int]]:
    """{cell: {reason: count}} of `task`'s skipped docs: from its facts, or (older files) from its metrics."""
    found = facts(results, task).get("skip_reasons")
    if found is None:
        found = task_metrics(results, task, readings).get("skip_reasons")
    return found if isinstance(found, dict) else {}


def evaluation_of(results: dict[str, Any], task: str, readings: Readings) -> str | None:
    """The lm-eval-longmem evaluation `task` of a results dict belongs to, else None.

    A task of ours records it in its facts (`configs.<task>.longmem.evaluation`). A group is one
    evaluation's when all its tasks are. A harness task whose name merely starts like ours is none. Files
    written before tasks recorded it are recognised by their metrics (`guessed_evaluation`). The name
    may be of an evaluation not installed here: whether it is registered is the registry's to say
    (`report.blocks.is_ours`).
    """
    groups = results.get("group_subtasks")
    subtasks = groups.get(task) if isinstance(groups, dict) else None
    if isinstance(subtasks, list) and subtasks:
        kinds = {evaluation_of(results, sub, readings) for sub in subtasks}
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None
    recorded = facts(results, task).get("evaluation")
    if isinstance(recorded, str) and recorded:
        return recorded
    return guessed_evaluation(_grammar_metrics(results, task), readings)


def tasks_of(results: dict[str, Any], evaluation: str, readings: Readings) -> list[str]:
    """The tasks (not groups) of `evaluation` in a results dict, in the file's order (`evaluation_of`)."""
    table = results.get("results")
    groups = results.get("group_subtasks")
    return [
        task
        for task in (table if isinstance(table, dict) else ())
        if not (isinstance(groups, dict) and groups.get(task)) and evaluation_of(results, task, readings) == evaluation
    ]


def condition_of(results: dict[str, Any], task: str, readings: Readings) -> str | None:
    """Which of `common.conditions.CONDITIONS` our `task` of a results dict ran under, else None (not ours,
    or a group). Recorded by the task (`configs.<task>.longmem.condition`); derived for older files
    (`condition_facts`)."""
    if evaluation_of(results, task, readings) is None or task in (results.get("group_subtasks") or {}):
        return None
    found = condition_facts(results, task, readings).get("condition")
    return found if found in CONDITIONS else None


def condition_facts(results: dict[str, Any], task: str, readings: Readings) -> dict[str, Any]:
    """`task`'s `condition` (and, for retrieval, its `retrieval` setting) as a task records them today.

    The one place conditions of files written before tasks recorded them are derived: a task that stored its
    setting as its condition ("in-context", or "sentences top-5 bm25" for retrieval); a task whose evaluation
    reads a condition from its config (`ResultsReading.condition`: an option of its YAML, say); any other
    task of ours ran in-context. A fine-tuned run always recorded itself (the fine-tuning command came with
    conditions)."""
    recorded = facts(results, task)
    found = recorded.get("condition")
    if found in CONDITIONS:
        return {"condition": found} | ({"retrieval": recorded["retrieval"]} if "retrieval" in recorded else {})
    if isinstance(found, str) and found:
        return {"condition": found} if found == IN_CONTEXT else {"condition": RETRIEVAL, "retrieval": found}
    configs = results.get("configs")
    config = configs.get(task) if isinstance(configs, dict) else None
    if not isinstance(config, dict):
        return {"condition": IN_CONTEXT}
    reading = readings.get(evaluation_of(results, task, readings) or "")
    return {"condition": (reading.condition(config) if reading is not None else None) or IN_CONTEXT}


def read_samples_file(path: Path) -> list[dict[str, Any]]:
    """The records of an lm_eval `samples_*.jsonl` file; a bad line is an error naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise ResultsFileError(f"{path}: no such file; rerun lm_eval with --log_samples to write it")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ResultsFileError(
                f"{path}, line {number}: not valid JSON ({err.msg}); the file is damaged, rerun lm_eval"
            ) from None
        if not isinstance(record, dict):
            raise ResultsFileError(
                f"{path}, line {number}: not a sample record; pass a samples_*.jsonl file that lm_eval wrote"
            )
        records.append(record)
    if not records:
        raise ResultsFileError(f"{path} holds no samples; rerun lm_eval with --log_samples")
    return records


def guessed_evaluation(metrics: Mapping[str, Any], readings: Readings) -> str | None:
    """The evaluation of a task in a file written before tasks recorded theirs, from its metrics (under the
    grammar's names, `metric_names.canonical_row`): the first of `readings`, in their order, that recognises
    them (`ResultsReading.recognises`). The one place a result's evaluation is guessed; never used for a file
    whose task recorded it."""
    return next((name for name, reading in readings.items() if reading.recognises(metrics)), None)

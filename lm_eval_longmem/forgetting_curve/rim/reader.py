"""Forgetting-curve results read back: every file kind a curve comes from, as one `analysis.Curve`.

The original tool's JSON (a list of per-length records with `copy_accs`/`lm_accs`), lm_eval's
`samples_*.jsonl` (per-doc scores), and lm_eval's `results_*.json` (per-length means, with the
samples file beside it when present). `stored_summary` gives what the task stored in a results file
(per-length intervals, memory lengths with their bootstrap intervals) without recomputing anything;
`report` and `plot` use it. Metric names are read through `common/metric_names.py`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.stats import Interval
from lm_eval_longmem.forgetting_curve.analysis import (
    COPY,
    CRITERIA,
    LM,
    Curve,
    CurvePoint,
    Summary,
    curve_from_points,
    summarize,
)
from lm_eval_longmem.forgetting_curve.options import NAME
from lm_eval_longmem.forgetting_curve.scores import CLAIMED_LENGTH, memory_censored, memory_length
from lm_eval_longmem.readers.results import (
    Run,
    facts,
    find_results_file,
    read_json,
    read_samples_file,
    skip_reasons,
    task_metrics,
    tasks_of,
)


def read_reference(records: list[dict[str, Any]], *, claimed: int | None = None) -> Curve:
    """A curve from the original forgetting-curve tool's result JSON (list of per-length records)."""
    points = []
    for record in records:
        copies, lms = record["copy_accs"], record["lm_accs"]
        if len(copies) != len(lms):
            raise ValueError(f"length {record['length']}: {len(copies)} copy vs {len(lms)} LM samples")
        points += [
            CurvePoint(int(record["length"]), k, float(c), float(m), (), claimed)
            for k, (c, m) in enumerate(zip(copies, lms, strict=True))
        ]
    return curve_from_points(points)


def is_reference(data: Any) -> bool:
    """True for the original tool's format: a list of records with `length`, `copy_accs`, `lm_accs`."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(r, dict) and {"length", "copy_accs", "lm_accs"} <= r.keys() for r in data)
    )


def read_samples(records: Iterable[dict[str, Any]]) -> Curve:
    """A curve from lm_eval's `samples_<task>_*.jsonl` records of our task (needs `--log_samples`)."""
    points = []
    for record in records:
        doc = record["doc"]
        L = int(doc["length"])
        if COPY in record:
            copy, lm = record[COPY], record[LM]
        else:  # written before the per-doc payload: one key per length
            copy, lm = record[metric_names.name(COPY, L)], record[metric_names.name(LM, L)]
        points.append(CurvePoint(L, int(doc["sample"]), float(copy), float(lm)))
    if not points:
        raise ValueError("no forgetting-curve samples in the file")
    return curve_from_points(points)


def forgetting_curve_task(results: dict[str, Any]) -> str | None:
    """Name of the (first) forgetting-curve task in an lm_eval results dict (`readers.results.tasks_of`)."""
    return next(iter(tasks_of(results, NAME)), None)


def tested_lengths(metrics: dict[str, Any]) -> list[int]:
    """Every L with a `copy_acc@L` mean among metric names (canonical), ascending."""
    return sorted(int(c[0]) for c in metric_names.cells_of(metrics, COPY) if len(c) == 1 and c[0].isdigit())


def read_results(results: dict[str, Any], task: str | None = None) -> Curve:
    """A means-only curve from an lm_eval results dict: per-length means and intervals, skipped lengths,
    claimed window, samples per length and the memory lengths as the task reported them."""
    task = task or forgetting_curve_task(results)
    if task is None:
        raise ValueError("the results file holds no forgetting-curve metrics (copy_acc@L)")
    metrics = task_metrics(results, task)

    def number(score: str, *parts: int, stat: str = "") -> float:
        value = metric_names.number(metrics.get(metric_names.name(score, *parts, stat=stat)))
        return math.nan if value is None else value

    copy, lm = {}, {}
    intervals: dict[int, tuple[Interval, Interval]] = {}
    for L in tested_lengths(metrics):
        copy[L] = np.array([number(COPY, L)])
        lm[L] = np.array([number(LM, L)])
        copy_interval, lm_interval = (
            Interval(*(number(score, L, stat=stat) for stat in metric_names.MEAN_AND_INTERVAL)) for score in (COPY, LM)
        )
        intervals[L] = (copy_interval, lm_interval)
    skipped = tuple(sorted(int(cell) for cell in skip_reasons(results, task)))
    claimed = metric_names.number(metrics.get(CLAIMED_LENGTH))
    reported: dict[str, Any] = {}
    for criterion in CRITERIA:
        length, low, high = (
            metric_names.number(metrics.get(memory_length(criterion, stat))) for stat in metric_names.MEAN_AND_INTERVAL
        )
        if length is not None:
            reported[f"{criterion}_length"] = int(length)
            reported[f"{criterion}_censored"] = bool(metric_names.number(metrics.get(memory_censored(criterion))))
        if low is not None and high is not None:
            reported[f"{criterion}_interval"] = (int(low), int(high))
    counts = {
        int(cell): int(n)
        for cell, n in (facts(results, task).get("docs_per_cell") or {}).items()
        if str(cell).isdigit()
    }
    return Curve(
        tuple(sorted(copy)),
        copy,
        lm,
        skipped,
        int(claimed) if claimed else None,
        intervals,
        reported,
        counts,
    )


def stored_summary(results: dict[str, Any], task: str | None = None, *, path: Path | None = None) -> Summary:
    """The curve's statistics as the task stored them in a results dict (nothing recomputed, no bootstrap).

    Samples per length come from the run's facts; for a file written before they were stored,
    from the samples file beside `path` when there is one.
    """
    task = task or forgetting_curve_task(results)
    curve = read_results(results, task)
    if not curve.counts and path is not None and task is not None:
        samples = Run(Path(path), results).samples_file(task)
        if samples is not None:
            lengths = [int(record["doc"]["length"]) for record in read_samples_file(samples)]
            curve = replace(curve, counts={L: lengths.count(L) for L in curve.lengths})
    return summarize(curve)


def is_samples(data: Any) -> bool:
    """True for lm_eval per-sample records (a list of dicts with a `doc`)."""
    return isinstance(data, list) and bool(data) and all(isinstance(r, dict) and "doc" in r for r in data)


def curve_from_data(data: Any, *, path: Path | None = None, claimed: int | None = None) -> Curve:
    """A curve from loaded file content: the original tool's list, lm_eval samples records or a results dict.

    For a results dict read from `path`, the samples file of the same run (same date stamp, same
    folder) is used when present, so per-sample statistics are available; otherwise the
    per-length means are used.
    """
    if isinstance(data, dict) and "results" in data and not isinstance(data["results"], dict):
        raise UsageError(
            f'{path or "the data"}: its "results" is a {type(data["results"]).__name__}, not an object of tasks: '
            "pass the results_*.json lm_eval wrote for the forgetting_curve task"
        )
    if is_reference(data):
        curve = read_reference(data, claimed=claimed)
    elif is_samples(data):
        curve = read_samples(data)
    elif isinstance(data, dict) and (task := forgetting_curve_task(data)):
        samples = Run(path, data).samples_file(task) if path is not None else None
        curve = read_results(data, task)
        if samples is not None:  # per-sample values; the run's skips, window and intervals from the results
            per_sample = read_samples(read_samples_file(samples))
            curve = replace(per_sample, skipped=curve.skipped, claimed=curve.claimed, reported=curve.reported)
    else:
        raise UsageError(
            f"{path or 'the data'} is neither an lm_eval results/samples file of the forgetting_curve task nor "
            "an original forgetting-curve result file (a list of records with length, copy_accs, lm_accs)"
        )
    if claimed is not None:
        curve = replace(curve, claimed=claimed)
    return curve


def load_curve(path: Path | str, *, claimed: int | None = None) -> Curve:
    """A curve from any supported file (see `curve_from_data`); `.jsonl` files are lm_eval samples.

    A folder stands for the newest results file under it, as for `plot` and `report`; a file that
    cannot be read, or holds no forgetting curve, is a `UsageError` naming it and the fix.
    """
    path = Path(path)
    if path.is_dir():
        path = find_results_file(path)
    data = read_samples_file(path) if path.suffix == ".jsonl" else read_json(path)
    try:
        return curve_from_data(data, path=path, claimed=claimed)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, UsageError):
            raise
        raise UsageError(
            f"{path} holds no readable forgetting curve ({type(err).__name__}: {err}): pass an lm_eval results_*.json "
            "or samples_forgetting_curve_*.jsonl of the forgetting_curve task, or an original forgetting-curve result file"
        ) from err

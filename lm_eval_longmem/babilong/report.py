"""BABILong summaries: the task x length cells, means over tasks, effective context; and the text report.

The `babilong` task computes its summary metrics with these functions (`task.py`), and
`lm-eval-longmem babilong report`, the heatmap and `lm-eval-longmem report` read them back from a
results file (`read_cells`, `read_length_means`), so they work on runs made elsewhere.

* Cell: one (task, length) that ran, with a Wilson 95% interval of its accuracy.
* Mean over tasks (per length, or over every cell): the unweighted mean of cell accuracies, as the
  paper averages qa1-qa5 (Table 2), with an interval from the cells' binomial variances.
* Effective context of a task: the longest length L such that accuracy is at least the threshold
  (0.85, the paper's "satisfactory") at L and at every shorter length that ran; None when the
  shortest length already falls below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from lm_eval_longmem.babilong.options import DEFAULT_TASKS, STANDARD_LENGTHS
from lm_eval_longmem.common.lengths import parse_length
from lm_eval_longmem.common.stats import Interval, mean_of_proportions_interval

Metric = Literal["acc", "acc_corrected"]
_CELL_METRIC = re.compile(r"^acc@(qa\d+)_(\w+),")
_LENGTH_METRIC = re.compile(r"^(acc|acc_corrected)@(\d+[kM]),")
DEFAULT_THRESHOLD = 0.85
"""The paper's "satisfactory" accuracy (section 3.1)."""


class Cell(NamedTuple):
    """One (task, length) that ran."""

    qa: str
    length: str
    n: int
    """Docs evaluated (0 when read back from a results file, which holds the intervals instead)."""
    acc: Interval
    acc_corrected: Interval


def _length_key(length: str) -> int:
    return parse_length(length)


def ordered(cells: Iterable[Cell]) -> list[Cell]:
    """Cells by task number, then length."""
    return sorted(cells, key=lambda c: (int(c.qa[2:]), _length_key(c.length)))


def mean_interval(cells: Sequence[Cell], metric: Metric) -> Interval:
    """Unweighted mean of the cells' accuracies with its 95% interval (`stats.mean_of_proportions_interval`)."""
    return mean_of_proportions_interval(
        [(round(getattr(c, metric).estimate * c.n), c.n) for c in cells]
    )


def babilong_task(results: dict[str, Any]) -> str | None:
    """Name of the (first) task in a results dict that reports BABILong cells (`acc@qaN_LEN`)."""
    for name, metrics in results.get("results", {}).items():
        if any(_CELL_METRIC.match(key) for key in metrics):
            return name
    return None


def _interval(metrics: dict[str, Any], name: str) -> Interval:
    get = lambda suffix: float(metrics.get(f"{name}{suffix},none", float("nan")))  # noqa: E731
    return Interval(get(""), get("_ci_low"), get("_ci_high"))


def read_cells(results: dict[str, Any]) -> list[Cell]:
    """Every (task, length) cell of the BABILong task in an lm_eval results dict."""
    task = babilong_task(results)
    if task is None:
        return []
    metrics = results["results"][task]
    cells = []
    for key in metrics:
        if match := _CELL_METRIC.match(key):
            if key.endswith(("_ci_low,none", "_ci_high,none")) or "_stderr" in key:
                continue
            cell = f"{match[1]}_{match[2]}"
            cells.append(Cell(match[1], match[2], 0, _interval(metrics, f"acc@{cell}"), _interval(metrics, f"acc_corrected@{cell}")))
    return ordered(cells)


def read_length_means(results: dict[str, Any], metric: Metric = "acc") -> dict[str, Interval]:
    """Per length, the run's mean over tasks (`acc@LEN`) with its interval."""
    task = babilong_task(results)
    metrics = results["results"][task] if task else {}
    found = {m[2] for key in metrics if (m := _LENGTH_METRIC.match(key)) and m[1] == metric}
    return {length: _interval(metrics, f"{metric}@{length}") for length in sorted(found, key=_length_key)}


def effective_context(
    cells: Iterable[Cell], *, threshold: float = DEFAULT_THRESHOLD, metric: Metric = "acc"
) -> dict[str, str | None]:
    """Per task, the longest length up to which accuracy stays >= `threshold` (None: not even the shortest)."""
    by_task: dict[str, list[Cell]] = {}
    for cell in cells:
        by_task.setdefault(cell.qa, []).append(cell)
    result: dict[str, str | None] = {}
    for qa, task_cells in by_task.items():
        best = None
        for cell in sorted(task_cells, key=lambda c: _length_key(c.length)):
            if getattr(cell, metric).estimate < threshold:
                break
            best = cell.length
        result[qa] = best
    return result


def format_report(results: dict, *, threshold: float = DEFAULT_THRESHOLD, metric: Metric = "acc") -> str:
    """A plain-text report: task x length accuracies, the mean per length, effective context per task."""
    cells = read_cells(results)
    if not cells:
        raise ValueError("the results hold no BABILong cells (acc@qaN_LEN): run lm_eval --tasks babilong first")
    lengths = [ln for ln in STANDARD_LENGTHS if any(c.length == ln for c in cells)]
    tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
    table = {(c.qa, c.length): c for c in cells}
    lines = [f"BABILong {metric} (%), 95% Wilson interval"]
    lines.append("task   " + "".join(f"{ln:>18}" for ln in lengths))
    for qa in tasks:
        row = f"{qa:<7}"
        for ln in lengths:
            cell = table.get((qa, ln))
            if cell is None:
                row += f"{'-':>18}"
            else:
                value = getattr(cell, metric)
                row += f"{f'{100 * value.estimate:.1f} [{100 * value.low:.0f},{100 * value.high:.0f}]':>18}"
        lines.append(row)
    means = read_length_means(results, metric)
    which = "qa1-qa5, the paper's headline" if tuple(tasks) == DEFAULT_TASKS else f"{', '.join(tasks)}"
    lines.append("")
    lines.append(f"mean over tasks per length ({which}), 95% interval:")
    for length, value in means.items():
        lines.append(f"  {length:>5}: {100 * value.estimate:.1f} [{100 * value.low:.1f}, {100 * value.high:.1f}]")
    task = babilong_task(results)
    metrics = results["results"][task]
    overall = _interval(metrics, metric)
    lines.append(
        f"overall (mean of all {len(cells)} task x length cells): "
        f"{100 * overall.estimate:.1f} [{100 * overall.low:.1f}, {100 * overall.high:.1f}]"
    )
    lines.append("")
    lines.append(f"effective context ({metric} >= {100 * threshold:g}% at this and every shorter length):")
    for qa, length in effective_context(cells, threshold=threshold, metric=metric).items():
        lines.append(f"  {qa:<5}: {length if length is not None else 'none (below threshold at the shortest length run)'}")
    skipped = metrics.get("skip_reasons,none")
    if isinstance(skipped, dict) and skipped:
        lines.append("")
        lines.append("docs skipped (never truncated):")
        for cell, reasons in skipped.items():
            lines.append(f"  {cell}: " + "; ".join(f"{n} x {why}" for why, n in reasons.items()))
    return "\n".join(lines)

"""BABILong summaries from an lm_eval results file: the task x length table, the paper's headline, effective context.

Everything here reads the results file only (`lm-eval-longmem babilong report`, and the heatmap of
`lm-eval-longmem plot`), so it works on runs made elsewhere.

* Cell: one `babilong_qaN_LEN` task that ran, with a Wilson 95% interval from its accuracy and
  number of docs.
* Headline: per length, the unweighted mean over qa1-qa5 (the paper's Table 2), with a Wilson 95%
  interval on the tasks' effective number of docs (`mean_of_proportions_interval`; it stays
  informative at 0% and 100%). It is given only where all five tasks ran.
* Overall: the unweighted mean over every cell that ran (what the `babilong` group reports), same interval.
* Effective context of a task: the longest length L such that accuracy is at least the threshold
  (0.85, the paper's "satisfactory") at L and at every shorter length that ran; None when the
  shortest length already falls below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

from lm_eval_longmem.babilong.data import DEFAULT_TASKS, STANDARD_LENGTHS
from lm_eval_longmem.common.lengths import parse_length
from lm_eval_longmem.common.stats import Interval, mean_of_proportions_interval, proportion_interval

Metric = Literal["acc", "acc_corrected"]
_TASK_NAME = re.compile(r"^babilong_(qa\d+)_(\w+)$")
DEFAULT_THRESHOLD = 0.85
"""The paper's "satisfactory" accuracy (section 3.1)."""


class Cell(NamedTuple):
    """One (task, length) that ran."""

    qa: str
    length: str
    n: int
    """Docs evaluated."""
    acc: Interval
    acc_corrected: Interval


class Headline(NamedTuple):
    """The qa1-qa5 mean at one length."""

    length: str
    acc: Interval
    acc_corrected: Interval


def _length_key(length: str) -> int:
    return parse_length(length)


def read_cells(results: dict) -> list[Cell]:
    """Every BABILong task with metrics in an lm_eval results dict, ordered by task then length."""
    cells = []
    n_samples = results.get("n-samples", {})
    for name, metrics in results.get("results", {}).items():
        match = _TASK_NAME.match(name)
        if not match or "acc,none" not in metrics:
            continue
        n = int(n_samples.get(name, {}).get("effective") or metrics.get("sample_len") or 0)
        if n <= 0:
            continue
        intervals = {}
        for metric in ("acc", "acc_corrected"):
            value = float(metrics[f"{metric},none"])
            intervals[metric] = proportion_interval(round(value * n), n)
        cells.append(Cell(match[1], match[2], n, intervals["acc"], intervals["acc_corrected"]))
    return sorted(cells, key=lambda c: (int(c.qa[2:]), _length_key(c.length)))


def _mean_interval(cells: Sequence[Cell], metric: Metric, level: float = 0.95) -> Interval:
    """Unweighted mean of the cells' accuracies with a score interval that never collapses (see common.stats)."""
    counts = [(round(getattr(c, metric).estimate * c.n), c.n) for c in cells]
    return mean_of_proportions_interval(counts, level)


def headline(cells: Iterable[Cell], tasks: Sequence[str] = DEFAULT_TASKS) -> list[Headline]:
    """Per length, the mean over `tasks` (default qa1-qa5), where all of them ran."""
    by_length: dict[str, dict[str, Cell]] = {}
    for cell in cells:
        by_length.setdefault(cell.length, {})[cell.qa] = cell
    rows = []
    for length in sorted(by_length, key=_length_key):
        present = by_length[length]
        if all(qa in present for qa in tasks):
            chosen = [present[qa] for qa in tasks]
            rows.append(Headline(length, _mean_interval(chosen, "acc"), _mean_interval(chosen, "acc_corrected")))
    return rows


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
    """A plain-text report: task x length accuracies, the headline per length, effective context per task."""
    cells = read_cells(results)
    if not cells:
        raise ValueError("the results hold no BABILong task with metrics (run lm_eval --tasks babilong first)")
    lengths = [ln for ln in STANDARD_LENGTHS if any(c.length == ln for c in cells)]
    lengths += sorted({c.length for c in cells} - set(lengths), key=_length_key)
    tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
    table = {(c.qa, c.length): c for c in cells}
    lines = [f"BABILong {metric} (%), 95% Wilson interval, docs evaluated"]
    lines.append("task   " + "".join(f"{ln:>22}" for ln in lengths))
    for qa in tasks:
        row = f"{qa:<7}"
        for ln in lengths:
            cell = table.get((qa, ln))
            if cell is None:
                row += f"{'-':>22}"
            else:
                value = getattr(cell, metric)
                row += f"{f'{100 * value.estimate:.1f} [{100 * value.low:.0f},{100 * value.high:.0f}] n={cell.n}':>22}"
        lines.append(row)
    heads = headline(cells)
    lines.append("")
    if heads:
        lines.append("qa1-qa5 mean per length (the paper's headline), 95% interval:")
        for head in heads:
            value = getattr(head, metric)
            lines.append(f"  {head.length:>5}: {100 * value.estimate:.1f} [{100 * value.low:.1f}, {100 * value.high:.1f}]")
    else:
        lines.append("qa1-qa5 mean: not available (not all of qa1-qa5 ran at any length)")
    overall = _mean_interval(cells, metric)
    lines.append(
        f"overall (mean of all {len(cells)} task x length cells, as the babilong group): "
        f"{100 * overall.estimate:.1f} [{100 * overall.low:.1f}, {100 * overall.high:.1f}]"
    )
    lines.append("")
    lines.append(f"effective context ({metric} >= {100 * threshold:g}% at this and every shorter length):")
    for qa, length in effective_context(cells, threshold=threshold, metric=metric).items():
        lines.append(f"  {qa:<5}: {length if length is not None else 'none (below threshold at the shortest length run)'}")
    skipped = {
        name: config["metadata"]["babilong_skipped"]
        for name, config in results.get("configs", {}).items()
        if _TASK_NAME.match(name) and isinstance(config.get("metadata"), dict) and config["metadata"].get("babilong_skipped")
    }
    if skipped:
        lines.append("")
        lines.append("docs skipped (never truncated):")
        for name, reasons in sorted(skipped.items()):
            lines.append(f"  {name}: " + "; ".join(f"{n} {why}" for why, n in reasons.items()))
    return "\n".join(lines)

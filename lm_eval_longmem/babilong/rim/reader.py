"""BABILong results read back: the task x length cells, means over tasks and effective context a run
stored; and the text report of `lm-eval-longmem babilong report`.

`lm-eval-longmem babilong report`, the heatmap and `lm-eval-longmem report` read a results file with
these (`read_cells`, `read_length_means`, `read_effective_context`; names through
`common/metric_names.py`), so they work on runs made elsewhere. The summaries themselves are computed
by the task with `babilong/summary.py`. Lengths are token counts throughout; the text shows them as the
authors name them ("4k") through `common.lengths.format_length`, the one display formatter.
"""

from __future__ import annotations

import math
from typing import Any

from lm_eval_longmem.babilong import scores
from lm_eval_longmem.babilong.options import DEFAULT_TASKS, NAME
from lm_eval_longmem.babilong.scores import ABSTAINED, ACC, ACC_CORRECTED
from lm_eval_longmem.babilong.summary import DEFAULT_THRESHOLD, Cell, effective_context, ordered
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.metric_names import ScoreSpec
from lm_eval_longmem.common.stats import Interval
from lm_eval_longmem.readers.results import facts, skip_reasons, task_metrics, tasks_of


def _task_cells(metrics: dict[str, Any]) -> list[tuple[str, int]]:
    """(qa, length) of every `acc@qaN_LEN` mean among canonical metric names."""
    return [
        (qa, int(length))
        for qa, length in (c for c in metric_names.cells_of(metrics, ACC.name) if len(c) == 2)
        if qa.startswith("qa") and qa[2:].isdigit() and length.isdigit()
    ]


def babilong_task(results: dict[str, Any]) -> str | None:
    """Name of the (first) BABILong task in a results dict (`readers.results.tasks_of`)."""
    return next(iter(tasks_of(results, NAME)), None)


def _interval(metrics: dict[str, Any], score: ScoreSpec, *parts: str | int) -> Interval:
    def get(key: str) -> float:
        value = metric_names.number(metrics.get(key))
        return math.nan if value is None else value

    return Interval(*(get(key) for key in metric_names.with_interval(score.name, *parts)))


def read_cells(results: dict[str, Any]) -> list[Cell]:
    """Every (task, length) cell of the BABILong task in an lm_eval results dict, with the questions it scored
    (`n`, from the run's `docs_per_cell`; 0 in files written before the run stored it)."""
    task = babilong_task(results)
    if task is None:
        return []
    metrics = task_metrics(results, task)
    counts = facts(results, task).get("docs_per_cell") or {}
    return ordered(
        Cell(
            qa,
            length,
            int(counts.get(metric_names.cell(qa, length)) or 0),
            _interval(metrics, ACC, qa, length),
            _interval(metrics, ACC_CORRECTED, qa, length),
            _interval(metrics, ABSTAINED, qa, length),
        )
        for qa, length in _task_cells(metrics)
    )


def read_length_means(results: dict[str, Any], check: ScoreSpec = ACC) -> dict[int, Interval]:
    """Per length (tokens), the run's mean over tasks (`acc@LEN`) of answer check `check` with its interval."""
    task = babilong_task(results)
    metrics = task_metrics(results, task) if task else {}
    found = {int(c[0]) for c in metric_names.cells_of(metrics, check.name) if len(c) == 1 and c[0].isdigit()}
    return {length: _interval(metrics, check, length) for length in sorted(found)}


def read_effective_context(results: dict[str, Any], check: ScoreSpec = ACC) -> dict[str, int | None]:
    """Per task, the effective context (tokens, None: not even the shortest) under answer check `check` the run
    stored."""
    task = babilong_task(results)
    metrics = task_metrics(results, task) if task else {}
    out = {}
    for key, value in metrics.items():
        parsed = metric_names.parse(key)
        if parsed and parsed.score == scores.effective_context(check) and len(parsed.cell) == 1 and not parsed.stat:
            number = metric_names.number(value)
            out[parsed.cell[0]] = None if number is None else int(number)
    return dict(sorted(out.items(), key=lambda item: int(item[0][2:])))


def format_report(results: dict, *, threshold: float = DEFAULT_THRESHOLD, check: ScoreSpec = ACC) -> str:
    """A plain-text report: task x length accuracies, the mean per length, effective context per task.

    The effective context is the one the run stored when `threshold` is the paper's 85%, and is
    computed from the cells for any other threshold.
    """
    cells = read_cells(results)
    if not cells:
        raise ValueError("the results hold no BABILong cells (acc@qaN_LEN): run lm_eval --tasks babilong first")
    lengths = sorted({c.length for c in cells})
    tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
    table = {(c.qa, c.length): c for c in cells}
    counts = {c.n for c in cells}
    uniform = len(counts) == 1 and 0 not in counts  # else each cell says its n (0: the file does not say)
    title = f"BABILong {check.name} (%), 95% Wilson interval"
    lines = [title + (f", n = {cells[0].n} questions per cell" if uniform else "")]

    def shown(cell: Cell) -> str:
        value = getattr(cell, check.name)
        text = f"{100 * value.estimate:.1f} [{100 * value.low:.0f},{100 * value.high:.0f}]"
        return text if uniform or not cell.n else f"{text} n={cell.n}"

    width = max(18, *(len(shown(c)) + 2 for c in cells))
    lines.append("task   " + "".join(f"{format_length(ln):>{width}}" for ln in lengths))
    for qa in tasks:
        row = f"{qa:<7}"
        for ln in lengths:
            cell = table.get((qa, ln))
            row += f"{'-' if cell is None else shown(cell):>{width}}"
        lines.append(row)
    means = read_length_means(results, check)
    which = "qa1-qa5, the paper's headline" if tuple(tasks) == DEFAULT_TASKS else f"{', '.join(tasks)}"
    lines.append("")
    lines.append(f"mean over tasks per length ({which}), 95% interval:")
    for length, value in means.items():
        at_length = [c.n for c in cells if c.length == length]
        questions = f", n={sum(at_length)}" if all(at_length) else ""
        lines.append(
            f"  {format_length(length):>5}: {100 * value.estimate:.1f} [{100 * value.low:.1f}, {100 * value.high:.1f}]"
            + questions
        )
    task = babilong_task(results)
    assert task is not None  # read_cells found its cells
    overall = _interval(task_metrics(results, task), check)
    questions = f", n={sum(c.n for c in cells)}" if 0 not in counts else ""
    lines.append(
        f"overall (mean of all {len(cells)} task x length cells{questions}): "
        f"{100 * overall.estimate:.1f} [{100 * overall.low:.1f}, {100 * overall.high:.1f}]"
    )
    abstained = _interval(task_metrics(results, task), ABSTAINED)
    if check == ACC_CORRECTED and not math.isnan(abstained.estimate):
        lines.append(
            f"the corrected reader abstained (kept acc's verdict) on {100 * abstained.estimate:.1f}% of answers "
            f"[{100 * abstained.low:.1f}, {100 * abstained.high:.1f}]"
        )
    lines.append("")
    lines.append(f"effective context ({check.name} >= {100 * threshold:g}% at this and every shorter length):")
    stored = read_effective_context(results, check) if threshold == DEFAULT_THRESHOLD else {}
    found = stored if set(stored) == set(tasks) else effective_context(cells, threshold=threshold, check=check)
    for qa in tasks:
        reached = found.get(qa)
        lines.append(
            f"  {qa:<5}: {format_length(reached) if reached is not None else 'none (below threshold at the shortest length run)'}"
        )
    skipped = skip_reasons(results, task)
    if skipped:
        lines.append("")
        lines.append("docs skipped (never truncated):")
        for cell_text, reasons in skipped.items():
            lines.append(f"  {cell_label(cell_text)}: " + "; ".join(f"{n} x {why}" for why, n in reasons.items()))
    return "\n".join(lines)


def cell_label(cell: str) -> str:
    """A cell as the authors name its length (`qa1_4096` -> `qa1_4k`); any other cell as it is."""
    parts = metric_names.cell_parts(cell)
    if len(parts) == 2 and parts[1].isdigit():
        return f"{parts[0]}_{format_length(int(parts[1]))}"
    return cell

"""BABILong's summaries of one run: the task x length cells, the mean over tasks, effective context.

The `babilong` task computes its summary metrics with these (`task.py`); its reader (`rim/reader.py`)
reads the stored values back into the same `Cell`s.

* Cell: one (task, length) that ran, with a Wilson 95% interval of its accuracy. Lengths are
  token counts (0 for "0k").
* Mean over tasks (per length, or over every cell): the unweighted mean of cell accuracies, as the
  paper averages qa1-qa5 (Table 2), with an interval from the cells' binomial variances.
* Effective context of a task: the longest length L such that accuracy is at least the threshold
  (0.85, the paper's "satisfactory") at L and at every shorter length that ran; None when the
  shortest length already falls below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from lm_eval_longmem.babilong.scores import ACC
from lm_eval_longmem.common.metric_names import ScoreSpec
from lm_eval_longmem.common.stats import Interval, mean_of_proportions_interval

DEFAULT_THRESHOLD = 0.85
"""The paper's "satisfactory" accuracy (section 3.1)."""


class Cell(NamedTuple):
    """One (task, length) that ran."""

    qa: str
    length: int
    """Tokens of haystack (0 for "0k")."""
    n: int
    """Docs evaluated (0 when read back from a results file written before the run stored its docs per cell)."""
    acc: Interval
    acc_corrected: Interval
    corrected_abstained: Interval | None = None
    """Share of the cell's answers on which `acc_corrected` kept `acc`'s verdict (None: not recorded)."""


def ordered(cells: Iterable[Cell]) -> list[Cell]:
    """Cells by task number, then length."""
    return sorted(cells, key=lambda c: (int(c.qa[2:]), c.length))


def mean_interval(cells: Sequence[Cell], score: ScoreSpec) -> Interval:
    """Unweighted mean over the cells of a score (a check or `ABSTAINED`, a field of `Cell` under its name) with its
    95% interval (`stats.mean_of_proportions_interval`)."""
    return mean_of_proportions_interval([(round(getattr(c, score.name).estimate * c.n), c.n) for c in cells])


def effective_context(
    cells: Iterable[Cell], *, threshold: float = DEFAULT_THRESHOLD, check: ScoreSpec = ACC
) -> dict[str, int | None]:
    """Per task, the longest length up to which the accuracy of answer check `check` stays >= `threshold` (None:
    not even the shortest)."""
    by_task: dict[str, list[Cell]] = {}
    for cell in cells:
        by_task.setdefault(cell.qa, []).append(cell)
    result: dict[str, int | None] = {}
    for qa, task_cells in by_task.items():
        best = None
        for cell in sorted(task_cells, key=lambda c: c.length):
            if getattr(cell, check.name).estimate < threshold:
                break
            best = cell.length
        result[qa] = best
    return result

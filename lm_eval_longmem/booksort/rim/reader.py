"""Book-SORT results read back: the metric rows of every Book-SORT task of a results file, and the
factors (excerpt lengths L_E, distance bins) its cells hold. Names through `scores.py`.
"""

from __future__ import annotations

from typing import Any

from lm_eval_longmem.booksort.options import NAME
from lm_eval_longmem.booksort.scores import ACC, factor_value
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.readers.results import task_metrics, tasks_of


def excerpt_lengths(row: dict[str, Any]) -> list[int]:
    """L_E (words) of every `acc@LE<words>` cell of a metric row (canonical names), ascending."""
    return sorted(
        {n for c in metric_names.cells_of(row, ACC.name) if len(c) == 1 and (n := factor_value(c[0], "LE")) is not None}
    )


def distance_bins(row: dict[str, Any], excerpt_length: int | None = None) -> list[int]:
    """Distance bins of the `acc@bin<k>` cells, or of the `acc@LE<words>_bin<k>` cells at `excerpt_length`."""
    found = set()
    for c in metric_names.cells_of(row, ACC.name):
        if excerpt_length is None and len(c) == 1 and (k := factor_value(c[0], "bin")) is not None:
            found.add(k)
        elif (
            excerpt_length is not None
            and len(c) == 2
            and factor_value(c[0], "LE") == excerpt_length
            and (k := factor_value(c[1], "bin")) is not None
        ):
            found.add(k)
    return sorted(found)


def booksort_tasks(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The metric rows (canonical names, no filter suffix) of every Book-SORT task in an lm_eval results dict
    (`readers.results.tasks_of`) that has cells to show."""
    rows = {name: task_metrics(results, name) for name in tasks_of(results, NAME)} if isinstance(results, dict) else {}
    return {name: row for name, row in rows.items() if excerpt_lengths(row)}

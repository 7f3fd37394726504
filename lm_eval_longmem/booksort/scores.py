"""Book-SORT's scores and its other metric names: built here only, on the grammar of `common/metric_names.py`
(the task scores them, readers, figures and the report read them back through these names); and how readers
read its results files (`RESULTS_READING`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lm_eval_longmem.common.conditions import MEMORYLESS
from lm_eval_longmem.common.evaluations import ResultsReading
from lm_eval_longmem.common.metric_names import ScoreSpec, parse

ACC = ScoreSpec("acc")
"""Right or wrong: the paper's accuracy (the headline metric), per cell and as the mean over L_E x L_S cells."""
PCT_A = ScoreSpec("pct_A", higher_is_better=None)
"""Answered "A" or not: the answer bias (neither side is better)."""
CALIBRATED = ScoreSpec("acc_calibrated")
"""Right or wrong after contextual calibration (`task.calibrated_correct`); log-prob tasks only."""

INVALID = "invalid"
"""Whole-run summary of a generation task: the answers that name neither segment."""

FACTORS = ("LE", "LS", "bin", "book")
"""The factor tags of its cells' parts: excerpt length L_E (words), segment length L_S (words), distance bin, book
index. A factor keeps its tag, since its value is not a token count: ``LE250``, ``LS20``, ``bin2``, ``book0``, and
the cell ``LE250_bin2``."""


def factor(tag: str, value: int) -> str:
    """A factor part of a cell (``factor("LE", 250)`` -> ``LE250``)."""
    if tag not in FACTORS:
        raise ValueError(f"unknown factor {tag!r}: one of {FACTORS}")
    return f"{tag}{int(value)}"


def factor_value(part: str, tag: str) -> int | None:
    """The number of a factor part (``LE250`` -> 250 for tag ``LE``), None for any other part."""
    rest = part[len(tag) :] if part.startswith(tag) else ""
    return int(rest) if rest.isdigit() else None


class BooksortResults(ResultsReading):
    """Book-SORT's results files as readers read them."""

    def recognises(self, metrics: Mapping[str, Any]) -> bool:
        """An accuracy per excerpt length (``acc@LE<words>``)."""
        parsed = [found for key in metrics if (found := parse(key))]
        return any(
            n.score == ACC.name and len(n.cell) == 1 and factor_value(n.cell[0], "LE") is not None for n in parsed
        )

    def condition(self, config: Mapping[str, Any]) -> str | None:
        """Memory-less when the task's YAML asks for the prompt without the excerpt (`dataset_kwargs`
        ``condition: memoryless``, as `task.BooksortTask.condition` reads it)."""
        kwargs = config.get("dataset_kwargs")
        return MEMORYLESS if isinstance(kwargs, dict) and kwargs.get("condition") == "memoryless" else None


RESULTS_READING = BooksortResults()

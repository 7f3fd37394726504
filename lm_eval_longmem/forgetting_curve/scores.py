"""The forgetting curve's scores and its other metric names: built here only, on the grammar of
`common/metric_names.py` (the task scores them, readers, figures and the report read them back through these
names); and how readers read its results files (`RESULTS_READING`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lm_eval_longmem.common.evaluations import ResultsReading
from lm_eval_longmem.common.metric_names import CI_HIGH, CI_LOW, ScoreSpec, name, parse

SCORED = "scored"
"""Payload key: the doc's scored tokens (L - L//2), the units of its two accuracies."""
COPY_ACC = ScoreSpec("copy_acc", "share", units=SCORED)
"""Share of the scored tokens of the second S predicted greedily (the copy)."""
LM_ACC = ScoreSpec("lm_acc", "share", units=SCORED)
"""The same share when S follows unrelated text (the language-model baseline)."""
COPY_PPL = ScoreSpec("copy_ppl", "perplexity", higher_is_better=False)
"""Perplexity of the copy's scored tokens (from 1 up, lower is better)."""
LM_PPL = ScoreSpec("lm_ppl", "perplexity", higher_is_better=False)
"""Perplexity of the baseline's scored tokens."""
SCORES = (COPY_ACC, LM_ACC, COPY_PPL, LM_PPL)

CLAIMED_LENGTH = "claimed_length"
"""Whole-run summary: the model's claimed context window (tokens), null when unknown."""
MEMORY_LENGTH = "_memory_length"
"""The SCORE of a memory length after its criterion (``fine_memory_length``)."""
WRITTEN_BOUNDS = {CI_LOW: "_low", CI_HIGH: "_high"}
"""A memory length's interval bounds as results files spell them (``fine_memory_length_low``/``_high``), since the
first results files: renaming them would change every results file and the frozen reference runs for no number.
Readers see the grammar's ``_ci_low``/``_ci_high`` (`as_read`, through `RESULTS_READING`)."""


def memory_length(criterion: str, stat: str = "") -> str:
    """The memory length under `criterion` (``fine``, ``coarse``), or a bound of its bootstrap interval (`CI_LOW`,
    `CI_HIGH`): the name readers use (results files hold `as_written`)."""
    if stat not in ("", CI_LOW, CI_HIGH):
        raise ValueError(f"a memory length has no statistic {stat!r}")
    return name(criterion + MEMORY_LENGTH, stat=stat)


def memory_censored(criterion: str) -> str:
    """The flag (0/1): the memory length under `criterion` reached the last tested length."""
    return f"{criterion}_memory_censored"


def as_written(metric: str) -> str:
    """The spelling a results file holds for `metric`: itself, except the bounds of a memory length's interval
    (`WRITTEN_BOUNDS`)."""
    parsed = parse(metric)
    if (
        parsed is not None
        and parsed.score.endswith(MEMORY_LENGTH)
        and not parsed.cell
        and parsed.stat in WRITTEN_BOUNDS
    ):
        return parsed.score + WRITTEN_BOUNDS[parsed.stat]
    return metric


def as_read(metric: str) -> str:
    """The name readers use for a metric as a results file spells it: `as_written` undone."""
    for stat, written in WRITTEN_BOUNDS.items():
        score = metric.removesuffix(written)
        if score != metric and score.endswith(MEMORY_LENGTH) and "@" not in score:
            return name(score, stat=stat)
    return metric


class ForgettingCurveResults(ResultsReading):
    """The forgetting curve's results files as readers read them."""

    def recognises(self, metrics: Mapping[str, Any]) -> bool:
        """A copy accuracy per length (``copy_acc@L``)."""
        return any((n := parse(key)) is not None and n.score == COPY_ACC.name and n.cell for key in metrics)

    def canonical(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """The memory lengths' bounds under the grammar's spelling (`as_read`)."""
        return {as_read(key): value for key, value in metrics.items()}


RESULTS_READING = ForgettingCurveResults()

"""BABILong's scores and its other metric names: built here only, on the grammar of `common/metric_names.py` (the
task scores them, the summaries, readers, figures and the report read them back through these names); and how
readers read its results files (`RESULTS_READING`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lm_eval_longmem.common.evaluations import ResultsReading
from lm_eval_longmem.common.metric_names import ScoreSpec, name, parse, part_length

ACC = ScoreSpec("acc")
"""The authors' answer check (`official_check`): the score, and the headline metric."""
ACC_CORRECTED = ScoreSpec("acc_corrected")
"""The corrected answer check (`corrected`)."""
CHECKS = (ACC, ACC_CORRECTED)
"""The two answer checks, each a field of `summary.Cell` under its name."""
ABSTAINED = ScoreSpec("corrected_abstained", higher_is_better=None)
"""1 when the corrected reader found no answer to read with confidence (`corrected.ABSTENTIONS`), so
`acc_corrected` kept `acc`'s verdict: the share of `acc_corrected` that rests on the authors' check."""
RECALL = ScoreSpec("retrieval_recall")
"""1 when every supporting fact is among the retrieved pieces (binary, Wilson intervals); retrieval condition only."""

EFFECTIVE_CONTEXT = "effective_context"


def effective_context(check: ScoreSpec, qa: str = "") -> str:
    """The effective context of bAbI task `qa` under the answer check `check` (one of `CHECKS`):
    ``effective_context@qa1``, ``effective_context_corrected@qa1``; without `qa`, the score part alone (what
    `parse` gives as a name's `score`)."""
    if check not in CHECKS:
        raise ValueError(f"{check.name!r} is not an answer check (one of {', '.join(c.name for c in CHECKS)})")
    score = EFFECTIVE_CONTEXT + check.name.removeprefix(ACC.name)
    return name(score, qa) if qa else score


class BabilongResults(ResultsReading):
    """BABILong's results files as readers read them."""

    def recognises(self, metrics: Mapping[str, Any]) -> bool:
        """A task x length cell of the authors' check (``acc@qaN_LEN``)."""
        parsed = [found for key in metrics if (found := parse(key))]
        return any(n.score == ACC.name and len(n.cell) == 2 and n.cell[0].startswith("qa") for n in parsed)

    def canonical(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Files written before the metric-name schema stored an effective context as a length's name ("4k",
        "none"): it becomes its number of tokens (None for "none")."""
        return {
            key: (None if value == "none" else part_length(value))
            if isinstance(value, str) and key.startswith(EFFECTIVE_CONTEXT)
            else value
            for key, value in metrics.items()
        }


RESULTS_READING = BabilongResults()

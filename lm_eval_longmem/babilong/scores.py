"""BABILong's scores: their names and kinds, spelt here only (the task scores them, the summaries, readers,
figures and the report read them back through `common/metric_names.py`)."""

from __future__ import annotations

from typing import Final, Literal

from lm_eval_longmem.common.metric_names import ScoreSpec

ACC: Final = "acc"
"""The authors' answer check (`official_check`): the score, and the headline metric."""
ACC_CORRECTED: Final = "acc_corrected"
"""The corrected answer check (`corrected`)."""
Metric = Literal["acc", "acc_corrected"]
"""One of the two checks (the type of `ACC` and `ACC_CORRECTED`)."""
CHECKS: tuple[Metric, Metric] = (ACC, ACC_CORRECTED)
ABSTAINED = ScoreSpec("corrected_abstained", higher_is_better=None)
"""1 when the corrected reader found no answer to read with confidence (`corrected.ABSTENTIONS`), so
`acc_corrected` kept `acc`'s verdict: the share of `acc_corrected` that rests on the authors' check."""
RECALL = ScoreSpec("retrieval_recall")
"""1 when every supporting fact is among the retrieved pieces (binary, Wilson intervals); retrieval condition only."""

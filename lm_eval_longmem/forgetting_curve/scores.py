"""The forgetting curve's scores: their names and kinds, spelt here only (the task scores them, readers,
figures and the report read them back through `common/metric_names.py`)."""

from __future__ import annotations

from lm_eval_longmem.common.metric_names import ScoreSpec

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

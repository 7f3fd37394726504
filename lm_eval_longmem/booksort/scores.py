"""Book-SORT's scores: their names and kinds, spelt here only (the task scores them, readers, figures and the
report read them back through `common/metric_names.py`)."""

from __future__ import annotations

from lm_eval_longmem.common.metric_names import ScoreSpec

ACC = ScoreSpec("acc")
"""Right or wrong: the paper's accuracy (the headline metric), per cell and as the mean over L_E x L_S cells."""
PCT_A = ScoreSpec("pct_A", higher_is_better=None)
"""Answered "A" or not: the answer bias (neither side is better)."""
CALIBRATED = ScoreSpec("acc_calibrated")
"""Right or wrong after contextual calibration (`task.calibrated_correct`); log-prob tasks only."""

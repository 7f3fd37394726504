"""BABILong's summaries of one run, from cells: the mean over tasks and its interval."""

from __future__ import annotations

from lm_eval_longmem.babilong.scores import ACC, ACC_CORRECTED
from lm_eval_longmem.babilong.summary import Cell, mean_interval
from lm_eval_longmem.common.stats import Interval


def test_mean_interval_does_not_collapse_with_two_docs():
    # defect 9: every qa1-qa5 cell 0 of 2 right printed the interval [0.0, 0.0]
    zero = Interval(0.0, 0.0, 0.0)
    cells = [Cell(qa, 0, 2, zero, Interval(1.0, 1.0, 1.0)) for qa in ("qa1", "qa2", "qa3", "qa4", "qa5")]
    acc = mean_interval(cells, ACC)
    assert acc.estimate == 0.0 == acc.low < acc.high
    corrected = mean_interval(cells, ACC_CORRECTED)
    assert corrected.estimate == 1.0 == corrected.high > corrected.low

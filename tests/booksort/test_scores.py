"""`booksort/scores.py`: its factor cells built and parsed in one place, and how readers read its results files."""

from __future__ import annotations

import pytest

from lm_eval_longmem.booksort.scores import RESULTS_READING, factor, factor_value
from lm_eval_longmem.common.conditions import MEMORYLESS
from lm_eval_longmem.common.metric_names import cell


def test_factors_are_built_and_parsed_here():
    parts = factor("LE", 2500), factor("bin", 3)
    assert cell(*parts) == "LE2500_bin3" and factor("book", 69087) == "book69087"
    assert [factor_value(p, t) for p, t in [("LE2500", "LE"), ("bin3", "bin"), ("LS20", "LE"), ("LEx", "LE")]] == [
        2500,
        3,
        None,
        None,
    ]
    with pytest.raises(ValueError, match="unknown factor"):
        factor("LX", 1)


def test_an_unrecorded_run_is_recognised_by_its_excerpt_lengths():
    assert RESULTS_READING.recognises({"acc@LE2500": 0.6, "acc": 0.6})
    assert not RESULTS_READING.recognises({"acc@LE2500_bin1": 0.6, "acc@4096": 0.5, "acc": 0.6})


def test_an_unrecorded_condition_is_read_from_the_yaml():
    assert RESULTS_READING.condition({"dataset_kwargs": {"condition": "memoryless"}}) == MEMORYLESS
    assert RESULTS_READING.condition({"dataset_kwargs": {"condition": "in_context"}}) is None
    assert RESULTS_READING.condition({}) is None
    metrics = {"acc@LE250": 0.5, "acc_low": 0.1}
    assert RESULTS_READING.canonical(metrics) == metrics  # nothing spelt its own way

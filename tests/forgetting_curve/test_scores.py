"""`forgetting_curve/scores.py`: its memory-length names, the bounds as results files spell them, and how readers
read its results files."""

from __future__ import annotations

import pytest

from lm_eval_longmem.common.metric_names import CI_HIGH, CI_LOW, P_ABOVE_CHANCE, Name, parse
from lm_eval_longmem.forgetting_curve.scores import (
    RESULTS_READING,
    as_read,
    as_written,
    memory_censored,
    memory_length,
)


def test_the_memory_bounds_are_written_as_results_files_have_them_and_read_in_the_grammar():
    low, high = (memory_length("fine", stat) for stat in (CI_LOW, CI_HIGH))
    assert (low, high) == ("fine_memory_length_ci_low", "fine_memory_length_ci_high")  # what readers ask for
    assert [as_written(n) for n in (low, high)] == ["fine_memory_length_low", "fine_memory_length_high"]
    assert as_written("acc_ci_low") == "acc_ci_low" and as_written("fine_memory_length") == "fine_memory_length"
    assert [as_read(as_written(n)) for n in (low, high)] == [low, high]  # written and read back: one name
    assert as_read("acc_low") == "acc_low" and as_read(low) == low
    assert parse(as_read("coarse_memory_length_high")) == Name("coarse_memory_length", (), CI_HIGH)
    with pytest.raises(ValueError, match="no statistic"):
        memory_length("fine", P_ABOVE_CHANCE)


def test_summary_names():
    assert memory_censored("coarse") == "coarse_memory_censored"
    assert memory_length("coarse") == "coarse_memory_length"


def test_readers_see_the_bounds_in_the_grammar_and_recognise_an_unrecorded_run():
    metrics = {"copy_acc@1024": 0.9, "fine_memory_length": 512, "fine_memory_length_low": 256, "alias": "x"}
    assert RESULTS_READING.canonical(metrics) == {
        "copy_acc@1024": 0.9,
        "fine_memory_length": 512,
        "fine_memory_length_ci_low": 256,
        "alias": "x",
    }
    assert RESULTS_READING.recognises(metrics)
    assert not RESULTS_READING.recognises({"copy_acc": 0.9, "acc@1024": 0.5})  # no cell of the copy
    assert RESULTS_READING.condition({"dataset_kwargs": {"condition": "memoryless"}}) is None

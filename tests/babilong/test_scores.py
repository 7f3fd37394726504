"""`babilong/scores.py`: its effective-context names, and how readers read its results files (old values)."""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.scores import ABSTAINED, ACC, ACC_CORRECTED, RESULTS_READING, effective_context
from lm_eval_longmem.common.metric_names import Name, parse


def test_effective_context_names():
    assert effective_context(ACC_CORRECTED, "qa2") == "effective_context_corrected@qa2"
    assert parse(effective_context(ACC, "qa1")) == Name("effective_context", ("qa1",), "")
    assert effective_context(ACC) == "effective_context"
    with pytest.raises(ValueError, match="not an answer check"):
        effective_context(ABSTAINED, "qa1")


def test_an_old_files_effective_context_becomes_a_number():
    metrics = {"effective_context@qa1": "4k", "effective_context_corrected@qa2": "none", "acc@qa1_4096": 0.5}
    assert RESULTS_READING.canonical(metrics) == {
        "effective_context@qa1": 4096,
        "effective_context_corrected@qa2": None,
        "acc@qa1_4096": 0.5,
    }
    assert RESULTS_READING.canonical({"effective_context@qa1": 2048}) == {"effective_context@qa1": 2048}


def test_an_unrecorded_run_is_recognised_by_its_task_cells():
    assert RESULTS_READING.recognises({"acc@qa1_4096": 0.6})
    assert not RESULTS_READING.recognises({"acc@4096": 0.6, "acc@LE250_bin2": 0.5})
    assert RESULTS_READING.condition({"dataset_kwargs": {"condition": "memoryless"}}) is None

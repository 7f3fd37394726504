"""What a results dict says of a task: tasks record their evaluation in the results file, so readers take it from
there; for older files, and for names an evaluation spells its own way, each evaluation's `ResultsReading` says.
(The registry's readings, ours and another package's: `tests/readers/test_results.py`.)"""

from __future__ import annotations

from pathlib import Path

from kit import NeedleResults

from lm_eval_longmem.common.conditions import MEMORYLESS
from lm_eval_longmem.common.run import (
    ResultsReading,
    Run,
    condition_of,
    evaluation_of,
    guessed_evaluation,
    task_metrics,
    tasks_of,
)


class _Plain(ResultsReading):
    """An evaluation that takes every default."""


READINGS = {"plain": _Plain(), "needle": NeedleResults()}


def _results() -> dict:
    return {
        "results": {"t": {"hits@8,none": 0.5, "hits@8_ci_low,none": 0.25}, "u": {"acc,none": 0.1}},
        "configs": {"t": {"dataset_kwargs": {"blind": True}}, "u": {"dataset_kwargs": {"blind": True}}},
    }


def test_an_unrecorded_task_is_read_by_the_evaluation_that_recognises_it():
    results = _results()
    assert evaluation_of(results, "t", READINGS) == "needle" and evaluation_of(results, "u", READINGS) is None
    assert task_metrics(results, "t", READINGS) == {"acc@8": 0.5, "acc@8_ci_low": 0.25}
    assert task_metrics(results, "u", READINGS) == {"acc": 0.1}  # no evaluation's: the grammar alone
    assert condition_of(results, "t", READINGS) == MEMORYLESS and condition_of(results, "u", READINGS) is None
    assert tasks_of(results, "needle", READINGS) == ["t"]
    assert guessed_evaluation({"hits@8": 1.0}, READINGS) == "needle"
    assert guessed_evaluation({"hits@8": 1.0}, {}) is None  # no reading given: nothing is guessed


def test_what_the_task_recorded_wins_over_any_reading():
    results = _results()
    results["configs"]["t"]["longmem"] = {"evaluation": "plain", "condition": "in-context"}
    assert evaluation_of(results, "t", READINGS) == "plain"
    assert task_metrics(results, "t", READINGS) == {"hits@8": 0.5, "hits@8_ci_low": 0.25}  # plain rewrites nothing
    assert condition_of(results, "t", READINGS) == "in-context"
    ruler = {"results": {"t": {"hits@8,none": 0.5}}, "configs": {"t": {"longmem": {"evaluation": "ruler"}}}}
    assert evaluation_of(ruler, "t", READINGS) == "ruler"  # an evaluation not installed here: no reading of it
    assert task_metrics(ruler, "t", READINGS) == {"hits@8": 0.5}


def test_a_run_reads_with_the_readings_it_was_given():
    assert Run(Path("results.json"), _results(), READINGS).metrics("t") == {"acc@8": 0.5, "acc@8_ci_low": 0.25}
    assert Run(Path("results.json"), _results()).evaluation("t") is None  # made by hand: the grammar alone
    group = {**_results(), "group_subtasks": {"g": ["t"]}}
    assert evaluation_of(group, "g", READINGS) == "needle"

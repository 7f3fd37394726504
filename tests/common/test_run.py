"""What a results dict says of a task: tasks record their evaluation in the results file, so readers take it from
there; older files are recognised by their metric names; the registry says which evaluations are installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_longmem.common import evaluations as registry
from lm_eval_longmem.common.conditions import MEMORYLESS
from lm_eval_longmem.common.evaluations import Evaluation, ResultsReading
from lm_eval_longmem.common.run import Run, condition_of, evaluation_of, guessed_evaluation, task_metrics
from lm_eval_longmem.report.blocks import is_ours


def _results(facts: dict, metrics: dict) -> dict:
    return {"results": {"t": {"alias": "t", **metrics}}, "configs": {"t": {"longmem": facts}}}


def test_readers_take_the_evaluation_the_task_recorded_over_what_metric_names_suggest():
    forgetting_like = {"copy_acc@1024,none": 0.5}
    assert evaluation_of(_results({}, forgetting_like), "t") == "forgetting_curve"  # an old file: guessed
    assert evaluation_of(_results({"evaluation": "babilong"}, forgetting_like), "t") == "babilong"
    ruler = _results({"evaluation": "ruler"}, forgetting_like)  # an evaluation not installed here
    assert evaluation_of(ruler, "t") == "ruler"
    assert not is_ours(Run(Path("results.json"), ruler), "t")  # the registry says which are ours
    assert is_ours(Run(Path("results.json"), _results({"evaluation": "babilong"}, {})), "t")
    group = {**_results({"evaluation": "booksort"}, {}), "group_subtasks": {"g": ["t"]}}
    assert evaluation_of(group, "g") == "booksort"


@pytest.mark.parametrize(
    "metrics, expected",
    [
        ({"copy_acc@1024": 0.5}, "forgetting_curve"),
        ({"acc@LE2500": 0.6, "acc": 0.6}, "booksort"),
        ({"acc@qa1_4096": 0.6}, "babilong"),
        ({"acc": 0.6, "acc_stderr": 0.01}, None),  # any harness task
    ],
)
def test_the_one_guess_for_older_files(metrics, expected):
    assert guessed_evaluation(metrics) == expected


class _NeedleResults(ResultsReading):
    def recognises(self, metrics):
        return any(key.startswith("hits@") for key in metrics)

    def canonical(self, metrics):
        return {key.replace("hits", "acc"): value for key, value in metrics.items()}

    def condition(self, config):
        return MEMORYLESS if config.get("dataset_kwargs", {}).get("blind") else None


class _Needle(Evaluation):
    name = "needle"

    def results_reading(self):
        return _NeedleResults()


def test_an_evaluations_own_reading_is_reached_through_the_registry(monkeypatch):
    """Whose a file's unrecorded task is, the names and the condition it spells its own way: each evaluation's
    entry says (`Evaluation.results_reading`), one of another package as one of ours; none says it by default."""
    monkeypatch.setattr(registry, "evaluations", lambda: (*registry.registered().entries, _Needle()))
    results = {
        "results": {"t": {"hits@8,none": 0.5, "hits@8_ci_low,none": 0.25}, "u": {"acc,none": 0.1}},
        "configs": {"t": {"dataset_kwargs": {"blind": True}}, "u": {"dataset_kwargs": {"blind": True}}},
    }
    assert evaluation_of(results, "t") == "needle" and evaluation_of(results, "u") is None
    assert task_metrics(results, "t") == {"acc@8": 0.5, "acc@8_ci_low": 0.25}
    assert task_metrics(results, "u") == {"acc": 0.1}  # not an evaluation's: the grammar alone
    assert condition_of(results, "t") == MEMORYLESS and condition_of(results, "u") is None
    results["configs"]["t"]["longmem"] = {"evaluation": "needle", "condition": "in-context"}
    assert condition_of(results, "t") == "in-context"  # what the task recorded wins
    assert Evaluation.results_reading(_Needle()) is None  # the default: the grammar alone

"""What a results dict says of a task: tasks record their evaluation in the results file, so readers take it from
there; older files are recognised by their metric names; the registry says which evaluations are installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_longmem.common.run import Run, evaluation_of, guessed_evaluation
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

"""The registry of evaluations: every module it names exists with what its users call, and tasks record
their evaluation in the results file, so readers take it from there."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from lm_eval_longmem.commands.demo import DemoPart
from lm_eval_longmem.common.evaluations import EVALUATIONS, NAMES, evaluation, evaluation_of_class, load
from lm_eval_longmem.common.options import declared
from lm_eval_longmem.common.task import LongmemTask
from lm_eval_longmem.paths import task_configs_dir
from lm_eval_longmem.readers.results import evaluation_of


@pytest.mark.parametrize("entry", EVALUATIONS, ids=NAMES)
def test_every_module_an_entry_names_has_what_its_users_call(entry):
    options = load(entry.options)
    assert dataclasses.is_dataclass(options) and declared(options, entry.prefix)
    task_class = load(entry.task_class)
    assert issubclass(task_class, LongmemTask) and task_class.OPTIONS is options and task_class.PREFIX == entry.prefix
    assert callable(load(entry.data).source_problems)
    assert callable(load(entry.plotter).can_plot) and callable(load(entry.plotter).plot)
    assert callable(load(entry.commands).add_commands)
    load(entry.reader)
    load(entry.report)
    assert list(inspect.signature(load(entry.planner)).parameters) == ["task", "metadata", "tokenizer", "window"]
    assert isinstance(load(entry.demo), DemoPart)


@pytest.mark.parametrize("entry", EVALUATIONS, ids=NAMES)
def test_an_entry_has_its_task_folder_and_its_headline_task(entry):
    folder = task_configs_dir() / entry.name
    assert (folder / "README.md").is_file()
    assert any(f"task: {entry.headline.task}\n" in path.read_text(encoding="utf-8") for path in folder.glob("*.yaml"))


def test_looking_an_entry_up():
    assert evaluation("booksort").title == "Book-SORT"
    with pytest.raises(KeyError, match="known: forgetting_curve, booksort, babilong"):
        evaluation("ruler")


def test_a_task_class_and_its_subclasses_know_their_evaluation():
    for entry in EVALUATIONS:
        cls = load(entry.task_class)
        assert evaluation_of_class(cls) is entry
        assert evaluation_of_class(type("UsersTask", (cls,), {})) is entry  # a user's subclass of ours
    assert evaluation_of_class(LongmemTask) is None and evaluation_of_class(int) is None


def _results(facts: dict, metrics: dict) -> dict:
    return {"results": {"t": {"alias": "t", **metrics}}, "configs": {"t": {"longmem": facts}}}


def test_readers_take_the_evaluation_the_task_recorded_over_what_metric_names_suggest():
    forgetting_like = {"copy_acc@1024,none": 0.5}
    assert evaluation_of(_results({}, forgetting_like), "t") == "forgetting_curve"  # an old file: guessed
    assert evaluation_of(_results({"evaluation": "babilong"}, forgetting_like), "t") == "babilong"
    assert evaluation_of(_results({"evaluation": "ruler"}, forgetting_like), "t") is None  # not one of ours
    group = {**_results({"evaluation": "booksort"}, {}), "group_subtasks": {"g": ["t"]}}
    assert evaluation_of(group, "g") == "booksort"

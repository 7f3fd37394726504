"""The registry of evaluations: every entry is what its users call, and registration through the entry-point group
is checked (how readers find a task's evaluation in a results file: `tests/common/test_run.py`)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from importlib.metadata import EntryPoint

import pytest

from lm_eval_longmem.common import evaluations as registry
from lm_eval_longmem.common.evaluations import (
    BUILTIN,
    ENTRY_POINT_GROUP,
    Evaluation,
    Plotter,
    ResultsReading,
    evaluation,
    evaluations,
    names,
)
from lm_eval_longmem.common.options import declared
from lm_eval_longmem.common.task import LongmemTask
from lm_eval_longmem.plan import our_tasks


def _task_classes(name: str) -> set[type]:
    """The task classes the YAMLs of evaluation `name` name (`class: !function module.Class`)."""
    found = set()
    for owner, configs in our_tasks().values():
        for config in configs:
            if owner == name:
                module, _, cls = str(config["class"]).rpartition(".")
                found.add(getattr(importlib.import_module(module), cls))
    return found


def test_ours_are_the_builtin_names_in_order():
    assert names()[: len(BUILTIN)] == BUILTIN
    assert all(isinstance(entry, Evaluation) for entry in evaluations())


@pytest.mark.parametrize("name", BUILTIN)
def test_every_member_of_an_entry_gives_what_its_users_call(name):
    entry = evaluation(name)
    section = entry.report()
    assert isinstance(section.position, int) and len(section.headline_header) >= 1
    assert section.configured({}) == section
    assert isinstance(entry.plotter(), Plotter)
    planner = entry.planner()
    assert planner is not None and list(inspect.signature(planner).parameters) == [
        "task",
        "metadata",
        "tokenizer",
        "window",
    ]
    part = entry.demo()
    assert part is not None and callable(part.metadata) and callable(part.sentence)
    assert entry.source_problems({}) == [] or all(isinstance(line, str) for line in entry.source_problems({}))
    assert ResultsReading in type(entry.results_reading()).__mro__  # each of ours reads files older than the records


@pytest.mark.parametrize("name", BUILTIN)
def test_an_entry_has_its_task_folder_and_task_classes_that_record_it(name):
    entry = evaluation(name)
    folder = entry.task_folder()
    assert folder.name == name and (folder / "README.md").is_file()
    assert name in our_tasks()  # its group (or only) task bears its name
    classes = _task_classes(name)
    assert classes and all(issubclass(cls, LongmemTask) and cls.EVALUATION == name for cls in classes)
    for cls in classes:
        assert dataclasses.is_dataclass(cls.OPTIONS) and cls.PREFIX == f"{name}_" and declared(cls.OPTIONS, cls.PREFIX)
        assert type("UsersTask", (cls,), {}).EVALUATION == name  # a user's subclass of ours is still ours
    assert set(entry.recorded_metadata()) <= {key for cls in classes for key in cls.RECORDED_METADATA}


def test_looking_an_entry_up():
    assert evaluation("booksort").title == "Book-SORT"
    with pytest.raises(KeyError, match="known: forgetting_curve, booksort, babilong"):
        evaluation("ruler")


def _with_entry_points(monkeypatch, *points: EntryPoint) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [p for p in points if p.group == group])
    registry.registered.cache_clear()


def test_a_bad_entry_point_is_one_warning_line_and_left_out(monkeypatch, registry_warnings):
    """An entry point named otherwise than its evaluation, or that gives something else than an evaluation, or two
    packages registering one name: each is left out with one line naming it, and the rest of the registry loads.
    (Every kind, installed as packages, in tests/test_adding_an_evaluation.py.)"""
    group = ENTRY_POINT_GROUP
    points = (
        EntryPoint("booksort2", "lm_eval_longmem.booksort.rim:EVALUATION", group),  # named otherwise
        EntryPoint("toy", "lm_eval_longmem.booksort.rim:NAME", group),  # a str, not an entry
        EntryPoint("twice", "lm_eval_longmem.booksort.rim:EVALUATION", group),
        EntryPoint("twice", "lm_eval_longmem.babilong.rim:EVALUATION", group),
        EntryPoint("other", "x:Y", "another.group"),
    )
    _with_entry_points(monkeypatch, *points)
    assert names() == BUILTIN
    origin = "of an unknown distribution (lm_eval_longmem.evaluations): it"
    assert registry_warnings == [
        f"lm-eval-longmem: left out the entry point booksort2 = lm_eval_longmem.booksort.rim:EVALUATION {origin} names "
        "the evaluation 'booksort'; name the entry point booksort",
        f"lm-eval-longmem: left out the entry point toy = lm_eval_longmem.booksort.rim:NAME {origin} gives a str, not "
        f"an lm-eval-longmem evaluation (it lacks {', '.join(sorted(set(registry._MEMBERS) - {'title'}))}); point it "
        "at the rim's EVALUATION",
        f"lm-eval-longmem: left out the entry point twice = lm_eval_longmem.babilong.rim:EVALUATION {origin} another "
        "package registers 'twice' too; uninstall one of them",
        f"lm-eval-longmem: left out the entry point twice = lm_eval_longmem.booksort.rim:EVALUATION {origin} another "
        "package registers 'twice' too; uninstall one of them",
    ]


def test_ours_take_one_harness_name_on_purpose_and_every_other_evaluation_none_by_default():
    assert {entry.name: dict(entry.replaces_harness) for entry in evaluations()} == {
        "forgetting_curve": {},
        "booksort": {},
        "babilong": {"babilong": "babilong_harness"},
    }

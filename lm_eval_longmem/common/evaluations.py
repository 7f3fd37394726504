"""The one list of our evaluations: what each is called, which tasks and options it has, its headline
number, and the modules that read, report, plot and command it.

Everything that needs "every evaluation" (the console script, `plot`, `report`, `merge`, `demo`, the
results readers) iterates `EVALUATIONS`; nothing else names the three. The modules an entry names sit
in layers above `common/` (`readers/`, `plots/`, `report/`, `commands/`), so they are written here as
dotted paths and imported only when used (`load`): this module imports nothing of ours, and the
import rules of `tests/test_structure.py` hold.

A task of ours records its evaluation's `name` in the results file (`configs.<task>.longmem.evaluation`,
`LongmemTask.result_facts`); readers take it from there (`readers.results.evaluation_of`).

Adding an evaluation: its package (options, data, task, YAMLs under `task_configs/<name>/`), a reader,
a report section, a plotter, a commands module, its rows of `plan` and its part of `demo`, then one
entry below. Its tasks record the condition they ran under (`common.conditions`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Headline:
    """The one number a leaderboard reads for an evaluation (every one is higher-is-better)."""

    task: str
    """The task whose metric it is (Book-SORT: the in-context condition, the paper's headline)."""
    metric: str
    """The metric's name in that task's results row."""
    meaning: str
    """What it measures, in a few words (the report's headline section)."""


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of the package."""

    name: str
    """The evaluation's package, group task and task folder (`task_configs/<name>/`), and what its tasks record
    as their `evaluation`."""
    title: str
    """How prose names it ("Book-SORT")."""
    prefix: str
    """The prefix of its `--metadata` keys (`booksort_`)."""
    options: str
    """Its options dataclass, `module:Class` (declared with `common.options.option`)."""
    task_class: str
    """Its task class, `module:Class` (a `LongmemTask`)."""
    data: str
    """Its data module, with `source_problems(metadata)` (the checks before the model loads, `preflight.py`)."""
    headline: Headline
    reader: str
    """Module of `readers/` that reads its results back."""
    report: str
    """Module of `report/` that builds its report sections."""
    plotter: str
    """Module of `plots/` with `can_plot(results)` and `plot(results, out_prefix, formats)`."""
    commands: str
    """Module of `commands/` with `add_commands(subparsers)`: its `lm-eval-longmem <name> ...` subcommands."""
    planner: str
    """Its rows of `lm-eval-longmem plan`: `plan:<name>_rows(task, metadata, tokenizer, window) -> (rows, notes)`."""
    demo: str
    """Its part of `lm-eval-longmem demo`: a `commands.demo.DemoPart` (its `--metadata`, the data it builds)."""


EVALUATIONS: tuple[Evaluation, ...] = tuple(
    Evaluation(
        name=name,
        title=title,
        prefix=f"{name}_",
        options=f"lm_eval_longmem.{name}.options:{options}",
        task_class=f"lm_eval_longmem.{name}.task:{task_class}",
        data=f"lm_eval_longmem.{name}.data",
        headline=headline,
        reader=f"lm_eval_longmem.readers.{name}",
        report=f"lm_eval_longmem.report.{name}",
        plotter=f"lm_eval_longmem.plots.{name}",
        commands=f"lm_eval_longmem.commands.{name}",
        planner=f"lm_eval_longmem.plan:{name}_rows",
        demo=f"lm_eval_longmem.commands.demo:{name.upper()}_DEMO",
    )
    for name, title, options, task_class, headline in (
        ("forgetting_curve", "Forgetting curve", "SweepOptions", "ForgettingCurveTask",
         Headline("forgetting_curve", "fine_memory_length", "longest length L (tokens) copied with > 99% token accuracy")),
        ("booksort", "Book-SORT", "BooksortOptions", "BooksortTask",
         Headline("booksort_in_context", "acc", "in-context order-recall accuracy (chance 0.5)")),
        ("babilong", "BABILong", "BabilongOptions", "BabilongTask",
         Headline("babilong", "acc", "mean accuracy over every bAbI task x length that ran (authors' answer check)")),
    )
)  # fmt: skip
"""Every evaluation, in the order commands, figures and the headline table list them."""

NAMES: tuple[str, ...] = tuple(e.name for e in EVALUATIONS)


def evaluation(name: str) -> Evaluation:
    """The entry called `name`; a KeyError naming the known ones otherwise."""
    for entry in EVALUATIONS:
        if entry.name == name:
            return entry
    raise KeyError(f"{name!r} is not an evaluation of lm-eval-longmem; known: {', '.join(NAMES)}")


def load(path: str) -> Any:
    """The module `package.module`, or the attribute `package.module:Name`, that an entry names."""
    module, _, attribute = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def evaluation_of_class(cls: type) -> Evaluation | None:
    """The entry whose `task_class` is `cls` or one of its bases (a user's subclass of ours is still ours)."""
    classes = {f"{base.__module__}:{base.__qualname__}" for base in cls.__mro__}
    return next((entry for entry in EVALUATIONS if entry.task_class in classes), None)

"""The base of our own evaluations' registry entries: each member imports, when called, the conventional part of
the evaluation's own package, so a rim's `__init__.py` states only its name, title, headline and what differs.

A subclass is defined in `lm_eval_longmem.<name>.rim` (its `__init__.py`); the package `<name>` holds its core,
`<name>.rim` its rim. Its members give:

* `task_folder()`: `task_configs/<name>/` of this repository (`paths.task_configs_dir()`);
* `report()`: `<name>.rim.section:SECTION`;
* `source_problems(metadata)`: `<name>.data:source_problems(metadata)`;
* `add_commands(subparsers)`: `<name>.rim.commands:add_commands(subparsers)`;
* `plotter()`: the module `<name>.rim.figures`;
* `planner()`: `<name>.rim.planner:rows`;
* `demo()`: `<name>.rim.demo:DEMO`;
* `results_reading()`: `<name>.scores:RESULTS_READING`;
* the other members: `Evaluation`'s defaults.

Each part is imported by its module path (`importlib`) only when its member is called, so loading the registry
imports no part, and this module imports no evaluation. Internal: it is the layout of this repository (the task
YAMLs in its root `task_configs/`), no part of the evaluation API (`docs/evaluation-api.md`); an evaluation of
another package subclasses `Evaluation` and writes the members it has.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lm_eval_longmem.common.evaluations import DemoPart, Evaluation, Planner, Plotter, ReportSection, ResultsReading

if TYPE_CHECKING:
    import argparse


class BuiltinEvaluation(Evaluation):
    """An evaluation of ours whose members take its package's conventional parts (module docstring)."""

    def _part(self, module: str, attribute: str | None = None) -> Any:
        """The module `module` of the evaluation's package (relative to it: `rim.section`), or its `attribute`."""
        package = type(self).__module__.removesuffix(".rim")
        found = importlib.import_module(f"{package}.{module}")
        return found if attribute is None else getattr(found, attribute)

    def task_folder(self) -> Path:
        from lm_eval_longmem.paths import task_configs_dir

        return task_configs_dir() / self.name

    def report(self) -> ReportSection:
        return self._part("rim.section", "SECTION")

    def source_problems(self, metadata: dict[str, Any]) -> list[str]:
        return self._part("data", "source_problems")(metadata)

    def add_commands(self, subparsers: argparse._SubParsersAction) -> None:
        self._part("rim.commands", "add_commands")(subparsers)

    def plotter(self) -> Plotter:
        return self._part("rim.figures")

    def planner(self) -> Planner:
        return self._part("rim.planner", "rows")

    def demo(self) -> DemoPart:
        return self._part("rim.demo", "DEMO")

    def results_reading(self) -> ResultsReading:
        return self._part("scores", "RESULTS_READING")

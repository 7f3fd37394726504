"""The forgetting curve's rim: what the generic commands show of it, behind its registry entry `EVALUATION`.

`reader` (results read back as curves), `section` (its part of the report), `figures` (`plot`), `commands`
(`lm-eval-longmem forgetting-curve summarize`), `planner` (its rows of `plan`), `demo` (its part of the demo
and headline sentence). The entry's members import them only when called (`common.evaluations`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lm_eval_longmem.common.evaluations import DemoPart, Evaluation, Headline, Planner, Plotter, ReportSection
from lm_eval_longmem.forgetting_curve.options import NAME
from lm_eval_longmem.forgetting_curve.scores import memory_length

if TYPE_CHECKING:
    import argparse

    from lm_eval_longmem.common.evaluations import ResultsReading


class ForgettingCurve(Evaluation):
    """Liu et al.'s forgetting curve (`forgetting_curve/`)."""

    name = NAME
    title = "Forgetting curve"
    headline = Headline(memory_length("fine"), "longest length L (tokens) copied with > 99% token accuracy")

    def task_folder(self) -> Path:
        from lm_eval_longmem.paths import task_configs_dir

        return task_configs_dir() / NAME

    def report(self) -> ReportSection:
        from lm_eval_longmem.forgetting_curve.rim.section import SECTION

        return SECTION

    def source_problems(self, metadata: dict[str, Any]) -> list[str]:
        from lm_eval_longmem.forgetting_curve.data import source_problems

        return source_problems(metadata)

    def recorded_metadata(self) -> tuple[str, ...]:
        from lm_eval_longmem.forgetting_curve.task import ForgettingCurveTask

        return ForgettingCurveTask.RECORDED_METADATA

    def add_commands(self, subparsers: argparse._SubParsersAction) -> None:
        from lm_eval_longmem.forgetting_curve.rim.commands import add_commands

        add_commands(subparsers)

    def plotter(self) -> Plotter:
        from lm_eval_longmem.forgetting_curve.rim import figures

        return figures

    def planner(self) -> Planner:
        from lm_eval_longmem.forgetting_curve.rim.planner import forgetting_curve_rows

        return forgetting_curve_rows

    def demo(self) -> DemoPart:
        from lm_eval_longmem.forgetting_curve.rim.demo import DEMO

        return DEMO

    def results_reading(self) -> ResultsReading:
        from lm_eval_longmem.forgetting_curve.scores import RESULTS_READING

        return RESULTS_READING


EVALUATION = ForgettingCurve()

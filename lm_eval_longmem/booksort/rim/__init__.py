"""Book-SORT's rim: what the generic commands show of it, behind its registry entry `EVALUATION`.

`reader` (the metric rows and factors of its tasks), `section` (its part of the report), `figures` (`plot`),
`commands` (`lm-eval-longmem booksort build | select-prompt | finetune`), `finetune_commands` (the
fine-tuned memory condition run end to end), `finetune_reader` and `finetune_figures` (its summary and
figure), `planner` (its rows of `plan`), `demo` (its part of the demo and headline sentence). The entry's
members import them only when called (`common.evaluations`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lm_eval_longmem.booksort.options import NAME
from lm_eval_longmem.booksort.scores import ACC
from lm_eval_longmem.common.evaluations import DemoPart, Evaluation, Headline, Planner, Plotter, ReportSection

if TYPE_CHECKING:
    import argparse

    from lm_eval_longmem.common.evaluations import ResultsReading


class Booksort(Evaluation):
    """Book-SORT (`booksort/`)."""

    name = NAME
    title = "Book-SORT"
    headline = Headline(ACC.name, "in-context order-recall accuracy (chance 0.5)")

    def task_folder(self) -> Path:
        from lm_eval_longmem.paths import task_configs_dir

        return task_configs_dir() / NAME

    def report(self) -> ReportSection:
        from lm_eval_longmem.booksort.rim.section import SECTION

        return SECTION

    def source_problems(self, metadata: dict[str, Any]) -> list[str]:
        from lm_eval_longmem.booksort.data import source_problems

        return source_problems(metadata)

    def add_commands(self, subparsers: argparse._SubParsersAction) -> None:
        from lm_eval_longmem.booksort.rim.commands import add_commands

        add_commands(subparsers)

    def plotter(self) -> Plotter:
        from lm_eval_longmem.booksort.rim import figures

        return figures

    def planner(self) -> Planner:
        from lm_eval_longmem.booksort.rim.planner import booksort_rows

        return booksort_rows

    def demo(self) -> DemoPart:
        from lm_eval_longmem.booksort.rim.demo import DEMO

        return DEMO

    def results_reading(self) -> ResultsReading:
        from lm_eval_longmem.booksort.scores import RESULTS_READING

        return RESULTS_READING


EVALUATION = Booksort()

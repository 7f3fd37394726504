"""BABILong's rim: what the generic commands show of it, behind its registry entry `EVALUATION`.

`reader` (the task x length cells, means and effective context a run stored; the text report),
`section` (its part of the report, with the authors' predictions as references), `figures` (the heatmap,
`plot`), `conditions_figure` (in-context and retrieval runs side by side), `commands` (`lm-eval-longmem
babilong score | audit | simulate | report`), `planner` (its rows of `plan`), `demo` (its part of the
demo and headline sentence). The entry's members import them only when called (`common.builtin_evaluation`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lm_eval_longmem.babilong.options import NAME
from lm_eval_longmem.babilong.scores import ACC
from lm_eval_longmem.common.builtin_evaluation import BuiltinEvaluation
from lm_eval_longmem.common.evaluations import Headline

if TYPE_CHECKING:
    import argparse


class Babilong(BuiltinEvaluation):
    """BABILong (`babilong/`)."""

    name = NAME
    title = "BABILong"
    headline = Headline(ACC.name, "mean accuracy over every bAbI task x length that ran (authors' answer check)")
    # The harness ships a `babilong` group of its own (babilong_qa1-20); ours takes its name, and it stays
    # reachable as this alias group (task_configs/babilong_harness.yaml, documented in the card).
    replaces_harness = {NAME: "babilong_harness"}

    def add_report_arguments(self, parser: argparse.ArgumentParser) -> None:
        from lm_eval_longmem.babilong.rim.section import REFERENCE_OPTION

        parser.add_argument(
            f"--{REFERENCE_OPTION}", type=Path, action="append", default=[], metavar="DIR",
            help="a folder of the BABILong authors' prediction CSVs (e.g. their RAG Llama-3 runs), drawn as a reference line",
        )  # fmt: skip


EVALUATION = Babilong()

"""The forgetting curve's rim: what the generic commands show of it, behind its registry entry `EVALUATION`.

`reader` (results read back as curves), `section` (its part of the report), `figures` (`plot`), `commands`
(`lm-eval-longmem forgetting-curve summarize`), `planner` (its rows of `plan`), `demo` (its part of the demo
and headline sentence). The entry's members import them only when called (`common.builtin_evaluation`).
"""

from __future__ import annotations

from lm_eval_longmem.common.builtin_evaluation import BuiltinEvaluation
from lm_eval_longmem.common.evaluations import Headline
from lm_eval_longmem.forgetting_curve.options import NAME
from lm_eval_longmem.forgetting_curve.scores import memory_length


class ForgettingCurve(BuiltinEvaluation):
    """Liu et al.'s forgetting curve (`forgetting_curve/`)."""

    name = NAME
    title = "Forgetting curve"
    headline = Headline(memory_length("fine"), "longest length L (tokens) copied with > 99% token accuracy")

    def recorded_metadata(self) -> tuple[str, ...]:
        from lm_eval_longmem.forgetting_curve.task import ForgettingCurveTask

        return ForgettingCurveTask.RECORDED_METADATA


EVALUATION = ForgettingCurve()

"""Book-SORT's rim: what the generic commands show of it, behind its registry entry `EVALUATION`.

`reader` (the metric rows and factors of its tasks), `section` (its part of the report), `figures` (`plot`),
`commands` (`lm-eval-longmem booksort build | select-prompt | finetune`), `finetune_commands` (the
fine-tuned memory condition run end to end), `finetune_reader` and `finetune_figures` (its summary and
figure), `planner` (its rows of `plan`), `demo` (its part of the demo and headline sentence). The entry's
members import them only when called (`common.builtin_evaluation`).
"""

from __future__ import annotations

from lm_eval_longmem.booksort.options import NAME
from lm_eval_longmem.booksort.scores import ACC
from lm_eval_longmem.common.builtin_evaluation import BuiltinEvaluation
from lm_eval_longmem.common.evaluations import Headline


class Booksort(BuiltinEvaluation):
    """Book-SORT (`booksort/`)."""

    name = NAME
    title = "Book-SORT"
    headline = Headline(ACC.name, "in-context order-recall accuracy (chance 0.5)")


EVALUATION = Booksort()

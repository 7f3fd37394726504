"""BABILong's corrected answer check (`acc_corrected`): the authors' rule, read only where an answer's shape is listed.

The authors' check (`official_check`, `acc`) finds labels by substring in the output's first sentence. The
corrected check changes `acc`'s verdict only when the answer has one of an explicit list of shapes
(`decision.SHAPES`): mechanical ones, right by construction (the answer says only labels), and reading
ones (an answer followed by an explanation, a statement of the asked fact, "cannot be determined"), each
admitted with its precision measured on rows of models no rule was written from. Every other answer
abstains (`decision.ABSTENTIONS`), and `acc_corrected` keeps `acc`'s verdict there. One module per
concern: `labels` (label sets, forms, bare answers), `answer` (where the answer is; hedges, alternatives,
options), `forms` (the statement forms of each question, as data) and `statements` (what a matched form says),
`decision` (the shapes and the verdict).
The rubric and the measured figures: docs/babilong-corrected-check.md.
"""

from lm_eval_longmem.babilong.corrected.decision import ABSTENTIONS, SHAPES, Check, Reading, check, read

__all__ = ["ABSTENTIONS", "SHAPES", "Check", "Reading", "check", "read"]

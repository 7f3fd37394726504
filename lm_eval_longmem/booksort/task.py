"""The Book-SORT task class: scoring and the per-factor metrics (window fit and skips: the task base).

Scoring (log-prob tasks, ``output_type: multiple_choice``): the prompt ends with the answer prefix
"Answer: Segment" (lm-eval's ``gen_prefix``), and the choices are " A" and " B". lm-eval encodes
context + choice together and splits off the choice tokens, so a tokenizer that merges the space
into the label (``ĠA``) or not gives the same comparison: log P(" A" | prompt) vs
log P(" B" | prompt), i.e. the next-token probabilities of the two labels. With a one-token label
HF's ``_loglikelihood_tokens`` groups both requests by context and runs the model once per trial
(``tests/booksort/test_task.py`` counts the forward calls). Generation task: `parse_label`.

Metrics (every one also in ``task_configs/booksort/README.md``):

- ``acc``: as the paper reports it, the mean over L_E x L_S conditions of each condition's mean,
  with ``acc_ci_low``/``acc_ci_high`` (Wilson 95% interval on the conditions' effective number of
  trials; exactly the pooled Wilson interval when the conditions are equally large) and
  ``acc_p_above_chance`` (one-sided test against 0.5 from the exact null law of the mean: the exact
  binomial test for equal conditions); see `lm_eval_longmem.common.stats`.
- ``acc@<cell>`` for every cell of one factor: ``LE<words>``, ``LS<words>``, ``bin<0..3>``,
  ``book<book_idx>`` and ``LE<words>_bin<k>`` (the paper's Figure 1b): plain accuracy (lm-eval adds
  its standard error), ``_ci_low``/``_ci_high`` (Wilson 95% interval) and ``_p_above_chance``
  (one-sided exact binomial test against 0.5; the cell is significantly above chance when < 0.05).
- ``pct_A``: answer bias, the share of all trials answered "A" (pooled), with ``pct_A_ci_low``/
  ``pct_A_ci_high`` (Wilson); ``pct_A@<cell>`` per cell. A model that always answers one label
  scores the share of trials with that gold label, which reads like chance; the report flags it.
- ``skipped``: trials left out because the prompt does not fit the model's window.
- ``invalid`` (generation task only): answers that are not exactly one label; scored wrong.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lm_eval_longmem.booksort.data import prompt_work
from lm_eval_longmem.booksort.options import PREFIX, BooksortOptions
from lm_eval_longmem.booksort.prompts import LABELS
from lm_eval_longmem.common.metric_names import ScoreSpec
from lm_eval_longmem.common.stats import (
    above_chance,
    mean_of_proportions_above_chance,
    mean_of_proportions_interval,
    proportion_interval,
)
from lm_eval_longmem.common.task import CellStat, LongmemTask, Summary

CHANCE = 0.5
_STRICT_ANSWER = re.compile(r"^\s*(?:Segment\s+)?([AB])(?![A-Za-z0-9])")


def parse_label(generated: str) -> str | None:
    """The label a generated answer names, or None when it is not exactly one label.

    Accepted: optional whitespace, an optional repeated "Segment", then ``A`` or ``B`` not followed
    by a letter or digit (" A", "A.", "Segment B is first"). Rejected: "a", "Both", "AB", "" ...
    """
    match = _STRICT_ANSWER.match(generated)
    return match.group(1) if match else None


def factor_cells(doc: dict[str, Any]) -> list[str]:
    """The per-factor cells a trial belongs to (suffixes of its ``acc@`` metrics)."""
    le, ls, k = int(doc["excerpt_length"]), int(doc["segment_length"]), int(doc["distance_bin_idx"])
    return [f"LE{le}", f"LS{ls}", f"bin{k}", f"book{doc['book_idx']}", f"LE{le}_bin{k}"]


def condition_key(doc: dict[str, Any]) -> str:
    """The paper's averaging unit: one L_E x L_S condition."""
    return f"{int(doc['excerpt_length'])}x{int(doc['segment_length'])}"


# --- aggregations -----------------------------------------------------------------------------


def condition_counts(items: Sequence[tuple[str, float]]) -> list[tuple[int, int]]:
    """(correct, trials) of every L_E x L_S condition in `items` of ``(condition, correct)``, by condition."""
    groups: dict[str, list[float]] = defaultdict(list)
    for key, correct in items:
        groups[key].append(float(correct))
    return [(round(math.fsum(groups[key])), len(groups[key])) for key in sorted(groups)]


def paper_acc(items: Sequence[tuple[str, float]]) -> float:
    """Accuracy as the paper reports it: mean over L_E x L_S conditions of per-condition accuracy."""
    return mean_of_proportions_interval(condition_counts(items)).estimate


def paper_acc_ci_low(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_interval(condition_counts(items)).low


def paper_acc_ci_high(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_interval(condition_counts(items)).high


def paper_acc_p_above_chance(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_above_chance(condition_counts(items), chance=CHANCE)


def binomial_p_above_chance(items: Sequence[float]) -> float:
    return above_chance(round(math.fsum(items)), len(items), chance=CHANCE)[0]


_PAPER_ACC = {
    "acc": paper_acc,
    "acc_ci_low": paper_acc_ci_low,
    "acc_ci_high": paper_acc_ci_high,
    "acc_p_above_chance": paper_acc_p_above_chance,
}


def share(items: Sequence[float]) -> float:
    return math.fsum(items) / len(items)


def share_ci_low(items: Sequence[float]) -> float:
    return proportion_interval(round(math.fsum(items)), len(items)).low


def share_ci_high(items: Sequence[float]) -> float:
    return proportion_interval(round(math.fsum(items)), len(items)).high


_PCT_A = {"pct_A": share, "pct_A_ci_low": share_ci_low, "pct_A_ci_high": share_ci_high}
"""Answer bias over every trial of the run, pooled (not the mean over conditions): the share answered "A"."""


# --- the task ---------------------------------------------------------------------------------


class BooksortTask(LongmemTask):
    """Book-SORT trials as a lm-eval task (multiple_choice on log-probs, or generate_until)."""

    OPTIONS = BooksortOptions
    PREFIX = PREFIX
    SCORES = ("acc", ScoreSpec("pct_A", higher_is_better=None))
    """`acc`: right or wrong; `pct_A`: answered "A" or not (answer bias: neither side is better)."""

    def cell_stats(self, spec: ScoreSpec) -> dict[str, CellStat]:
        """Accuracy cells also get the one-sided exact binomial test against chance; answer-bias cells do not."""
        if spec.name != "acc":
            return super().cell_stats(spec)
        return super().cell_stats(spec) | {"_p_above_chance": (binomial_p_above_chance, False)}

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        return tuple(factor_cells(doc))

    def doc_work(self, doc: dict[str, Any]) -> int:
        return prompt_work(doc, doc["condition"])

    def skip_cell(self, doc: dict[str, Any]) -> str:
        return f"LE{int(doc['excerpt_length'])}"

    def score(self, doc: dict[str, Any], results: list) -> dict[str, float]:
        gold = LABELS[int(doc["label"])]
        if self.OUTPUT_TYPE == "generate_until":
            answer = parse_label(results[0])
        else:
            answer = LABELS[int(np.argmax([ll for ll, _ in results]))]
        return {"acc": float(answer == gold), "pct_A": float(answer == LABELS[0]), "invalid": float(answer is None)}

    def summary_item(self, doc: dict[str, Any], scores: dict[str, float]) -> list:
        return [condition_key(doc), scores["acc"], scores["invalid"], scores["pct_A"]]

    def summaries(self) -> dict[str, Summary]:
        def paper(fn: Callable[[Sequence[tuple[str, float]]], float]) -> Callable[[Sequence[list]], float]:
            return lambda items: fn([(key, correct) for key, correct, *_ in items])

        def answered_a(fn: Callable[[Sequence[float]], float]) -> Callable[[Sequence[list]], float]:
            return lambda items: fn([item[3] for item in items])

        out: dict[str, Summary] = {name: (paper(fn), not name.endswith("_p_above_chance")) for name, fn in _PAPER_ACC.items()}
        out.update({name: (answered_a(fn), None) for name, fn in _PCT_A.items()})
        if self.OUTPUT_TYPE == "generate_until":
            out["invalid"] = (lambda items: sum(item[2] for item in items), False)
        return out

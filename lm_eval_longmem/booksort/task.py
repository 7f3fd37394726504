"""The Book-SORT task class: scoring and the per-factor metrics (window fit and skips: the task base).

Scoring (log-prob tasks, ``output_type: multiple_choice``): the prompt ends with the answer prefix
"Answer: Segment" (lm-eval's ``gen_prefix``), and the choices are " A" and " B". lm-eval encodes
context + choice together and splits off the choice tokens, so a tokenizer that merges the space
into the label (``ĠA``) or not gives the same comparison: log P(" A" | prompt) vs
log P(" B" | prompt), i.e. the next-token probabilities of the two labels. The two requests of a
trial go out as `loglikelihood_accuracy` requests with the same string pairs (`construct_requests`),
which the request type encodes exactly as the harness encodes `loglikelihood` ones, so the same
tokens are scored; the backends then apply the LM head only where the labels are read, never the
full-vocabulary `log_softmax` at every prompt position, and HF scores the shared prompt of a
trial's choices, and the shared excerpt of its trials, once (`backends.hf`). The answers are stored
as the harness's `(logprob, is_greedy)` (`apply_filters`), so metrics and logged samples keep the
stock `multiple_choice` shape. Generation task: `parse_label`.

The authors' readout (``booksort_protocol=authors``, log-prob tasks): their HF path reads the
next-token log-probabilities after their prompt, tokenized by a plain ``tokenizer(prompt)`` call,
at the last token of ``tokenizer.encode("A")`` and of ``tokenizer.encode("B")`` (the bare labels for
byte-level BPE tokenizers), and answers the larger. To send exactly those tokens the task turns
into ``loglikelihood_accuracy`` requests with token ids (`construct_requests`); `authors_answer`
decides.

Metrics (every one also in ``task_configs/booksort/README.md``):

- ``acc``: as the paper reports it, the mean over L_E x L_S cells of each cell's mean,
  with ``acc_ci_low``/``acc_ci_high`` (Wilson 95% interval on the cells' effective number of
  trials; exactly the pooled Wilson interval when the cells are equally large) and
  ``acc_p_above_chance`` (one-sided test against 0.5 from the exact null law of the mean: the exact
  binomial test for equal cells); see `lm_eval_longmem.common.stats`.
- ``acc@<cell>`` for every cell of one factor: ``LE<words>``, ``LS<words>``, ``bin<0..3>``,
  ``book<book_idx>`` and ``LE<words>_bin<k>`` (the paper's Figure 1b): plain accuracy (lm-eval adds
  its standard error), ``_ci_low``/``_ci_high`` (Wilson 95% interval) and ``_p_above_chance``
  (one-sided exact binomial test against 0.5; the cell is significantly above chance when < 0.05).
- ``pct_A``: answer bias, the share of all trials answered "A" (pooled), with ``pct_A_ci_low``/
  ``pct_A_ci_high`` (Wilson); ``pct_A@<cell>`` per cell. A model that always answers one label
  scores the share of trials with that gold label, which reads like chance; the report flags it.
- ``acc_calibrated`` (log-prob tasks; ours, not the paper's): accuracy after removing the answer
  bias, by contextual calibration in the spirit of Zhao et al. (2021): a trial's log-odds
  log P(" A") - log P(" B") minus the median log-odds of its L_E x L_S cell decides the answer
  (`calibrated_correct`). Computed at aggregation (it needs every trial of the cell), then
  reported as ``acc`` is: the paper-style mean with interval and test, and ``acc_calibrated@<cell>``
  per cell with Wilson intervals and binomial tests.
- ``skipped``: trials left out because the prompt does not fit the model's window.
- ``invalid`` (generation task only): answers that are not exactly one label; scored wrong.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
from lm_eval.api.instance import Instance

from lm_eval_longmem.backends import plugin
from lm_eval_longmem.backends.request_type import OUTPUT_TYPE as TOKEN_REQUEST
from lm_eval_longmem.backends.request_type import as_loglikelihood, as_token_ids, compact_ids
from lm_eval_longmem.booksort.data import Excerpts, fine_tuned_checkpoint, prompt_work, user_text
from lm_eval_longmem.booksort.options import AUTHORS, NAME, PREFIX, BooksortOptions
from lm_eval_longmem.booksort.prompts import AUTHORS_PROMPTS, LABELS
from lm_eval_longmem.booksort.scores import ACC, CALIBRATED, INVALID, PCT_A, factor
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.conditions import FINE_TUNED, IN_CONTEXT, MEMORYLESS
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.metric_names import CI_HIGH, CI_LOW, P_ABOVE_CHANCE, SUMMARY_KEY, ScoreSpec
from lm_eval_longmem.common.stats import (
    above_chance,
    mean_of_proportions_above_chance,
    mean_of_proportions_interval,
    proportion_interval,
)
from lm_eval_longmem.common.task import CellStat, LongmemTask
from lm_eval_longmem.harness import Plugin

CHANCE = 0.5
_STRICT_ANSWER = re.compile(r"^\s*(?:Segment\s+)?([AB])(?![A-Za-z0-9])")


def parse_label(generated: str) -> str | None:
    """The label a generated answer names, or None when it is not exactly one label.

    Accepted: optional whitespace, an optional repeated "Segment", then ``A`` or ``B`` not followed
    by a letter or digit (" A", "A.", "Segment B is first"). Rejected: "a", "Both", "AB", "" ...
    """
    match = _STRICT_ANSWER.match(generated)
    return match.group(1) if match else None


def our_answer(logprobs: Sequence[float]) -> str:
    """Ours: the label whose continuation after the answer prefix (" A", " B") is the more likely; a tie is A."""
    return LABELS[int(np.argmax(logprobs))]


def authors_answer(logprobs: Sequence[float]) -> str | None:
    """The authors' decision from the log-probabilities of their two label tokens (`authors_label_ids`).

    The larger wins, a tie is A (`np.argmax`); when both are equal and below -0.5e12 (their marker for
    a label they did not find) the answer is their "X", None here, which is scored wrong.
    """
    if logprobs[0] == logprobs[1] and logprobs[0] < -0.5e12:
        return None
    return LABELS[int(np.argmax(logprobs))]


def authors_label_ids(tokenizer: Any) -> list[int]:
    """The tokens the authors' HF path reads each label from: the last id of ``tokenizer.encode(label)``.

    Byte-level BPE tokenizers (Llama-3, SmolLM2, GPT-2) give the bare label, ``A``, not the `` A``
    that follows "Answer: Segment" in text; SentencePiece tokenizers (Llama-2, Mistral) prefix a
    space marker, ``▁A``, so for them it is the spaced label.
    """
    return [tokenizer.encode(label)[-1] for label in LABELS]


def authors_answer_space(tokenizer: Any) -> str:
    """ " " when the tokenizer writes every space as a token of its own, else "".

    The authors' script tests the tokenizer this way and then ends its prompt with a space after
    "Answer: Segment" (practically never: most tokenizers fold the space into the next word).
    """
    space = tokenizer.encode(" ")[-1]
    sentence = "Which of the two segments came first in the book"
    return " " if tokenizer.encode(sentence).count(space) == sentence.count(" ") else ""


def factor_cells(doc: dict[str, Any]) -> list[str]:
    """The per-factor cells a trial belongs to (suffixes of its ``acc@`` metrics)."""
    le, ls, k = (
        factor("LE", doc["excerpt_length"]),
        factor("LS", doc["segment_length"]),
        factor("bin", doc["distance_bin_idx"]),
    )
    return [le, ls, k, factor("book", doc["book_idx"]), metric_names.cell(le, k)]


def le_ls_cell(doc: dict[str, Any]) -> str:
    """The paper's averaging unit: one L_E x L_S cell ("2500x50")."""
    return f"{int(doc['excerpt_length'])}x{int(doc['segment_length'])}"


# --- aggregations -----------------------------------------------------------------------------


class Trial(NamedTuple):
    """What one trial gives the summaries and the calibration (the fields in the order of the positional
    lists that files logged before the items were named)."""

    cell: str
    """Its L_E x L_S cell (`le_ls_cell`), the paper's averaging unit (older samples files log it as
    `condition`: `BooksortTask.ITEM_FORMER_NAMES`)."""
    acc: float
    invalid: float
    """1 when a generated answer names neither segment."""
    pct_A: float
    log_odds: float | None
    """log P("A") - log P("B"); None when the answer was generated or read the authors' way."""
    label: int
    """The gold label's index (0: "A")."""


def cell_counts(items: Sequence[tuple[str, float]]) -> list[tuple[int, int]]:
    """(correct, trials) of every L_E x L_S cell in `items` of ``(cell, correct)``, by cell."""
    groups: dict[str, list[float]] = defaultdict(list)
    for key, correct in items:
        groups[key].append(float(correct))
    return [(round(math.fsum(groups[key])), len(groups[key])) for key in sorted(groups)]


def paper_acc(items: Sequence[tuple[str, float]]) -> float:
    """Accuracy as the paper reports it: mean over L_E x L_S cells of per-cell accuracy."""
    return mean_of_proportions_interval(cell_counts(items)).estimate


def paper_acc_ci_low(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_interval(cell_counts(items)).low


def paper_acc_ci_high(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_interval(cell_counts(items)).high


def paper_acc_p_above_chance(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_above_chance(cell_counts(items), chance=CHANCE)


def binomial_p_above_chance(items: Sequence[float]) -> float:
    return above_chance(round(math.fsum(items)), len(items), chance=CHANCE)[0]


def calibrated_correct(items: Sequence[Trial]) -> list[float | None]:
    """Per trial (in the order of `items`), 1.0 or 0.0: whether the answer after contextual calibration
    is right; None for a trial without log-odds (a generation task).

    `items`: the trials' summary items (`Trial`). A
    trial answers "A" when its log-odds exceed the median log-odds of its L_E x L_S cell, "B"
    when they fall below it, and keeps the model's own answer at exactly the median. Why the
    cell's median: the builder counterbalances the order of presentation 50/50 in every
    cell, so a model without answer bias answers "A" on about half of a cell's trials, and
    the bias may change with the excerpt's length (a longer prompt, another prior over the labels);
    the median is the shift that removes a constant bias whatever its size (a model stuck on "A" at
    every trial then answers by which trials it prefers "A" on most), and it is robust to a few
    extreme trials, unlike the mean. A model whose log-odds carry no information about the order
    scores about 0.5, since the threshold uses no gold label. The median of a cell's values
    does not depend on their order, so one process and N ranks agree.
    """
    by_cell: dict[str, list[float]] = defaultdict(list)
    for trial in items:
        if trial.log_odds is not None:
            by_cell[trial.cell].append(float(trial.log_odds))
    medians = {cell: float(np.median(values)) for cell, values in by_cell.items()}
    out: list[float | None] = []
    for trial in items:
        if trial.log_odds is None:
            out.append(None)
            continue
        shifted = float(trial.log_odds) - medians[trial.cell]
        answers_a = shifted > 0 or (
            shifted == 0 and float(trial.log_odds) >= 0
        )  # at the median: the model's own answer
        out.append(float(answers_a == (int(trial.label) == 0)))
    return out


_PAPER_ACC = {
    "": paper_acc,
    CI_LOW: paper_acc_ci_low,
    CI_HIGH: paper_acc_ci_high,
    P_ABOVE_CHANCE: paper_acc_p_above_chance,
}
"""Statistic suffix -> the paper-style accuracy over L_E x L_S cells (of `acc`, and of `acc_calibrated`)."""


def share(items: Sequence[float]) -> float:
    return math.fsum(items) / len(items)


def share_ci_low(items: Sequence[float]) -> float:
    return proportion_interval(round(math.fsum(items)), len(items)).low


def share_ci_high(items: Sequence[float]) -> float:
    return proportion_interval(round(math.fsum(items)), len(items)).high


_PCT_A = {"": share, CI_LOW: share_ci_low, CI_HIGH: share_ci_high}
"""Answer bias over every trial of the run, pooled (not the mean over cells): the share answered "A"."""


# --- the task ---------------------------------------------------------------------------------


class BooksortTask(LongmemTask):
    """Book-SORT trials as a lm-eval task (multiple_choice on log-probs, or generate_until)."""

    OPTIONS = BooksortOptions
    EVALUATION = NAME
    PREFIX = PREFIX
    SCORES = (ACC, PCT_A)
    """`acc`: right or wrong; `pct_A`: answered "A" or not (answer bias: neither side is better)."""
    ITEM = Trial
    ITEM_FORMER_NAMES = {"condition": "cell"}
    OUTPUT_TYPE: str  # set by lm_eval's ConfigurableTask.__init__ (untyped there), changed in ours
    CALIBRATED = CALIBRATED

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        if self.options.protocol == AUTHORS and self.OUTPUT_TYPE == "multiple_choice":
            self.OUTPUT_TYPE = TOKEN_REQUEST  # the authors' readout: exact token ids (`construct_requests`)

    @classmethod
    def harness_plugin(cls) -> Plugin:
        """The `loglikelihood_accuracy` request type the authors' readout sends (`backends.plugin`)."""
        return plugin()

    @cached_property
    def authors_label_ids(self) -> list[int]:
        return authors_label_ids(self.tokenizer)

    @cached_property
    def authors_answer_space(self) -> str:
        return authors_answer_space(self.tokenizer)

    def authors_context(self, prompt: str) -> list[int]:
        """The prompt's tokens as the authors' HF path makes them: ``tokenizer(prompt)``, default special tokens
        (a chat template that writes its own BOS then gets a second one, as theirs does)."""
        return self.tokenizer(prompt + self.authors_answer_space)["input_ids"]

    def before_requests(self) -> None:
        if self.options.prompt in AUTHORS_PROMPTS and not self._render_kwargs.get("apply_chat_template"):
            raise UsageError(
                f"--metadata {PREFIX}prompt={self.options.prompt} is one of the authors' prompt configs, which are chat "
                "prompts (their code always applies the model's chat template): add --apply_chat_template"
            )

    def answer_tokens(self, doc: dict[str, Any], prompt: str) -> int:
        if self.OUTPUT_TYPE == TOKEN_REQUEST:
            return len(self.authors_context(prompt)) + 1
        return super().answer_tokens(doc, prompt)

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> Any:
        """Ours: the harness's two `multiple_choice` requests (prompt, " A"/" B"), sent as `loglikelihood_accuracy`
        (same strings, same tokens; the head only where the label is read). The authors' readout: one
        `loglikelihood_accuracy` request per label, the prompt's tokens (`authors_context`) and the label's token
        (`authors_label_ids`). Generation: the harness's request."""
        if self.OUTPUT_TYPE == "multiple_choice":
            requests = super().construct_requests(doc, ctx, **kwargs)
            for instance in requests:
                instance.request_type = TOKEN_REQUEST
            return requests
        if self.OUTPUT_TYPE != TOKEN_REQUEST:
            return super().construct_requests(doc, ctx, **kwargs)
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        context = as_token_ids(self.authors_context(ctx))
        return [
            Instance(request_type=TOKEN_REQUEST, doc=doc, arguments=(context, as_token_ids([label])), idx=i, **kwargs)
            for i, label in enumerate(self.authors_label_ids)
        ]

    def apply_filters(self) -> None:
        """After the model has answered: our protocol's answers as the harness's `(logprob, is_greedy)`
        (`as_loglikelihood`), before the filters copy them; the authors' token-id prompts logged as a length and a
        digest (the doc has the text)."""
        if self.OUTPUT_TYPE == "multiple_choice":
            for instance in self.instances:
                if instance.request_type == TOKEN_REQUEST:
                    instance.resps = [as_loglikelihood(answer) for answer in instance.resps]
        super().apply_filters()
        for instance in self.instances:
            if instance.request_type == TOKEN_REQUEST:
                instance.arguments = tuple(compact_ids(arg) for arg in instance.arguments)

    @property
    def condition(self) -> str:
        """In-context, or (the prompt without the excerpt, YAML `condition: memoryless`) memory-less, or
        fine-tuned when that prompt is put to a checkpoint of `booksort finetune` (`fine_tuned_checkpoint`)."""
        if (self.config.dataset_kwargs or {}).get("condition") != "memoryless":
            return IN_CONTEXT
        return FINE_TUNED if fine_tuned_checkpoint(self.metadata) else MEMORYLESS

    def result_facts(self) -> dict[str, Any]:
        """Our facts, and whose readout and prompt the run used (`booksort_protocol`, `booksort_prompt`)."""
        return super().result_facts() | {"protocol": self.options.protocol, "prompt": self.options.prompt}

    @cached_property
    def excerpts(self) -> Excerpts:
        """Each doc's excerpt, from where the doc says it is (docs do not hold it: see `data.py`)."""
        return Excerpts(self.options)

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The user turn: P_context, the excerpt (in context), P_task, the two segments, P_question."""
        return user_text(doc, self.excerpts(doc))

    def cell_stats(self, spec: ScoreSpec) -> dict[str, CellStat]:
        """Accuracy cells (plain and calibrated) also get the one-sided exact binomial test against chance;
        answer-bias cells do not."""
        if spec.name not in (ACC.name, self.CALIBRATED.name):
            return super().cell_stats(spec)
        return super().cell_stats(spec) | {
            P_ABOVE_CHANCE: (lambda values, units: binomial_p_above_chance(values), False)
        }

    def run_score_specs(self) -> tuple[ScoreSpec, ...]:
        return (self.CALIBRATED,) if self.OUTPUT_TYPE == "multiple_choice" else ()

    def run_scores(self, columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self.OUTPUT_TYPE != "multiple_choice":
            return {}
        return {self.CALIBRATED.name: calibrated_correct(columns.get(SUMMARY_KEY, []))}

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        return tuple(factor_cells(doc))

    def doc_work(self, doc: dict[str, Any]) -> int:
        return prompt_work(doc, doc["condition"])

    def skip_cell(self, doc: dict[str, Any]) -> str:
        return factor("LE", doc["excerpt_length"])

    def score(self, doc: dict[str, Any], results: list) -> dict[str, float]:
        gold = LABELS[int(doc["label"])]
        if self.OUTPUT_TYPE == "generate_until":
            answer, log_odds = parse_label(results[0]), None
        elif self.OUTPUT_TYPE == TOKEN_REQUEST:
            answer, log_odds = authors_answer([logprob for _, logprob in results]), None
        else:
            answer = our_answer([ll for ll, _ in results])
            log_odds = float(results[0][0]) - float(results[1][0])
        return {
            ACC.name: float(answer == gold),
            PCT_A.name: float(answer == LABELS[0]),
            INVALID: float(answer is None),
            "log_odds": log_odds,  # type: ignore[dict-item]  # None for a generated answer (no log-odds), as Trial.log_odds
        }

    def summary_item(self, doc: dict[str, Any], scores: dict[str, float]) -> Trial:
        return Trial(
            le_ls_cell(doc),
            scores[ACC.name],
            scores[INVALID],
            scores[PCT_A.name],
            scores["log_odds"],
            int(doc["label"]),
        )

    def summarize(self, items: Sequence[Trial]) -> dict[str, float | None]:
        """The paper's accuracy over L_E x L_S cells (and the calibrated one, log-prob tasks) with interval and test
        against chance, the pooled answer bias with its interval, and (generation) the invalid answers."""
        by_cell = [(t.cell, t.acc) for t in items]
        out: dict[str, float | None] = {
            metric_names.name(ACC.name, stat=s): fn(by_cell) for s, fn in _PAPER_ACC.items()
        }
        if self.OUTPUT_TYPE == "multiple_choice":
            # every multiple-choice trial has log-odds, so no calibrated verdict is None
            calibrated = [
                (t.cell, float(right))
                for t, right in zip(items, calibrated_correct(items), strict=True)
                if right is not None
            ]
            out.update(
                {metric_names.name(self.CALIBRATED.name, stat=s): fn(calibrated) for s, fn in _PAPER_ACC.items()}
            )
        answered_a = [t.pct_A for t in items]
        out.update({metric_names.name(PCT_A.name, stat=s): fn(answered_a) for s, fn in _PCT_A.items()})
        if self.OUTPUT_TYPE == "generate_until":
            out[INVALID] = sum(t.invalid for t in items)
        return out

    def summary_directions(self) -> dict[str, bool | None]:
        accuracies = (ACC.name, self.CALIBRATED.name) if self.OUTPUT_TYPE == "multiple_choice" else (ACC.name,)
        out: dict[str, bool | None] = {
            metric_names.name(a, stat=s): s != P_ABOVE_CHANCE for a in accuracies for s in _PAPER_ACC
        }
        out.update(dict.fromkeys((metric_names.name(PCT_A.name, stat=s) for s in _PCT_A), None))
        if self.OUTPUT_TYPE == "generate_until":
            out[INVALID] = False
        return out

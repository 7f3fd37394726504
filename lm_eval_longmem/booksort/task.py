"""The Book-SORT task class: window-fit skips, scoring and the per-factor metrics.

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
- ``skipped``: trials left out because the prompt does not fit the model's window.
- ``invalid`` (generation task only): answers that are not exactly one label; scored wrong.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lm_eval.api.metrics import mean

from lm_eval_longmem.booksort.prompts import LABELS
from lm_eval_longmem.common.model_info import claimed_window, load_tokenizer
from lm_eval_longmem.common.stats import (
    above_chance,
    mean_of_proportions_above_chance,
    mean_of_proportions_interval,
    proportion_interval,
)
from lm_eval_longmem.common.task import LongmemTask

CHANCE = 0.5
_INTERVAL_SUFFIXES = ("_ci_low", "_ci_high", "_p_above_chance")
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
    return [(round(sum(groups[key])), len(groups[key])) for key in sorted(groups)]


def paper_acc(items: Sequence[tuple[str, float]]) -> float:
    """Accuracy as the paper reports it: mean over L_E x L_S conditions of per-condition accuracy."""
    return mean_of_proportions_interval(condition_counts(items)).estimate


def paper_acc_ci_low(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_interval(condition_counts(items)).low


def paper_acc_ci_high(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_interval(condition_counts(items)).high


def paper_acc_p_above_chance(items: Sequence[tuple[str, float]]) -> float:
    return mean_of_proportions_above_chance(condition_counts(items), chance=CHANCE)


def wilson_low(items: Sequence[float]) -> float:
    return proportion_interval(int(sum(items)), len(items)).low


def wilson_high(items: Sequence[float]) -> float:
    return proportion_interval(int(sum(items)), len(items)).high


def binomial_p_above_chance(items: Sequence[float]) -> float:
    return above_chance(int(sum(items)), len(items), chance=CHANCE)[0]


def total(items: Sequence[float]) -> float:
    return float(sum(items))


_PAPER_ACC = {
    "acc": paper_acc,
    "acc_ci_low": paper_acc_ci_low,
    "acc_ci_high": paper_acc_ci_high,
    "acc_p_above_chance": paper_acc_p_above_chance,
}
_CELL_AGG = {"_ci_low": wilson_low, "_ci_high": wilson_high, "_p_above_chance": binomial_p_above_chance}


class _Aggregations(dict):
    """Aggregation per metric name; ``acc@<cell>...`` names are resolved by their suffix."""

    def __missing__(self, metric: str) -> Callable:
        if metric.startswith("acc@"):
            return next((fn for suffix, fn in _CELL_AGG.items() if metric.endswith(suffix)), mean)
        raise KeyError(metric)


# --- the task ---------------------------------------------------------------------------------


class BooksortTask(LongmemTask):
    """Book-SORT trials as a lm-eval task (multiple_choice on log-probs, or generate_until)."""

    n_skipped: int = 0
    """Trials of this run left out because their prompt does not fit the model's window."""

    def build_all_requests(self, *, limit: int | None = None, **kwargs: Any) -> None:
        self._drop_unfit_docs(limit=limit, **kwargs)
        super().build_all_requests(limit=limit, **kwargs)

    def _drop_unfit_docs(self, *, limit: int | None, **build_kwargs: Any) -> None:
        """Keep the trials whose full prompt (chat template included) fits the window; count the rest.

        A trial fits when prompt + longest label (+ ``max_gen_toks`` for generation) is at most the
        window, counted with the tokenizer's special tokens (so at most one token conservative).
        With ``--limit N`` the first N trials that fit are kept. Nothing is ever truncated.
        """
        metadata = self.config.metadata or {}
        window = claimed_window(metadata)
        if window is None:
            raise ValueError(
                "booksort needs the model's context window to skip trials that do not fit (never truncate): "
                "pass max_length=N in --model_args (max_model_len=N for vllm)"
            )
        tokenizer = load_tokenizer(metadata)
        reserve = (
            int((self.config.generation_kwargs or {}).get("max_gen_toks", 256))
            if self.OUTPUT_TYPE == "generate_until"
            else 0
        )
        split = self.config.test_split
        docs = self.dataset[split]
        keep: list[int] = []
        skipped = 0
        for i, doc in enumerate(docs):
            if limit is not None and len(keep) >= limit:
                break
            ctx = self.rendered_prompt(doc, **build_kwargs)
            longest = max((f" {label}" for label in LABELS), key=lambda c: len(tokenizer(ctx + c)["input_ids"]))
            n_tokens = len(tokenizer(ctx + longest)["input_ids"]) + reserve
            if n_tokens <= window:
                keep.append(i)
            else:
                skipped += 1
        if not keep:
            raise ValueError(
                f"every booksort trial examined ({skipped}) is longer than the model's window of {window} tokens: "
                "restrict the conditions (e.g. --metadata booksort_excerpt_lengths=[250,1000]) or raise max_length"
            )
        self.n_skipped = skipped
        self.dataset[split] = docs.select(keep)

    def process_results(self, doc: dict[str, Any], results: list) -> dict[str, Any]:
        gold = LABELS[int(doc["label"])]
        out: dict[str, Any] = {}
        if self.OUTPUT_TYPE == "generate_until":
            answer = parse_label(results[0])
            out["invalid"] = float(answer is None)
        else:
            log_likelihoods = [ll for ll, _ in results]
            answer = LABELS[int(np.argmax(log_likelihoods))]
        correct = float(answer == gold)
        condition = condition_key(doc)
        out.update({name: (condition, correct) for name in _PAPER_ACC})
        for cell in factor_cells(doc):
            out[f"acc@{cell}"] = correct
            out.update({f"acc@{cell}{suffix}": correct for suffix in _INTERVAL_SUFFIXES})
        out["skipped"] = 0.0
        return out

    def aggregation(self) -> dict[str, Callable]:
        aggregations = _Aggregations(_PAPER_ACC)
        aggregations["skipped"] = lambda items: float(self.n_skipped)
        aggregations["invalid"] = total
        return aggregations

    def higher_is_better(self) -> dict[str, bool]:
        better = {name: not name.endswith("_p_above_chance") for name in _PAPER_ACC}
        return better | {"skipped": False, "invalid": False}

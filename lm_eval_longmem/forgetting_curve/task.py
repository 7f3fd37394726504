"""The `forgetting_curve` task: docs -> copy and LM requests -> per-length metrics and memory lengths.

Each doc (one sample of one length L, built by `data.build_dataset`) sends two
`loglikelihood_accuracy` requests, copy first: `[bos] S [bos] S` and `[bos] I [bos] S`, scoring
the later half of the second S. Its scores are `copy_acc` and `lm_acc` (share of scored tokens
the model predicts greedily) and `copy_ppl` and `lm_ppl` (perplexity of the same tokens, from the
summed log-probability each response also carries: the paper's section 5 puts perplexity beside
the curve); the task base turns them into `copy_acc@L`, ... and their `_ci_low`/`_ci_high`
(`stats.bounded_mean_interval` over samples for the accuracies, Student t for the perplexities)
for every tested length. Where S and I come from (`Sources`, section 3.4) is decided in
`data.py`; the task cuts or draws their tokens per doc.

The memory lengths need the whole curve, which no single doc has. So every doc also gives its
`CurvePoint` (length, sample, copy, LM) to the whole-run summaries in `CURVE_METRICS`, each of
which reads all points at once (`analysis.py`) and returns one number: the memory length, its
censoring flag (0/1) or a bootstrap interval bound. Lengths whose 2L+1 input positions the backend
cannot run are skipped before any request is built (`fit_reason`) and listed in `skip_reasons`;
memory lengths that reach the last tested length are then censored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

import numpy as np

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy
from lm_eval_longmem.backends.task import LoglikelihoodAccuracyTask
from lm_eval_longmem.common.cache import sha256_hex
from lm_eval_longmem.common.metric_names import ScoreSpec, cell
from lm_eval_longmem.common.task import Summary
from lm_eval_longmem.forgetting_curve import analysis
from lm_eval_longmem.forgetting_curve.data import (
    COPY,
    PREFIX_ROLE,
    Sources,
    doc_work,
    model_inputs,
    pair_sequences,
    position_limit,
    resolve_lengths,
    role_tokens,
    sweep_sources,
    vocabulary_ids,
)
from lm_eval_longmem.forgetting_curve.options import PREFIX, RANDOM, SweepOptions

log = logging.getLogger(f"lm_eval.{__name__}")


def _compact(ids: Any) -> Any:
    """A short stand-in for a token-id list in the logged samples: its length and a digest."""
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        return ids
    digest = sha256_hex(json.dumps([int(t) for t in ids]))[:16]
    return f"<{len(ids)} token ids sha256:{digest}>"


def perplexity(logprob: float, tokens: int) -> float:
    """exp of the mean negative log-probability per token (inf when a token had probability 0)."""
    return float(np.exp(-logprob / tokens))


class ForgettingCurveTask(LoglikelihoodAccuracyTask):
    """Liu et al.'s forgetting curve as one lm-eval task (see the module docstring)."""

    OPTIONS = SweepOptions
    PREFIX = PREFIX
    SCORES = (
        ScoreSpec("copy_acc", binary=False),
        ScoreSpec("lm_acc", binary=False),
        ScoreSpec("copy_ppl", binary=False, bounded=False, higher_is_better=False),
        ScoreSpec("lm_ppl", binary=False, bounded=False, higher_is_better=False),
    )
    """Shares of the scored tokens predicted greedily (fractions in [0, 1], not 0/1 per doc), and the
    perplexity of the same tokens (real, from 1 up, lower is better)."""
    RECORDED_METADATA = (f"{PREFIX}separator_used",)
    beyond_max_length = True
    """The paper's grid runs sequences of up to 2l+2 tokens, twice the claimed window l; lengths the
    model cannot physically run are skipped up front, never truncated."""

    @cached_property
    def sources(self) -> Sources:
        return sweep_sources(self.options)

    @cached_property
    def streams(self) -> dict[int, np.ndarray | None]:
        """The token stream each role's offsets point into (None for a random role; tokenized once, cached on disk)."""
        return self.sources.streams(self.metadata)

    @cached_property
    def vocabulary(self) -> np.ndarray | None:
        """The token ids random sources draw from (None when no role is random)."""
        return vocabulary_ids(self.tokenizer) if RANDOM in (self.sources.copy, self.sources.prefix) else None

    @cached_property
    def claimed(self) -> int | None:
        return resolve_lengths(self.options, self.metadata)[1]

    @cached_property
    def position_limit(self) -> tuple[int | None, str]:
        """(most input positions a sequence may use, why): decided once, not per doc."""
        return position_limit(self.options, self.metadata, self.claimed)

    @cached_property
    def separator(self) -> dict[str, Any]:
        """The token the sequences use as [bos] and where it came from ("option", "bos", or "eos" for a
        tokenizer without BOS): recorded in the results' config metadata as `forgetting_curve_separator_used`."""
        sep = int(self.eval_docs[0]["separator_id"])
        source = "option" if self.options.separator is not None else "bos" if sep == self.tokenizer.bos_token_id else "eos"
        return {"id": sep, "token": self.tokenizer.convert_ids_to_tokens(sep), "source": source}

    def dump_config(self) -> dict:
        config = super().dump_config()
        config["metadata"] = {**(config.get("metadata") or {}), self.RECORDED_METADATA[0]: self.separator}
        return config

    def before_requests(self) -> None:
        """Say, before the sweep, how long the longest sequence is against the window and the backend limit
        (and which token stands for [bos] when the tokenizer has no BOS)."""
        if self.separator["source"] == "eos":
            log.warning(
                "forgetting_curve: the tokenizer has no BOS token, so its EOS token %r (id %d) stands for [bos] "
                "(recorded as %sseparator_used in the results' config metadata; choose another with --metadata %sseparator=TOKEN)",
                self.separator["token"], self.separator["id"], PREFIX, PREFIX,
            )  # fmt: skip
        longest = max(int(L) for L in self.eval_docs["length"])
        limit, why = self.position_limit
        window = self.window
        message = (
            "forgetting_curve: the longest length L=%d needs %d input positions; the model's window is %s "
            "tokens (%s), and the backend can run %s (%s)"
        )
        args = (longest, model_inputs(longest), window.tokens, window.source, limit if limit else "any length", why)
        if window.tokens is not None and model_inputs(longest) > window.tokens:
            log.warning(message, *args)
        else:
            log.info(message, *args)

    def fit_reason(self, doc: dict[str, Any]) -> str:
        limit, why = self.position_limit
        if limit is not None and model_inputs(int(doc["length"])) > limit:
            return f"its {model_inputs(int(doc['length']))} input positions exceed {limit} ({why})"
        return ""

    def skip_cell(self, doc: dict[str, Any]) -> str:
        return cell(int(doc["length"]))

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        return (cell(int(doc["length"])),)

    def doc_work(self, doc: dict[str, Any]) -> int:
        return doc_work(doc, self.position_limit[0])

    def accuracy_requests(self, doc: dict) -> list[tuple[np.ndarray, np.ndarray]]:
        """Copy then LM: ([bos] S [bos] S[:L//2], S[L//2:]) and ([bos] I [bos] S[:L//2], S[L//2:])."""
        s, i = (self.tokens(doc, role) for role in (COPY, PREFIX_ROLE))
        pair = pair_sequences(s, i, doc["separator_id"])
        return [pair.copy, pair.lm]

    def tokens(self, doc: dict[str, Any], role: int) -> np.ndarray:
        """S or I of one doc, after checking that its stream is the one the docs were built from."""
        stream = self.streams[role]
        if stream is not None:
            key = "corpus_tokens" if "corpus_tokens" in doc else ("copy_tokens" if role == COPY else "prefix_tokens")
            if len(stream) != doc[key]:
                raise ValueError(
                    f"the corpus has {len(stream)} tokens but the docs were built from {doc[key]}: "
                    "the corpus changed between building and running"
                )
        return role_tokens(doc, self.sources, role, stream, self.vocabulary)

    def score(self, doc: dict[str, Any], results: list[TokenAccuracy]) -> dict[str, float]:
        """`copy_acc` and `lm_acc`: the share of the scored half predicted greedily; `copy_ppl` and
        `lm_ppl`: the perplexity of that half, from the summed log-probability the same requests return."""
        (copy_bits, copy_logprob), (lm_bits, lm_logprob) = results
        for bits in (copy_bits, lm_bits):
            if len(bits) != doc["scored"]:
                raise ValueError(f"expected {doc['scored']} scored tokens, the backend returned {len(bits)}")
        return {
            "copy_acc": copy_bits.count("1") / len(copy_bits),
            "lm_acc": lm_bits.count("1") / len(lm_bits),
            "copy_ppl": perplexity(copy_logprob, len(copy_bits)),
            "lm_ppl": perplexity(lm_logprob, len(lm_bits)),
        }

    def summary_item(self, doc: dict[str, Any], scores: dict[str, float]) -> list:
        return [int(doc["length"]), int(doc["sample"]), scores["copy_acc"], scores["lm_acc"]]

    def curve(self, points: Sequence[Sequence[Any]]) -> analysis.Curve:
        """The measured curve, with the lengths skipped in this run and the claimed window."""
        curve = analysis.curve_from_points(analysis.CurvePoint(*p[:4]) for p in points)
        return replace(curve, skipped=tuple(sorted(int(L) for L in self.skips)), claimed=self.claimed)

    def summaries(self) -> dict[str, Summary]:
        """Memory lengths, their censoring flags and bootstrap bounds, and the claimed window."""

        built: dict[int, analysis.Curve] = {}
        intervals: dict[str, tuple[int, int] | None] = {}

        def on_curve(fn: Callable[[analysis.Curve], Any]) -> Callable[[Sequence[Any]], Any]:
            def summary(points: Sequence[Any]) -> Any:
                if id(points) not in built:  # one curve (and one bootstrap per criterion) for all summaries
                    built.clear()
                    intervals.clear()
                    built[id(points)] = self.curve(points)
                return fn(built[id(points)])

            return summary

        def bound(criterion: analysis.Criterion, which: int) -> Callable[[analysis.Curve], int | None]:
            def fn(curve: analysis.Curve) -> int | None:
                if criterion not in intervals:
                    intervals[criterion] = analysis.memory_interval(curve, criterion, seed=0)  # fixed: same samples, same interval
                interval = intervals[criterion]
                return None if interval is None else interval[which]

            return fn

        out: dict[str, Summary] = {}
        for c in ("fine", "coarse"):
            out[f"{c}_memory_length"] = (on_curve(lambda curve, c=c: analysis.curve_memory(curve, c)[0]), True)
            out[f"{c}_memory_censored"] = (on_curve(lambda curve, c=c: int(analysis.curve_memory(curve, c)[1])), None)
            out[f"{c}_memory_length_low"] = (on_curve(bound(c, 0)), True)
            out[f"{c}_memory_length_high"] = (on_curve(bound(c, 1)), True)
        out["claimed_length"] = (lambda points: self.claimed, None)
        return out

    def apply_filters(self) -> None:
        """After the model has answered: shorten the logged token-id arguments (keeps `--log_samples` small).

        The harness logs every request's arguments verbatim; ours are 2L+2 token ids per sequence.
        The doc (offsets into the corpus stream) already says exactly which tokens were sent.
        """
        super().apply_filters()
        for instance in self.instances:
            if instance.request_type == OUTPUT_TYPE:
                instance.arguments = tuple(_compact(arg) for arg in instance.arguments)

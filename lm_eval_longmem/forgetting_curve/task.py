"""The `forgetting_curve` task: docs -> copy and LM requests -> per-length metrics and memory lengths.

Each doc (one sample of one length L, built by `data.build_dataset`) sends two
`loglikelihood_accuracy` requests, copy first: `[bos] S [bos] S` and `[bos] I [bos] S`, scoring
the later half of the second S. Its scores are `copy_acc` and `lm_acc` (share of the `scored`
tokens the model predicts greedily) and `copy_ppl` and `lm_ppl` (perplexity of the same tokens,
from the summed log-probability each response also carries: the paper's section 5 puts perplexity
beside the curve); the task base turns them into `copy_acc@L`, ... and their `_ci_low`/`_ci_high`
for every tested length (`stats.share_interval` over samples for the accuracies, with the scored
tokens as units; `stats.log_mean_interval` for the perplexities, whose per-length value is the
geometric mean). Where S and I come from (`Sources`, section 3.4) is decided in
`data.py`; the task cuts or draws their tokens per doc.

The memory lengths need the whole curve, which no single doc has. So every doc also gives its
`Point` (length, sample, copy and LM accuracy) to `summarize`, which builds the curve from all
points once (`analysis.py`) and gives each memory length, its censoring flag (0/1) and the bounds of
its bootstrap interval, and the claimed window (names from `scores.py`). Lengths whose 2L+1 input positions
the backend cannot run are skipped before any request is built (`fit_reason`) and listed in `skip_reasons`;
memory lengths that reach the last tested length are then censored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, compact_ids
from lm_eval_longmem.backends.task import LoglikelihoodAccuracyTask
from lm_eval_longmem.common.metric_names import CI_HIGH, CI_LOW, cell
from lm_eval_longmem.forgetting_curve import analysis
from lm_eval_longmem.forgetting_curve.data import (
    COPY,
    PREFIX_ROLE,
    AuthorsDraw,
    Sources,
    authors_draws,
    authors_random_tokens,
    doc_work,
    model_inputs,
    pair_sequences,
    position_limit,
    resolve_lengths,
    role_tokens,
    running_lengths,
    sweep_sources,
    vocabulary_ids,
)
from lm_eval_longmem.forgetting_curve.options import AUTHORS, NAME, PREFIX, RANDOM, SweepOptions
from lm_eval_longmem.forgetting_curve.scores import (
    CLAIMED_LENGTH,
    COPY_ACC,
    COPY_PPL,
    LM_ACC,
    LM_PPL,
    SCORED,
    SCORES,
    as_written,
    memory_censored,
    memory_length,
)

log = logging.getLogger(f"lm_eval.{__name__}")


class Point(NamedTuple):
    """What one doc gives the memory lengths: its point of the curve."""

    length: int
    """L (tokens of S)."""
    sample: int
    """The sample's index at that length (the curve pairs copy and LM accuracies by it)."""
    copy_acc: float
    lm_acc: float


def _listed(numbers: Any) -> str:
    return ", ".join(str(n) for n in numbers)


def perplexity(logprob: float, tokens: int) -> float:
    """exp of the mean negative log-probability per token (inf when a token had probability 0)."""
    return float(np.exp(-logprob / tokens))


def short_curve_reason(short: dict[str, tuple[int, int]]) -> str:
    """Why the memory lengths of a curve with short lengths (`LongmemTask.short_cells`) are null, in one line."""
    shown = sorted(short.items(), key=lambda item: int(item[0]))
    listed = "; ".join(f"{length}: {scored} of {expected}" for length, (scored, expected) in shown[:6])
    more = f"; {len(shown) - 6} more" if len(shown) > 6 else ""
    return (
        f"{len(shown)} length(s) ran fewer samples than the sweep holds ({listed}{more}), and a memory length reads "
        "every sample of every length: run without --limit (or with every length's samples)"
    )


class ForgettingCurveTask(LoglikelihoodAccuracyTask):
    """Liu et al.'s forgetting curve as one lm-eval task (see the module docstring)."""

    OPTIONS = SweepOptions
    EVALUATION = NAME
    PREFIX = PREFIX
    SCORES = SCORES
    """Shares of the `SCORED` tokens predicted greedily (in [0, 1], not 0/1 per doc), and the
    perplexity of the same tokens (from 1 up, lower is better)."""
    ITEM = Point
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
    def authors_random(self) -> dict[tuple[int, int], AuthorsDraw]:
        """The authors' random sequence per (L, sample), when their protocol draws a random S (else empty)."""
        if self.options.protocol != AUTHORS or self.sources.copy != RANDOM:
            return {}
        lengths = running_lengths(resolve_lengths(self.options, self.metadata)[0], self.position_limit[0])
        return authors_draws(lengths, self.options.samples, self.options.seed, None)

    @cached_property
    def claimed(self) -> int | None:
        return resolve_lengths(self.options, self.metadata)[1]

    @cached_property
    def position_limit(self) -> tuple[int | None, str]:
        """(most input positions a sequence may use, why): decided once, not per doc."""
        return position_limit(self.options, self.metadata, self.claimed)

    @cached_property
    def separator(self) -> dict[str, Any]:
        """The token the sequences use as [bos] and where it came from ("option"; "authors", their hard-coded
        id 1; "bos"; or "eos" for a tokenizer without BOS): recorded in the results' config metadata as
        `forgetting_curve_separator_used`."""
        sep = int(self.eval_docs[0]["separator_id"])
        if self.options.separator is not None:
            source = "option"
        elif self.options.protocol == AUTHORS:
            source = "authors"
        else:
            source = "bos" if sep == self.tokenizer.bos_token_id else "eos"
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
        lengths = sorted({int(L) for L in self.eval_docs["length"]})
        limit, why = self.position_limit
        window = self.window
        runs = [L for L in lengths if limit is None or model_inputs(L) <= limit]
        skipped = [L for L in lengths if L not in runs]
        past = [L for L in runs if window.tokens is not None and model_inputs(L) > window.tokens]
        if past:
            can = (
                f"the backend runs up to {limit} input positions ({why})"
                if limit
                else f"the {window.backend} backend runs any length for this model (its positions have no fixed limit; memory is the limit)"
            )
            log.warning(
                "forgetting_curve: length(s) %s (%s input positions: 2L+1) exceed the model's claimed window of %d "
                "tokens (%s) and will run anyway, as the paper's grid intends (up to twice the window, to find where "
                "memory ends): %s. To keep every sequence within the window: --metadata %sbeyond_window=false (those "
                "lengths are then skipped and counted), or %smax_tokens=N, or other %slengths / %sclaimed_length",
                _listed(past), _listed(model_inputs(L) for L in past), window.tokens, window.source, can,
                PREFIX, PREFIX, PREFIX, PREFIX,
            )  # fmt: skip
        if skipped:
            log.warning(
                "forgetting_curve: length(s) %s will be skipped and counted, not run: their 2L+1 input positions exceed %s (%s)",
                _listed(skipped), limit, why,
            )  # fmt: skip
        log.info(
            "forgetting_curve: lengths %s run, up to %d input positions; claimed window %s tokens (%s)",
            _listed(runs), model_inputs(runs[-1]) if runs else 0, window.tokens, window.source,
        )  # fmt: skip

    def fit_reason(self, doc: dict[str, Any]) -> str:
        limit, why = self.position_limit
        if limit is not None and model_inputs(int(doc["length"])) > limit:
            return f"its {model_inputs(int(doc['length']))} input positions exceed {limit} ({why})"
        return ""

    def skip_cell(self, doc: dict[str, Any]) -> str:
        return cell(int(doc["length"]))

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        return (cell(int(doc["length"])),)

    def sweep_cells(self) -> list[str]:
        """Every length of the sweep, shortest first (read from the dataset's `length` column)."""
        return [cell(length) for length in sorted({int(n) for n in self.eval_docs["length"]})]

    def doc_work(self, doc: dict[str, Any]) -> int:
        return doc_work(doc, self.position_limit[0])

    def accuracy_requests(self, doc: dict) -> list[tuple[np.ndarray, np.ndarray]]:  # type: ignore[override]  # token arrays: numpy's stubs do not call an array a Sequence[int]
        """Copy then LM: ([bos] S [bos] S[:L//2], S[L//2:]) and ([bos] I [bos] S[:L//2], S[L//2:])."""
        s, i = (self.tokens(doc, role) for role in (COPY, PREFIX_ROLE))
        pair = pair_sequences(s, i, doc["separator_id"])
        return [pair.copy, pair.lm]

    def tokens(self, doc: dict[str, Any], role: int) -> np.ndarray:
        """S or I of one doc, after checking that its stream is the one the docs were built from."""
        if self.authors_random and self.sources.of(role) == RANDOM:
            return authors_random_tokens(
                self.authors_random[int(doc["length"]), int(doc["sample"])], int(doc["length"])
            )[role - 1]
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
        `lm_ppl`: the perplexity of that half, from the summed log-probability the same requests return;
        `scored`: the tokens of that half."""
        (copy_bits, copy_logprob), (lm_bits, lm_logprob) = results
        for bits in (copy_bits, lm_bits):
            if len(bits) != doc["scored"]:
                raise ValueError(f"expected {doc['scored']} scored tokens, the backend returned {len(bits)}")
        return {
            COPY_ACC.name: copy_bits.count("1") / len(copy_bits),
            LM_ACC.name: lm_bits.count("1") / len(lm_bits),
            COPY_PPL.name: perplexity(copy_logprob, len(copy_bits)),
            LM_PPL.name: perplexity(lm_logprob, len(lm_bits)),
            SCORED: len(copy_bits),
        }

    def result_facts(self) -> dict[str, Any]:
        """Our facts, and whose sample construction the run used (`forgetting_curve_protocol`)."""
        return super().result_facts() | {"protocol": self.options.protocol}

    def summary_item(self, doc: dict[str, Any], scores: dict[str, float]) -> Point:
        return Point(int(doc["length"]), int(doc["sample"]), scores[COPY_ACC.name], scores[LM_ACC.name])

    def curve(self, points: Sequence[Point]) -> analysis.Curve:
        """The measured curve, with the lengths skipped in this run and the claimed window."""
        curve = analysis.curve_from_points(
            analysis.CurvePoint(p.length, p.sample, p.copy_acc, p.lm_acc) for p in points
        )
        return replace(curve, skipped=tuple(sorted(int(L) for L in self.skips)), claimed=self.claimed)

    def summarize(self, items: Sequence[Point]) -> dict[str, float | None]:
        """Memory lengths, their censoring flags and bootstrap bounds (a fixed seed: same samples, same
        interval), and the claimed window; one curve for all of them.

        A memory length reads the whole curve, so when a length ran fewer samples than the sweep holds (a
        `--limit`, `--samples`, a partial merge: `short_cells`) it is null, with its censoring flag and
        bounds, and the reason goes to `null_reasons`."""
        curve = self.curve(items)
        short = self.short_cells()
        why = short_curve_reason(short) if short else ""
        out: dict[str, float | None] = {}
        for criterion in analysis.CRITERIA:
            name = memory_length(criterion)
            length, censored = analysis.curve_memory(curve, criterion)
            interval = None if short else analysis.memory_interval(curve, criterion, seed=0)
            out[name] = None if short else length
            out[memory_censored(criterion)] = None if short else int(censored)
            for stat, bound in zip((CI_LOW, CI_HIGH), interval or (None, None)):
                out[as_written(memory_length(criterion, stat))] = bound
            if short:
                self.null_reasons[name] = why
        out[CLAIMED_LENGTH] = self.claimed
        return out

    def summary_directions(self) -> dict[str, bool | None]:
        out: dict[str, bool | None] = {}
        for criterion in analysis.CRITERIA:
            out[memory_length(criterion)] = True
            out[memory_censored(criterion)] = None
            out.update({as_written(memory_length(criterion, stat)): True for stat in (CI_LOW, CI_HIGH)})
        return out | {CLAIMED_LENGTH: None}

    def apply_filters(self) -> None:
        """After the model has answered: shorten the logged token-id arguments (keeps `--log_samples` small).

        The harness logs every request's arguments verbatim; ours are 2L+2 token ids per sequence.
        The doc (offsets into the corpus stream) already says exactly which tokens were sent.
        """
        super().apply_filters()
        for instance in self.instances:
            if instance.request_type == OUTPUT_TYPE:
                instance.arguments = tuple(compact_ids(arg) for arg in instance.arguments)

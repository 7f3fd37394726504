"""The `forgetting_curve` task: docs -> copy and LM requests -> per-length metrics and memory lengths.

Each doc (one sample of one length L, built by `data.build_dataset`) sends two
`loglikelihood_accuracy` requests, copy first: `[bos] S [bos] S` and `[bos] I [bos] S`, scoring
the later half of the second S. `process_results` reports, for that doc's length only,
`copy_acc@L` and `lm_acc@L` (share of scored tokens the model predicts greedily), averaged over
samples by the harness (with its usual stderr).

The memory lengths need the whole curve, which no single doc has. So every doc also reports
its `CurvePoint` (length, sample, copy, LM) under the names in `CURVE_METRICS`, and each of those
names has an aggregation that reads all points at once (`analysis.py`) and returns one number:
the memory length, its censoring flag or a bootstrap interval bound. The claimed window and the
skipped lengths, which every doc carries, are reported once (`SWEEP_FACTS`). The harness computes stderr only for aggregations it knows (mean, median, ...),
so these report "N/A" there and its stderr machinery is untouched; their uncertainty is the
`_low`/`_high` bootstrap interval.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lm_eval.api.metrics import mean

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy
from lm_eval_longmem.backends.task import LoglikelihoodAccuracyTask
from lm_eval_longmem.forgetting_curve import analysis
from lm_eval_longmem.forgetting_curve.data import Spans, SweepOptions, corpus_stream, sequences

COPY = analysis.COPY_PREFIX
LM = analysis.LM_PREFIX


def _memory_value(criterion: analysis.Criterion) -> Callable[[Sequence[analysis.CurvePoint]], int]:
    def aggregate(points: Sequence[analysis.CurvePoint]) -> int:
        return analysis.curve_memory(analysis.curve_from_points(points), criterion)[0]

    aggregate.__name__ = f"{criterion}_memory_length"
    return aggregate


def _memory_censored(criterion: analysis.Criterion) -> Callable[[Sequence[analysis.CurvePoint]], bool]:
    def aggregate(points: Sequence[analysis.CurvePoint]) -> bool:
        return analysis.curve_memory(analysis.curve_from_points(points), criterion)[1]

    aggregate.__name__ = f"{criterion}_memory_censored"
    return aggregate


def _memory_bound(criterion: analysis.Criterion, bound: int) -> Callable[[Sequence[analysis.CurvePoint]], int | None]:
    def aggregate(points: Sequence[analysis.CurvePoint]) -> int | None:
        curve = analysis.curve_from_points(points)
        interval = analysis.memory_interval(curve, criterion, seed=0)  # fixed: same samples, same interval
        return None if interval is None else interval[bound]

    aggregate.__name__ = f"{criterion}_memory_length_{('low', 'high')[bound]}"
    return aggregate


def _same_for_all(values: Sequence[Any]) -> Any:
    """A sweep-wide fact every doc carries (claimed window, skipped lengths): its one value."""
    distinct = set(values)
    if len(distinct) != 1:
        raise ValueError(f"docs of one forgetting-curve sweep disagree: {sorted(map(str, distinct))}")
    return values[0]


def _skipped_text(skipped: Sequence[int]) -> str:
    return ",".join(str(L) for L in skipped) if skipped else "none"


CURVE_METRICS: dict[str, tuple[Callable[[Sequence[Any]], Any], bool | None]] = {
    "fine_memory_length": (_memory_value("fine"), True),
    "fine_memory_censored": (_memory_censored("fine"), None),
    "fine_memory_length_low": (_memory_bound("fine", 0), True),
    "fine_memory_length_high": (_memory_bound("fine", 1), True),
    "coarse_memory_length": (_memory_value("coarse"), True),
    "coarse_memory_censored": (_memory_censored("coarse"), None),
    "coarse_memory_length_low": (_memory_bound("coarse", 0), True),
    "coarse_memory_length_high": (_memory_bound("coarse", 1), True),
}
"""Whole-curve results: name -> (aggregation over every doc's CurvePoint, higher_is_better)."""

SWEEP_FACTS: dict[str, tuple[Callable[[Sequence[Any]], Any], bool | None]] = {
    "claimed_length": (_same_for_all, None),
    "skipped_lengths": (_same_for_all, None),
}
"""Sweep-wide facts reported once: name -> (aggregation over every doc's value, higher_is_better)."""


def _compact(ids: Any) -> Any:
    """A short stand-in for a token-id list in the logged samples: its length and a digest."""
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        return ids
    digest = hashlib.sha256(json.dumps([int(t) for t in ids]).encode()).hexdigest()[:16]
    return f"<{len(ids)} token ids sha256:{digest}>"


class ForgettingCurveTask(LoglikelihoodAccuracyTask):
    """Liu et al.'s forgetting curve as one lm-eval task (see the module docstring)."""

    beyond_max_length = True
    """The paper's grid runs sequences of up to 2l+2 tokens, twice the claimed window l; lengths the
    model cannot physically run are skipped up front by the data builder, never truncated."""

    _stream: np.ndarray | None = None

    def stream(self) -> np.ndarray:
        """The corpus token stream the docs' offsets point into (tokenized once, cached on disk)."""
        if self._stream is None:
            metadata = self.config.metadata or {}
            self._stream = corpus_stream(SweepOptions.from_metadata(metadata), metadata)
        return self._stream

    def accuracy_requests(self, doc: dict) -> list[tuple[np.ndarray, np.ndarray]]:
        """Copy then LM: ([bos] S [bos] S[:L//2], S[L//2:]) and ([bos] I [bos] S[:L//2], S[L//2:])."""
        stream = self.stream()
        if len(stream) != doc["corpus_tokens"]:
            raise ValueError(
                f"the corpus has {len(stream)} tokens but the docs were built from {doc['corpus_tokens']}: "
                "the corpus changed between building and running; rerun without --cache_requests"
            )
        pair = sequences(stream, doc["separator_id"], doc["length"], Spans(doc["s_start"], doc["i_start"]))
        return [pair.copy, pair.lm]

    def process_results(self, doc: dict, results: list[TokenAccuracy]) -> dict[str, Any]:
        """`copy_acc@L`, `lm_acc@L` for this doc's L, its CurvePoint under every CURVE_METRICS name, the sweep facts."""
        (copy_bits, _), (lm_bits, _) = results
        for bits in (copy_bits, lm_bits):
            if len(bits) != doc["scored"]:
                raise ValueError(f"expected {doc['scored']} scored tokens, the backend returned {len(bits)}")
        L = doc["length"]
        copy = copy_bits.count("1") / len(copy_bits)
        lm = lm_bits.count("1") / len(lm_bits)
        point = analysis.CurvePoint(L, doc["sample"], copy, lm)
        return {
            f"{COPY}{L}": copy,
            f"{LM}{L}": lm,
            **{name: point for name in CURVE_METRICS},
            "claimed_length": doc["claimed_length"],
            "skipped_lengths": _skipped_text(doc["skipped_lengths"]),
        }

    def _lengths(self) -> list[int]:
        return sorted({int(L) for L in self.eval_docs["length"]})

    def aggregation(self) -> dict[str, Callable]:
        """Mean for every per-length accuracy; whole-curve functions for the memory lengths."""
        per_length = {f"{prefix}{L}": mean for L in self._lengths() for prefix in (COPY, LM)}
        return per_length | {name: fn for name, (fn, _) in (CURVE_METRICS | SWEEP_FACTS).items()}

    def higher_is_better(self) -> dict[str, bool | None]:
        per_length = {f"{prefix}{L}": True for L in self._lengths() for prefix in (COPY, LM)}
        return per_length | {name: better for name, (_, better) in (CURVE_METRICS | SWEEP_FACTS).items()}

    def apply_filters(self) -> None:
        """After the model has answered: shorten the logged token-id arguments (keeps `--log_samples` small).

        The harness logs every request's arguments verbatim; ours are 2L+2 token ids per sequence.
        The doc (offsets into the corpus stream) already says exactly which tokens were sent.
        """
        super().apply_filters()
        for instance in self.instances:
            if instance.request_type == OUTPUT_TYPE:
                instance.arguments = tuple(_compact(arg) for arg in instance.arguments)

"""Forgetting-curve statistics: per-length accuracy, memory lengths, censoring and bootstrap intervals.

Definitions (Liu et al., section 3.3 footnote 8 and Table 3):
  * fine-grained memory length: the largest tested L whose mean copy accuracy exceeds 99%;
  * coarse-grained memory length: the largest tested L whose mean copy accuracy exceeds the mean
    LM accuracy by more than 1 point (0.01).
A length is censored (">L", as in the paper's Table 3) when the condition still holds at the last
tested length: the sweep stopped, not the memory. Lengths the backend could not run are skipped
before the run; the last *tested* length is then below the grid's end and the result says so.
No length qualifies -> 0 (the paper writes 0 for Llama-2-base's fine length).

Intervals: per length, the share interval of each accuracy over samples (Wilson on the
Korn-Graubard effective size, the scored tokens as units), a Student-t interval of the paired
difference and a paired t-test p-value (as the original tool's `p_value`); for each memory length,
a percentile bootstrap interval that resamples the samples of every length independently; all from
`lm_eval_longmem.common.stats`. One sample per length gives null bounds ("n=1"), never [m, m]; so does a
memory length the samples bound from below only (censored, or resamples censored at the interval's upper
end: `bounded`).

The files a curve is read from (the original tool's JSON, lm_eval's samples and results files)
are read by its rim (`rim/reader.py`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from lm_eval_longmem.common.stats import Interval, bootstrap_interval, mean_interval, paired_test, share_interval
from lm_eval_longmem.forgetting_curve.scores import COPY_ACC, LM_ACC

Criterion = Literal["fine", "coarse"]
CRITERIA: tuple[Criterion, ...] = ("fine", "coarse")
"""The two memory lengths, in the order results report them."""
FINE_THRESHOLD = 0.99
"""Fine-grained memory: mean copy accuracy strictly above this."""
COARSE_MARGIN = 0.01
"""Coarse-grained memory: mean copy accuracy minus mean LM accuracy strictly above this."""
_EPS = 1e-9
"""Float slack: a mean of token ratios exactly at a threshold (0.30 - 0.29) must not count as above it."""
COPY = COPY_ACC.name
LM = LM_ACC.name


def scored_tokens(length: int) -> int:
    """Tokens scored at length L: the later half of the second S, L - L//2 (as the authors' tool scores)."""
    return int(length) - int(length) // 2


class CurvePoint(NamedTuple):
    """One sample of one length: what a doc contributes to the memory-length aggregations."""

    length: int
    sample: int
    copy: float
    lm: float
    skipped: tuple[int, ...] = ()
    claimed: int | None = None


@dataclass(frozen=True)
class Curve:
    """A forgetting curve as measured: per-sample accuracies, or only per-length means."""

    lengths: tuple[int, ...]
    """Tested lengths L (tokens of S), ascending."""
    copy: dict[int, np.ndarray]
    """Per length: copy accuracy of each sample (ordered by sample index), or the mean alone."""
    lm: dict[int, np.ndarray]
    """Per length: LM accuracy of each sample, paired with `copy` by position."""
    skipped: tuple[int, ...] = ()
    """Lengths of the sweep that the backend could not run (never tested)."""
    claimed: int | None = None
    """The model's claimed context window, when known."""
    intervals: dict[int, tuple[Interval, Interval]] = field(default_factory=dict)
    """Per length (copy, LM) 95% intervals as a run reported them, only for curves read from means (results JSON)."""
    reported: dict[str, Any] = field(default_factory=dict)
    """Memory lengths as the run reported them (results JSON): `<criterion>_length`, `_censored`, `_interval`."""
    counts: dict[int, int] = field(default_factory=dict)
    """Per length, the samples behind a means-only curve's values (when the run says)."""

    @property
    def per_sample(self) -> bool:
        """True when every length holds per-sample values (so intervals and tests can be computed)."""
        return not self.intervals


class LengthStats(NamedTuple):
    """Statistics of one tested length."""

    length: int
    n: int
    copy: Interval
    lm: Interval
    copy_std: float | None
    lm_std: float | None
    difference: Interval
    p_value: float | None


class MemoryLength(NamedTuple):
    """A memory length read off the curve."""

    length: int
    """Largest tested L where the condition holds (0 if none)."""
    censored: bool
    """True when the condition still holds at the last tested length (report as ">L")."""
    interval: tuple[int, int] | None
    """Percentile bootstrap interval over samples, None when some length has fewer than 2 samples."""
    reason: str
    """One line saying why the value is what it is."""

    @property
    def label(self) -> str:
        """The value as the paper's Table 3 writes it: "4134" or ">9293"."""
        return f">{self.length}" if self.censored else str(self.length)


class Summary(NamedTuple):
    """Everything `forgetting-curve summarize` prints."""

    per_length: list[LengthStats]
    fine: MemoryLength
    coarse: MemoryLength
    skipped: tuple[int, ...]
    claimed: int | None


def holds(criterion: Criterion, copy_mean: float, lm_mean: float) -> bool:
    """Whether a length counts towards the memory length of `criterion`."""
    if criterion == "fine":
        return bool(copy_mean > FINE_THRESHOLD + _EPS)
    return bool(copy_mean - lm_mean > COARSE_MARGIN + _EPS)


def memory_length(lengths: Sequence[int], ok: Sequence[bool]) -> tuple[int, bool]:
    """(largest length where `ok`, censored?) for ascending `lengths`; (0, False) when none is ok."""
    best = 0
    for length, good in zip(lengths, ok, strict=True):
        if good:
            best = length
    censored = bool(lengths) and bool(ok[-1])
    return best, censored


def curve_memory(curve: Curve, criterion: Criterion) -> tuple[int, bool]:
    """(memory length, censored?) of `curve` under `criterion`, from the per-length means."""
    ok = [holds(criterion, curve.copy[L].mean(), curve.lm[L].mean()) for L in curve.lengths]
    return memory_length(curve.lengths, ok)


def _reason(criterion: Criterion, value: int, censored: bool, curve: Curve) -> str:
    what = (
        f"mean copy accuracy > {FINE_THRESHOLD}"
        if criterion == "fine"
        else f"mean copy - LM accuracy > {COARSE_MARGIN}"
    )
    if not curve.lengths:
        return "no length was tested"
    last = curve.lengths[-1]
    if censored:
        why = f"{what} still holds at the last tested length {last}"
        longer = [L for L in curve.skipped if L > last]
        if longer:
            why += f"; longer lengths {longer} were skipped (the backend cannot run them)"
        return why + f": memory length > {last}"
    if value == 0:
        return f"{what} holds at no tested length"
    return f"{what} holds up to {value} and not at the last tested length {last}"


def memory_interval(
    curve: Curve, criterion: Criterion, *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[int, int] | None:
    """Percentile bootstrap interval of a memory length, resampling each length's samples independently.

    Copy and LM accuracies of one sample stay paired. None when a length has fewer than 2 samples, and
    when the samples bound the memory length from below only (`bounded`).
    """
    if not curve.lengths or not curve.per_sample or min(len(curve.copy[L]) for L in curve.lengths) < 2:
        return None
    if curve_memory(curve, criterion)[1]:
        return None
    lengths = np.asarray(curve.lengths)
    # one group per length, one row (copy, LM) per sample
    groups = [np.column_stack([curve.copy[L], curve.lm[L]]) for L in curve.lengths]

    def statistic(*resampled: np.ndarray) -> np.ndarray:
        # resampled[j]: shape (..., n_j, 2); per-length means -> shape (..., n_lengths)
        copy = np.stack([g[..., 0].mean(axis=-1) for g in resampled], axis=-1)
        lm = np.stack([g[..., 1].mean(axis=-1) for g in resampled], axis=-1)
        ok = copy > FINE_THRESHOLD + _EPS if criterion == "fine" else copy - lm > COARSE_MARGIN + _EPS
        # largest length where ok: position of the last True, 0 when none
        last = ok.shape[-1] - 1 - np.argmax(ok[..., ::-1], axis=-1)
        return np.where(ok.any(axis=-1), lengths[last], 0).astype(float)

    low, high = bootstrap_interval(groups, statistic, level=level, n_resamples=n_resamples, seed=seed)
    return bounded((int(round(low)), int(round(high))), curve, censored=False)


def bounded(interval: tuple[int, int] | None, curve: Curve, *, censored: bool) -> tuple[int, int] | None:
    """`interval`, or None when the samples cannot give it: the memory length is censored (">L": the
    condition still holds at the last tested length, so no upper bound exists), or the interval's upper
    end is the last tested length (the resamples there are censored: their memory length is ">L", not L).
    Never a point interval [L, L] beside a ">L"."""
    if interval is None or censored or not curve.lengths or interval[1] >= curve.lengths[-1]:
        return None
    return interval


def length_stats(length: int, copy: np.ndarray, lm: np.ndarray, *, level: float = 0.95) -> LengthStats:
    """Mean, spread, interval, paired difference and paired t-test of one length's samples.

    Accuracies: `stats.share_interval` with each sample's `scored_tokens(length)` as units (null
    bounds and standard deviations for one sample). Difference: Student t (null bounds for one sample, or when every
    sample's difference is the same), clipped to [-1, 1], the range of a difference of two shares.
    """
    n = len(copy)
    p_value = paired_test(copy, lm) if n >= 2 else None
    units = [scored_tokens(length)] * n
    diff = mean_interval(np.asarray(copy) - np.asarray(lm), level)
    return LengthStats(
        length=length,
        n=n,
        copy=share_interval(copy, units, level),
        lm=share_interval(lm, units, level),
        copy_std=float(np.std(copy)) if n >= 2 else None,  # population std, as the tool; none of one sample
        lm_std=float(np.std(lm)) if n >= 2 else None,
        difference=Interval(diff.estimate, max(-1.0, diff.low), min(1.0, diff.high))
        if not math.isnan(diff.low)
        else diff,
        p_value=None if p_value is None or math.isnan(p_value) else p_value,
    )


def summarize(curve: Curve, *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Summary:
    """All statistics of a curve (see the module docstring)."""
    if curve.per_sample:
        per_length = [length_stats(L, curve.copy[L], curve.lm[L], level=level) for L in curve.lengths]
    else:
        per_length = []
        for L in curve.lengths:
            c, m = float(curve.copy[L].mean()), float(curve.lm[L].mean())
            unknown = (Interval(c, math.nan, math.nan), Interval(m, math.nan, math.nan))
            copy_iv, lm_iv = curve.intervals.get(L, unknown)
            per_length.append(
                LengthStats(
                    L,
                    curve.counts.get(L, 0),
                    copy_iv,
                    lm_iv,
                    None,
                    None,
                    Interval(c - m, math.nan, math.nan),
                    None,
                )
            )
    found = {}
    for criterion in CRITERIA:
        value, censored = curve_memory(curve, criterion)
        if not curve.per_sample and f"{criterion}_length" in curve.reported:  # as the run computed it from its samples
            value, censored = curve.reported[f"{criterion}_length"], curve.reported[f"{criterion}_censored"]
        interval = memory_interval(curve, criterion, level=level, n_resamples=n_resamples, seed=seed)
        if interval is None and curve.reported.get(f"{criterion}_interval"):  # files written before the rule above
            interval = bounded(tuple(curve.reported[f"{criterion}_interval"]), curve, censored=censored)
        found[criterion] = MemoryLength(value, censored, interval, _reason(criterion, value, censored, curve))
    return Summary(per_length, found["fine"], found["coarse"], curve.skipped, curve.claimed)


def _clean(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def summary_json(summary: Summary) -> dict[str, Any]:
    """A JSON-ready dict of `summary` (NaN becomes null)."""

    def interval(iv: Interval) -> dict[str, float | None]:
        return {"mean": _clean(iv.estimate), "low": _clean(iv.low), "high": _clean(iv.high)}

    def memory(m: MemoryLength) -> dict[str, Any]:
        return {
            "length": m.length,
            "censored": m.censored,
            "label": m.label,
            "interval": list(m.interval) if m.interval else None,
            "reason": m.reason,
        }

    return {
        "fine_memory_length": memory(summary.fine),
        "coarse_memory_length": memory(summary.coarse),
        "claimed_length": summary.claimed,
        "skipped_lengths": list(summary.skipped),
        "lengths": [
            {
                "length": s.length,
                "samples": s.n,
                COPY: interval(s.copy),
                LM: interval(s.lm),
                "copy_std": _clean(s.copy_std),
                "lm_std": _clean(s.lm_std),
                "difference": interval(s.difference),
                "p_value": _clean(s.p_value),
            }
            for s in summary.per_length
        ],
    }


# ---- building a Curve --------------------------------------------------------------------------


def curve_from_points(points: Iterable[CurvePoint]) -> Curve:
    """A per-sample curve from doc-level points (in any order; sorted by length, then sample)."""
    grouped: dict[int, list[CurvePoint]] = defaultdict(list)
    skipped: set[int] = set()
    claimed = None
    for p in points:
        p = CurvePoint(*p)  # lists from JSON become points too
        grouped[int(p.length)].append(p)
        skipped.update(int(L) for L in p.skipped or ())
        claimed = claimed if p.claimed is None else int(p.claimed)
    lengths = tuple(sorted(grouped))
    copy, lm = {}, {}
    for L in lengths:
        rows = sorted(grouped[L], key=lambda p: p.sample)
        copy[L] = np.array([p.copy for p in rows], dtype=float)
        lm[L] = np.array([p.lm for p in rows], dtype=float)
    return Curve(lengths, copy, lm, tuple(sorted(skipped)), claimed)

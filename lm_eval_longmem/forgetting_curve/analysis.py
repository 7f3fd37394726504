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
`lm_eval_longmem.common.stats`. One sample per length gives null bounds ("n=1"), never [m, m].

Readers turn the three file kinds into one `Curve`: the original tool's JSON (a list of
per-length records with `copy_accs`/`lm_accs`), lm_eval's `samples_*.jsonl` (per-doc scores),
and lm_eval's `results_*.json` (per-length means, with the samples file beside it when present).
`stored_summary` gives what the task stored in a results file (per-length intervals, memory
lengths with their bootstrap intervals) without recomputing anything; `report` and `plot` use it.
Metric names are read through `common/metric_names.py`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.results import (
    Run,
    evaluation_of,
    facts,
    find_results_file,
    read_json,
    read_samples_file,
    skip_reasons,
    task_metrics,
)
from lm_eval_longmem.common.stats import Interval, bootstrap_interval, mean_interval, paired_test, share_interval

Criterion = Literal["fine", "coarse"]
FINE_THRESHOLD = 0.99
"""Fine-grained memory: mean copy accuracy strictly above this."""
COARSE_MARGIN = 0.01
"""Coarse-grained memory: mean copy accuracy minus mean LM accuracy strictly above this."""
_EPS = 1e-9
"""Float slack: a mean of token ratios exactly at a threshold (0.30 - 0.29) must not count as above it."""
COPY = "copy_acc"
LM = "lm_acc"


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

    Copy and LM accuracies of one sample stay paired. None when a length has fewer than 2 samples.
    """
    if not curve.lengths or not curve.per_sample or min(len(curve.copy[L]) for L in curve.lengths) < 2:
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
    return int(round(low)), int(round(high))


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
        difference=Interval(diff.estimate, max(-1.0, diff.low), min(1.0, diff.high)) if not math.isnan(diff.low) else diff,
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
    for criterion in ("fine", "coarse"):
        value, censored = curve_memory(curve, criterion)
        if not curve.per_sample and f"{criterion}_length" in curve.reported:  # as the run computed it from its samples
            value, censored = curve.reported[f"{criterion}_length"], curve.reported[f"{criterion}_censored"]
        interval = memory_interval(curve, criterion, level=level, n_resamples=n_resamples, seed=seed)
        if interval is None and curve.reported.get(f"{criterion}_interval"):
            interval = curve.reported[f"{criterion}_interval"]
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
                "copy_acc": interval(s.copy),
                "lm_acc": interval(s.lm),
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


def read_reference(records: list[dict[str, Any]], *, claimed: int | None = None) -> Curve:
    """A curve from the original forgetting-curve tool's result JSON (list of per-length records)."""
    points = []
    for record in records:
        copies, lms = record["copy_accs"], record["lm_accs"]
        if len(copies) != len(lms):
            raise ValueError(f"length {record['length']}: {len(copies)} copy vs {len(lms)} LM samples")
        points += [
            CurvePoint(int(record["length"]), k, float(c), float(m), (), claimed)
            for k, (c, m) in enumerate(zip(copies, lms, strict=True))
        ]
    return curve_from_points(points)


def is_reference(data: Any) -> bool:
    """True for the original tool's format: a list of records with `length`, `copy_accs`, `lm_accs`."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(r, dict) and {"length", "copy_accs", "lm_accs"} <= r.keys() for r in data)
    )


def read_samples(records: Iterable[dict[str, Any]]) -> Curve:
    """A curve from lm_eval's `samples_<task>_*.jsonl` records of our task (needs `--log_samples`)."""
    points = []
    for record in records:
        doc = record["doc"]
        L = int(doc["length"])
        if COPY in record:
            copy, lm = record[COPY], record[LM]
        else:  # written before the per-doc payload: one key per length
            copy, lm = record[metric_names.name(COPY, L)], record[metric_names.name(LM, L)]
        points.append(CurvePoint(L, int(doc["sample"]), float(copy), float(lm)))
    if not points:
        raise ValueError("no forgetting-curve samples in the file")
    return curve_from_points(points)


def forgetting_curve_task(results: dict[str, Any]) -> str | None:
    """Name of the (first) task in an lm_eval results dict that reports `copy_acc@L` metrics."""
    table = results.get("results")
    for name in table if isinstance(table, dict) else ():
        if evaluation_of(results, name) == "forgetting_curve":
            return name
    return None


def tested_lengths(metrics: dict[str, Any]) -> list[int]:
    """Every L with a `copy_acc@L` mean among metric names (canonical), ascending."""
    return sorted(int(c[0]) for c in metric_names.cells_of(metrics, COPY) if len(c) == 1 and c[0].isdigit())


def read_results(results: dict[str, Any], task: str | None = None) -> Curve:
    """A means-only curve from an lm_eval results dict: per-length means and intervals, skipped lengths,
    claimed window, samples per length and the memory lengths as the task reported them."""
    task = task or forgetting_curve_task(results)
    if task is None:
        raise ValueError("the results file holds no forgetting-curve metrics (copy_acc@L)")
    metrics = task_metrics(results, task)

    def number(score: str, *parts: int, stat: str = "") -> float:
        value = metric_names.number(metrics.get(metric_names.name(score, *parts, stat=stat)))
        return math.nan if value is None else value

    copy, lm, intervals = {}, {}, {}
    for L in tested_lengths(metrics):
        copy[L] = np.array([number(COPY, L)])
        lm[L] = np.array([number(LM, L)])
        copy_interval, lm_interval = (
            Interval(number(score, L), number(score, L, stat="_ci_low"), number(score, L, stat="_ci_high"))
            for score in (COPY, LM)
        )
        intervals[L] = (copy_interval, lm_interval)
    skipped = tuple(sorted(int(cell) for cell in skip_reasons(results, task)))
    claimed = metric_names.number(metrics.get("claimed_length"))
    reported: dict[str, Any] = {}
    for criterion in ("fine", "coarse"):
        length = metric_names.number(metrics.get(f"{criterion}_memory_length"))
        if length is not None:
            reported[f"{criterion}_length"] = int(length)
            reported[f"{criterion}_censored"] = bool(metric_names.number(metrics.get(f"{criterion}_memory_censored")))
        low = metric_names.number(metrics.get(f"{criterion}_memory_length_low"))
        high = metric_names.number(metrics.get(f"{criterion}_memory_length_high"))
        if low is not None and high is not None:
            reported[f"{criterion}_interval"] = (int(low), int(high))
    counts = {int(cell): int(n) for cell, n in (facts(results, task).get("docs_per_cell") or {}).items() if str(cell).isdigit()}
    return Curve(
        tuple(sorted(copy)),
        copy,
        lm,
        skipped,
        int(claimed) if claimed else None,
        intervals,
        reported,
        counts,
    )


def stored_summary(results: dict[str, Any], task: str | None = None, *, path: Path | None = None) -> Summary:
    """The curve's statistics as the task stored them in a results dict (nothing recomputed, no bootstrap).

    Samples per length come from the run's facts; for a file written before they were stored,
    from the samples file beside `path` when there is one.
    """
    task = task or forgetting_curve_task(results)
    curve = read_results(results, task)
    if not curve.counts and path is not None and task is not None:  # (read_results refused a None task)
        samples = Run(Path(path), results).samples_file(task)
        if samples is not None:
            lengths = [int(record["doc"]["length"]) for record in read_samples_file(samples)]
            curve = replace(curve, counts={L: lengths.count(L) for L in curve.lengths})
    return summarize(curve)


def is_samples(data: Any) -> bool:
    """True for lm_eval per-sample records (a list of dicts with a `doc`)."""
    return isinstance(data, list) and bool(data) and all(isinstance(r, dict) and "doc" in r for r in data)


def curve_from_data(data: Any, *, path: Path | None = None, claimed: int | None = None) -> Curve:
    """A curve from loaded file content: the original tool's list, lm_eval samples records or a results dict.

    For a results dict read from `path`, the samples file of the same run (same date stamp, same
    folder) is used when present, so per-sample statistics are available; otherwise the
    per-length means are used.
    """
    if isinstance(data, dict) and "results" in data and not isinstance(data["results"], dict):
        raise UsageError(
            f"{path or 'the data'}: its \"results\" is a {type(data['results']).__name__}, not an object of tasks: "
            "pass the results_*.json lm_eval wrote for the forgetting_curve task"
        )
    if is_reference(data):
        curve = read_reference(data, claimed=claimed)
    elif is_samples(data):
        curve = read_samples(data)
    elif isinstance(data, dict) and (task := forgetting_curve_task(data)):
        samples = Run(path, data).samples_file(task) if path is not None else None
        curve = read_results(data, task)
        if samples is not None:  # per-sample values; the run's skips, window and intervals from the results
            per_sample = read_samples(read_samples_file(samples))
            curve = replace(per_sample, skipped=curve.skipped, claimed=curve.claimed, reported=curve.reported)
    else:
        raise UsageError(
            f"{path or 'the data'} is neither an lm_eval results/samples file of the forgetting_curve task nor "
            "an original forgetting-curve result file (a list of records with length, copy_accs, lm_accs)"
        )
    if claimed is not None:
        curve = replace(curve, claimed=claimed)
    return curve


def load_curve(path: Path | str, *, claimed: int | None = None) -> Curve:
    """A curve from any supported file (see `curve_from_data`); `.jsonl` files are lm_eval samples.

    A folder stands for the newest results file under it, as for `plot` and `report`; a file that
    cannot be read, or holds no forgetting curve, is a `UsageError` naming it and the fix.
    """
    path = Path(path)
    if path.is_dir():
        path = find_results_file(path)
    data = read_samples_file(path) if path.suffix == ".jsonl" else read_json(path)
    try:
        return curve_from_data(data, path=path, claimed=claimed)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, UsageError):
            raise
        raise UsageError(
            f"{path} holds no readable forgetting curve ({type(err).__name__}: {err}): pass an lm_eval results_*.json "
            "or samples_forgetting_curve_*.jsonl of the forgetting_curve task, or an original forgetting-curve result file"
        ) from err

"""Every interval, test and bootstrap of the package, all built on scipy; one method per metric family.

* 0/1 scores (an answer right or wrong): Wilson score intervals and exact binomial tests
  (`proportion_interval`, `above_chance`), so nothing collapses at 0% or 100% or with a handful
  of trials (2/2 correct is p = 0.25 against chance, not 0).
* Means of per-cell proportions (a paper's accuracy averaged over its conditions or tasks):
  the same on Kish's effective size (`mean_of_proportions_interval`,
  `mean_of_proportions_above_chance`).
* Shares of tokens per sample (teacher-forced token accuracies): Wilson on the Korn-Graubard
  effective sample size (`share_interval`): inside [0, 1], never narrower for more spread, never
  zero width when samples agree.
* Perplexities: the t interval of the mean log, exponentiated (`log_mean_interval`), at least 1.
* Unbounded means (paired differences): Student t (`mean_interval`).
* Statistics with no closed form (memory lengths): a seeded percentile bootstrap.

Where the data cannot give an interval (one sample of a per-sample mean; a t interval over samples
that all agree) the bounds are NaN, never [m, m]: results files hold null, readers show "n=1" or
"all equal".
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from scipy import signal, special, stats

GRID_MAX = 20000
"""Finest grid (points per unit of one cell's accuracy) of the convolution in
`mean_of_proportions_above_chance`; above it the p-value is a conservative bound."""


class Interval(NamedTuple):
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float


@functools.lru_cache(maxsize=8)
def _z(level: float) -> float:
    return float(special.ndtri(0.5 + 0.5 * level))


def _wilson(p: float, n: float, level: float) -> tuple[float, float]:
    """Wilson score interval of a share `p` of `n` trials (Newcombe 1998, no continuity correction).

    The same arithmetic as scipy's ``binomtest(...).proportion_ci(method="wilson")``, written out
    because the aggregation of a large sweep computes thousands of them (scipy's path builds a
    test object per call). Exactly 0 at p = 0 and 1 at p = 1, as scipy's.
    """
    z = _z(level)
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    delta = z / denom * math.sqrt(4 * n * p * (1 - p) + z**2)
    return (0.0 if p == 0 else center - delta), (1.0 if p == 1 else center + delta)


def _spread_unknown(data: np.ndarray) -> bool:
    """True when the samples say nothing about their spread: one value, or all equal."""
    return data.size < 2 or float(data.max()) == float(data.min())


@functools.lru_cache(maxsize=64)
def _t(level: float, df: int) -> float:
    return float(stats.t.ppf(0.5 + 0.5 * level, df))


def mean_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean with a Student-t interval; NaN bounds when the samples give no spread (one value, or all equal).

    A t interval rests on the spread between samples; with none observed it would be [m, m], a
    certainty nothing supports, so the bounds are NaN (null in results files, shown as "n=1" or
    "all equal"). Families with a known least spread do better: `share_interval`, `proportion_interval`.
    """
    data = np.sort(np.asarray(values, dtype=float))
    if data.size == 0:
        raise ValueError("mean_interval of no values")
    mean = math.fsum(data) / data.size
    if _spread_unknown(data):
        return Interval(mean, math.nan, math.nan)
    half = _t(level, data.size - 1) * float(np.std(data, ddof=1)) / math.sqrt(data.size)
    return Interval(mean, mean - half, mean + half)


def share_interval(values: Sequence[float] | np.ndarray, units: Sequence[int], level: float = 0.95) -> Interval:
    """Mean of per-sample shares (tokens right out of `units` scored) with a Wilson interval on the
    Korn-Graubard effective sample size; NaN bounds for a single sample.

    The tokens of a sample are clustered: they share one text, so they are not independent trials,
    and the between-sample spread sets the uncertainty. Korn & Graubard (1998) turn the variance of
    the mean, ``v = s**2 / n``, into an effective number of trials ``n_eff = p (1 - p) / v`` and
    correct it for the n - 1 degrees of freedom of ``s``, ``n* = n_eff (z / t_{n-1})**2``; the
    interval is Wilson's with n* trials, so it stays inside [0, 1] and is about the Student t
    interval where that one stays inside. ``n_eff`` is at most what independent tokens would give
    (``n**2 / sum(1 / units)``, all the scored tokens when samples are equally long: Korn and
    Graubard's truncation at a design effect of 1). So samples that agree (all at 100%, say) get the
    interval of their tokens, the narrowest this method gives at that mean, never zero width; more
    spread never narrows it. One sample says nothing about the spread between samples: NaN bounds.
    """
    data = np.asarray(values, dtype=float)
    sizes = np.asarray(units, dtype=float)
    if data.size == 0 or data.shape != sizes.shape or not (sizes > 0).all():
        raise ValueError(
            f"share_interval needs one positive unit count per value, got {len(values)} values, {len(units)} counts"
        )
    order = np.lexsort((sizes, data))  # sorted, so the result does not depend on the samples' order
    data, sizes = data[order], sizes[order]
    n = data.size
    mean = math.fsum(data) / n
    if n < 2:
        return Interval(mean, math.nan, math.nan)
    independent = n**2 / math.fsum(1.0 / sizes)
    variance = float(np.var(data, ddof=1)) / n
    n_eff = independent if variance == 0.0 else min(independent, mean * (1 - mean) / variance)
    low, high = _wilson(mean, n_eff * (_z(level) / _t(level, n - 1)) ** 2, level)
    return Interval(mean, low, high)


def log_mean_interval(values: Sequence[float], level: float = 0.95, floor: float = 1.0) -> Interval:
    """Geometric mean of positive values (perplexities) with the exponentiated t interval of their logs.

    Perplexity is exp(mean negative log-likelihood per token), so its natural scale is the log:
    the geometric mean of a cell's perplexities is exp of their mean NLL, the perplexity of all
    the cell's tokens together when samples score equally many tokens. The interval is the
    Student t interval of the mean log, exponentiated, with its lower bound raised to `floor` (no
    token perplexity is below 1). NaN bounds when the logs give no spread (`mean_interval`); an
    infinite value (a token of probability 0) gives an infinite mean and NaN bounds.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0 or (data <= 0).any():
        raise ValueError(f"log_mean_interval needs positive values, got {list(values)}")
    if not np.isfinite(data).all():
        return Interval(math.inf, math.nan, math.nan)
    logs = mean_interval(np.log(data), level)
    if math.isnan(logs.low):
        return Interval(math.exp(logs.estimate), math.nan, math.nan)
    return Interval(math.exp(logs.estimate), max(floor, math.exp(logs.low)), math.exp(logs.high))


def proportion_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """Share of successes with a Wilson score interval (good at 0%, 100% and small n)."""
    if n <= 0:
        raise ValueError("proportion_interval needs n > 0")
    if not 0 <= successes <= n:
        raise ValueError(f"proportion_interval needs 0 <= successes <= n, got {successes} of {n}")
    low, high = _wilson(int(successes) / int(n), int(n), level)
    return Interval(successes / n, low, high)


def _check_counts(counts: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    pairs = [(int(x), int(n)) for x, n in counts]
    if not pairs or any(n <= 0 or not 0 <= x <= n for x, n in pairs):
        raise ValueError(f"need at least one (successes, trials) pair with 0 <= successes <= trials > 0, got {counts}")
    return pairs


def mean_of_proportions_interval(counts: Sequence[tuple[int, int]], level: float = 0.95) -> Interval:
    """Unweighted mean of K proportions ``x_k / n_k`` with a Wilson score interval on Kish's effective size.

    The mean has variance ``sum_k p_k (1 - p_k) / n_k / K**2``. Evaluated, as the score method does,
    at a common p, that is ``p (1 - p) / n_eff`` with ``n_eff = K**2 / sum_k(1 / n_k)``, so the
    interval is Wilson's with n_eff trials: it never collapses at 0% or 100% (the plug-in normal
    interval gives [0, 0] for 0/2 and 0/2) and it stays inside [0, 1].

    Equal sizes (``n_k = n``): the mean is the pooled share ``X / (K n)`` and n_eff = K n, so this is
    exactly the Wilson interval of the pooled counts; and since ``mean_k p_k (1 - p_k)`` is at most
    ``p̄ (1 - p̄)``, cells that differ only make it wider than needed, never too narrow. Unequal
    sizes (trials skipped for the window, ``--limit``): the survey-statistics "Wilson with effective
    sample size" interval, an approximation that is exact for the equal case.
    """
    pairs = _check_counts(counts)
    k = len(pairs)
    mean = sum(x / n for x, n in pairs) / k
    n_eff = k**2 / sum(1 / n for _, n in pairs)
    z2 = _z(level) ** 2
    center = (mean + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = math.sqrt(z2) / (1 + z2 / n_eff) * math.sqrt(mean * (1 - mean) / n_eff + z2 / (4 * n_eff**2))
    # at 0% and 100% the bound is exactly 0 or 1; say so rather than leave 0.9999999999999999
    low = 0.0 if mean == 0.0 else max(0.0, center - half)
    high = 1.0 if mean == 1.0 else min(1.0, center + half)
    return Interval(mean, low, high)


def mean_of_proportions_above_chance(counts: Sequence[tuple[int, int]], chance: float = 0.5) -> float:
    """One-sided p-value that the unweighted mean of ``x_k / n_k`` exceeds `chance`, from its exact null law.

    Null hypothesis: every trial succeeds with probability `chance` independently, so ``x_k`` is
    Binomial(n_k, chance). Equal sizes: the mean is the pooled share, and this is the exact
    one-sided binomial test of ``sum x_k`` out of ``sum n_k`` (2/2 correct gives 0.25).

    Unequal sizes (trials skipped for the window, ``--limit``): cells of one size n pool
    exactly (their successes are Binomial(m n, chance)), and the null law of
    ``sum_n X_n / n`` is the convolution of the pooled laws on a grid of G points per unit. With G
    the least common multiple of the sizes (when it is at most `GRID_MAX`) every value lies on the
    grid and the p-value is exact. Otherwise G = `GRID_MAX` and each value is rounded *up* to the
    grid, so the result bounds the exact p-value from above (a conservative test) and is at most
    the exact p-value of a mean lower by 1/G. Deterministic, unlike a Monte Carlo test; large
    laws are convolved by FFT, where values below about 1e-12 are floating-point noise (read them as 0).
    """
    pairs = _check_counts(counts)
    by_size: dict[int, int] = {}
    for x, n in pairs:
        by_size[n] = by_size.get(n, 0) + x
    if len(by_size) == 1:
        return float(
            stats.binomtest(sum(x for x, _ in pairs), sum(n for _, n in pairs), p=chance, alternative="greater").pvalue
        )
    lcm = math.lcm(*by_size)
    grid = lcm if lcm <= GRID_MAX else GRID_MAX
    observed = sum(Fraction(grid * x, n) for x, n in pairs)
    threshold = math.ceil(observed)  # grid sums are integers: sum >= observed  <=>  sum >= ceil(observed)
    law = np.ones(1)
    for n, m in Counter(n for _, n in pairs).items():
        outcomes = np.arange(m * n + 1)
        on_grid = -((-grid * outcomes) // n)  # ceil(grid * X / n) in exact integer arithmetic
        pooled = np.bincount(on_grid, weights=stats.binom.pmf(outcomes, m * n, chance))
        law = signal.convolve(law, pooled)  # direct for small laws, FFT for large ones
    return float(min(1.0, max(0.0, law[threshold:].clip(min=0.0).sum())))


def bootstrap_interval(
    groups: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Seeded percentile bootstrap interval, resampling the rows of every group independently.

    `statistic` is called with one resampled array per group, each with the resamples on leading
    axes and the group's rows on the next axis (shape ``(..., n_rows, *row_shape)``), and returns
    one value per resample. Rows stay whole, so paired values (one sample's copy and LM accuracy)
    stay paired; groups (one sweep length each, say) are resampled separately (stratified).
    """
    arrays = [np.asarray(g) for g in groups]

    def on_indices(*indices: np.ndarray, axis: int = -1) -> np.ndarray:
        return statistic(*(a[np.asarray(i, dtype=int)] for a, i in zip(arrays, indices, strict=True)))

    result = stats.bootstrap(
        tuple(np.arange(len(a), dtype=float) for a in arrays),
        on_indices,
        vectorized=True,
        paired=False,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return float(ci.low), float(ci.high)


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided paired t-test p-value of a vs b.

    With no spread in the differences the t statistic is 0/0 or infinite, so the exact sign test
    answers instead: 1.0 when every difference is zero, ``2 * 0.5**n`` when all n are equal and
    non-zero (0.5 for two samples, not the 0 an infinite t would claim).
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError("paired_test needs two equally long samples of at least 2 values")
    diff = x - y
    if np.all(diff == diff[0]):
        return 1.0 if diff[0] == 0 else float(stats.binomtest(diff.size, diff.size).pvalue)
    return float(stats.ttest_rel(x, y).pvalue)


def above_chance(successes: int, n: int, chance: float = 0.5, level: float = 0.95) -> tuple[float, bool]:
    """One-sided exact binomial test that accuracy exceeds `chance`: (p-value, significant at 1-level)."""
    if n <= 0:
        raise ValueError("above_chance needs n > 0")
    p = float(stats.binomtest(int(successes), int(n), p=chance, alternative="greater").pvalue)
    return p, p < 1 - level

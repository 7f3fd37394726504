"""Every interval, test and bootstrap of the package, all built on scipy.

Proportions get score (Wilson) intervals and exact binomial tests, so nothing collapses at 0% or
100% or with a handful of trials (2/2 correct is p = 0.25 against chance, not 0). Means of
per-condition proportions (Book-SORT's paper accuracy, BABILong's qa1-qa5 headline) get the same
treatment through `mean_of_proportions_interval` and `mean_of_proportions_above_chance`. Means of
continuous scores (forgetting-curve token accuracies) get Student-t intervals and paired t-tests;
statistics with no closed form (memory lengths) get a seeded percentile bootstrap.
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
"""Finest grid (points per unit of one condition's accuracy) of the convolution in
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


def mean_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean with a Student-t interval; a single value (or zero spread) gives a zero-width interval."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("mean_interval of no values")
    mean = math.fsum(data) / data.size
    if data.size == 1 or float(data.std()) == 0.0:
        return Interval(mean, mean, mean)
    low, high = stats.t.interval(level, df=data.size - 1, loc=mean, scale=stats.sem(data))
    return Interval(mean, float(low), float(high))


def bounded_mean_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean of values in [0, 1] (shares of tokens right) with a 95% interval that never collapses.

    Student t, clipped to [0, 1], when the values spread. When they do not (all samples agree, or
    only one), the t interval would be [mean, mean]; agreeing samples are then evidence of their
    number only, so they get the Wilson interval of n trials at that mean, exactly what n agreeing
    0/1 scores get (2 samples at 100% -> [34.2%, 100%], as BABILong and Book-SORT report 2/2).
    The values are sorted first, so the result does not depend on their order.
    """
    data = np.sort(np.asarray(values, dtype=float))
    if data.size == 0:
        raise ValueError("bounded_mean_interval of no values")
    if data.size > 1 and float(data.std()) > 0.0:
        t = mean_interval(data, level)
        return Interval(t.estimate, max(0.0, t.low), min(1.0, t.high))
    mean = math.fsum(data) / data.size
    low, high = _wilson(mean, data.size, level)
    return Interval(mean, low, high)


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
    ``p̄ (1 - p̄)``, conditions that differ only make it wider than needed, never too narrow. Unequal
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

    Unequal sizes (trials skipped for the window, ``--limit``): conditions of one size n pool
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
    stay paired; groups (one forgetting-curve length each) are resampled separately (stratified).
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


def paired_test(a: Sequence[float], b: Sequence[float]) -> float:
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


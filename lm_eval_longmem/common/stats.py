"""Statistics shared by the evaluations, all from scipy: intervals, bootstrap, paired and binomial tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats


class Interval(NamedTuple):
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float


def mean_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean with a Student-t interval; a single value (or zero spread) gives a zero-width interval."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("mean_interval of no values")
    mean = float(data.mean())
    if data.size == 1 or float(data.std()) == 0.0:
        return Interval(mean, mean, mean)
    low, high = stats.t.interval(level, df=data.size - 1, loc=mean, scale=stats.sem(data))
    return Interval(mean, float(low), float(high))


def proportion_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """Share of successes with a Wilson score interval (good at 0%, 100% and small n)."""
    if n <= 0:
        raise ValueError("proportion_interval needs n > 0")
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return Interval(successes / n, float(ci.low), float(ci.high))


def bootstrap_interval(
    data: Sequence | np.ndarray,
    statistic: Callable[..., float],
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of `statistic(data)` resampling the first axis (seeded).

    `statistic` receives one resampled array (rows of `data`) and returns a float; it is called
    once per resample, so it may be any function of the whole sample (e.g. a memory length).
    """
    array = np.asarray(data)
    estimate = float(statistic(array))
    # Resample row indices, so the statistic sees whole rows (e.g. one sample's copy and LM accuracy).
    result = stats.bootstrap(
        (np.arange(array.shape[0]),),
        lambda idx: float(statistic(array[np.asarray(idx, dtype=int)])),
        vectorized=False,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return Interval(estimate, float(ci.low), float(ci.high))


def paired_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p-value of a vs b (1.0 when every difference is zero, 0.0 when all are equal and non-zero)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError("paired_test needs two equally long samples of at least 2 values")
    diff = x - y
    if np.all(diff == diff[0]):  # no spread: the t statistic is undefined (0/0) or infinite
        return 1.0 if diff[0] == 0 else 0.0
    return float(stats.ttest_rel(x, y).pvalue)


def above_chance(successes: int, n: int, chance: float = 0.5, level: float = 0.95) -> tuple[float, bool]:
    """One-sided exact binomial test that accuracy exceeds `chance`: (p-value, significant at 1-level)."""
    if n <= 0:
        raise ValueError("above_chance needs n > 0")
    p = float(stats.binomtest(int(successes), int(n), p=chance, alternative="greater").pvalue)
    return p, p < 1 - level


def mean_of_proportions_interval(cells: Sequence[tuple[int, int]], level: float = 0.95) -> Interval:
    """Unweighted mean of several proportions (successes, n) with a normal interval on Agresti-Coull variances.

    The variance of each proportion is taken at (s + 2) / (n + 4), so the interval never collapses
    to a point at 0% or 100% (2/2 correct does not mean certainty).
    """
    cells = [(int(s), int(n)) for s, n in cells if n > 0]
    if not cells:
        raise ValueError("mean_of_proportions_interval of no cells")
    k = len(cells)
    mean = sum(s / n for s, n in cells) / k
    variance = sum(((s + 2) / (n + 4)) * (1 - (s + 2) / (n + 4)) / (n + 4) for s, n in cells) / k**2
    half = float(stats.norm.ppf(0.5 + level / 2)) * variance**0.5
    return Interval(mean, max(0.0, mean - half), min(1.0, mean + half))

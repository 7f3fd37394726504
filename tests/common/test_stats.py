import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from lm_eval_longmem.common import stats
from lm_eval_longmem.common.stats import (
    above_chance,
    bootstrap_interval,
    mean_interval,
    mean_of_proportions_above_chance,
    mean_of_proportions_interval,
    paired_test,
    proportion_interval,
)


def test_mean_interval_matches_t_formula():
    values = [0.2, 0.4, 0.9, 0.5]
    est, low, high = mean_interval(values)
    half = sps.t.ppf(0.975, 3) * np.std(values, ddof=1) / 2
    assert est == pytest.approx(0.5) and low == pytest.approx(0.5 - half) and high == pytest.approx(0.5 + half)
    assert mean_interval([0.3]) == (0.3, 0.3, 0.3)


def test_proportion_interval_is_wilson_and_stays_in_unit_range():
    est, low, high = proportion_interval(10, 10)
    assert est == 1.0 and high == pytest.approx(1.0) and 0.6 < low < 0.75  # Wilson: 0.722
    est, low, high = proportion_interval(0, 4)
    assert est == 0.0 and low == pytest.approx(0.0, abs=1e-12) and high > 0.4


@pytest.mark.parametrize("counts", [[(3, 5), (4, 5)], [(2, 2)], [(0, 7), (0, 7), (1, 7)], [(40, 50)] * 10])
def test_mean_of_equal_proportions_is_the_pooled_wilson_interval(counts):
    successes, n = sum(x for x, _ in counts), sum(n for _, n in counts)
    ci = sps.binomtest(successes, n).proportion_ci(method="wilson")
    assert mean_of_proportions_interval(counts) == pytest.approx((successes / n, ci.low, ci.high))


def test_mean_of_proportions_interval_never_collapses_at_the_edges():
    # defect 9: 2/2 right gave [1, 1]; BABILong's mean of two 0-of-2 cells gave [0, 0]
    all_right = mean_of_proportions_interval([(2, 2)])
    assert all_right.estimate == 1.0 and all_right.high == 1.0 and all_right.low < 0.5
    none_right = mean_of_proportions_interval([(0, 2), (0, 2)])
    assert none_right.estimate == 0.0 and none_right.low == 0.0 and none_right.high > 0.3
    unequal = mean_of_proportions_interval([(3, 3), (10, 10), (1, 1)])
    assert unequal.estimate == 1.0 and 0 < unequal.low < 1


def test_mean_of_unequal_proportions_uses_the_effective_size():
    counts = [(1, 1), (1, 3)]  # mean 2/3; n_eff = 4 / (1 + 1/3) = 3
    z = sps.norm.ppf(0.975)
    mean, n_eff = 2 / 3, 3.0
    center = (mean + z**2 / (2 * n_eff)) / (1 + z**2 / n_eff)
    half = z / (1 + z**2 / n_eff) * np.sqrt(mean * (1 - mean) / n_eff + z**2 / (4 * n_eff**2))
    assert mean_of_proportions_interval(counts) == pytest.approx((mean, center - half, center + half))


def _exact_p(counts, chance=0.5):
    """Oracle: P(mean of x_k/n_k >= observed) by enumerating every outcome (small n only)."""
    observed = sum(Fraction(x, n) for x, n in counts)
    laws = [sps.binom.pmf(np.arange(n + 1), n, chance) for _, n in counts]
    total = 0.0
    for outcome in itertools.product(*(range(n + 1) for _, n in counts)):
        if sum(Fraction(x, n) for x, (_, n) in zip(outcome, counts)) >= observed:
            total += float(np.prod([law[x] for law, x in zip(laws, outcome)]))
    return total


def test_p_above_chance_is_the_exact_binomial_test_for_equal_conditions():
    # defect 9: 2/2 correct gave p = 0; the exact one-sided binomial p is 0.25
    assert mean_of_proportions_above_chance([(2, 2)]) == pytest.approx(0.25)
    for counts in ([(60, 100)], [(7, 10), (4, 10), (9, 10)], [(0, 3), (3, 3)]):
        x, n = sum(c[0] for c in counts), sum(c[1] for c in counts)
        expected = sps.binomtest(x, n, 0.5, alternative="greater").pvalue
        assert mean_of_proportions_above_chance(counts) == pytest.approx(expected)


@pytest.mark.parametrize("counts", [[(2, 2), (1, 3)], [(1, 4), (4, 5), (2, 3)], [(0, 1), (5, 6), (6, 6)]])
def test_p_above_chance_is_exact_for_small_unequal_conditions(counts):
    assert mean_of_proportions_above_chance(counts) == pytest.approx(_exact_p(counts), rel=1e-9)


def test_p_above_chance_bounds_the_exact_p_from_above_on_a_coarse_grid(monkeypatch):
    counts = [(9, 11), (7, 13), (10, 17)]  # lcm 2431: beyond a grid of 100 points per unit
    exact = _exact_p(counts)
    monkeypatch.setattr(stats, "GRID_MAX", 100)
    bound = mean_of_proportions_above_chance(counts)
    assert exact <= bound <= exact + 0.05


def test_bootstrap_is_seeded_stratified_and_covers_the_estimate():
    data = np.random.default_rng(1).normal(size=(30, 2))
    stat = lambda rows: rows[..., 0].mean(axis=-1) - rows[..., 1].mean(axis=-1)  # noqa: E731
    first = bootstrap_interval([data], stat, seed=3, n_resamples=500)
    assert first == bootstrap_interval([data], stat, seed=3, n_resamples=500)
    assert first[0] < float(stat(data)) < first[1]
    # two groups resampled separately: a constant group adds no spread to a difference of means
    constant = np.full(5, 2.0)
    low, high = bootstrap_interval([data[:, 0], constant], lambda a, b: a.mean(-1) - b.mean(-1), n_resamples=500)
    alone = bootstrap_interval([data[:, 0]], lambda a: a.mean(-1), n_resamples=500)
    assert (low, high) == pytest.approx((alone[0] - 2, alone[1] - 2))


def test_paired_and_binomial_tests():
    assert paired_test([1, 2, 3], [1, 2, 3]) == 1.0
    assert paired_test([0.9, 0.95, 0.97, 0.99], [0.1, 0.2, 0.15, 0.1]) < 0.001
    # equal non-zero differences: no t statistic, the exact sign test (not p = 0)
    assert paired_test([1.0, 1.0], [0.5, 0.5]) == pytest.approx(0.5)
    assert paired_test([1.0] * 6, [0.0] * 6) == pytest.approx(2 * 0.5**6)
    p, significant = above_chance(60, 100)
    assert p == pytest.approx(sps.binomtest(60, 100, 0.5, alternative="greater").pvalue) and significant
    assert above_chance(50, 100)[1] is False


def test_bounded_mean_interval_never_collapses_when_samples_agree():
    """Issue 21 defect 6: two forgetting-curve samples that agree gave the interval [x, x]."""
    for value in (0.0, 0.5, 1.0):
        iv = stats.bounded_mean_interval([value, value])
        assert iv.low < iv.high and iv.low <= value <= iv.high and 0.0 <= iv.low and iv.high <= 1.0
    two_of_two = stats.bounded_mean_interval([1.0, 1.0])
    assert two_of_two == pytest.approx(stats.proportion_interval(2, 2))  # what 2 agreeing 0/1 trials get
    spread = [0.2, 0.4, 0.9, 0.5]  # values that spread: the Student t interval, clipped to [0, 1]
    t = mean_interval(spread)
    assert stats.bounded_mean_interval(spread) == pytest.approx((t.estimate, max(0.0, t.low), min(1.0, t.high)))
    assert stats.bounded_mean_interval(spread) == stats.bounded_mean_interval(spread[::-1])  # order-free, bit for bit

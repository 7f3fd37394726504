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


# --- every family on degenerate inputs: 1 sample, 2 samples, all equal, one outlier ---------------------------

Z = sps.norm.ppf(0.975)


def nan_bounds(interval) -> bool:
    return np.isnan(interval.low) and np.isnan(interval.high)


def inside(interval, low, high) -> bool:
    return low <= interval.low <= interval.estimate <= interval.high <= high and interval.low < interval.high


def wilson(p, n):
    center = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z / (1 + Z**2 / n) * np.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return max(0.0, center - half), min(1.0, center + half)


@pytest.mark.parametrize("successes,n", [(1, 1), (0, 1), (1, 2), (0, 5), (5, 5), (9, 10), (1, 10)])
def test_binary_family_wilson_on_degenerate_counts(successes, n):
    """0/1 scores: the spread is fixed by the mean, so one trial and all-equal trials get an interval of their number."""
    iv = proportion_interval(successes, n)
    assert inside(iv, 0.0, 1.0) and iv.estimate == successes / n
    ci = sps.binomtest(successes, n).proportion_ci(method="wilson")
    assert (iv.low, iv.high) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_share_family_one_sample_has_no_interval():
    iv = stats.share_interval([0.7], [64])
    assert iv.estimate == 0.7 and nan_bounds(iv)


def test_share_family_two_samples_is_wilson_on_the_korn_graubard_size():
    values, tokens = [0.6, 0.9], 32
    p, v = 0.75, np.var(values, ddof=1) / 2
    n_star = (p * (1 - p) / v) * (Z / sps.t.ppf(0.975, 1)) ** 2
    assert stats.share_interval(values, [tokens] * 2) == pytest.approx((p, *wilson(p, n_star)))


@pytest.mark.parametrize("value", [0.0, 0.5, 1.0])
def test_share_family_agreeing_samples_get_the_interval_of_their_tokens(value):
    """All equal: the variance cannot be below independent tokens', so n_eff is every scored token."""
    iv = stats.share_interval([value] * 4, [50] * 4)
    assert inside(iv, 0.0, 1.0) and iv.estimate == value
    assert (iv.low, iv.high) == pytest.approx(wilson(value, 200 * (Z / sps.t.ppf(0.975, 3)) ** 2))


def test_share_family_never_widens_because_samples_agree():
    """Copy_std 0.0 beside [0.316, 0.999] (agreeing samples were wider than nearly agreeing ones)."""
    widths = []
    for spread in (0.0, 0.002, 0.02, 0.1, 0.3):
        iv = stats.share_interval([0.95 - spread, 0.95 + spread * 0.5, 0.95 + spread * 0.5], [128] * 3)
        assert inside(iv, 0.0, 1.0)
        widths.append(iv.high - iv.low)
    assert widths == sorted(widths) and widths[0] > 0
    at_one = stats.share_interval([1.0, 1.0], [128, 128])
    near_one = stats.share_interval([0.99, 1.0], [128, 128])
    assert near_one.low < at_one.low and at_one.high == 1.0


def test_share_family_one_outlier_stays_in_range_and_is_order_free():
    values = [1.0, 1.0, 1.0, 0.05]
    iv = stats.share_interval(values, [64] * 4)
    assert inside(iv, 0.0, 1.0) and iv.estimate == pytest.approx(0.7625)
    assert iv == stats.share_interval(values[::-1], [64] * 4)  # bit for bit
    # unequal units: independent tokens of the unweighted mean count n**2 / sum(1 / units) = 4 / (1/10 + 1/40) = 32
    agree = stats.share_interval([1.0, 1.0], [10, 40])
    assert (agree.low, agree.high) == pytest.approx(wilson(1.0, 32 * (Z / sps.t.ppf(0.975, 1)) ** 2))


def test_share_family_refuses_missing_units():
    with pytest.raises(ValueError, match="one positive unit count per value"):
        stats.share_interval([0.5, 0.6], [10])


def test_perplexity_family_one_sample_and_equal_samples_have_no_interval():
    assert nan_bounds(stats.log_mean_interval([2.5])) and stats.log_mean_interval([2.5]).estimate == pytest.approx(2.5)
    equal = stats.log_mean_interval([3.0, 3.0, 3.0])
    assert equal.estimate == pytest.approx(3.0) and nan_bounds(equal)


def test_perplexity_family_two_samples_is_the_exponentiated_t_interval_of_the_logs():
    values = [20.0, 45.0]
    logs = np.log(values)
    half = sps.t.ppf(0.975, 1) * np.std(logs, ddof=1) / np.sqrt(2)
    iv = stats.log_mean_interval(values)
    assert iv.estimate == pytest.approx(30.0)  # the geometric mean: exp of the mean NLL per token
    assert iv.high == pytest.approx(np.exp(logs.mean() + half))
    assert iv.low == pytest.approx(max(1.0, np.exp(logs.mean() - half)))


def test_perplexity_family_never_below_one():
    """A t interval of perplexities gave lm_ppl@256_ci_low = -101.0 and copy_ppl@256_ci_low = 0.648."""
    for values in ([1.05, 1.6], [1.0, 1.0, 1.3], [30.0, 31.0, 29.0, 400.0], [1.2, 80.0]):
        iv = stats.log_mean_interval(values)
        assert 1.0 <= iv.low <= iv.estimate <= iv.high
    outlier = stats.log_mean_interval([30.0, 31.0, 29.0, 400.0])
    assert outlier.estimate < np.mean([30.0, 31.0, 29.0, 400.0])  # the geometric mean: one outlier weighs less


def test_perplexity_family_infinite_or_invalid_values():
    assert stats.log_mean_interval([2.0, np.inf]).estimate == np.inf and nan_bounds(
        stats.log_mean_interval([2.0, np.inf])
    )
    with pytest.raises(ValueError, match="positive values"):
        stats.log_mean_interval([0.5, 0.0])


def test_mean_family_no_interval_without_spread():
    """Unbounded means (paired differences): one value or equal values give no t interval, never [m, m]."""
    assert nan_bounds(mean_interval([0.3])) and mean_interval([0.3]).estimate == 0.3
    assert nan_bounds(mean_interval([0.2, 0.2, 0.2]))
    two = mean_interval([0.1, 0.3])
    assert two == pytest.approx((0.2, 0.2 - sps.t.ppf(0.975, 1) * 0.1, 0.2 + sps.t.ppf(0.975, 1) * 0.1))
    outlier = mean_interval([0.1, 0.1, 0.1, 0.9])
    assert outlier.low < 0.3 < outlier.high


@pytest.mark.parametrize("counts", [[(1, 1)], [(0, 1), (1, 1)], [(3, 3), (3, 3)], [(5, 5), (5, 5), (0, 5)]])
def test_mean_of_proportions_family_on_degenerate_counts(counts):
    iv = mean_of_proportions_interval(counts)
    assert inside(iv, 0.0, 1.0)

import numpy as np
import pytest
from scipy import stats as sps

from lm_eval_longmem.common.stats import (
    above_chance,
    bootstrap_interval,
    mean_interval,
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


def test_bootstrap_is_seeded_and_covers_the_estimate():
    data = np.random.default_rng(1).normal(size=(30, 2))
    stat = lambda rows: float(rows[:, 0].mean() - rows[:, 1].mean())  # noqa: E731
    first = bootstrap_interval(data, stat, seed=3, n_resamples=500)
    assert first == bootstrap_interval(data, stat, seed=3, n_resamples=500)
    assert first.low < first.estimate < first.high


def test_paired_and_binomial_tests():
    assert paired_test([1, 2, 3], [1, 2, 3]) == 1.0
    assert paired_test([0.9, 0.95, 0.97, 0.99], [0.1, 0.2, 0.15, 0.1]) < 0.001
    p, significant = above_chance(60, 100)
    assert p == pytest.approx(sps.binomtest(60, 100, 0.5, alternative="greater").pvalue) and significant
    assert above_chance(50, 100)[1] is False

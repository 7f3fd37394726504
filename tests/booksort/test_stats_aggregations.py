"""Book-SORT's aggregations of the paper accuracy and the per-cell metrics (statistics from common.stats)."""

from __future__ import annotations

import pytest
from scipy import stats

from lm_eval_longmem.booksort.task import (
    condition_counts,
    paper_acc,
    paper_acc_ci_high,
    paper_acc_ci_low,
    paper_acc_p_above_chance,
)


def test_paper_acc_is_the_mean_of_condition_means():
    # condition 250x20: 1/1 correct, condition 1000x20: 1/3 correct
    items = [("250x20", 1.0), ("1000x20", 1.0), ("1000x20", 0.0), ("1000x20", 0.0)]
    assert condition_counts(items) == [(1, 3), (1, 1)]
    assert paper_acc(items) == pytest.approx((1.0 + 1 / 3) / 2)
    assert paper_acc_ci_low(items) < paper_acc(items) < paper_acc_ci_high(items)


def test_all_right_does_not_collapse_to_certainty():
    # defect 9: 2/2 correct reported p = 0 and the interval [1, 1]
    items = [("250x20", 1.0), ("250x20", 1.0)]
    assert paper_acc(items) == 1.0
    assert paper_acc_p_above_chance(items) == pytest.approx(0.25)  # exact one-sided binomial
    assert paper_acc_ci_high(items) == 1.0 and paper_acc_ci_low(items) < 0.5
    items = [("250x20", 1.0), ("250x20", 1.0), ("1000x20", 1.0), ("1000x20", 1.0)]
    assert paper_acc_p_above_chance(items) == pytest.approx(1 / 16)


def test_equal_conditions_pool_into_the_binomial_test_and_wilson_interval():
    items = [("250x20", float(i % 3 != 0)) for i in range(30)] + [("1000x20", float(i % 2)) for i in range(30)]
    correct = sum(c for _, c in items)
    assert paper_acc_p_above_chance(items) == pytest.approx(
        stats.binomtest(int(correct), len(items), 0.5, alternative="greater").pvalue
    )
    ci = stats.binomtest(int(correct), len(items)).proportion_ci(method="wilson")
    assert (paper_acc_ci_low(items), paper_acc_ci_high(items)) == pytest.approx((ci.low, ci.high))


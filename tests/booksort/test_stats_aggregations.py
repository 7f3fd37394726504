"""Book-SORT's aggregations of the paper accuracy and the per-cell metrics (statistics from common.stats)."""

from __future__ import annotations

import pytest
from scipy import stats

from lm_eval_longmem.booksort.task import (
    Trial,
    calibrated_correct,
    cell_counts,
    paper_acc,
    paper_acc_ci_high,
    paper_acc_ci_low,
    paper_acc_p_above_chance,
)


def test_paper_acc_is_the_mean_of_condition_means():
    # condition 250x20: 1/1 correct, condition 1000x20: 1/3 correct
    items = [("250x20", 1.0), ("1000x20", 1.0), ("1000x20", 0.0), ("1000x20", 0.0)]
    assert cell_counts(items) == [(1, 3), (1, 1)]
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


# --- acc_calibrated: contextual calibration by the L_E x L_S cell's median log-odds (ours, not the paper's) -----------


def item(cell, log_odds, label):
    """A summary item of the log-prob task."""
    answered_a = log_odds >= 0
    return Trial(cell, float(answered_a == (label == 0)), 0.0, float(answered_a), log_odds, label)


def test_a_model_always_answering_a_is_scored_by_what_its_log_odds_know():
    """ "A" on 32 of 32 trials made every cell exactly 50%; the order is still in the log-odds."""
    items = [
        item("250x20", 3.0 + (0.4 if label == 0 else -0.4) + 0.01 * k, label) for k, label in enumerate([0, 1] * 8)
    ]
    assert all(i.pct_A == 1.0 for i in items) and sum(i.acc for i in items) / 16 == 0.5  # raw: always A, chance
    assert calibrated_correct(items) == [1.0] * 16


def test_log_odds_without_information_stay_at_chance():
    items = [item("250x20", 2.0 + 0.1 * (k // 2), k % 2) for k in range(16)]  # each value once with A, once with B
    assert sum(calibrated_correct(items)) == 8  # half right: the threshold uses no gold label


def test_the_median_is_the_conditions_own():
    """Bias that differs between conditions (+5 at L_E 250, -5 at 1000): one run-wide median would leave it."""
    items = [item("250x20", 5.0 + (0.5 if label == 0 else -0.5), label) for label in (0, 1, 0, 1)]
    items += [item("1000x20", -5.0 + (0.5 if label == 0 else -0.5), label) for label in (0, 1, 0, 1)]
    assert calibrated_correct(items) == [1.0] * 8


@pytest.mark.parametrize("one,two,three", [(0.5, 1.0, 2.0), (-2.0, -1.0, -0.5)])
def test_a_trial_at_the_median_keeps_the_models_answer(one, two, three):
    items = [item("250x20", one, 1), item("250x20", two, 0), item("250x20", three, 0)]
    # the middle trial sits at the median: it keeps the model's own answer ("A" when log-odds >= 0)
    assert calibrated_correct(items) == [1.0, float(two >= 0), 1.0]


def test_calibration_does_not_depend_on_the_order_of_trials():
    items = [item(c, v, k % 2) for k, (c, v) in enumerate([("250x20", 0.3), ("250x20", -1.2), ("1000x20", 2.0), ("250x20", 0.9),
                                                          ("1000x20", 1.1), ("1000x20", 1.7), ("250x20", 0.1)])]  # fmt: skip
    forward = calibrated_correct(items)
    assert calibrated_correct(items[::-1]) == forward[::-1]


def test_generated_trials_have_no_calibrated_answer():
    assert calibrated_correct([Trial("250x20", 1.0, 0.0, 1.0, None, 0)]) == [None]

"""Memory lengths, censoring, intervals and readers, including parity with the original tool's Llama-3-8B file."""

import json
import math

import numpy as np
import pytest

from lm_eval_longmem.cli import main
from lm_eval_longmem.common.stats import share_interval
from lm_eval_longmem.forgetting_curve.analysis import (
    Curve,
    CurvePoint,
    curve_from_points,
    holds,
    memory_interval,
    memory_length,
    scored_tokens,
    summarize,
    summary_json,
)
from lm_eval_longmem.forgetting_curve.rim.reader import load_curve, read_results


@pytest.fixture(scope="module")
def llama3(shared_data):
    path = shared_data / "forgetting_curve" / "Meta-Llama-3-8B.json"
    return path, json.loads(path.read_text())


def test_llama3_memory_lengths_match_the_paper(llama3):
    path, _ = llama3
    summary = summarize(load_curve(path))
    assert (summary.fine.length, summary.fine.censored, summary.fine.label) == (4134, False, "4134")
    assert (summary.coarse.length, summary.coarse.censored, summary.coarse.label) == (9293, True, ">9293")
    # Censored (">9293"): the samples bound it from below only, so no interval, never [9293, 9293].
    assert summary.coarse.interval is None
    # The bootstrap interval brackets the estimate and stays on the tested grid.
    low, high = summary.fine.interval
    assert low <= 4134 <= high and {low, high} <= {L for L in load_curve(path).lengths}


def test_llama3_per_length_statistics_reproduce_the_tool(llama3):
    path, records = llama3
    stats = {s.length: s for s in summarize(load_curve(path)).per_length}
    for record in records:
        s = stats[record["length"]]
        assert s.n == len(record["copy_accs"]) == 10
        assert s.copy.estimate == pytest.approx(record["copy_mean"], abs=1e-9)
        assert s.lm.estimate == pytest.approx(record["lm_mean"], abs=1e-9)
        assert s.copy_std == pytest.approx(record["copy_std"], abs=1e-9)  # population std, as the tool
        assert s.lm_std == pytest.approx(record["lm_std"], abs=1e-9)
        assert s.p_value == pytest.approx(record["p_value"], rel=1e-6)  # paired t-test, as the tool
        assert 0.0 <= s.copy.low <= s.copy.estimate <= s.copy.high <= 1.0


def test_summarize_command_prints_json(llama3, capsys):
    path, _ = llama3
    main(["forgetting-curve", "summarize", str(path), "--claimed", "8k", "--resamples", "500"])
    out = json.loads(capsys.readouterr().out)
    assert out["fine_memory_length"]["length"] == 4134 and not out["fine_memory_length"]["censored"]
    assert out["coarse_memory_length"]["label"] == ">9293" and out["coarse_memory_length"]["censored"]
    assert out["claimed_length"] == 8192 and len(out["lengths"]) == 19


@pytest.mark.parametrize(
    "lengths,ok,expected",
    [
        ([1, 2, 3], [False, False, False], (0, False)),  # nothing qualifies: 0, as the paper's Llama-2-base fine length
        ([1, 2, 3], [True, True, False], (2, False)),
        ([1, 2, 3], [True, True, True], (3, True)),  # holds at the last tested length: censored ">3"
        ([1, 2, 3], [False, True, False], (2, False)),  # very short lengths may fail (paper footnote 7)
        ([1, 2, 3], [True, False, True], (3, True)),  # largest qualifying length, not the first gap
        ([1, 2, 3], [True, False, False], (1, False)),
        ([5], [True], (5, True)),
    ],
)
def test_memory_length_table(lengths, ok, expected):
    assert memory_length(lengths, ok) == expected


@pytest.mark.parametrize(
    "copy,lm,fine,coarse",
    [
        (0.995, 0.5, True, True),
        (0.99, 0.5, False, True),  # "exceeds 99%": strictly above
        (0.30, 0.29, False, False),  # exactly 1 point above is not "more than 1 point"
        (0.30, 0.285, False, True),
        (0.05, 0.07, False, False),  # LM above copy (the RNN case in the paper)
    ],
)
def test_criteria_are_strict(copy, lm, fine, coarse):
    assert holds("fine", copy, lm) is fine and holds("coarse", copy, lm) is coarse


def _curve(means: dict[int, tuple[float, float]], n: int = 4, skipped=(), claimed=None, spread=0.001) -> Curve:
    points = []
    for L, (c, m) in means.items():
        for k in range(n):
            jitter = spread * (k - (n - 1) / 2)
            points.append(CurvePoint(L, k, c + jitter, m - jitter, tuple(skipped), claimed))
    return curve_from_points(points)


def test_skipped_longer_lengths_censor_and_are_reported():
    curve = _curve({256: (1.0, 0.4), 512: (1.0, 0.4)}, skipped=(768, 1024), claimed=1024)
    summary = summarize(curve, n_resamples=200)
    assert summary.fine.label == ">512" and summary.coarse.label == ">512"
    assert "768" in summary.coarse.reason and "skipped" in summary.coarse.reason
    assert summary.skipped == (768, 1024) and summary.claimed == 1024
    out = summary_json(summary)
    assert out["skipped_lengths"] == [768, 1024] and out["fine_memory_length"]["censored"] is True


def test_condition_failing_before_the_skip_is_not_censored():
    curve = _curve({256: (1.0, 0.4), 512: (0.3, 0.3)}, skipped=(768,))
    summary = summarize(curve, n_resamples=200)
    assert summary.coarse.label == "256" and not summary.coarse.censored


def test_bootstrap_interval_is_seeded_and_widens_with_noise():
    noisy = _curve({100: (1.0, 0.5), 200: (0.97, 0.5), 300: (0.515, 0.5), 400: (0.3, 0.5)}, n=6, spread=0.004)
    a = memory_interval(noisy, "coarse", n_resamples=300, seed=3)
    assert a == memory_interval(noisy, "coarse", n_resamples=300, seed=3)
    assert a[0] <= a[1] and a[0] in (0, 100, 200, 300) and a[1] in (0, 100, 200, 300)
    clean = _curve({100: (0.999, 0.5), 200: (0.999, 0.5), 300: (0.5, 0.5)}, n=6, spread=0.0)
    assert memory_interval(clean, "fine", n_resamples=300) == (200, 200)  # agreeing samples, bounded above by 300
    single = _curve({100: (1.0, 0.5)}, n=1)
    assert memory_interval(single, "fine") is None  # one sample: nothing to resample


def test_a_censored_memory_length_has_no_interval():
    """The demo showed `coarse_memory_length >256 [256, 256]`, a point interval beside a value the
    samples bound from below only. Censored: null bounds, in the summary, its JSON and the task's results."""
    curve = _curve({128: (0.999, 0.3), 256: (0.9, 0.3)}, n=4, spread=0.01)
    summary = summarize(curve, n_resamples=300)
    assert summary.coarse.label == ">256" and summary.coarse.interval is None
    assert summary_json(summary)["coarse_memory_length"]["interval"] is None
    assert (
        summary.fine.label == "128" and summary.fine.interval is not None
    )  # not censored: 256 fails in every resample


def test_an_interval_reaching_the_last_length_is_null():
    """Resamples in which the condition still holds at the last tested length are censored (">L"), so a percentile
    interval whose upper end is that length would understate it: null, though the estimate itself is not censored."""
    # at 300, copy minus LM is 0, 0, 0, 0.03 (mean 0.0075, under the 0.01 margin): a quarter of the resamples
    # draw the 0.03 sample twice or more, and their condition holds at 300
    points = [CurvePoint(L, k, 0.9, 0.5) for L in (100, 200) for k in range(4)]
    points += [CurvePoint(300, k, 0.5 + (0.03 if k == 3 else 0.0), 0.5) for k in range(4)]
    curve = curve_from_points(points)
    summary = summarize(curve, n_resamples=400)
    assert summary.coarse.label == "200" and summary.coarse.interval is None
    assert memory_interval(curve, "coarse", n_resamples=400) is None


def test_points_pair_copy_and_lm_by_sample_in_any_order():
    points = [CurvePoint(64, 1, 0.9, 0.2), CurvePoint(64, 0, 0.8, 0.1), CurvePoint(32, 0, 1.0, 0.3)]
    curve = curve_from_points(points)
    assert curve.lengths == (32, 64)
    assert list(curve.copy[64]) == [0.8, 0.9] and list(curve.lm[64]) == [0.1, 0.2]


def test_results_json_without_samples_uses_means_and_reported_intervals():
    results = {
        "results": {
            "forgetting_curve": {
                "copy_acc@64,none": 1.0,
                "copy_acc@64_ci_low,none": 1.0,
                "copy_acc@64_ci_high,none": 1.0,
                "lm_acc@64,none": 0.3,
                "lm_acc@64_ci_low,none": 0.26,
                "lm_acc@64_ci_high,none": 0.34,
                "copy_acc@128,none": 0.5,
                "copy_acc@128_ci_low,none": 0.4,
                "copy_acc@128_ci_high,none": 0.6,
                "lm_acc@128,none": 0.3,
                "lm_acc@128_ci_low,none": 0.27,
                "lm_acc@128_ci_high,none": 0.33,
                "coarse_memory_length_low,none": 128,
                "coarse_memory_length_high,none": 128,
                "fine_memory_length_low,none": 64,
                "fine_memory_length_high,none": 64,
                "claimed_length,none": 128,
                "skipped,none": 20,
                "skip_reasons,none": {"256": {"too long": 10}, "512": {"too long": 10}},
            }
        }
    }
    curve = read_results(results)
    assert not curve.per_sample and curve.lengths == (64, 128) and curve.skipped == (256, 512)
    summary = summarize(curve)
    assert summary.fine.label == "64" and summary.coarse.label == ">128"
    assert summary.coarse.interval is None and summary.claimed == 128  # the file's [128, 128] beside ">128": dropped
    lm128 = summary.per_length[1].lm
    assert (lm128.low, lm128.high) == (0.27, 0.33)  # the run's own interval
    assert math.isnan(summary.per_length[1].difference.low)


def test_unknown_file_is_a_clear_error(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"results": {"hellaswag": {"acc,none": 0.3}}}))
    with pytest.raises(ValueError, match="forgetting_curve"):
        load_curve(path)


def test_mismatched_reference_record_is_an_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"length": 8, "copy_accs": [1.0, 1.0], "lm_accs": [0.5]}]))
    with pytest.raises(ValueError, match="length 8"):
        load_curve(path)


def test_paired_values_survive_json_round_trip():
    points = [
        CurvePoint(8, k, float(c), float(m), (16,), 16)
        for k, (c, m) in enumerate(np.random.default_rng(0).random((3, 2)))
    ]
    again = curve_from_points(json.loads(json.dumps(points)))
    assert again.skipped == (16,) and again.claimed == 16 and np.allclose(again.copy[8], [p.copy for p in points])


def test_per_length_interval_of_agreeing_samples_does_not_collapse():
    """With forgetting_curve_samples=2 and both samples alike, the 95% interval was [1, 1]."""
    from lm_eval_longmem.forgetting_curve.analysis import length_stats

    stats_ = length_stats(64, np.array([1.0, 1.0]), np.array([0.25, 0.25]))
    assert stats_.copy.low < stats_.copy.estimate == stats_.copy.high == 1.0
    assert stats_.lm.low < 0.25 < stats_.lm.high
    # agreeing samples are not wider than nearly agreeing ones (copy_std 0.0 beside [0.316, 0.999])
    assert stats_.copy == share_interval([1.0, 1.0], [scored_tokens(64)] * 2)
    assert stats_.copy.low > length_stats(64, np.array([0.99, 1.0]), np.array([0.25, 0.25])).copy.low
    # equal differences give no t interval: null bounds, not the zero-width [0.75, 0.75]
    assert (
        stats_.difference.estimate == 0.75 and math.isnan(stats_.difference.low) and math.isnan(stats_.difference.high)
    )


def test_one_sample_per_length_has_no_interval():
    """With --limit 1 the accuracy got [0.19, 0.9997] and the difference [d, d]; one sample says
    nothing about the spread between samples, so every per-length bound is null ("n=1")."""
    from lm_eval_longmem.forgetting_curve.analysis import length_stats

    one = length_stats(1024, np.array([0.9]), np.array([0.3]))
    assert one.n == 1 and one.p_value is None and one.copy.estimate == 0.9 and one.copy_std is one.lm_std is None
    assert all(math.isnan(bound) for iv in (one.copy, one.lm, one.difference) for bound in (iv.low, iv.high))
    curve = curve_from_points([CurvePoint(1024, 0, 0.9, 0.3)])
    (row,) = summary_json(summarize(curve))["lengths"]
    assert row["copy_acc"] == {"mean": 0.9, "low": None, "high": None} and row["difference"]["low"] is None
    assert row["copy_std"] is None and row["p_value"] is None


def test_difference_interval_stays_within_the_range_of_a_difference():
    from lm_eval_longmem.forgetting_curve.analysis import length_stats

    wide = length_stats(64, np.array([1.0, 0.1]), np.array([0.0, 0.05]))
    assert -1.0 <= wide.difference.low < wide.difference.estimate < wide.difference.high <= 1.0

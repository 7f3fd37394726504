"""The Figure-1-style plot from the original tool's file (lm_eval results are covered in test_task.py)."""

import json

import pytest

from lm_eval_longmem.forgetting_curve.analysis import CurvePoint, curve_from_points, summarize
from lm_eval_longmem.forgetting_curve.rim import figures as forgetting_curve


def test_plot_reads_the_original_tools_file(shared_data, tmp_path):
    records = json.loads((shared_data / "forgetting_curve" / "Meta-Llama-3-8B.json").read_text())
    assert forgetting_curve.can_plot(records)
    written = forgetting_curve.plot(records, tmp_path / "llama3", ("png", "svg", "pdf"), claimed=8192)
    assert [p.name for p in written] == [f"llama3_forgetting_curve.{fmt}" for fmt in ("png", "svg", "pdf")]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and written[2].read_bytes()[:5] == b"%PDF-"
    svg = written[1].read_text()
    # The legend names both memory lengths as the paper's Table 3 writes them.
    assert "fine-grained memory (4134)" in svg and "coarse-grained memory (&gt;9293)" in svg


def test_plot_declines_other_results():
    assert not forgetting_curve.can_plot({"results": {"hellaswag": {"acc,none": 0.3}}})
    assert not forgetting_curve.can_plot([{"length": 8}])


def _summary(copy_by_length, lm=0.3, samples=3):
    points = [
        CurvePoint(L, k, c - 0.001 * k * (samples > 1), lm) for L, c in copy_by_length.items() for k in range(samples)
    ]
    return summarize(curve_from_points(points), n_resamples=50)


def _regions(fig):
    """(colour, start, end) of the shaded regions of the curve's axes."""
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    ax = fig.axes[0]
    return [
        (to_hex(p.get_facecolor(), keep_alpha=False), p.get_x(), p.get_x() + p.get_width())
        for p in ax.patches
        if isinstance(p, Rectangle)
    ]


def test_regions_shade_only_lengths_that_meet_the_criterion():
    """The fine-grained region was shaded over 0-128 although copy_acc@64 = 0.906 < 0.99."""
    import matplotlib.pyplot as plt

    summary = _summary({16: 1.0, 32: 1.0, 64: 0.906, 128: 1.0, 256: 0.3})
    assert summary.fine.length == 128  # the paper's definition: the longest tested length that passes
    fig = forgetting_curve.figure(summary)
    fine, coarse, amnesia = forgetting_curve.FINE_COLOR, forgetting_curve.COARSE_COLOR, forgetting_curve.AMNESIA_COLOR
    assert _regions(fig) == [(fine, 0, 32), (coarse, 32, 64), (fine, 64, 128), (amnesia, 128, 256)]  # drawn as measured
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert (
        legend.count("fine-grained memory (128)") == 1
        and "coarse-grained memory (128)" in legend
        and "amnesia" in legend
    )
    plt.close(fig)


def test_a_monotone_curve_gives_the_papers_regions():
    import matplotlib.pyplot as plt

    fig = forgetting_curve.figure(_summary({64: 1.0, 128: 1.0, 256: 0.9, 512: 0.8, 1024: 0.3}))
    fine, coarse, amnesia = forgetting_curve.FINE_COLOR, forgetting_curve.COARSE_COLOR, forgetting_curve.AMNESIA_COLOR
    assert _regions(fig) == [(fine, 0, 128), (coarse, 128, 512), (amnesia, 512, 1024)]
    plt.close(fig)


def test_lengths_of_one_sample_are_hollow_markers_without_a_band():
    import math

    import matplotlib.pyplot as plt

    summary = _summary({16: 1.0, 32: 0.8}, samples=1)
    assert all(math.isnan(s.copy.low) for s in summary.per_length)
    fig = forgetting_curve.figure(summary)
    ax = fig.axes[0]
    hollow = [
        line
        for line in ax.get_lines()
        if line.get_marker() == "o" and line.get_markerfacecolor() == "white" and len(line.get_xdata())
    ]
    assert sorted(list(line.get_xdata()) for line in hollow) == [[16, 32], [16, 32]]  # copy and LM
    assert "no interval (n=1)" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)


def test_an_interval_between_lengths_without_one_is_an_error_bar():
    """A band needs two neighbouring intervals: a lone one (here L = 32, between lengths of one sample) is a bar."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    points = [CurvePoint(16, 0, 1.0, 0.3), CurvePoint(64, 0, 0.5, 0.3)] + [
        CurvePoint(32, k, 0.9 - 0.05 * k, 0.3) for k in range(3)
    ]
    summary = summarize(curve_from_points(points), n_resamples=50)
    fig = forgetting_curve.figure(summary)
    bars = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    segments = [seg for c in bars for seg in c.get_segments()]
    copy_32 = next(s.copy for s in summary.per_length if s.length == 32)
    assert [(32.0, pytest.approx(copy_32.low), pytest.approx(copy_32.high))] in [
        [(a[0], a[1], b[1])] for a, b in segments
    ]
    plt.close(fig)


@pytest.mark.parametrize(
    ("lengths", "labelled"),
    [((128, 256), True), ((16, 32, 64, 128, 256, 512, 1024), False)],
    ids=["demo-lengths", "geometric-sweep"],
)
def test_every_tested_length_has_a_tick(lengths, labelled):
    """The demo's lengths 128 and 256 sat between
    the linear axis's round-number ticks. Lengths far enough apart get labelled ticks; a geometric sweep on the
    linear axis gets a minor tick at each length beside the round-number labels."""
    import matplotlib.pyplot as plt

    fig = forgetting_curve.figure(_summary({L: 0.9 for L in lengths}))
    ax = fig.axes[0]
    ticks = set(ax.get_xticks()) | set(ax.get_xticks(minor=True))
    assert set(lengths) <= ticks
    assert ([t.get_text() for t in ax.get_xticklabels()] == [str(L) for L in lengths]) == labelled
    plt.close(fig)

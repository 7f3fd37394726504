"""`lm-eval-longmem plot` for Book-SORT results (Figure 1 a/b), from a results dict only."""

from __future__ import annotations

import pytest

from lm_eval_longmem.booksort.rim import figures as booksort
from lm_eval_longmem.booksort.rim.reader import booksort_tasks


def _row(cells: dict[str, float], scores=("acc",)) -> dict[str, float]:
    row = {"acc,none": 0.7}
    for score in scores:
        for cell, value in cells.items():
            value = value if score == "acc" else 1.0 - value / 2
            row |= {
                f"{score}@{cell},none": value,
                f"{score}@{cell}_ci_low,none": value - 0.1,
                f"{score}@{cell}_ci_high,none": value + 0.05,
                f"{score}@{cell}_p_above_chance,none": 0.01 if value > 0.6 else 0.4,
            }
    return row


def test_plot_writes_both_panels(tmp_path):
    results = {
        "results": {
            "booksort_in_context": _row(
                {"LE250": 0.9, "LE2500": 0.7, "LE2500_bin0": 0.6, "LE2500_bin3": 0.8, "bin0": 0.6},
                ("acc", "acc_calibrated"),
            ),
            "booksort_memoryless": _row({"LE250": 0.5, "bin0": 0.5, "bin1": 0.52}),
            "other_task": {"acc,none": 0.3},
        }
    }
    assert booksort.can_plot(results)
    assert set(booksort_tasks(results)) == {"booksort_in_context", "booksort_memoryless"}
    written = booksort.plot(results, tmp_path / "run", formats=("png", "svg"))
    assert written == [tmp_path / "run_booksort.png", tmp_path / "run_booksort.svg"]
    assert all(p.stat().st_size > 5_000 for p in written)


def test_can_plot_ignores_other_results():
    assert not booksort.can_plot({"results": {"arc_easy": {"acc,none": 0.5}}})
    assert not booksort.can_plot([{"copy_acc": 1.0}])


def test_calibrated_accuracy_is_drawn_beside_accuracy():
    import matplotlib.pyplot as plt

    tasks = {
        "in-context": booksort_tasks(
            {"results": {"t": _row({"LE250": 0.5, "LE2500": 0.5, "LE2500_bin0": 0.5}, ("acc", "acc_calibrated"))}}
        )["t"],
        "generated": booksort_tasks({"results": {"t": _row({"LE250": 0.4, "LE2500": 0.6, "LE2500_bin0": 0.5})}})["t"],
    }
    fig = booksort.figure(tasks)
    ax_a, ax_b = fig.axes
    for ax, x in ((ax_a, [0.08, 1.08]), (ax_b, [0.08])):
        lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
        calibrated = [line for line in ax.get_lines() if line.get_linestyle() == "--" and line.get_marker() == "s"]
        assert len(calibrated) == 1 and list(calibrated[0].get_xdata()) == pytest.approx(x)  # beside acc, not on it
        assert list(calibrated[0].get_ydata()) == pytest.approx([0.75] * len(x))
        assert "generated: calibrated" not in lines  # a task without acc_calibrated draws none
    assert ax_a.get_ylabel() == "accuracy (dashed: calibrated; dotted: share answered A)"
    plt.close(fig)


def _one_length_row(acc: float, low: float, high: float, p: float) -> dict[str, float]:
    """One excerpt length (250 words), as the demo runs it: accuracy, calibrated accuracy, share answered "A"."""
    row = {"acc,none": acc, "pct_A,none": 0.8, "pct_A@LE250,none": 0.8}
    for score, value in (("acc", acc), ("acc_calibrated", acc - 0.05)):
        for cell in ("LE250", "bin0", "bin1"):
            row |= {f"{score}@{cell},none": value, f"{score}@{cell}_ci_low,none": low - (acc - value),
                    f"{score}@{cell}_ci_high,none": high - (acc - value), f"{score}@{cell}_p_above_chance,none": p}  # fmt: skip
    return row


@pytest.mark.parametrize(
    ("acc", "low", "high", "p", "starred"),
    [(0.65, 0.495, 0.779, 0.040, False), (0.8, 0.652, 0.895, 0.0001, True)],
    ids=["26-of-40-interval-reaches-chance", "32-of-40-above-chance"],
)
def test_one_excerpt_length_draws_every_point_beside_its_tick_and_stars_follow_the_interval(acc, low, high, p, starred):
    """With one excerpt length, `acc_calibrated@LE250` was drawn at the right
    border with no tick, and a star (one-sided p 0.040) sat above the share-answered-"A" marker beside an interval
    that reaches the chance line (26/40: Wilson [49.5, 77.9]). Now every point sits within a small offset of its own
    tick, half a step from the border, and a star marks an accuracy only when its drawn interval excludes chance."""
    import matplotlib.pyplot as plt

    fig = booksort.figure(booksort_tasks({"results": {"booksort_in_context": _one_length_row(acc, low, high, p)}}))
    for ax in fig.axes:
        ticks = list(ax.get_xticks())
        left, right = ax.get_xlim()
        for line in ax.get_lines():
            if line.get_label() == "chance":
                continue
            for x in line.get_xdata():
                assert min(abs(x - t) for t in ticks) <= booksort.CALIBRATED_OFFSET + 1e-9, (line.get_label(), x)
                assert min(x - left, right - x) >= booksort.MARGIN - booksort.CALIBRATED_OFFSET - 1e-9
        stars = [text for text in ax.texts if text.get_text() == "*"]
        assert len(stars) == (len(ticks) if starred else 0)
        (accuracy,) = [line for line in ax.get_lines() if line.get_marker() == "o"]  # the accuracy's line
        for star in stars:  # on the accuracy's x, above the top of its bar; the share answered "A" is elsewhere
            x, y = star.xy
            assert x in list(accuracy.get_xdata()) and y == pytest.approx(high)
    assert "interval lies above chance" in fig._suptitle.get_text()
    plt.close(fig)


def test_each_line_of_the_plot_names_the_trials_behind_it(tmp_path, monkeypatch):
    """A legend entry says its n when the results file records it (`n-samples`), and only then."""
    import matplotlib.figure

    results = {
        "results": {"booksort_in_context": _one_length_row(0.8, 0.652, 0.895, 0.0001),
                    "booksort_memoryless": _one_length_row(0.5, 0.35, 0.65, 0.5)},
        "n-samples": {"booksort_in_context": {"original": 100, "effective": 40}},
    }  # fmt: skip
    legends = []
    savefig = matplotlib.figure.Figure.savefig

    def keep_legend(fig, *args, **kwargs):
        legends.append([text.get_text() for text in fig.axes[0].get_legend().get_texts()])
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_legend)
    booksort.plot(results, tmp_path / "run", formats=("png",))
    assert "booksort_in_context (n=40)" in legends[0]
    assert "booksort_memoryless" in legends[0]  # the file does not say its n

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

"""`lm-eval-longmem plot` for Book-SORT results (Figure 1 a/b), from a results dict only."""

from __future__ import annotations

from lm_eval_longmem.plots import booksort


def _row(cells: dict[str, float]) -> dict[str, float]:
    row = {"acc,none": 0.7}
    for cell, value in cells.items():
        row |= {
            f"acc@{cell},none": value,
            f"acc@{cell}_ci_low,none": value - 0.1,
            f"acc@{cell}_ci_high,none": value + 0.05,
            f"acc@{cell}_p_above_chance,none": 0.01 if value > 0.6 else 0.4,
        }
    return row


def test_plot_writes_both_panels(tmp_path):
    results = {
        "results": {
            "booksort_in_context": _row(
                {"LE250": 0.9, "LE2500": 0.7, "LE2500_bin0": 0.6, "LE2500_bin3": 0.8, "bin0": 0.6}
            ),
            "booksort_memoryless": _row({"LE250": 0.5, "bin0": 0.5, "bin1": 0.52}),
            "other_task": {"acc,none": 0.3},
        }
    }
    assert booksort.can_plot(results)
    assert set(booksort.booksort_tasks(results)) == {"booksort_in_context", "booksort_memoryless"}
    written = booksort.plot(results, tmp_path / "run", formats=("png", "svg"))
    assert written == [tmp_path / "run_booksort.png", tmp_path / "run_booksort.svg"]
    assert all(p.stat().st_size > 5_000 for p in written)


def test_can_plot_ignores_other_results():
    assert not booksort.can_plot({"results": {"arc_easy": {"acc,none": 0.5}}})
    assert not booksort.can_plot([{"copy_acc": 1.0}])

"""Book-SORT's part of the report (`booksort/rim/section.py`): its figure, table and answer-bias flags."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from report_kit import blocks, figure, with_answer_bias, write_run

from lm_eval_longmem.readers.results import load_runs
from lm_eval_longmem.report import build_report
from lm_eval_longmem.report.blocks import Table

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")


pytestmark = pytest.mark.usefixtures("close_figures")


def test_booksort_figure_has_a_line_per_model_by_excerpt_length_and_distance(two_runs_report):
    report = two_runs_report
    ax_a, ax_b = figure(report, "booksort").axes
    assert ax_a.get_xlabel() == "excerpt length L_E (words)" and ax_b.get_xlabel() == "distance bin (d0 nearest)"
    assert [t.get_text() for t in ax_a.get_xticklabels()] == ["250", "500"]
    assert {t.get_text() for t in ax_a.get_legend().get_texts()} == {"big-model (n=48)", "small-model (n=48)", "chance"}
    small = next(c for c in ax_a.containers if c.get_label() == "small-model (n=48)")
    assert list(small.lines[0].get_ydata()) == pytest.approx([0.9, 0.6])
    by_bin = next(c for c in ax_b.containers if c.get_label() == "big-model (n=48)")
    assert list(by_bin.lines[0].get_xdata()) == [0, 1, 2, 3]
    table = blocks(report, Table, "Book-SORT")[0]
    assert table.header == ["model", "acc", "answered A", "L_E=250 words", "L_E=500 words", "trials"]
    assert table.rows[1][2:] == ["-", "72.0 [62.0, 82.0]", "48.0 [38.0, 58.0]", "48"]  # no pct_A: results of before


@pytest.mark.slow
def test_a_model_answering_one_label_always_is_flagged_in_the_headline(tmp_path):
    stuck = with_answer_bias(write_run(tmp_path / "a", "stuck-model", fine=128, coarse=512), 1.0)
    mixed = with_answer_bias(write_run(tmp_path / "b", "mixed-model", fine=128, coarse=512), 0.55, (0.5, 0.6))
    report = build_report(load_runs([stuck, mixed]))
    flags = [b for b in blocks(report, str, "Headline numbers") if "Answer bias" in b]
    assert flags == ['**Answer bias: stuck-model answers "A" on 48 of 48 trials of `booksort_in_context`**: its accuracy '
                     "(75.0%) is the share of trials whose answer is that label, not order recall."]  # fmt: skip
    table = blocks(report, Table, "Book-SORT")[0]
    assert [row[2] for row in table.rows] == ["100.0 [90.0, 100.0]", "55.0 [45.0, 65.0]"]
    ax_a = figure(report, "booksort").axes[0]
    dotted = {line.get_label(): list(line.get_ydata()) for line in ax_a.get_lines() if line.get_linestyle() == ":"}
    assert dotted == {
        'stuck-model (n=48): share answered "A"': [1.0, 1.0],
        'mixed-model (n=48): share answered "A"': [0.5, 0.6],
    }
    proc = subprocess.run(
        [CLI, "report", str(stuck), "--output_path", str(tmp_path / "r")], capture_output=True, text=True
    )
    assert (
        "stuck-model: forgetting_curve fine_memory_length 128 [64, 128] (coarse 512 [256, 512]), booksort acc 75.0 [30.0, 80.0]% "
        '(n=48), babilong acc 55.0 [40.0, 70.0]% (n=177) (answer bias: "A" on every booksort_in_context trial) '
        "[rests on: babilong: 3 docs skipped]" in [line.strip() for line in proc.stdout.splitlines()]
    )

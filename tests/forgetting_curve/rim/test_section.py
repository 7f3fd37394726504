"""The forgetting curve's part of the report (`forgetting_curve/rim/section.py`): its figures and tables."""

from __future__ import annotations

import json

import pytest
from report_kit import LENGTHS, blocks, figure, with_sources, write_run

from lm_eval_longmem.readers.results import load_runs
from lm_eval_longmem.report import build_report
from lm_eval_longmem.report.blocks import FigureBlock, Table

pytestmark = pytest.mark.usefixtures("close_figures")


def test_overlay_has_one_copy_curve_per_model_with_its_memory_lengths(two_runs_report):
    fig = figure(two_runs_report, "forgetting_curve_overlay")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "length L of the copied text (tokens)" and ax.get_ylabel().startswith("copy accuracy")
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "small-model: fine 128, coarse 512" in labels and "big-model: fine 512, coarse >1024" in labels
    assert any(label.startswith("claimed window (8k, off scale)") for label in labels)  # 8192 >> the 1024 swept
    curves = {
        line.get_label(): line
        for line in ax.get_lines()
        if ":" in line.get_label() and not line.get_label().startswith("claimed")
    }
    small = curves["small-model: fine 128, coarse 512"]
    assert list(small.get_xdata()) == list(LENGTHS) and list(small.get_ydata()) == [1.0, 1.0, 0.6, 0.6, 0.3]
    vertical = sorted(
        {
            line.get_xdata()[0]
            for line in ax.get_lines()
            if len(set(line.get_xdata())) == 1 and line.get_label().startswith("_")
        }
    )
    assert vertical == [128, 512, 1024]  # fine and coarse marks of both models (512 is shared)
    assert ax.get_xscale() == "log"  # a geometric sweep: 64 and 128 would crowd on a linear axis
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(L) for L in LENGTHS]


def test_overlay_names_only_the_memory_lines_it_draws(tmp_path):
    """No tested length copied > 99%, so no fine-grained line is drawn, the legend names none and
    the curve's label says "<64" (below the shortest length tested), not "fine 0"; the figure of the run says so too."""
    runs = load_runs([write_run(tmp_path / "a", "forgetful", fine=0, coarse=256)])  # copy 0.6 from 64 on
    report = build_report(runs)
    ax = figure(report, "forgetting_curve_overlay").axes[0]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "forgetful: fine <64, coarse 256" in labels
    assert not any(label.startswith("fine-grained") for label in labels)
    assert "coarse-grained memory length (copy beats LM by > 1 point)" in labels
    vertical = {line.get_xdata()[0] for line in ax.get_lines() if len(set(line.get_xdata())) == 1}
    assert vertical == {256}  # the coarse line only (the claimed window is off scale)
    labels = [t.get_text() for t in figure(report, "forgetting_curve_forgetful").axes[0].get_legend().get_texts()]
    assert "coarse-grained memory (256)" in labels and not any(label.startswith("fine-grained") for label in labels)


def test_tables_write_a_memory_length_below_the_shortest_length_tested_as_such(tmp_path):
    """A stored memory length of 0 (no tested length met the criterion) reads "<64" in the headline and the
    section's table, as the figures say it, not "0 [0, 0]"; a length that was met reads as the number."""
    report = build_report(load_runs([write_run(tmp_path / "a", "forgetful", fine=0, coarse=256)]))
    tables = {block.header[1]: block for block in blocks(report, Table)}
    headline = tables["forgetting_curve fine_memory_length"]
    assert headline.rows[0][1:3] == ["<64 [<64, <64]", "256 [128, 256]"]
    section = tables["fine_memory_length"]
    assert section.rows[0][1:3] == ["<64 [<64, <64]", "256 [128, 256]"]


def test_each_model_gets_its_own_forgetting_curve(two_runs_report):
    report = two_runs_report
    names = [b.name for b in blocks(report, FigureBlock, "Forgetting curve")]
    assert names == ["forgetting_curve_overlay", "forgetting_curve_small-model", "forgetting_curve_big-model"]
    ax = figure(report, "forgetting_curve_big-model").axes[0]
    assert ax.get_title() == "Forgetting curve: big-model"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"copy accuracy", "LM accuracy", "fine-grained memory (512)", "coarse-grained memory (>1024)"} <= set(labels)


def test_perplexity_is_drawn_under_the_curve(tmp_path):
    path = write_run(tmp_path / "a", "ppl-model", fine=128, coarse=512)
    data = json.loads(path.read_text())
    for L in LENGTHS:
        data["results"]["forgetting_curve"] |= {
            f"copy_ppl@{L},none": 1.5, f"copy_ppl@{L}_ci_low,none": 0.8, f"copy_ppl@{L}_ci_high,none": 2.2,
            f"lm_ppl@{L},none": 30.0 - L / 100, f"lm_ppl@{L}_ci_low,none": 20.0, f"lm_ppl@{L}_ci_high,none": 40.0,
        }  # fmt: skip
    path.write_text(json.dumps(data))
    report = build_report(load_runs([path]))
    curve_ax, ppl_ax = figure(report, "forgetting_curve_ppl-model").axes
    assert ppl_ax.get_yscale() == "log" and ppl_ax.get_xlabel() == "length L of the copied text (tokens)"
    lines = {line.get_label(): line for line in ppl_ax.get_lines()}
    assert list(lines["LM perplexity"].get_xdata()) == list(LENGTHS)
    assert list(lines["LM perplexity"].get_ydata()) == pytest.approx([30.0 - L / 100 for L in LENGTHS])
    band = ppl_ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(1.0)  # a t interval reaching below 1 is drawn from 1: no perplexity is lower
    # A run without perplexity (results of before) keeps the one-panel figure.
    assert (
        len(
            figure(
                build_report(load_runs([write_run(tmp_path / "b", "old-model", fine=128, coarse=512)])),
                "forgetting_curve_old-model",
            ).axes
        )
        == 1
    )


@pytest.mark.slow
def test_runs_that_differ_only_in_sources_are_overlaid(tmp_path):
    plain = with_sources(write_run(tmp_path / "a", "m", fine=128, coarse=512))
    prefix = with_sources(write_run(tmp_path / "b", "m", fine=128, coarse=512), forgetting_curve_prefix_source="random")
    copy = with_sources(write_run(tmp_path / "c", "m", fine=0, coarse=256), forgetting_curve_copy_source="random")
    other_samples = with_sources(write_run(tmp_path / "d", "m", fine=0, coarse=256), forgetting_curve_samples=3,
                                 forgetting_curve_copy_source="random")  # fmt: skip
    other_model = with_sources(
        write_run(tmp_path / "e", "n", fine=0, coarse=256), forgetting_curve_copy_source="random"
    )
    report = build_report(load_runs([plain, prefix, copy, other_samples, other_model]))
    table = blocks(report, Table, "Forgetting curve by text source")
    assert len(table) == 1 and [row[1:3] for row in table[0].rows] == [
        ["pg19", "pg19"],
        ["pg19", "random"],
        ["random", "pg19"],
    ]
    ax_a, ax_b = figure(report, "forgetting_curve_sources_m").axes
    assert {line.get_label() for line in ax_a.get_lines()} == {"I: pg19", "I: random"}  # S fixed to pg19
    assert {line.get_label() for line in ax_b.get_lines()} == {
        "S: pg19 (copy)",
        "S: pg19 (LM)",
        "S: random (copy)",
        "S: random (LM)",
    }
    random_copy = next(line for line in ax_b.get_lines() if line.get_label() == "S: random (copy)")
    assert list(random_copy.get_ydata()) == [0.6, 0.6, 0.6, 0.3, 0.3]  # the curve of the run with random S
    assert not blocks(build_report(load_runs([plain, other_model])), Table, "Forgetting curve by text source")

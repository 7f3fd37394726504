"""BABILong's part of the report (`babilong/rim/section.py`): the heatmap and table per run."""

from __future__ import annotations

import pytest
from matplotlib.patches import Rectangle
from report_kit import blocks, figure

from lm_eval_longmem.report import build_report
from lm_eval_longmem.report.blocks import Table

pytestmark = pytest.mark.usefixtures("close_figures")


def test_babilong_heatmap_reads_the_one_task_results(two_runs_report):
    report = two_runs_report
    fig = figure(report, "babilong_small-model")
    acc_ax, corrected_ax = (ax for ax in fig.axes if ax.get_title())
    assert acc_ax.get_title() == "acc (authors' answer check)" and corrected_ax.get_title() == "acc_corrected"
    assert [t.get_text() for t in acc_ax.get_xticklabels()] == ["0k", "1k", "4k"]
    assert [t.get_text() for t in acc_ax.get_yticklabels()] == ["qa1", "qa2", "qa3", "mean"]
    grid = acc_ax.get_images()[0].get_array()
    assert grid[0, 1] == pytest.approx(90) and grid[2, 2] == pytest.approx(10)
    assert grid[3, 0] == pytest.approx(100 * (1.0 + 0.9 + 0.5) / 3)  # acc@0k: mean over the tasks
    assert corrected_ax.get_images()[0].get_array()[2, 2] == pytest.approx(15)
    outlined = sorted(
        (p.get_x() + 0.5, p.get_y() + 0.5) for p in acc_ax.patches if isinstance(p, Rectangle) and not p.get_fill()
    )
    assert outlined == [(0.0, 1.0), (1.0, 0.0)]  # qa1 up to 1k, qa2 up to 0k, qa3 nowhere
    texts = [t.get_text() for t in acc_ax.texts]  # row by row: every cell's n beside its value
    assert texts[:3] == ["100\nn=20", "90\nn=20", "60\nn=20"] and texts[8] == "10\nn=17"
    assert texts[9:] == ["80\nn=60", "57\nn=60", "30\nn=57"]  # the mean over tasks: their questions summed
    table = blocks(report, Table, "BABILong")[0]
    assert table.header == ["model", "acc", "acc@0k", "acc@1k", "acc@4k", "effective context", "questions per cell"]
    assert table.rows[0][-2:] == ["qa1 1k, qa2 0k, qa3 none", "17-20"]  # n per cell


def test_the_authors_predictions_reach_the_section_through_the_report_s_options(two_runs, tmp_path):
    """`--babilong_reference DIR` (declared by BABILong's entry) is read by its section (`configured`), not by the
    generic report, and draws the authors' cells beside the runs."""
    from lm_eval_longmem.babilong.rim.section import REFERENCE_OPTION, SECTION

    folder = tmp_path / "llama3-rag"
    folder.mkdir()
    rows = [("kitchen", "The kitchen.", "Where is Mary?"), ("garden", "In the hallway.", "Where is John?")]
    (folder / "qa1_1k_instruction_yes_examples_yes_post_prompt_yes.csv").write_text(
        "target,output,question\n" + "".join(f"{t},{o},{q}\n" for t, o, q in rows), encoding="utf-8"
    )
    assert REFERENCE_OPTION == "babilong_reference" and SECTION.configured({}) == SECTION
    configured = SECTION.configured({REFERENCE_OPTION: [folder]})
    assert [(cell.qa, cell.length, cell.n) for reference in configured.references for cell in reference.cells] == [
        ("qa1", 1024, 2)
    ]
    table = blocks(
        build_report(two_runs, {REFERENCE_OPTION: [folder]}), Table, "BABILong conditions: in-context and retrieval"
    )[0]
    assert [row[:3] for row in table.rows if row[1] == "reference"] == [
        ["llama3-rag (authors' predictions)", "reference", qa] for qa in ("qa1", "qa2", "qa3")
    ]
    assert not blocks(build_report(two_runs), Table, "BABILong conditions: in-context and retrieval")  # in-context only

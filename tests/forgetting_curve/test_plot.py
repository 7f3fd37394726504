"""The Figure-1-style plot from the original tool's file (lm_eval results are covered in test_task.py)."""

import json

from lm_eval_longmem.plots import forgetting_curve


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

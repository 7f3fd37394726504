"""Report, effective context, heatmap and the `babilong` command line, on results files."""

from __future__ import annotations

import json

import pytest

from lm_eval_longmem.babilong.report import effective_context, format_report, headline, read_cells
from lm_eval_longmem.cli import main

ACC = {  # (task, length) -> accuracy
    ("qa1", "0k"): 1.0, ("qa1", "4k"): 0.9, ("qa1", "8k"): 0.8, ("qa1", "16k"): 0.9,
    ("qa2", "0k"): 0.8, ("qa2", "4k"): 0.5, ("qa2", "8k"): 0.4, ("qa2", "16k"): 0.3,
    ("qa3", "0k"): 0.9, ("qa3", "4k"): 0.85, ("qa3", "8k"): 0.2, ("qa3", "16k"): 0.1,
    ("qa4", "0k"): 1.0, ("qa4", "4k"): 1.0, ("qa4", "8k"): 1.0,
    ("qa5", "0k"): 0.9, ("qa5", "4k"): 0.9, ("qa5", "8k"): 0.9, ("qa5", "16k"): 0.9,
}  # fmt: skip


def _results(n: int = 100) -> dict:
    results = {"babilong_qa6_4k": {"alias": "qa6 4k", "sample_len": 0}}  # a task that did not run
    samples = {"babilong_qa6_4k": {"original": 0, "effective": 0}}
    for (qa, length), acc in ACC.items():
        name = f"babilong_{qa}_{length}"
        results[name] = {"acc,none": acc, "acc_corrected,none": min(1.0, acc + 0.05), "sample_len": n}
        samples[name] = {"original": n, "effective": n}
    configs = {"babilong_qa1_16k": {"metadata": {"babilong_skipped": {"prompt + 20 answer tokens exceed the window (16384)": 3}}}}
    return {"results": results, "n-samples": samples, "configs": configs, "config": {"model_args": "pretrained=x"}}


def test_cells_skip_tasks_that_did_not_run_and_carry_intervals():
    cells = read_cells(_results())
    assert len(cells) == len(ACC)
    first = cells[0]
    assert (first.qa, first.length, first.n) == ("qa1", "0k", 100)
    assert first.acc.low < first.acc.estimate == 1.0 == first.acc.high
    assert [c.length for c in cells if c.qa == "qa2"] == ["0k", "4k", "8k", "16k"]


def test_headline_is_the_qa1_qa5_mean_where_all_five_ran():
    heads = {h.length: h for h in headline(read_cells(_results()))}
    assert set(heads) == {"0k", "4k", "8k"}  # qa4 did not run at 16k
    assert heads["4k"].acc.estimate == pytest.approx((0.9 + 0.5 + 0.85 + 1.0 + 0.9) / 5)
    assert heads["4k"].acc.low < heads["4k"].acc.estimate < heads["4k"].acc.high


def test_effective_context_is_the_longest_length_that_stays_above_threshold():
    cells = read_cells(_results())
    assert effective_context(cells) == {"qa1": "4k", "qa2": None, "qa3": "4k", "qa4": "8k", "qa5": "16k"}
    # qa1 recovers at 16k, but "stays" means every shorter length must pass too
    assert effective_context(cells, threshold=0.75)["qa1"] == "16k"
    assert effective_context(cells, metric="acc_corrected")["qa1"] == "16k"  # 0.85 at 8k


def test_text_report_and_cli(tmp_path, capsys):
    text = format_report(_results())
    assert "qa1-qa5 mean per length" in text and "babilong_qa1_16k: 3 prompt + 20 answer tokens" in text
    overall = 100 * sum(ACC.values()) / len(ACC)
    assert f"overall (mean of all {len(ACC)} task x length cells, as the babilong group): {overall:.1f}" in text
    path = tmp_path / "results_x.json"
    path.write_text(json.dumps(_results()))
    main(["babilong", "report", str(tmp_path), "--threshold", "0.9"])
    out = capsys.readouterr().out
    assert "effective context (acc >= 90%" in out and "qa5  : 16k" in out
    with pytest.raises(ValueError, match="no BABILong task"):
        format_report({"results": {}})


def test_heatmap(tmp_path):
    from lm_eval_longmem.plots import babilong as plot_module
    from lm_eval_longmem.plots import plot_results

    assert plot_module.can_plot(_results()) and not plot_module.can_plot({"results": {"booksort": {}}})
    path = tmp_path / "results_x.json"
    path.write_text(json.dumps(_results()))
    written = plot_results(path, out_prefix=tmp_path / "fig", formats=("png", "svg"))
    assert {p.name for p in written} >= {"fig_babilong.png", "fig_babilong.svg"}
    assert all(p.stat().st_size > 1000 for p in written)


def test_score_command_prints_both_checks(shared_data, capsys):
    files = sorted((shared_data / "babilong_predictions").rglob("qa1_16k_*.csv"))
    main(["babilong", "score", str(files[0]), "--task", "qa1"])
    assert "n=1000  acc=91.30  acc_corrected=91.30" in capsys.readouterr().out
    main(["babilong", "score", str(files[0]), "--task", "qa1", "--json"])
    record = json.loads(capsys.readouterr().out)
    assert record["acc"] == pytest.approx(91.3) and record["n"] == 1000 and "acc_corrected" in record


def test_score_command_on_a_corrected_case(tmp_path, capsys):
    csv_file = tmp_path / "qa7.csv"
    csv_file.write_text("target,output,question\nnone,none,How many objects is Mary carrying?\none,one,How many?\n")
    main(["babilong", "score", str(csv_file), "--task", "qa7"])
    assert "n=2  acc=50.00  acc_corrected=100.00" in capsys.readouterr().out


def test_headline_interval_does_not_collapse_with_two_docs():
    # defect 9: every qa1-qa5 cell 0 of 2 right printed the interval [0.0, 0.0]
    results = {"results": {}, "n-samples": {}}
    for qa in ("qa1", "qa2", "qa3", "qa4", "qa5"):
        results["results"][f"babilong_{qa}_0k"] = {"acc,none": 0.0, "acc_corrected,none": 1.0, "sample_len": 2}
        results["n-samples"][f"babilong_{qa}_0k"] = {"original": 2, "effective": 2}
    (head,) = headline(read_cells(results))
    assert head.acc.estimate == 0.0 == head.acc.low < head.acc.high
    assert head.acc_corrected.estimate == 1.0 == head.acc_corrected.high > head.acc_corrected.low

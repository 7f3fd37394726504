"""Cells, means over tasks, effective context, heatmap and the `babilong` command line, on results files."""

from __future__ import annotations

import json

import pytest

from lm_eval_longmem.babilong.rim.reader import format_report, read_cells, read_length_means
from lm_eval_longmem.babilong.scores import ABSTAINED, ACC_CORRECTED
from lm_eval_longmem.babilong.summary import effective_context, mean_interval
from lm_eval_longmem.babilong.task import Answer, cells_from_items
from lm_eval_longmem.cli import main
from lm_eval_longmem.common.stats import Interval

ACC = {  # (task, length) -> accuracy
    ("qa1", "0k"): 1.0, ("qa1", "4k"): 0.9, ("qa1", "8k"): 0.8, ("qa1", "16k"): 0.9,
    ("qa2", "0k"): 0.8, ("qa2", "4k"): 0.5, ("qa2", "8k"): 0.4, ("qa2", "16k"): 0.3,
    ("qa3", "0k"): 0.9, ("qa3", "4k"): 0.85, ("qa3", "8k"): 0.2, ("qa3", "16k"): 0.1,
    ("qa4", "0k"): 1.0, ("qa4", "4k"): 1.0, ("qa4", "8k"): 1.0,
    ("qa5", "0k"): 0.9, ("qa5", "4k"): 0.9, ("qa5", "8k"): 0.9, ("qa5", "16k"): 0.9,
}  # fmt: skip


TOKENS = {"0k": 0, "4k": 4096, "8k": 8192, "16k": 16384}


def _results(*, legacy: bool = False) -> dict:
    """A results dict shaped as the `babilong` task writes it (values made up, intervals around them).

    `legacy`: as files written before the metric schema: lengths named "4k", skip reasons among the metrics.
    """
    spell = (lambda length: length) if legacy else (lambda length: TOKENS[length])  # noqa: E731
    metrics: dict = {"alias": "babilong"}
    for (qa, length), acc in ACC.items():
        for check, value in (("acc", acc), ("acc_corrected", min(1.0, acc + 0.05))):
            name = f"{check}@{qa}_{spell(length)}"
            metrics |= {
                f"{name},none": value,
                f"{name}_ci_low,none": value * 0.9,
                f"{name}_ci_high,none": min(1.0, value * 1.1),
            }
    for length in ("0k", "4k", "8k", "16k"):
        values = [acc for (qa, ln), acc in ACC.items() if ln == length]
        mean = sum(values) / len(values)
        name = f"acc@{spell(length)}"
        metrics |= {f"{name},none": mean, f"{name}_ci_low,none": mean - 0.05, f"{name}_ci_high,none": mean + 0.05}
    overall = sum(ACC.values()) / len(ACC)
    metrics |= {
        "acc,none": overall,
        "acc_ci_low,none": overall - 0.03,
        "acc_ci_high,none": overall + 0.03,
        "skipped,none": 3,
    }
    reasons = {f"qa4_{spell('16k')}": {"prompt + answer exceed the window (16384 tokens)": 3}}
    config: dict = {"task": "babilong"}
    if legacy:
        metrics["skip_reasons,none"] = reasons
    else:
        config["longmem"] = {"skip_reasons": reasons, "length_names": {str(n): name for name, n in TOKENS.items()}}
    return {
        "results": {"babilong": metrics, "hellaswag": {"acc,none": 0.3}},
        "configs": {"babilong": config},
        "config": {"model_args": "pretrained=x"},
    }


@pytest.mark.parametrize("legacy", [False, True])
def test_cells_are_read_back_with_their_intervals(legacy):
    cells = read_cells(_results(legacy=legacy))
    assert len(cells) == len(ACC)
    first = cells[0]
    assert (first.qa, first.length) == ("qa1", 0) and first.acc == Interval(1.0, 0.9, 1.0)
    assert [c.length for c in cells if c.qa == "qa2"] == [0, 4096, 8192, 16384]
    means = read_length_means(_results(legacy=legacy))
    assert list(means) == [0, 4096, 8192, 16384]
    assert means[4096].estimate == pytest.approx((0.9 + 0.5 + 0.85 + 1.0 + 0.9) / 5)


def test_old_and_new_files_give_the_same_report():
    assert format_report(_results(legacy=True)) == format_report(_results())


def test_effective_context_is_the_longest_length_that_stays_above_threshold():
    cells = read_cells(_results())
    assert effective_context(cells) == {"qa1": 4096, "qa2": None, "qa3": 4096, "qa4": 8192, "qa5": 16384}
    # qa1 recovers at 16k, but "stays" means every shorter length must pass too
    assert effective_context(cells, threshold=0.75)["qa1"] == 16384
    assert effective_context(cells, check=ACC_CORRECTED)["qa1"] == 16384  # 0.85 at 8k


def test_task_summaries_from_doc_items():
    items = [
        Answer("qa1", 0, 1.0, 1.0),
        Answer("qa1", 0, 0.0, 1.0),
        Answer("qa2", 0, 1.0, 0.0),
        Answer("qa1", 1024, 0.0, 0.0),
    ]
    cells = cells_from_items(items)
    assert [(c.qa, c.length, c.n) for c in cells] == [("qa1", 0, 2), ("qa1", 1024, 1), ("qa2", 0, 1)]
    assert cells[0].acc.estimate == 0.5 and cells[0].acc_corrected.estimate == 1.0


def test_abstention_share_per_cell_and_in_the_report():
    items = [
        Answer("qa1", 0, 1.0, 1.0, None, 1.0),
        Answer("qa1", 0, 0.0, 1.0, None, 0.0),
        Answer("qa2", 0, 1.0, 1.0, None, 0.0),
    ]
    cells = cells_from_items(items)
    assert [c.corrected_abstained.estimate for c in cells] == [0.5, 0.0]
    assert mean_interval(cells, ABSTAINED).estimate == pytest.approx(0.25)
    results = _results()
    results["results"]["babilong"] |= {
        "corrected_abstained,none": 0.125,
        "corrected_abstained_ci_low,none": 0.1,
        "corrected_abstained_ci_high,none": 0.15,
    }
    line = "the corrected reader abstained (kept acc's verdict) on 12.5% of answers [10.0, 15.0]"
    assert line in format_report(results, check=ACC_CORRECTED)
    assert line not in format_report(results) and "abstained" not in format_report(_results(), check=ACC_CORRECTED)


def test_text_report_and_cli(tmp_path, capsys):
    text = format_report(_results())
    assert "mean over tasks per length (qa1-qa5, the paper's headline)" in text
    assert "qa4_16k: 3 x prompt + answer exceed the window" in text
    overall = 100 * sum(ACC.values()) / len(ACC)
    assert f"overall (mean of all {len(ACC)} task x length cells): {overall:.1f}" in text
    path = tmp_path / "results_x.json"
    path.write_text(json.dumps(_results()))
    main(["babilong", "report", str(tmp_path), "--threshold", "0.9"])
    out = capsys.readouterr().out
    assert "effective context (acc >= 90%" in out and "qa5  : 16k" in out
    with pytest.raises(ValueError, match="no BABILong cells"):
        format_report({"results": {}})


@pytest.mark.slow
def test_heatmap(tmp_path):
    from lm_eval_longmem.babilong.rim import figures as plot_module
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


def test_text_report_says_the_questions_behind_each_number():
    """The questions each cell, length mean and the overall mean rest on, from the run's `docs_per_cell`."""
    from lm_eval_longmem.common import metric_names

    results = _results()
    cells = {metric_names.cell(c.qa, c.length): 20 for c in read_cells(results)}
    results["configs"]["babilong"]["longmem"]["docs_per_cell"] = cells
    text = format_report(results)
    assert text.splitlines()[0] == "BABILong acc (%), 95% Wilson interval, n = 20 questions per cell"
    tasks_at_4k = sum(1 for (_, length) in ACC if length == "4k")
    [line_4k] = [line for line in text.splitlines() if line.strip().startswith("4k:")]
    assert line_4k.endswith(f"], n={20 * tasks_at_4k}")
    assert f"cells, n={20 * len(ACC)})" in text
    cells[metric_names.cell("qa1", 4096)] = 7  # one cell scored fewer questions: each cell says its own n
    text = format_report(results)
    assert "questions per cell" not in text.splitlines()[0]
    assert "n=7" in text and "n=20" in text
    header, qa1 = text.splitlines()[1], text.splitlines()[2]
    assert len(header) == len(qa1)  # the columns stay aligned

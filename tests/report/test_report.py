"""`lm-eval-longmem report`: headline table, figures (checked as matplotlib objects), other tasks, files."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import pytest
from kit import build_booksort, build_uniform_model, hf_run_args, in_process, read_results, run_lm_eval
from report_kit import LENGTHS, blocks, booksort_metrics, write_run

from lm_eval_longmem.readers.results import load_runs
from lm_eval_longmem.report import build_report, write_report
from lm_eval_longmem.report.blocks import Table
from lm_eval_longmem.report.render import render_markdown

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")


pytestmark = pytest.mark.usefixtures("close_figures")


def test_headline_table_has_one_row_per_model_leading_with_each_evaluations_number(two_runs_report):
    report = two_runs_report
    assert [s.title for s in report.sections[:2]] == [
        "What these numbers rest on",
        "Headline numbers",
    ]  # both skipped docs
    table = blocks(report, Table, "Headline numbers")[0]
    assert table.header == [
        "model",
        "forgetting_curve fine_memory_length",
        "coarse_memory_length",
        "booksort acc (%)",
        "trials",
        "babilong acc (%)",
        "questions",
        "rests on",
    ]  # fmt: skip (every interval beside its n)
    assert table.rows == [
        [
            "small-model",
            "128 [64, 128]",
            "512 [256, 512]",
            "75.0 [30.0, 80.0]",
            "48",
            "55.0 [40.0, 70.0]",
            "177",
            "babilong: 3 docs skipped",
        ],
        [
            "big-model",
            "512 [256, 512]",
            ">1024 [512, 1024]",
            "60.0 [30.0, 80.0]",
            "48",
            "44.0 [40.0, 70.0]",
            "177",
            "babilong: 3 docs skipped",
        ],
    ]


def test_other_harness_tasks_are_listed_with_their_main_metric(two_runs_report):
    table = blocks(two_runs_report, Table, "Other harness tasks in the same runs")[0]
    assert table.rows == [
        ["small-model", "hellaswag", "acc", "0.41", "0.01", "higher"],
        ["small-model", "babilong_qa1", "acc", "0.3", "0.02", "?"],  # a built-in whose name starts like ours
    ]


def test_skips_are_reported_per_task_and_reason(two_runs_report):
    table = blocks(two_runs_report, Table, "Skipped (never truncated)")[0]
    assert table.rows[0] == ["small-model", "babilong", "3", "qa3_4k: 3 longer than the window"]


def test_a_run_without_our_tasks_still_gets_a_report(tmp_path):
    path = tmp_path / "results_2026-01-01T00-00-00.1.json"
    path.write_text(json.dumps({"results": {"arc_easy": {"acc,none": 0.7}}, "config": {"model_args": "pretrained=m"}}))
    report = build_report(load_runs([path]))
    assert [s.title for s in report.sections] == ["Headline numbers", "Other harness tasks in the same runs", "Runs"]
    assert blocks(report, Table, "Headline numbers")[0].rows[0][1:] == ["-"] * 7
    assert blocks(report, Table, "Runs")[0].rows == [["m", "-", "pretrained=m", path.name]]


@pytest.mark.slow
def test_files_markdown_and_a_self_contained_html_page(two_runs, tmp_path):
    files = write_report(two_runs, tmp_path / "report")
    md = files.markdown.read_text()
    assert md.startswith("# Long-context memory report")
    assert (
        "| small-model | 128 [64, 128] | 512 [256, 512] | 75.0 [30.0, 80.0] | 48 | 55.0 [40.0, 70.0] | 177 | babilong: 3 docs skipped |\n"
        in md
    )
    assert f"| big-model | hf | pretrained=.../big-model, dtype=float32 | {two_runs[1].path.name} |" in md
    linked = re.findall(r"!\[[^]]*\]\((figures/[^)]+\.png)\)", md)
    assert len(linked) == 6 and all((tmp_path / "report" / name).is_file() for name in linked)
    page = files.html.read_text()
    sources = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(sources) == 6 and all(src.startswith("data:image/png;base64,") for src in sources)
    assert base64.b64decode(sources[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    assert sorted(p.suffix for p in files.figures) == [".pdf"] * 6 + [".png"] * 6
    assert render_markdown(build_report(two_runs)) == md  # the same runs give the same report


def test_a_figure_name_with_spaces_and_brackets_is_written_where_its_links_point(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    import lm_eval_longmem.report as report_module
    from lm_eval_longmem.report.blocks import FigureBlock, Report, Section

    figure = plt.figure()
    block = FigureBlock("SmolLM2-135M-Instruct [2026-01-01 run]", "A run label as a name.", figure)
    monkeypatch.setattr(
        report_module, "build_report", lambda runs, options=None: Report([], [], [Section("S", [block])])
    )
    files = write_report([], tmp_path / "report")
    (linked,) = re.findall(r"!\[[^]]*\]\(([^)]+)\)", files.markdown.read_text())
    assert linked == "figures/SmolLM2-135M-Instruct_2026-01-01_run.png"
    assert (tmp_path / "report" / linked).is_file() and (tmp_path / "report" / linked).with_suffix(".pdf").is_file()
    assert "data:image/png;base64," in files.html.read_text()


@pytest.mark.slow
def test_command_reports_good_files_and_names_the_bad_one(two_runs, tmp_path):
    empty = tmp_path / "results_2026-01-02T00-00-00.1.json"
    empty.write_bytes(b"")
    proc = subprocess.run(
        [CLI, "report", str(two_runs[0].path), str(empty), str(tmp_path / "b"), "--output_path", str(tmp_path / "r")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        == f"lm-eval-longmem: error: {empty} is empty (0 bytes), probably from an interrupted run: rerun lm_eval or pass another results file"
    )
    assert "small-model: forgetting_curve fine_memory_length 128 [64, 128]" in proc.stdout
    assert "big-model" in proc.stdout
    assert (tmp_path / "r" / "report.html").is_file()


# --- answer bias, perplexity under the curve, curves by text source ---------------------------------


# --- the HTML page of a real run (Markdown shown as Markdown, long paths wrapped) ------------------


@pytest.fixture(scope="module")
def uniform_run(tiny_llama_dir, embedded_books_dir, tmp_path_factory):
    """A real lm_eval run (forgetting curve, Book-SORT) of the tiny model with a zeroed head, written under a
    long folder: it answers "A" on every trial (a bold answer-bias flag), its perplexities all agree, and
    with `--limit 3` the second length has one sample."""
    work = tmp_path_factory.mktemp("uniform")
    model = build_uniform_model(tiny_llama_dir, work / "tiny-model-with-a-zeroed-head-for-degenerate-cells")
    data = build_booksort(embedded_books_dir / "macbeth.txt", work / "booksort")
    out = work / "a-results-folder-with-a-long-name" / "and-another-level-below-it-as-a-cluster-would-write"
    out.mkdir(parents=True)
    metadata = {"forgetting_curve_corpus": str(embedded_books_dir / "macbeth.txt"), "forgetting_curve_lengths": "16,32",
                "forgetting_curve_samples": 2, "booksort_data": str(data)}  # fmt: skip
    run_lm_eval(hf_run_args(model, "forgetting_curve,booksort_in_context", "--limit", "3", "--batch_size", "2",
        "--metadata", json.dumps(metadata)), out)  # fmt: skip
    return read_results(out), write_report(load_runs([out]), work / "report")


@pytest.mark.slow
def test_a_real_run_records_each_task_s_evaluation(uniform_run):
    results, _ = uniform_run
    assert {task: results["configs"][task]["longmem"]["evaluation"] for task in ("forgetting_curve", "booksort_in_context")} == {
        "forgetting_curve": "forgetting_curve", "booksort_in_context": "booksort"}  # fmt: skip
    assert {results["configs"][task]["longmem"]["condition"] for task in ("forgetting_curve", "booksort_in_context")} == {
        "in-context"}  # fmt: skip


@pytest.mark.slow
def test_html_report_renders_markdown(uniform_run):
    results, files = uniform_run
    assert results["results"]["booksort_in_context"]["pct_A,none"] == 1.0
    md, page = files.markdown.read_text(), files.html.read_text()
    (flag, *_) = [line for line in md.splitlines() if line.startswith("**Answer bias:")]
    assert flag.count("**") == 2 and "`booksort_in_context`**" in flag  # bold around a code span
    calibrated = results["results"]["booksort_in_context"]
    assert flag.endswith(f"With the bias removed (`acc_calibrated`, from the log-odds of the two labels): "
                         f"{100 * calibrated['acc_calibrated,none']:.1f} [{100 * calibrated['acc_calibrated_ci_low,none']:.1f}, "
                         f"{100 * calibrated['acc_calibrated_ci_high,none']:.1f}]%.")  # fmt: skip
    assert "**" not in page and "<strong>Answer bias:" in page
    assert "<code>booksort_in_context</code></strong>" in page.replace("<wbr>", "")
    assert page.count("<strong>") == md.count("**") // 2


@pytest.mark.slow
def test_html_report_wraps_long_paths(uniform_run):
    _, files = uniform_run
    page = files.html.read_text()
    assert (
        "td { " in page and "overflow-wrap: anywhere" in page.split("td { ")[0] + page.split("td { ")[1].split("}")[0]
    )
    results_file = load_runs([files.markdown.parent.parent / "a-results-folder-with-a-long-name"])[0].path
    assert len(str(results_file)) > 120 and "a-results-folder-with-a-long-name" not in page  # the machine's folders
    breakable = re.sub(r"([/_])", r"\1<wbr>", results_file.name)
    assert f"<td>{breakable}</td>" in page  # the file by its name
    cells = re.findall(r"<td>(.*?)</td>", page)
    text = [re.sub(r"<[^>]+>", " ", piece) for cell in cells for piece in cell.split("<wbr>")]
    runs = [
        run for piece in text for run in re.split(r"\s+|(?<=-)", piece) if run
    ]  # a browser may break after a hyphen
    assert max(map(len, runs)) <= 48, max(runs, key=len)  # no unbreakable stretch wider than a column


@pytest.mark.slow
def test_one_sample_and_agreeing_cells_are_shown_as_such(uniform_run):
    results, files = uniform_run
    row = results["results"]["forgetting_curve"]
    counts = results["configs"]["forgetting_curve"]["longmem"]["docs_per_cell"]
    one, two = sorted(counts, key=counts.get)  # --limit 3 of 2 lengths x 2 samples: one length has 1 sample
    assert (counts[one], counts[two]) == (1, 2)
    assert (
        row[f"copy_ppl@{two},none"] == pytest.approx(101.0) and row[f"copy_ppl@{two}_ci_low,none"] is None
    )  # equal: no t interval
    assert row[f"copy_acc@{one}_ci_low,none"] is None and row[f"copy_acc@{two}_ci_low,none"] is not None  # n=1: none
    table = [line.split(" | ") for line in files.markdown.read_text().splitlines() if line.startswith("| ")]
    by_length = {cells[1]: cells for cells in table if cells[1] in (one, two)}
    assert by_length[two][2] == "2" and by_length[two][5:] == ["101.0 (all equal)", "101.0 (all equal) |"]
    assert by_length[one][2] == "1" and all(cell.endswith(("(n=1)", "(n=1) |")) for cell in by_length[one][3:])


# --- a report says what its numbers rest on ---------------------------------------------------------


@pytest.mark.slow
def test_a_partial_merge_and_lengths_without_docs_are_stated_first_and_in_the_tables(tmp_path, capsys):
    """A report of `merge` output with docs in no shard read as a complete run ("lengths tested 64" for a 32,64 sweep)."""
    path = write_run(tmp_path / "a", "merged-model", fine=128, coarse=512)
    data = json.loads(path.read_text())
    data["n-samples"]["forgetting_curve"] = {"original": 9, "effective": 4}
    data["configs"] = {"forgetting_curve": {"task": "forgetting_curve", "longmem": {
        "skip_reasons": {}, "docs_per_cell": {str(L): 1 for L in LENGTHS}, "sweep_cells": ["32", *map(str, LENGTHS)],
        "merge": {"shards": 1, "docs_missing": 5}}}}  # fmt: skip
    path.write_text(json.dumps(data))
    report = build_report(load_runs([path]))
    first = report.sections[0]
    assert first.title == "What these numbers rest on"
    text = " ".join(b for b in first.blocks if isinstance(b, str))
    assert "`forgetting_curve` is a PARTIAL merge: 5 of 9 docs of the sweep are in no shard" in text
    assert "`forgetting_curve`: no doc ran at 32 of its sweep" in text
    assert "`babilong`: 3 docs were skipped" in text
    headline = blocks(report, Table, "Headline numbers")[0]
    assert (
        headline.rows[0][-1]
        == "forgetting_curve PARTIAL: 5 of 9 docs in no shard; forgetting_curve: no doc at 32; babilong: 3 docs skipped"
    )
    curve = blocks(report, Table, "Forgetting curve")[0]
    assert curve.rows[0][curve.header.index("lengths tested")] == "32 (no docs), 64, 128, 256, 512, 1024"
    proc = subprocess.run(
        [CLI, "report", str(path), "--output_path", str(tmp_path / "r")], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "PARTIAL" in proc.stdout and "PARTIAL" in (tmp_path / "r" / "report.md").read_text()


def test_a_model_s_conditions_are_laid_side_by_side_over_its_runs(tmp_path):
    memoryless = {**booksort_metrics(0.5, 0.5), "alias": "booksort_memoryless"}
    plain = write_run(
        tmp_path / "plain", "small-model", fine=128, coarse=512, extra={"booksort_memoryless": memoryless}
    )
    data = json.loads(plain.read_text())
    data["configs"]["booksort_memoryless"] = {"dataset_kwargs": {"condition": "memoryless"}}  # before tasks recorded it
    plain.write_text(json.dumps(data))
    rag = write_run(tmp_path / "rag", "small-model", fine=128, coarse=512, scale=0.5)
    data = json.loads(rag.read_text())
    data["results"] = {"babilong": data["results"]["babilong"]}
    data["configs"]["babilong"]["longmem"] |= {
        "evaluation": "babilong",
        "condition": "retrieval",
        "retrieval": "sentences top-5 bm25",
    }
    rag.write_text(json.dumps(data))

    report = build_report(load_runs([plain, rag]))
    [table] = blocks(report, Table, "Conditions side by side")
    assert table.header == ["model", "evaluation", "in-context", "memory-less", "retrieval"]
    rows = {row[1]: row for row in table.rows}  # the forgetting curve has one condition: no row
    assert rows == {
        "Book-SORT": [
            "small-model",
            "Book-SORT",
            "booksort_in_context: 75.0 [30.0, 80.0] (n=48)",
            "booksort_memoryless: 50.0 [30.0, 80.0]",
            "-",
        ],
        "BABILong": [
            "small-model",
            "BABILong",
            "babilong: 55.0 [40.0, 70.0] (n=177)",
            "-",
            "babilong (sentences top-5 bm25): 27.5 [40.0, 70.0] (n=177)",
        ],
    }  # fmt: skip (n: the docs each interval rests on, where the run says)
    assert not blocks(build_report(load_runs([rag])), Table, "Conditions side by side")  # one condition: no section


def test_a_null_summary_states_its_reason_first_and_in_the_headline(tmp_path):
    """A `--limit 1` run leaves the memory lengths null, with the reason in
    `configs.forgetting_curve.longmem.null_reasons`; the report says so where the null value is read."""
    path = write_run(tmp_path / "a", "limited-model", fine=128, coarse=512)
    data = json.loads(path.read_text())
    why = "length 64 ran 1 of its 14 docs (--limit); set forgetting_curve_limit_order=cheapest"
    for criterion in ("fine", "coarse"):
        for stat in ("", "_low", "_high"):
            data["results"]["forgetting_curve"][f"{criterion}_memory_length{stat},none"] = None
    data["configs"]["forgetting_curve"] = {"longmem": {"null_reasons": {"fine_memory_length": why,
                                                                        "coarse_memory_length": why}}}  # fmt: skip
    path.write_text(json.dumps(data))
    report = build_report(load_runs([path]))
    text = " ".join(b for b in report.sections[0].blocks if isinstance(b, str))
    assert report.sections[0].title == "What these numbers rest on"
    assert (
        f"`forgetting_curve` `fine_memory_length` is null: {why} (`configs.forgetting_curve.longmem.null_reasons`)"
        in text
    )
    headline = blocks(report, Table, "Headline numbers")[0]
    row = dict(zip(headline.header, headline.rows[0], strict=True))
    assert row["forgetting_curve fine_memory_length"] == "-"
    assert row["rests on"].startswith(
        "forgetting_curve coarse_memory_length: null; forgetting_curve fine_memory_length: null"
    )


def test_html_headers_break_between_words_only(two_runs):
    """Headers broke inside words ("coarse_memory_len|gth", "bac|ken|d") because every cell could
    break anywhere, so a column shrank below its header's words. Headers now break only at separators and spaces,
    which keeps each column at least as wide as its header's longest word."""
    from lm_eval_longmem.report.render import _CSS, render_html

    report = build_report(two_runs)
    page = render_html(report, pngs={block.name: b"" for block in report.figures()})
    rules = dict(re.findall(r"(?m)(?:^|\} )([a-z, ]+) \{ ([^}]*)\}", _CSS))
    assert "overflow-wrap: normal" in rules["th"] and "anywhere" not in rules["th"]
    assert "<th>coarse_<wbr>memory_<wbr>length</th>" in page and "<th>backend</th>" in page


@pytest.mark.parametrize(
    ("value", "shown"),
    [("/home/someone/models/SmolLM2-135M", ".../SmolLM2-135M"), ("/home/someone/models/SmolLM2/", ".../SmolLM2"),
     ("~/m/tiny", ".../tiny"), ("C:\\Users\\x\\tiny", ".../tiny"), ("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M"),
     ("float32", "float32"), (4, "4")],
)  # fmt: skip
def test_the_runs_table_shows_no_folder_of_the_writers_machine(value, shown, two_runs_report):
    """The Runs table showed absolute paths of the user's machine; a local folder is shown by its
    name, a hub name and other values as given, and the results file by its name."""
    from lm_eval_longmem.report import portable

    assert portable(value) == shown
    table = blocks(two_runs_report, Table, "Runs")[0]
    assert table.rows[0][2:] == ["pretrained=.../small-model, dtype=float32", "results_2026-01-01T00-00-00.000001.json"]


# --- what the report reads: a stray JSON beside a run, impossible values, NaN ---------------------------------------


def _report(capsys, *args) -> tuple[int, str, str]:
    return in_process(capsys, "report", *args)


def test_a_stray_json_beside_a_run_is_named_and_the_run_reported(tmp_path, capsys):
    """`report out5/` refused the whole folder: `results_mine.json is JSON but not an lm_eval results file`."""
    write_run(tmp_path / "out5" / "m", "m", fine=128, coarse=256)
    stray = tmp_path / "out5" / "results_mine.json"
    stray.write_text(json.dumps({"notes": "mine"}))
    status, out, err = _report(capsys, tmp_path / "out5", "--output_path", tmp_path / "r")
    assert status == 0 and "m: forgetting_curve fine_memory_length 128 [64, 128]" in out
    assert err == f'lm-eval-longmem: skipped {stray}: JSON but not an lm_eval results file (no "results" object)\n'
    assert (tmp_path / "r" / "report.md").is_file()


def test_an_impossible_accuracy_refuses_its_run_in_one_line_naming_file_and_metric(tmp_path, capsys):
    """`report` showed an accuracy of 1.7 as "170.0 [0.0, 71.6]" without a word; the other runs are still reported."""
    bad = write_run(tmp_path / "out" / "a", "a", fine=128, coarse=256)
    write_run(tmp_path / "out" / "b", "b", fine=128, coarse=256)
    data = json.loads(bad.read_text())
    data["results"]["booksort_in_context"] |= {"acc,none": 1.7, "acc_ci_low,none": 0.0, "acc_ci_high,none": 0.716}
    bad.write_text(json.dumps(data))
    status, out, err = _report(capsys, tmp_path / "out", "--output_path", tmp_path / "r")
    assert status == 1 and "b: forgetting_curve" in out and "a: forgetting_curve" not in out
    assert err == (
        f"lm-eval-longmem: error: {bad}: booksort_in_context acc = 1.7 (a proportion lies in [0, 1]): the file was "
        "damaged or edited; rerun the evaluation\n"
    )


@pytest.mark.parametrize(
    ("task", "metric", "value", "why"),
    [
        ("booksort_in_context", "acc@LE250_ci_low", -0.2, "a proportion lies in [0, 1]"),
        ("booksort_in_context", "pct_A", 1.5, "a proportion lies in [0, 1]"),
        ("booksort_in_context", "acc@LE250_p_above_chance", 3.0, "a p-value lies in [0, 1]"),
        ("babilong", "acc_corrected@qa1_0", 1.05, "a proportion lies in [0, 1]"),
        ("forgetting_curve", "copy_acc@64", 2.0, "a proportion lies in [0, 1]"),
        ("forgetting_curve", "copy_ppl@64", 0.5, "a perplexity is at least 1"),
    ],
)
def test_values_no_task_can_write_are_found_by_their_family(tmp_path, task, metric, value, why):
    from lm_eval_longmem.readers.results import load_run
    from lm_eval_longmem.report import impossible_values

    path = write_run(tmp_path / "a", "a", fine=128, coarse=256)
    data = json.loads(path.read_text())
    data["results"]["forgetting_curve"] |= {"copy_ppl@128,none": 3.5, "claimed_length,none": 8192}  # not proportions
    assert impossible_values(load_run(path)) == []
    data["results"][task][f"{metric},none"] = value
    path.write_text(json.dumps(data))
    assert impossible_values(load_run(path)) == [f"{task} {metric} = {value:g} ({why})"]


def test_a_nan_is_shown_as_nan_not_as_absent(tmp_path, capsys):
    path = write_run(tmp_path / "out" / "a", "a", fine=128, coarse=256)
    path.write_text(path.read_text().replace('"acc,none": 0.55', '"acc,none": NaN'))
    status, out, err = _report(capsys, path, "--output_path", tmp_path / "r")
    assert status == 0 and "babilong acc NaN [40.0, 70.0]% (n=177)" in out
    assert err == f"lm-eval-longmem: note: {path}: babilong acc stored as NaN (shown as NaN)\n"
    assert "| NaN [40.0, 70.0] |" in (tmp_path / "r" / "report.md").read_text()


def test_a_run_given_twice_is_refused(tmp_path, capsys):
    path = write_run(tmp_path / "out" / "a", "a", fine=128, coarse=256)
    status, out, err = _report(capsys, tmp_path / "out", path, "--output_path", tmp_path / "r")
    assert (status, out) == (1, "")
    assert err == f"lm-eval-longmem: error: {path} is given twice: name each run once\n"

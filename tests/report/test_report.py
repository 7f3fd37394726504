"""`lm-eval-longmem report`: headline table, figures (checked as matplotlib objects), other tasks, files."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import matplotlib.pyplot as plt
import pytest
from kit import build_booksort, build_uniform_model, read_results, run_lm_eval
from matplotlib.patches import Rectangle

from lm_eval_longmem.readers.results import load_runs
from lm_eval_longmem.report import build_report, write_report
from lm_eval_longmem.report.blocks import FigureBlock, Table
from lm_eval_longmem.report.render import render_markdown

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")
LENGTHS = (64, 128, 256, 512, 1024)


def copy_curve(fine_until: int, coarse_until: int) -> dict[int, tuple[float, float]]:
    """Per length (copy, lm): copy perfect up to `fine_until`, above LM up to `coarse_until`, equal after."""
    return {L: (1.0 if L <= fine_until else 0.6 if L <= coarse_until else 0.3, 0.3) for L in LENGTHS}


def forgetting_curve_metrics(curve, fine, coarse) -> dict:
    row = {"alias": "forgetting_curve"}
    for L, (c, m) in curve.items():
        row |= {
            f"copy_acc@{L},none": c,
            f"copy_acc@{L}_stderr,none": 0.0,
            f"lm_acc@{L},none": m,
            f"lm_acc@{L}_stderr,none": 0.0,
        }
    row |= {
        "fine_memory_length,none": fine, "fine_memory_censored,none": fine == LENGTHS[-1],
        "fine_memory_length_low,none": fine // 2, "fine_memory_length_high,none": fine,
        "coarse_memory_length,none": coarse, "coarse_memory_censored,none": coarse == LENGTHS[-1],
        "coarse_memory_length_low,none": coarse // 2, "coarse_memory_length_high,none": coarse,
        "claimed_length,none": 8192, "skipped_lengths,none": "none", "skipped,none": 0,
    }  # fmt: skip
    return row


def booksort_metrics(acc_250: float, acc_500: float) -> dict:
    row = {
        "alias": "booksort_in_context",
        "acc,none": (acc_250 + acc_500) / 2,
        "acc_ci_low,none": 0.3,
        "acc_ci_high,none": 0.8,
    }
    for cell, value in (
        ("LE250", acc_250),
        ("LE500", acc_500),
        ("bin0", 0.9),
        ("bin1", 0.7),
        ("bin2", 0.5),
        ("bin3", 0.4),
    ):
        row |= {f"acc@{cell},none": value, f"acc@{cell}_ci_low,none": value - 0.1, f"acc@{cell}_ci_high,none": min(1.0, value + 0.1),
                f"acc@{cell}_p_above_chance,none": 0.01 if value > 0.8 else 0.5}  # fmt: skip
    return row


def babilong_metrics(scale: float) -> dict:
    """The one-task BABILong results (the shared-core contract): qa1-qa3 at 0k, 1k, 4k."""
    row = {"alias": "babilong", "skipped,none": 3, "skip_reasons,none": {"qa3_4k": {"longer than the window": 3}}}
    accs = {"qa1": (1.0, 0.9, 0.6), "qa2": (0.9, 0.5, 0.2), "qa3": (0.5, 0.3, 0.1)}
    for qa, values in accs.items():
        for length, value in zip(("0k", "1k", "4k"), values):
            row[f"acc@{qa}_{length},none"] = value * scale
            row[f"acc_corrected@{qa}_{length},none"] = min(1.0, value * scale + 0.05)
    for j, length in enumerate(("0k", "1k", "4k")):
        mean = sum(v[j] for v in accs.values()) / 3 * scale
        row |= {f"acc@{length},none": mean, f"acc@{length}_ci_low,none": mean - 0.1, f"acc@{length}_ci_high,none": mean + 0.1,
                f"acc_corrected@{length},none": mean + 0.05}  # fmt: skip
    row |= {"acc,none": 0.55 * scale, "acc_ci_low,none": 0.4, "acc_ci_high,none": 0.7, "acc_corrected,none": 0.6 * scale,
            "effective_context@qa1,none": "1k" if scale == 1 else "0k", "effective_context@qa2,none": "0k",
            "effective_context@qa3,none": "none"}  # fmt: skip
    return row


def write_run(folder, model, *, fine, coarse, scale=1.0, extra=None):
    folder.mkdir(parents=True)
    data = {
        "results": {
            "forgetting_curve": forgetting_curve_metrics(copy_curve(fine, coarse), fine, coarse),
            "booksort": {"alias": "booksort", "acc,none": 0.6},
            "booksort_in_context": booksort_metrics(0.9 * scale, 0.6 * scale),
            "babilong": babilong_metrics(scale),
            **(extra or {}),
        },
        "group_subtasks": {"booksort": ["booksort_in_context"]},
        "configs": {
            "babilong": {
                "longmem": {
                    "docs_per_cell": {f"{qa}_{n}": 20 for qa in ("qa1", "qa2", "qa3") for n in (0, 1024, 4096)}
                    | {"qa3_4096": 17}
                }
            }
        },  # fmt: skip (3 of qa3 at 4k skipped)
        "higher_is_better": {"hellaswag": {"acc": True, "acc_norm": True}},
        "n-samples": {"booksort_in_context": {"original": 48, "effective": 48}},
        "config": {"model": "hf", "model_args": f"pretrained=/models/{model},dtype=float32"},
        "model_name": f"/models/{model}",
    }
    path = folder / "results_2026-01-01T00-00-00.000001.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def two_runs(tmp_path):
    hellaswag = {
        "hellaswag": {"alias": "hellaswag", "acc,none": 0.41, "acc_stderr,none": 0.01, "acc_norm,none": 0.52},
        "babilong_qa1": {"alias": "babilong_qa1", "acc,none": 0.3, "acc_stderr,none": 0.02},  # the harness's, not ours
    }
    a = write_run(tmp_path / "a", "small-model", fine=128, coarse=512, extra=hellaswag)
    b = write_run(tmp_path / "b", "big-model", fine=512, coarse=1024, scale=0.8)
    return load_runs([a, b])


def blocks(report, kind, section=None):
    return [b for s in report.sections if section in (None, s.title) for b in s.blocks if isinstance(b, kind)]


def figure(report, name):
    return next(b.figure for b in blocks(report, FigureBlock) if b.name == name)


def test_headline_table_has_one_row_per_model_leading_with_each_evaluations_number(two_runs):
    report = build_report(two_runs)
    assert [s.title for s in report.sections[:2]] == [
        "What these numbers rest on",
        "Headline numbers",
    ]  # both skipped docs
    table = blocks(report, Table, "Headline numbers")[0]
    assert table.header == [
        "model", "forgetting_curve fine_memory_length", "coarse_memory_length", "booksort acc (%)", "babilong acc (%)", "rests on"
    ]  # fmt: skip
    assert table.rows == [
        [
            "small-model",
            "128 [64, 128]",
            "512 [256, 512]",
            "75.0 [30.0, 80.0]",
            "55.0 [40.0, 70.0]",
            "babilong: 3 docs skipped",
        ],
        [
            "big-model",
            "512 [256, 512]",
            ">1024 [512, 1024]",
            "60.0 [30.0, 80.0]",
            "44.0 [40.0, 70.0]",
            "babilong: 3 docs skipped",
        ],
    ]


def test_overlay_has_one_copy_curve_per_model_with_its_memory_lengths(two_runs):
    fig = figure(build_report(two_runs), "forgetting_curve_overlay")
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


def test_each_model_gets_its_own_forgetting_curve(two_runs):
    report = build_report(two_runs)
    names = [b.name for b in blocks(report, FigureBlock, "Forgetting curve")]
    assert names == ["forgetting_curve_overlay", "forgetting_curve_small-model", "forgetting_curve_big-model"]
    ax = figure(report, "forgetting_curve_big-model").axes[0]
    assert ax.get_title() == "Forgetting curve: big-model"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"copy accuracy", "LM accuracy", "fine-grained memory (512)", "coarse-grained memory (>1024)"} <= set(labels)


def test_babilong_heatmap_reads_the_one_task_results(two_runs):
    report = build_report(two_runs)
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
    table = blocks(report, Table, "BABILong")[0]
    assert table.header == ["model", "acc", "acc@0k", "acc@1k", "acc@4k", "effective context", "questions per cell"]
    assert table.rows[0][-2:] == ["qa1 1k, qa2 0k, qa3 none", "17-20"]  # n per cell (issue 26, item 1)


def test_booksort_figure_has_a_line_per_model_by_excerpt_length_and_distance(two_runs):
    report = build_report(two_runs)
    ax_a, ax_b = figure(report, "booksort").axes
    assert ax_a.get_xlabel() == "excerpt length L_E (words)" and ax_b.get_xlabel() == "distance bin (d0 nearest)"
    assert [t.get_text() for t in ax_a.get_xticklabels()] == ["250", "500"]
    assert {t.get_text() for t in ax_a.get_legend().get_texts()} == {"big-model", "small-model", "chance"}
    small = next(c for c in ax_a.containers if c.get_label() == "small-model")
    assert list(small.lines[0].get_ydata()) == pytest.approx([0.9, 0.6])
    by_bin = next(c for c in ax_b.containers if c.get_label() == "big-model")
    assert list(by_bin.lines[0].get_xdata()) == [0, 1, 2, 3]
    table = blocks(report, Table, "Book-SORT")[0]
    assert table.header == ["model", "acc", "answered A", "L_E=250 words", "L_E=500 words", "trials"]
    assert table.rows[1][2:] == ["-", "72.0 [62.0, 82.0]", "48.0 [38.0, 58.0]", "48"]  # no pct_A: results of before


def test_other_harness_tasks_are_listed_with_their_main_metric(two_runs):
    table = blocks(build_report(two_runs), Table, "Other harness tasks in the same runs")[0]
    assert table.rows == [
        ["small-model", "hellaswag", "acc", "0.41", "0.01", "higher"],
        ["small-model", "babilong_qa1", "acc", "0.3", "0.02", "?"],  # a built-in whose name starts like ours
    ]


def test_skips_are_reported_per_task_and_reason(two_runs):
    table = blocks(build_report(two_runs), Table, "Skipped (never truncated)")[0]
    assert table.rows[0] == ["small-model", "babilong", "3", "qa3_4k: 3 longer than the window"]


def test_a_run_without_our_tasks_still_gets_a_report(tmp_path):
    path = tmp_path / "results_2026-01-01T00-00-00.1.json"
    path.write_text(json.dumps({"results": {"arc_easy": {"acc,none": 0.7}}, "config": {"model_args": "pretrained=m"}}))
    report = build_report(load_runs([path]))
    assert [s.title for s in report.sections] == ["Headline numbers", "Other harness tasks in the same runs", "Runs"]
    assert blocks(report, Table, "Headline numbers")[0].rows[0][1:] == ["-", "-", "-", "-", "-"]
    assert blocks(report, Table, "Runs")[0].rows == [["m", "-", "pretrained=m", str(path)]]


@pytest.mark.slow
def test_files_markdown_and_a_self_contained_html_page(two_runs, tmp_path):
    files = write_report(two_runs, tmp_path / "report")
    md = files.markdown.read_text()
    assert md.startswith("# Long-context memory report")
    assert (
        "| small-model | 128 [64, 128] | 512 [256, 512] | 75.0 [30.0, 80.0] | 55.0 [40.0, 70.0] | babilong: 3 docs skipped |\n"
        in md
    )
    assert f"| big-model | hf | pretrained=/models/big-model, dtype=float32 | {two_runs[1].path} |" in md
    linked = re.findall(r"!\[[^]]*\]\((figures/[^)]+\.png)\)", md)
    assert len(linked) == 6 and all((tmp_path / "report" / name).is_file() for name in linked)
    page = files.html.read_text()
    sources = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(sources) == 6 and all(src.startswith("data:image/png;base64,") for src in sources)
    assert base64.b64decode(sources[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    assert sorted(p.suffix for p in files.figures) == [".pdf"] * 6 + [".png"] * 6
    assert render_markdown(build_report(two_runs)) == md  # the same runs give the same report


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
        == f"lm-eval-longmem report: {empty} is empty (0 bytes), probably from an interrupted run: rerun lm_eval or pass another results file"
    )
    assert "small-model: forgetting_curve fine_memory_length 128 [64, 128]" in proc.stdout
    assert "big-model" in proc.stdout
    assert (tmp_path / "r" / "report.html").is_file()


# --- answer bias, perplexity under the curve, curves by text source ---------------------------------


def with_answer_bias(path, share, per_length=(1.0, 1.0)):
    """Add Book-SORT `pct_A` metrics to a written run."""
    data = json.loads(path.read_text())
    row = data["results"]["booksort_in_context"]
    row |= {
        "pct_A,none": share,
        "pct_A_ci_low,none": max(0.0, share - 0.1),
        "pct_A_ci_high,none": min(1.0, share + 0.1),
    }
    row |= {f"pct_A@{cell},none": value for cell, value in zip(("LE250", "LE500"), per_length)}
    path.write_text(json.dumps(data))
    return path


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
    assert dotted == {'stuck-model: share answered "A"': [1.0, 1.0], 'mixed-model: share answered "A"': [0.5, 0.6]}
    proc = subprocess.run(
        [CLI, "report", str(stuck), "--output_path", str(tmp_path / "r")], capture_output=True, text=True
    )
    assert (
        "stuck-model: forgetting_curve fine_memory_length 128 [64, 128] (coarse 512 [256, 512]), booksort acc 75.0 [30.0, 80.0]%, "
        'babilong acc 55.0 [40.0, 70.0]% (answer bias: "A" on every booksort_in_context trial) [rests on: babilong: 3 docs skipped]'
        in [line.strip() for line in proc.stdout.splitlines()]
    )


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


def with_sources(path, **sources):
    data = json.loads(path.read_text())
    metadata = {"forgetting_curve_corpus": "/data/pg19", "forgetting_curve_samples": 10, **sources}
    data["configs"] = {"forgetting_curve": {"metadata": metadata}}
    path.write_text(json.dumps(data))
    return path


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


# --- the HTML page of a real run (issue 26: Markdown shown as Markdown, long paths wrapped) ------------------


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
    run_lm_eval(["--model", "hf", "--model_args", f"pretrained={model},dtype=float32", "--device", "cpu",
                 "--tasks", "forgetting_curve,booksort_in_context", "--limit", "3", "--batch_size", "2",
                 "--metadata", json.dumps(metadata)], out)  # fmt: skip
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
    results_file = str(load_runs([files.markdown.parent.parent / "a-results-folder-with-a-long-name"])[0].path)
    assert len(results_file) > 120 and re.sub(r"([/_])", r"\1<wbr>", results_file) in page  # breaks at every separator
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


# --- issue 28, defect 5: a report says what its numbers rest on ---------------------------------------------------------


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
        "Book-SORT": ["small-model", "Book-SORT", "booksort_in_context: 75.0 [30.0, 80.0]", "booksort_memoryless: 50.0 [30.0, 80.0]", "-"],
        "BABILong": ["small-model", "BABILong", "babilong: 55.0 [40.0, 70.0]", "-", "babilong (sentences top-5 bm25): 27.5 [40.0, 70.0]"],
    }  # fmt: skip
    assert not blocks(build_report(load_runs([rag])), Table, "Conditions side by side")  # one condition: no section

"""Today's readers (`report`, `plot`, `babilong report`) read results files written before the metric
schema to the same tables and figures as the readers of that time.

`tests/fixtures/results_before/` holds a three-task SmolLM2 run made with the code before the schema
(results file, forgetting-curve samples: lengths "1k", effective context "none", skip reasons among
the metrics) and what the readers of that code made of it; it is frozen (the code that wrote it is
gone). Whether today's runs still give their numbers is the reference runs' job
(`reference_runs.py`, `tests/reference/`), not this file's.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

BEFORE = Path(__file__).parent / "fixtures" / "results_before"


def figure_data(fig) -> list[dict]:
    """What a figure draws, per axes: lines, filled bands, images, rectangles and texts (numbers rounded to 1e-9)."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Rectangle

    def nums(values) -> list:
        return [
            None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), 9)
            for v in np.asarray(values, dtype=float).ravel()
        ]

    axes = []
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        axes.append({
            "title": ax.get_title(),
            "xlabel": ax.get_xlabel(),
            "xscale": ax.get_xscale(),
            "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
            "yticklabels": [t.get_text() for t in ax.get_yticklabels()],
            "lines": [[line.get_label(), nums(line.get_xdata()), nums(line.get_ydata())] for line in ax.get_lines()],
            "bands": [nums(c.get_paths()[0].vertices) if c.get_paths() else [] for c in ax.collections if isinstance(c, PolyCollection)],
            "images": [nums(np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), np.nan)) for im in ax.get_images()],
            "rectangles": [nums([p.get_x(), p.get_y(), p.get_width(), p.get_height()]) for p in ax.patches if isinstance(p, Rectangle)],
            "texts": [t.get_text() for t in ax.texts],
            "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [],
        })  # fmt: skip
    return axes


def reader_outputs(results: Path, dest: Path) -> dict:
    """`report` (Markdown), `plot` and `babilong report` on one run's results file; the figures as data.

    Writes `report.md` and `babilong_report.txt` under `dest` and returns {figure name: `figure_data`}.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lm_eval_longmem.babilong.rim.reader import format_report
    from lm_eval_longmem.plots import plot_results
    from lm_eval_longmem.readers.results import load_runs, read_json
    from lm_eval_longmem.report import build_report
    from lm_eval_longmem.report.render import render_markdown

    figures: dict[str, list] = {}
    report = build_report(load_runs([results]))
    (dest / "report.md").write_text(render_markdown(report), encoding="utf-8")
    for block in report.figures():
        figures[f"report/{block.name}"] = figure_data(block.figure)
        plt.close(block.figure)
    original = plt.close
    try:
        plt.close = lambda fig=None: (figures.__setitem__(f"plot/{len(figures)}", figure_data(fig)), original(fig))
        plot_results(results, out_prefix=dest / "_plot" / "run", formats=("png",))
    finally:
        plt.close = original
    shutil.rmtree(dest / "_plot", ignore_errors=True)
    (dest / "babilong_report.txt").write_text(format_report(read_json(results)) + "\n", encoding="utf-8")
    return figures


def old_results_file() -> Path:
    return next((BEFORE / "run").glob("results_*.json"))


def same_numbers(old, new, tol=1e-8) -> bool:
    """Equal structures, numbers within `tol` (figure data is rounded to 1e-9)."""
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool):
        return math.isclose(old, new, rel_tol=0, abs_tol=tol) or (math.isnan(old) and math.isnan(new))
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(same_numbers(a, b, tol) for a, b in zip(old, new))
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(same_numbers(old[k], new[k], tol) for k in old)
    return old == new


def without_paths(markdown: str) -> str:
    """The report without the results file's location (the last column of the Runs table) and the model folder's parent."""
    markdown = re.sub(
        r"pretrained=[^,|]*/(?=[^/,|]+[,|])", "pretrained=", markdown
    )  # the model's folder, wherever the cache is
    return re.sub(r"\| [^|]*results_[^|]*\.json \|", "| RESULTS |", markdown)


def without_additions(markdown: str) -> str:
    """The report without the answer-bias additions: the Book-SORT "answered A" column and its note, the
    answer-bias flags, the per-length table and the BABILong questions per cell, what the numbers rest on, and the perplexity panel's words in a forgetting-curve caption."""
    markdown = markdown.replace(
        ' "answered A": the share of trials answered "A" (answer bias; 50% is none on balanced data).', ""
    )
    markdown = markdown.replace(", with the perplexity of the same tokens under it (the paper's Figure 5).", ".")
    markdown = re.sub(r"\n\*\*Answer bias: [^\n]*\n", "", markdown)
    # the forgetting curve's per-length table (its note and rows) after the summary table
    markdown = re.sub(r"\n\nPer length: [^\n]*\n\n(\|[^\n]*\n)+", "\n", markdown)
    # what the numbers rest on (a first section when a run leaves something out, a headline column)
    markdown = re.sub(r"## What these numbers rest on\n.*?(?=\n## )\n", "", markdown, flags=re.DOTALL)
    # the Book-SORT caption states what its stars mean
    markdown = markdown.replace(
        ", with 95% Wilson intervals; * where the accuracy's interval lies above chance.](", ".]("
    )
    # the Runs table's note (model folders and results files by their names)
    markdown = re.sub(r"\nModel arguments as the run gave them, [^\n]*\n", "", markdown)
    # each headline interval beside its n (the "trials" and "questions" columns and the words saying so)
    markdown = markdown.replace(
        ", each beside the n it rests on (the memory lengths' samples per length are in their section); ", "; "
    )
    # a memory length below the shortest length tested reads "<S" in tables, not 0 (and the headline note says so)
    markdown = markdown.replace("; `<S`: below the shortest length tested.", ".")
    markdown = re.sub(r"(?<=[ \[])<\d+(?=[ \],])", "0", markdown)
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("| model | forgetting_curve fine_memory_length |"):
            drop = [k for k, name in enumerate(line.split("|")) if name.strip() in ("trials", "questions")]
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                lines[j] = "|".join(cell for k, cell in enumerate(lines[j].split("|")) if k not in drop)
                j += 1
    for i, line in enumerate(lines):
        if line.startswith("| model | forgetting_curve fine_memory_length |") and line.endswith(" rests on |"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                lines[j] = "|".join(lines[j].split("|")[:-2]) + "|"
                j += 1
    for i, line in enumerate(lines):  # BABILong's "questions per cell" column
        if line.startswith("| model | acc | acc@") and line.endswith(" questions per cell |"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                lines[j] = "|".join(lines[j].split("|")[:-2]) + "|"
                j += 1
    for i, line in enumerate(lines):
        if line.startswith("| model | acc | answered A |"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                cells = lines[j].split("|")
                lines[j] = "|".join(cells[:3] + cells[4:])
                j += 1
    return "\n".join(lines)


TRIALS = re.compile(r" \(n=\d+\)$")
"""The trials a Book-SORT line's legend entry names (`booksort.rim.figures.line_label`)."""


def figure_without_additions(data: list[dict]) -> list[dict]:
    """A figure's data without the answer-bias additions: the dotted share-answered-"A" lines of Book-SORT
    panel (a), and the perplexity panel under a forgetting curve (whose x label and tick labels moved
    down to it: the panels share the x axis); and without the trials a Book-SORT line's label names
    since (" (n=48)")."""
    out = []
    for axis in data:
        if any(line[0] in ("copy perplexity", "LM perplexity") for line in axis["lines"]):
            out[-1] = out[-1] | {"xlabel": axis["xlabel"], "xticklabels": axis["xticklabels"]}
            continue
        lines = [[TRIALS.sub("", line[0]), *line[1:]] for line in axis["lines"]
                 if not line[0].endswith('share answered "A"')]  # fmt: skip
        legend = [TRIALS.sub("", text) for text in axis["legend"] if not text.endswith('share answered "A"')]
        out.append(axis | {"lines": lines, "legend": legend})
    return out


FINE_PROXY = "fine-grained memory length (copy > 99%)"


def before_as_drawn_since_issue_36(data: list[dict]) -> list[dict]:
    """The frozen figure data as drawn today: a memory length no tested length met reads "<S" (S the
    shortest length tested) instead of 0, and the overlay's legend names a memory-length line only when one is drawn."""
    out = []
    for axis in data:
        lines = [list(line) for line in axis["lines"]]
        for line in lines:
            if ": fine 0, " in line[0]:
                line[0] = line[0].replace(": fine 0, ", f": fine <{line[1][0]:g}, ")
        legend = [next((line[0] for line in lines if line[0].split(":")[0] == text.split(":")[0]), text)
                  if ": fine 0, " in text else text for text in axis["legend"]]  # fmt: skip
        curves = [line[0] for line in lines if ": fine " in line[0]]
        if curves and all(": fine <" in label for label in curves):  # no fine-grained line drawn
            lines = [line for line in lines if line[0] != FINE_PROXY]
            legend = [text for text in legend if text != FINE_PROXY]
        out.append(axis | {"lines": lines, "legend": legend})
    return out


def unnumbered(data: list[dict]) -> list[dict]:
    """Figure data with matplotlib's "_childN" labels of unlabelled lines unnumbered (N counts every artist drawn
    before, so it moves when a legend-only line is left out)."""
    return [
        axis | {"lines": [[re.sub(r"^_child\d+$", "_child", line[0]), *line[1:]] for line in axis["lines"]]}
        for axis in data
    ]


def assert_same_readers(outputs: Path, figures: dict) -> None:
    before_figures = {
        name: before_as_drawn_since_issue_36(data)
        for name, data in json.loads((BEFORE / "figures.json").read_text()).items()
    }
    assert sorted(figures) == sorted(before_figures)
    for name, data in before_figures.items():
        assert same_numbers(unnumbered(data), unnumbered(figure_without_additions(figures[name]))), name
    now = without_additions(without_paths((outputs / "report.md").read_text()))
    assert now == without_paths((BEFORE / "report.md").read_text())
    assert (outputs / "babilong_report.txt").read_text() == (BEFORE / "babilong_report.txt").read_text()


def test_old_results_files_read_to_the_same_tables_and_figures(tmp_path):
    """Files written before the schema (lengths "1k", effective context "none", skip reasons among the metrics)."""
    figures = reader_outputs(old_results_file(), tmp_path)
    assert_same_readers(tmp_path, figures)

"""The three-task run whose outputs (made before the metric schema changed) are committed under
`tests/fixtures/results_before/`, and the readers' outputs on it; `tests/test_results_before_after.py`
reruns it with today's code and compares value by value and table by table.

Regenerate (only when a change of numbers is intended, and say so in the commit):
    python tests/reference_run.py tests/fixtures/results_before
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from kit import build_booksort, run_lm_eval

LIMIT = 40
"""Docs per task: every forgetting-curve and BABILong doc, the first 40 Book-SORT trials."""


def three_task_run(model: Path, books: Path, work: Path) -> Path:
    """forgetting_curve, booksort and babilong on `model` (SmolLM2) with small sizes and one skip each; returns the output folder."""
    data = build_booksort(books / "macbeth.txt", work / "booksort_data", "250,500")
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    book = books / "macbeth.txt"
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={model},dtype=float32,max_length=1300", "--device", "cpu",
         "--tasks", "forgetting_curve,booksort,babilong", "--limit", str(LIMIT), "--batch_size", "4",
         "--log_samples",
         "--metadata", f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[32,64,128,256,512,1024]",
         "forgetting_curve_samples=3", f"booksort_data={data}", "babilong_source=generate",
         "babilong_facts=simulated", f"babilong_corpus={book}", "babilong_lengths=[0k,1k]",
         "babilong_tasks=[qa1,qa2]", "babilong_samples=3"],
        out,
        env={"LM_EVAL_LONGMEM_CACHE": str(work / "cache")},
    )  # fmt: skip
    return out


def figure_data(fig) -> list[dict]:
    """What a figure draws, per axes: lines, filled bands, images, rectangles and texts (numbers rounded to 1e-9)."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Rectangle

    def nums(values) -> list:
        return [None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), 9)
                for v in np.asarray(values, dtype=float).ravel()]

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

    from lm_eval_longmem.babilong.report import format_report
    from lm_eval_longmem.common.results import load_runs, read_json
    from lm_eval_longmem.plots import plot_results
    from lm_eval_longmem.report import build_report, render_markdown

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


if __name__ == "__main__":
    from lm_eval_longmem.common import embedded

    dest = Path(sys.argv[1]).resolve()
    work = dest / "_work"
    shutil.rmtree(work, ignore_errors=True)
    out = three_task_run(embedded.smollm2_dir(), embedded.embedded_books_dir(), work)
    results = max(out.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    (dest / "run").mkdir(exist_ok=True)
    for f in results.parent.iterdir():
        shutil.copy(f, dest / "run" / f.name)
    copied = dest / "run" / results.name
    figures = reader_outputs(copied, dest)
    (dest / "figures.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work)
    print(sorted(str(p.relative_to(dest)) for p in dest.rglob("*")))

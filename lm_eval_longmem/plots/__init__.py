"""Figures from results files: `lm-eval-longmem plot RESULTS` calls every plotter that applies.

Figures read result files only, never a model, so they work on runs made elsewhere (e.g. on a
GPU cluster). Each evaluation's figure lives in `plots/<evaluation>.py` with two functions:
`can_plot(results) -> bool` and `plot(results, out_prefix, formats) -> list[Path]`, where `results` is
the parsed JSON file: an lm_eval results dict, or the list the original forgetting-curve tool writes.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from lm_eval_longmem.common.results import find_results_file, read_json

PLOTTERS = ("forgetting_curve", "booksort", "babilong")
__all__ = ["PLOTTERS", "find_results_file", "plot_results"]


def plot_results(path: Path, *, out_prefix: Path | None = None, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Draw every figure the results file supports; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    results_file = find_results_file(path)
    results = read_json(results_file)
    if isinstance(results, dict):  # an lm_eval results file (the original forgetting-curve tool writes a list)
        results.setdefault("_source_path", str(results_file))
    prefix = Path(out_prefix) if out_prefix is not None else results_file.with_suffix("")
    written: list[Path] = []
    for name in PLOTTERS:
        module = importlib.import_module(f"lm_eval_longmem.plots.{name}")
        if module.can_plot(results):
            written += module.plot(results, prefix, formats)
    if not written:
        raise ValueError(
            f"{results_file} holds no forgetting_curve, booksort or babilong results to plot "
            "(run the tasks with lm_eval first, or pass an original forgetting-curve result file)"
        )
    return written

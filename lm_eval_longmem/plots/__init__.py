"""Figures from results files: `lm-eval-longmem plot RESULTS` calls every plotter that applies.

Figures read result files only, never a model, so they work on runs made elsewhere (e.g. on a
GPU cluster). Each evaluation's figure is its registry entry's plotter (`common.evaluations.Plotter`):
`can_plot(results) -> bool` and `plot(results, out_prefix, formats) -> list[Path]`, where `results` is
the parsed JSON file: an lm_eval results dict, or another format an evaluation reads.
"""

from __future__ import annotations

from pathlib import Path

from lm_eval_longmem.common.cache import check_folder, check_target
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import evaluations
from lm_eval_longmem.readers.results import find_results_file, read_json

__all__ = ["find_results_file", "plot_results"]


def plot_results(
    path: Path, *, out_prefix: Path | None = None, formats: tuple[str, ...] = ("png", "svg"), overwrite: bool = False
) -> list[Path]:
    """Draw every figure the results file supports; returns the files written.

    Every file it will write, `<prefix>_<evaluation>.<format>`, is checked before anything is
    drawn (`common.cache.check_target`): an existing figure is replaced only with `overwrite`, and
    a folder (or anything but a file) at one of those names never.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    supported = Figure().canvas.get_supported_filetypes()
    unknown = [fmt for fmt in formats if fmt not in supported]
    if unknown or not formats:
        raise UsageError(
            f"--formats {','.join(formats)}: {','.join(unknown) or 'no format'} is not a figure format; use some of {','.join(sorted(supported))}"
        )
    results_file = find_results_file(path)
    results = read_json(results_file)
    if isinstance(results, dict):  # an lm_eval results file (other formats an evaluation reads may not be)
        results.setdefault("_source_path", str(results_file))
    prefix = Path(out_prefix) if out_prefix is not None else results_file.with_suffix("")
    plotters = [
        (entry.name, plotter)
        for entry in evaluations()
        if (plotter := entry.plotter()) is not None and plotter.can_plot(results)
    ]
    if not plotters:
        drawn = [entry.name for entry in evaluations() if entry.plotter() is not None]
        raise ValueError(
            f"{results_file} holds no results that a figure draws (evaluations with a figure: {', '.join(drawn)}; "
            "the others are shown by `lm-eval-longmem report`): run those tasks with lm_eval first, or pass a "
            "file of another format an evaluation reads"
        )
    check_folder(prefix.parent)
    for name, _ in plotters:
        for fmt in formats:
            check_target(Path(f"{prefix}_{name}.{fmt}"), overwrite=overwrite)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for _, plotter in plotters:
        written += plotter.plot(results, prefix, formats)
    return written

"""BABILong heatmap: accuracy per task (rows) and length (columns), as the paper's Figure 2 / Table 2.

Two panels, the authors' check (`acc`) and ours (`acc_corrected`); a cell that did not run is blank.
A bottom row gives the run's mean over tasks per length (with the default tasks, the paper's qa1-qa5
headline), and each task's effective context (accuracy >= 85% up to that length) is outlined.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lm_eval_longmem.babilong.options import STANDARD_LENGTHS
from lm_eval_longmem.babilong.report import effective_context, read_cells, read_length_means


def _model_name(results: dict) -> str:
    """The evaluated model's short name (last part of `pretrained`) from the results' config, or ""."""
    args = (results.get("config") or {}).get("model_args") or ""
    if isinstance(args, str):
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    name = str(args.get("pretrained") or args.get("model") or "") if isinstance(args, dict) else ""
    return name.rstrip("/").rsplit("/", 1)[-1]


def can_plot(results: dict | list) -> bool:
    """True when the results are an lm_eval results dict with at least one BABILong task with metrics."""
    return isinstance(results, dict) and bool(read_cells(results))


def plot(results: dict, out_prefix: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write `{out_prefix}_babilong.{fmt}` for each format; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    cells = read_cells(results)
    lengths = [ln for ln in STANDARD_LENGTHS if any(c.length == ln for c in cells)]
    tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
    means = {metric: read_length_means(results, metric) for metric in ("acc", "acc_corrected")}
    rows = tasks + (["mean"] if means["acc"] else [])

    fig, axes = plt.subplots(
        1, 2, figsize=(max(6.0, 2.2 + 1.5 * len(lengths)), 1.2 + 0.45 * len(rows)), squeeze=False, constrained_layout=True
    )
    for ax, metric, title in zip(axes[0], ("acc", "acc_corrected"), ("acc (authors' check)", "acc_corrected")):
        grid = np.full((len(rows), len(lengths)), np.nan)
        for cell in cells:
            grid[tasks.index(cell.qa), lengths.index(cell.length)] = 100 * getattr(cell, metric).estimate
        for length, value in means[metric].items():
            grid[len(rows) - 1, lengths.index(length)] = 100 * value.estimate
        image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
        for (i, j), value in np.ndenumerate(grid):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=8)
        for qa, length in effective_context(cells, metric=metric).items():
            if length is not None:
                ax.add_patch(Rectangle((lengths.index(length) - 0.5, tasks.index(qa) - 0.5), 1, 1, fill=False, lw=2))
        ax.set_xticks(range(len(lengths)), lengths)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlabel("context length (tokens)")
        ax.set_title(title)
        fig.colorbar(image, ax=ax, shrink=0.8, label="accuracy (%)")
    model = _model_name(results)
    fig.suptitle(f"BABILong{': ' + model if model else ''}", fontsize=9)
    written = []
    for fmt in formats:
        path = Path(f"{out_prefix}_babilong.{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
        written.append(path)
    plt.close(fig)
    return written

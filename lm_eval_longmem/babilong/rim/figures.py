"""BABILong heatmap: accuracy per task (rows) and length (columns), as the paper's Figure 2 / Table 2.

Two panels, the authors' check (`acc`) and ours (`acc_corrected`); a cell that did not run is blank.
A bottom row gives the run's mean over tasks per length (with the default tasks, the paper's qa1-qa5
headline). Each cell shows its accuracy and, where the run stored it, its n (questions scored; the mean row's
is the sum over its tasks), and each task's effective context (accuracy >= 85% up to that length, as the run stored
it) is outlined. `figure` draws from one run's results dict (names read through
`common/metric_names.py`); `lm-eval-longmem plot` and `lm-eval-longmem report` both use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lm_eval_longmem.babilong.rim.reader import (
    babilong_task,
    read_cells,
    read_effective_context,
    read_length_means,
)
from lm_eval_longmem.babilong.scores import ACC, ACC_CORRECTED, CHECKS
from lm_eval_longmem.common.lengths import format_length


def _model_name(results: dict) -> str:
    """The evaluated model's short name (last part of `pretrained`) from the results' config, or ""."""
    args = (results.get("config") or {}).get("model_args") or ""
    if isinstance(args, str):
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    name = str(args.get("pretrained") or args.get("model") or "") if isinstance(args, dict) else ""
    return name.rstrip("/").rsplit("/", 1)[-1]


def can_plot(results: dict | list) -> bool:
    """True when the results are an lm_eval results dict with BABILong cells."""
    return isinstance(results, dict) and bool(read_cells(results))


def figure(results: dict[str, Any], title: str) -> Any:
    """Accuracy per bAbI task (rows) and length (columns), authors' check and corrected check side by side.

    The bottom row is the mean over the selected tasks at each length (`acc@LEN`); each task's
    effective context (`effective_context@qaN`: the longest length up to which it stays at or
    above the paper's 85%) is outlined on both panels. A cell that did not run is blank.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    cells = read_cells(results)
    tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
    lengths = sorted({c.length for c in cells})
    effective = read_effective_context(results)
    rows = tasks + ["mean"]
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 2.6 + 1.4 * len(lengths)), 1.6 + 0.42 * len(rows)), squeeze=False)
    for ax, check, panel in zip(axes[0], CHECKS, (f"{ACC.name} (authors' answer check)", ACC_CORRECTED.name)):
        grid = np.full((len(rows), len(lengths)), np.nan)
        n = np.zeros((len(rows), len(lengths)), dtype=int)  # questions behind each cell; 0: the file does not say
        for cell in cells:
            grid[tasks.index(cell.qa), lengths.index(cell.length)] = 100 * getattr(cell, check.name).estimate
            n[tasks.index(cell.qa), lengths.index(cell.length)] = cell.n
        for ln, value in read_length_means(results, check).items():
            if ln in lengths:
                j = lengths.index(ln)
                grid[len(rows) - 1, j] = 100 * value.estimate
                known = [n[i, j] for i in range(len(tasks)) if not np.isnan(grid[i, j])]
                n[len(rows) - 1, j] = sum(known) if all(known) else 0
        image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
        for (i, j), value in np.ndenumerate(grid):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.0f}" + (f"\nn={n[i, j]}" if n[i, j] else ""), ha="center", va="center",
                        fontsize=9 if not n[i, j] else 8, linespacing=0.9)  # fmt: skip
        for qa in tasks:
            if (reached := effective.get(qa)) is not None and reached in lengths:
                ax.add_patch(Rectangle((lengths.index(reached) - 0.5, tasks.index(qa) - 0.5), 1, 1, fill=False, lw=2.2))
        ax.axhline(len(tasks) - 0.5, color="black", lw=1.0)
        ax.set_xticks(range(len(lengths)), [format_length(ln) for ln in lengths])
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlabel("context length (tokens)")
        ax.set_title(panel, fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.85, label="accuracy (%)")
    fig.suptitle(f"BABILong: {title} (outlined: effective context, accuracy >= 85% up to there)", fontsize=10)
    fig.tight_layout()
    return fig


def plot(results: dict, out_prefix: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write `{out_prefix}_babilong.{fmt}` for each format; returns the paths."""
    import matplotlib.pyplot as plt

    fig = figure(results, _model_name(results) or babilong_task(results) or "")
    written = []
    for fmt in formats:
        path = Path(f"{out_prefix}_babilong.{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
        written.append(path)
    plt.close(fig)
    return written

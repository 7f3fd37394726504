"""The forgetting curve in the style of Liu et al.'s Figure 1.

Copy accuracy and LM accuracy against the length L of the copied text, each with its 95%
interval over samples as a band (as the task stored them in the results file; computed from the
samples for the original tool's files). Background regions: green up to the fine-grained memory length (copy > 99%),
blue up to the coarse-grained memory length (copy beats LM by more than 1 point), red beyond it
(amnesia: the model ignores the prefix). A censored memory length (">L") has no region after it:
the sweep stopped before the memory did. The claimed window is a dashed vertical line.

Reads lm_eval results (`analysis.stored_summary`) and the original tool's JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.forgetting_curve.analysis import (
    Summary,
    curve_from_data,
    forgetting_curve_task,
    is_reference,
    stored_summary,
    summarize,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COPY_COLOR = "#e69f00"  # the paper's copy curve is yellow/orange
LM_COLOR = "#0072b2"
FINE_COLOR = "#2ca02c"
COARSE_COLOR = "#1f77b4"
AMNESIA_COLOR = "#d62728"


def can_plot(results: Any) -> bool:
    """True for an lm_eval results dict with forgetting-curve metrics, or an original tool's result list."""
    return is_reference(results) or (isinstance(results, dict) and forgetting_curve_task(results) is not None)


def _title(results: Any) -> str:
    if isinstance(results, dict):
        name = results.get("model_name") or ""
        if not name:
            args = (results.get("config") or {}).get("model_args") or {}
            name = args.get("pretrained", "") if isinstance(args, dict) else ""
        if name:
            return f"Forgetting curve: {Path(str(name)).name}"
    return "Forgetting curve"


def plot(results: Any, out_prefix: Path, formats: tuple[str, ...] = ("png", "svg"), *, claimed: int | None = None) -> list[Path]:
    """Draw the figure; writes `<out_prefix>_forgetting_curve.<fmt>` for each format and returns the paths."""
    if isinstance(results, dict):
        source = results.get("_source_path")
        summary = stored_summary(results, path=Path(source) if source else None)
        summary = summary._replace(claimed=claimed) if claimed is not None else summary
    else:
        summary = summarize(curve_from_data(results, claimed=claimed))
    fig = figure(summary, _title(results))
    import matplotlib.pyplot as plt

    out_prefix = Path(out_prefix)
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_prefix.with_name(f"{out_prefix.name}_forgetting_curve.{fmt}")
        fig.savefig(path, dpi=150)
        written.append(path)
    plt.close(fig)
    return written


def figure(summary: Summary, title: str = "Forgetting curve") -> Figure:
    """The figure of one curve's statistics (`analysis.summarize`/`stored_summary`; the caller saves and closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s.length for s in summary.per_length]
    swept = max(x + list(summary.skipped))
    # The claimed window sets the scale when the sweep reaches near it (the paper's grid ends at it);
    # far beyond a short sweep it would squash the curve, so it is then named off scale instead.
    claimed_on_scale = bool(summary.claimed) and summary.claimed <= 1.5 * swept
    x_max = max(swept, summary.claimed) if claimed_on_scale else swept
    fine, coarse = summary.fine, summary.coarse

    fig, ax = plt.subplots(figsize=(10, 4.5))
    if fine.length > 0:
        ax.axvspan(0, fine.length, color=FINE_COLOR, alpha=0.12, lw=0, label=f"fine-grained memory ({fine.label})")
    if coarse.length > fine.length:
        ax.axvspan(fine.length, coarse.length, color=COARSE_COLOR, alpha=0.12, lw=0, label=f"coarse-grained memory ({coarse.label})")
    if not coarse.censored and coarse.length < x_max:
        ax.axvspan(max(coarse.length, 0), x_max, color=AMNESIA_COLOR, alpha=0.10, lw=0, label="amnesia")

    for name, color, pick in (
        ("copy accuracy", COPY_COLOR, lambda s: s.copy),
        ("LM accuracy", LM_COLOR, lambda s: s.lm),
    ):
        intervals = [pick(s) for s in summary.per_length]
        ax.plot(x, [iv.estimate for iv in intervals], "o-", color=color, ms=3.5, lw=1.6, label=name)
        ax.fill_between(x, [iv.low for iv in intervals], [iv.high for iv in intervals], color=color, alpha=0.25, lw=0)

    if claimed_on_scale:
        ax.axvline(summary.claimed, color="black", ls="--", lw=1, label=f"claimed window ({format_length(summary.claimed)})")
    elif summary.claimed:
        ax.plot([], [], color="black", ls="--", lw=1, label=f"claimed window ({format_length(summary.claimed)}, off scale)")
    for L in summary.skipped:
        ax.axvline(L, color="grey", ls=":", lw=0.8)
    if summary.skipped:
        ax.plot([], [], color="grey", ls=":", lw=0.8, label=f"skipped lengths ({len(summary.skipped)})")

    ax.set_xlim(0, x_max * 1.02)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("length L of the copied text (tokens)")
    ax.set_ylabel("token accuracy (later half of S)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)  # outside: never over a curve
    fig.tight_layout()
    return fig

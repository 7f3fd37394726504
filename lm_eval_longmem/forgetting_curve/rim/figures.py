"""The forgetting curve in the style of Liu et al.'s Figure 1.

Copy accuracy and LM accuracy against the length L of the copied text, each with its 95%
interval over samples as a band (as the task stored them in the results file; computed from the
samples for the original tool's files). A length without an interval (one sample) is a hollow
marker with no band there. Background regions show what each tested length met: green where copy
accuracy exceeds 99% (fine-grained memory), blue where copy beats LM by more than 1 point
(coarse-grained memory), red where neither holds (amnesia). Each tested length L colours the
stretch from the previous tested length (0 for the first) up to L, so a curve that is monotone
gives the paper's picture (green up to the fine-grained memory length, blue up to the coarse one,
red after) and a non-monotone curve is drawn as measured: a length that fails is never inside a
region it did not meet. Nothing is shaded beyond the last tested length. The claimed window is a
dashed vertical line.

Reads lm_eval results (`analysis.stored_summary`) and the original tool's JSON.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.forgetting_curve.analysis import Summary, holds, summarize
from lm_eval_longmem.forgetting_curve.rim.reader import (
    curve_from_data,
    forgetting_curve_task,
    is_reference,
    stored_summary,
)
from lm_eval_longmem.forgetting_curve.scores import COPY_PPL, LM_PPL
from lm_eval_longmem.readers.results import task_metrics

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


def plot(
    results: Any, out_prefix: Path, formats: tuple[str, ...] = ("png", "svg"), *, claimed: int | None = None
) -> list[Path]:
    """Draw the figure; writes `<out_prefix>_forgetting_curve.<fmt>` for each format and returns the paths."""
    if isinstance(results, dict):
        source = results.get("_source_path")
        summary = stored_summary(results, path=Path(source) if source else None)
        summary = summary._replace(claimed=claimed) if claimed is not None else summary
        task = forgetting_curve_task(results)
        perplexity = perplexity_series(task_metrics(results, task)) if task else {}
    else:
        summary = summarize(curve_from_data(results, claimed=claimed))
        perplexity = {}
    fig = figure(summary, _title(results), perplexity)
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


def figure(
    summary: Summary, title: str = "Forgetting curve", perplexity: dict[str, list[PerplexityPoint]] | None = None
) -> Figure:
    """The figure of one curve's statistics (`analysis.summarize`/`stored_summary`; the caller saves and closes it);
    with `perplexity` (see `perplexity_series`), a second panel under it, on the same lengths, as the paper's Figure 5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s.length for s in summary.per_length]
    swept = max(x + list(summary.skipped))
    # The claimed window sets the scale when the sweep reaches near it (the paper's grid ends at it);
    # far beyond a short sweep it would squash the curve, so it is then named off scale instead.
    claimed = summary.claimed or 0  # 0: no claimed window
    claimed_on_scale = bool(claimed) and claimed <= 1.5 * swept
    x_max = max(swept, claimed) if claimed_on_scale else swept
    fine, coarse = summary.fine, summary.coarse

    if perplexity:
        fig, (ax, ax_ppl) = plt.subplots(2, 1, figsize=(10, 6.8), sharex=True, height_ratios=(2, 1))
        draw_perplexity(ax_ppl, perplexity)
        ax_ppl.set_xlabel("length L of the copied text (tokens)")
    else:
        fig, ax = plt.subplots(figsize=(10, 4.5))
    colors = {"fine": FINE_COLOR, "coarse": COARSE_COLOR, "amnesia": AMNESIA_COLOR}
    labels = {
        "fine": f"fine-grained memory ({fine.label})",
        "coarse": f"coarse-grained memory ({coarse.label})",
        "amnesia": "amnesia",
    }
    for status, start, end in regions(summary):
        ax.axvspan(
            start,
            end,
            color=colors[status],
            alpha=0.10 if status == "amnesia" else 0.12,
            lw=0,
            label=labels.pop(status, None),
        )

    for name, color, pick in (
        ("copy accuracy", COPY_COLOR, lambda s: s.copy),
        ("LM accuracy", LM_COLOR, lambda s: s.lm),
    ):
        intervals = [pick(s) for s in summary.per_length]
        ax.plot(x, [iv.estimate for iv in intervals], "o-", color=color, ms=3.5, lw=1.6, label=name)
        ax.fill_between(x, [iv.low for iv in intervals], [iv.high for iv in intervals], color=color, alpha=0.25, lw=0)
        draw_without_interval(
            ax, [(xi, iv.estimate, iv.low, iv.high) for xi, iv in zip(x, intervals, strict=True)], color
        )
    if any(math.isnan(iv.low) for s in summary.per_length for iv in (s.copy, s.lm)):
        ax.plot([], [], "o", mfc="white", mec="grey", ms=4.5, ls="none", label=without_interval_label(summary))

    if claimed_on_scale:
        ax.axvline(claimed, color="black", ls="--", lw=1, label=f"claimed window ({format_length(claimed)})")
    elif claimed:
        ax.plot([], [], color="black", ls="--", lw=1, label=f"claimed window ({format_length(claimed)}, off scale)")
    for L in summary.skipped:
        ax.axvline(L, color="grey", ls=":", lw=0.8)
    if summary.skipped:
        ax.plot([], [], color="grey", ls=":", lw=0.8, label=f"skipped lengths ({len(summary.skipped)})")

    ax.set_xlim(0, x_max * 1.02)
    ax.set_ylim(-0.02, 1.05)
    if not perplexity:
        ax.set_xlabel("length L of the copied text (tokens)")
    ax.set_ylabel("token accuracy (later half of S)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)  # outside: never over a curve
    fig.tight_layout()
    return fig


def status(copy: float, lm: float) -> str:
    """What a tested length met: "fine" (copy > 99%), "coarse" (copy beats LM by > 1 point) or "amnesia"."""
    return "fine" if holds("fine", copy, lm) else "coarse" if holds("coarse", copy, lm) else "amnesia"


def regions(summary: Summary) -> list[tuple[str, float, float]]:
    """(status, start, end) of the shaded regions: each tested length's status over the stretch from the
    previous tested length (0 for the first) to it, neighbours of one status merged."""
    out: list[tuple[str, float, float]] = []
    start = 0.0
    for s in summary.per_length:
        here = status(s.copy.estimate, s.lm.estimate)
        if out and out[-1][0] == here:
            out[-1] = (here, out[-1][1], float(s.length))
        else:
            out.append((here, start, float(s.length)))
        start = float(s.length)
    return out


def draw_without_interval(ax: Any, points: list[tuple[float, float, float, float]], color: str) -> None:
    """Where a band cannot show what was measured: hollow markers over the points (x, value, low, high)
    without an interval (NaN bounds: one sample), and an error bar on a point whose neighbours have none
    (a band needs two neighbouring intervals)."""
    bare = [(x, value) for x, value, low, _ in points if math.isnan(low)]
    if bare:
        ax.plot([p[0] for p in bare], [p[1] for p in bare], "o", mfc="white", mec=color, ms=4.5, ls="none")
    has = [not math.isnan(low) for _, _, low, _ in points]
    for i, (x, value, low, high) in enumerate(points):
        if has[i] and not (i > 0 and has[i - 1]) and not (i + 1 < len(points) and has[i + 1]):
            ax.errorbar(
                [x], [value], yerr=[[value - low], [high - value]], color=color, alpha=0.6, lw=1, capsize=3, fmt="none"
            )


def without_interval_label(summary: Summary) -> str:
    """The legend's words for hollow markers, with the sample counts behind them."""
    counts = sorted({s.n for s in summary.per_length if math.isnan(s.copy.low) or math.isnan(s.lm.low)})
    said = " or ".join(f"n={n}" for n in counts if n) or "too few samples"
    return f"no interval ({said})"


# --- perplexity under the curve (the paper's Figure 5) -------------------------------------------

PERPLEXITY_SCORES = ((COPY_PPL.name, "copy perplexity", COPY_COLOR), (LM_PPL.name, "LM perplexity", LM_COLOR))
"""Per-length perplexity metrics drawn under the curve: (score, legend, colour)."""


class PerplexityPoint(NamedTuple):
    length: int
    mean: float
    low: float
    high: float


def perplexity_series(metrics: dict[str, Any]) -> dict[str, list[PerplexityPoint]]:
    """Per perplexity score, its per-length values and 95% intervals (NaN where null: one sample), ascending in L;
    {} for runs without them.

    `metrics`: one task's metrics by name without lm_eval's filter suffix (`copy_ppl@64`, `copy_ppl@64_ci_low`).
    """
    out: dict[str, list[PerplexityPoint]] = {}
    for score, _, _ in PERPLEXITY_SCORES:
        points = []
        for cell in metric_names.cells_of(metrics, score):
            value = metric_names.number(metrics.get(metric_names.name(score, *cell)))
            if len(cell) == 1 and cell[0].isdigit() and value is not None:
                low, high = (
                    metric_names.number(metrics.get(metric_names.name(score, *cell, stat=stat)))
                    for stat in (metric_names.CI_LOW, metric_names.CI_HIGH)
                )
                nan = math.nan
                points.append(
                    PerplexityPoint(int(cell[0]), value, nan if low is None else low, nan if high is None else high)
                )
        if points:
            out[score] = sorted(points)
    return out


def draw_perplexity(ax: Any, series: dict[str, list[PerplexityPoint]]) -> None:
    """Copy and LM perplexity against L on a log scale, each with its 95% band (lower is better); a length
    without an interval is a hollow marker."""
    for score, label, color in PERPLEXITY_SCORES:
        points = series.get(score)
        if not points:
            continue
        x = [p.length for p in points]
        ax.plot(x, [p.mean for p in points], "o-", color=color, ms=3.5, lw=1.6, label=label)
        # Results of version 1.1 and before hold t intervals of the arithmetic mean, which may reach
        # below 1 (no perplexity does): their band stops at 1.
        ax.fill_between(x, [max(p.low, 1.0) if not math.isnan(p.low) else math.nan for p in points], [p.high for p in points],
                        color=color, alpha=0.25, lw=0)  # fmt: skip
        draw_without_interval(ax, [(p.length, p.mean, p.low, p.high) for p in points], color)
    if any(math.isnan(p.low) for points in series.values() for p in points):
        ax.plot([], [], "o", mfc="white", mec="grey", ms=4.5, ls="none", label="no interval (one sample, or all equal)")
    ax.set_yscale("log")
    ax.set_ylabel("perplexity (same tokens)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


# --- curves of runs that differ only in their text sources (the paper's Figure 3) ----------------


class SourcedCurve(NamedTuple):
    """One run of a sources comparison: where its S and I came from, and its curve's statistics."""

    copy: str
    prefix: str
    summary: Summary


def source_label(spec: str | None) -> str:
    """A short name for a source as a run's metadata gives it (None: the default hub corpus)."""
    if spec is None or str(spec).strip() == "":
        return "PG-19 test"
    text = str(spec)
    return text if text == "random" or text.startswith("hf:") else Path(text).name


def run_sources(metadata: dict[str, Any]) -> tuple[str, str]:
    """(copy, prefix) source labels of a run's forgetting-curve metadata (an unset role uses the corpus)."""
    corpus = metadata.get("forgetting_curve_corpus")
    copy = metadata.get("forgetting_curve_copy_source") or corpus
    prefix = metadata.get("forgetting_curve_prefix_source") or corpus
    return source_label(copy), source_label(prefix)


def sources_figure(runs: list[SourcedCurve], title: str = "Forgetting curve by text source") -> Figure:
    """Panel (a): LM accuracy for each prefix source, S fixed; panel (b): copy (solid) and LM (dashed)
    accuracy for each copy source, I fixed. The fixed source is the most common one among `runs`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = ("#000000", "#d55e00", "#009e73", "#cc79a7", "#56b4e9", "#e69f00", "#0072b2")
    copies = [r.copy for r in runs]
    prefixes = [r.prefix for r in runs]
    fixed_copy = max(set(copies), key=copies.count)
    fixed_prefix = max(set(prefixes), key=prefixes.count)
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    panel_a = [r for r in runs if r.copy == fixed_copy]
    panel_b = [r for r in runs if r.prefix == fixed_prefix]
    for i, run in enumerate(panel_a):
        summary = run.summary
        x = [s.length for s in summary.per_length]
        color = colors[i % len(colors)]
        ax_a.plot(x, [s.lm.estimate for s in summary.per_length], "o-", color=color, ms=3.5, label=f"I: {run.prefix}")
        ax_a.fill_between(
            x,
            [s.lm.low for s in summary.per_length],
            [s.lm.high for s in summary.per_length],
            color=color,
            alpha=0.2,
            lw=0,
        )
    for i, run in enumerate(panel_b):
        summary = run.summary
        x = [s.length for s in summary.per_length]
        color = colors[i % len(colors)]
        ax_b.plot(
            x, [s.copy.estimate for s in summary.per_length], "o-", color=color, ms=3.5, label=f"S: {run.copy} (copy)"
        )
        ax_b.plot(
            x, [s.lm.estimate for s in summary.per_length], "s--", color=color, ms=3, lw=1, label=f"S: {run.copy} (LM)"
        )
        ax_b.fill_between(
            x,
            [s.copy.low for s in summary.per_length],
            [s.copy.high for s in summary.per_length],
            color=color,
            alpha=0.2,
            lw=0,
        )
    ax_a.set_title(f"(a) LM accuracy by prefix source (S from {fixed_copy})", fontsize=10)
    ax_b.set_title(f"(b) forgetting curve by copy source (I from {fixed_prefix})", fontsize=10)
    for ax in (ax_a, ax_b):
        ax.set_xlabel("length L of the copied text (tokens)")
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    ax_a.set_ylabel("token accuracy (later half of S)")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig

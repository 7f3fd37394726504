"""The forgetting curve in the report: memory lengths and per-length table, the overlay of every run's
curve, each run's figure, and runs of one model that differ only in their text sources (the paper's Figure 3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.evaluations import ReportSection
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.forgetting_curve.options import NAME, PREFIX
from lm_eval_longmem.forgetting_curve.rim import figures as fc_plot
from lm_eval_longmem.forgetting_curve.rim.reader import forgetting_curve_task, stored_summary
from lm_eval_longmem.forgetting_curve.scores import SCORES, memory_censored, memory_length
from lm_eval_longmem.readers.results import Run
from lm_eval_longmem.report.blocks import (
    RUN_COLORS,
    FigureBlock,
    Section,
    Table,
    absent_cells,
    estimate,
    interval_of,
    number,
    pyplot,
    slug,
    tokens,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from lm_eval_longmem.forgetting_curve.analysis import Summary


class ForgettingCurveSection(ReportSection):
    """The forgetting curve's part of the report."""

    position = 0
    """First among the evaluations' sections."""
    headline_header = (f"{NAME} fine_memory_length", "coarse_memory_length")
    scores = SCORES

    def headline_cells(self, run: Run) -> list[str]:
        """Fine and coarse memory lengths with their intervals."""
        task = forgetting_curve_task(run.data)
        if task is None:
            return ["-", "-"]
        summary = stored_summary(run.data, task, path=run.path)
        return [memory_cell(run.metrics(task), criterion, summary) for criterion in ("fine", "coarse")]

    def headline_line(self, cells: list[str]) -> str:
        return f"{NAME} fine_memory_length {cells[0]} (coarse {cells[1]})"

    def sections(self, runs: Sequence[Run], labels: Sequence[str]) -> list[Section]:
        """Memory lengths and per-length tables with the figures, then runs that differ only in their text sources."""
        found = (_forgetting_curve_section(runs, labels), _forgetting_curve_sources_section(runs, labels))
        return [s for s in found if s is not None]


SECTION = ForgettingCurveSection()


def memory_cell(metrics: dict[str, Any], criterion: str, summary: Summary) -> str:
    """The memory length under `criterion` with its interval as a table shows it (`report.blocks.tokens`):
    `>L` when censored, `<S` when no tested length met it (S the shortest length `summary` tested)."""
    length, low, high = (metrics.get(memory_length(criterion, stat)) for stat in metric_names.MEAN_AND_INTERVAL)
    censored = metrics.get(memory_censored(criterion))
    shortest = summary.per_length[0].length if summary.per_length else None
    return tokens(length, censored, low, high, shortest=shortest)


def copy_overlay_figure(curves: Sequence[tuple[str, Any]]) -> Figure:
    """All runs' copy-accuracy curves on one axis, each with its fine (solid) and coarse (dashed) memory length.

    `curves` holds (label, `analysis.Summary`) pairs. A base-2 logarithmic length axis is used when
    the tested lengths span a factor of 8 or more (geometric sweeps), a linear one otherwise.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9.0, 4.0))
    all_lengths: list[int] = []
    claimed: set[int] = set()
    drawn: set[str] = set()
    for i, (label, summary) in enumerate(curves):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        x = [s.length for s in summary.per_length]
        all_lengths += x
        marks = (
            f"fine {fc_plot.memory_mark(summary.fine, summary)}, coarse {fc_plot.memory_mark(summary.coarse, summary)}"
        )
        ax.plot(x, [s.copy.estimate for s in summary.per_length], "o-", color=color, ms=3.5, lw=1.6,
                label=f"{label}: {marks}")  # fmt: skip
        ax.fill_between(x, [s.copy.low for s in summary.per_length], [s.copy.high for s in summary.per_length],
                        color=color, alpha=0.15, lw=0)  # fmt: skip
        fc_plot.draw_without_interval(
            ax, [(s.length, s.copy.estimate, s.copy.low, s.copy.high) for s in summary.per_length], color
        )
        for memory, style in ((summary.fine, "-"), (summary.coarse, "--")):
            if memory.length > 0:  # 0: below the shortest length tested, no line (the label says "<S")
                ax.axvline(memory.length, color=color, ls=style, lw=1.0, alpha=0.8)
                drawn.add(style)
        if summary.claimed:
            claimed.add(summary.claimed)
    if "-" in drawn:  # the legend names only the lines drawn
        ax.plot([], [], color="grey", ls="-", lw=1.0, label="fine-grained memory length (copy > 99%)")
    if "--" in drawn:
        ax.plot(
            [], [], color="grey", ls="--", lw=1.0, label="coarse-grained memory length (copy beats LM by > 1 point)"
        )
    low, high = min(all_lengths), max(all_lengths)
    if high / max(low, 1) >= 8:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(all_lengths))
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    else:
        fc_plot.tick_lengths(ax, all_lengths, max(high - low, 1))
    for window in sorted(claimed):
        if window <= 1.5 * high:
            ax.axvline(window, color="black", ls=":", lw=1.2)
    if claimed:
        on_scale = [w for w in sorted(claimed) if w <= 1.5 * high]
        names = ", ".join(format_length(w) for w in sorted(claimed))
        ax.plot(
            [], [], color="black", ls=":", lw=1.2, label=f"claimed window ({names}{'' if on_scale else ', off scale'})"
        )
    ax.axhline(0.99, color="grey", lw=0.6, alpha=0.6)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("length L of the copied text (tokens)")
    ax.set_ylabel("copy accuracy (later half of S)")
    ax.set_title("Forgetting curve: copy accuracy of every model")
    ax.grid(alpha=0.3)
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False
    )  # below: full-width axes
    fig.tight_layout()
    return fig


def _lengths_tested(run: Run, task: str, scored: list[int]) -> str:
    """The lengths a run scored; with the sweep's lengths stored, each one without docs marked "(no docs)"."""
    absent = {int(metric_names.cell_parts(c)[0]) for c in absent_cells(run, task)}
    planned = sorted({*scored, *absent})
    return ", ".join(f"{length} (no docs)" if length in absent else str(length) for length in planned)


def _forgetting_curve_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    found = [(run, label, task) for run, label in zip(runs, labels) if (task := forgetting_curve_task(run.data))]
    if not found:
        return None
    section = Section("Forgetting curve")
    summaries = []
    rows = []
    for run, label, task in found:
        summary = stored_summary(run.data, task, path=run.path)
        summaries.append((label, summary))
        metrics = run.metrics(task)
        rows.append([
            label,
            memory_cell(metrics, "fine", summary),
            memory_cell(metrics, "coarse", summary),
            format_length(summary.claimed) if summary.claimed else "-",
            _lengths_tested(run, task, [s.length for s in summary.per_length]),
            str(summary.per_length[0].n) if summary.per_length and summary.per_length[0].n else "-",
            ", ".join(map(str, summary.skipped)) or "none",
        ])  # fmt: skip
    section.blocks.append(
        "Fine-grained memory length: the longest tested L whose copy accuracy exceeds 99%; coarse-grained: the "
        "longest L where copy accuracy beats LM accuracy (same text after an unrelated prefix) by more than 1 point."
    )
    section.blocks.append(
        Table(
            [
                "model",
                "fine_memory_length",
                "coarse_memory_length",
                "claimed window",
                "lengths tested",
                "samples per length",
                "skipped lengths",
            ],
            rows,
        )
    )
    section.blocks.append(PER_LENGTH_NOTE)
    section.blocks.append(Table(PER_LENGTH_HEADER, [row for (run, label, task), (_, summary) in zip(found, summaries)
                                                    for row in per_length_rows(label, run.metrics(task), summary)]))  # fmt: skip
    section.blocks.append(
        FigureBlock(
            "forgetting_curve_overlay",
            "Copy accuracy of every model, with its memory lengths (95% bands).",
            copy_overlay_figure(summaries),
        )
    )
    for (run, label, task), (_, summary) in zip(found, summaries):
        perplexity = fc_plot.perplexity_series(run.metrics(task))
        fig = fc_plot.figure(summary, f"Forgetting curve: {label}", perplexity)
        caption = f"Copy and LM accuracy of {label}" + (
            ", with the perplexity of the same tokens under it (the paper's Figure 5)." if perplexity else "."
        )
        section.blocks.append(FigureBlock(f"forgetting_curve_{slug(label)}", caption, fig))
    return section


PER_LENGTH_HEADER = ["model", "L", "samples", *(f"{s.name} (%)" for s in SCORES[:2]), *(s.name for s in SCORES[2:])]


PER_LENGTH_NOTE = (
    "Per length: accuracies (%) with 95% intervals over samples (Wilson on the Korn-Graubard effective size of the "
    "scored tokens), perplexities as the geometric mean over samples with the exponentiated t interval of their logs. "
    "(n=1): one sample, no interval; (all equal): samples that all agree, where the method gives none."
)


def per_length_rows(label: str, metrics: dict[str, Any], summary: Any) -> list[list[str]]:
    """One row per tested length of a forgetting-curve run: samples, both accuracies and both perplexities as stored."""
    rows = []
    for s in summary.per_length:
        cells = [interval_of(metrics, score, s.length) for score in (s.name for s in SCORES)]
        rows.append(
            [label, str(s.length), str(s.n) if s.n else "-"]
            + [estimate(*c, s.n, scale=100) for c in cells[:2]]
            + [estimate(*c, s.n, digits=3 if (v := number(c[0])) is not None and v < 10 else 1) for c in cells[2:]]
        )
    return rows


_SOURCE_KEYS = (f"{PREFIX}copy_source", f"{PREFIX}prefix_source", f"{PREFIX}corpus")


def source_groups(runs: Sequence[Run], labels: Sequence[str]) -> list[list[tuple[str, Run]]]:
    """Forgetting-curve runs of one model that differ only in the sources of S and I, in groups of two or more.

    Two runs compare when their model and every other `forgetting_curve_*` option (lengths,
    samples, seed, ...) are the same and their (copy, prefix) sources differ.
    """
    groups: dict[str, list[tuple[str, Run]]] = {}
    for run, label in zip(runs, labels):
        if forgetting_curve_task(run.data) is None:
            continue
        rest = {k: v for k, v in _fc_metadata(run).items() if k.startswith(PREFIX) and k not in _SOURCE_KEYS}
        key = repr((run.model, sorted(rest.items(), key=str)))
        groups.setdefault(key, []).append((label, run))
    out = []
    for members in groups.values():
        distinct = {fc_plot.run_sources(_fc_metadata(run)) for _, run in members}
        if len(distinct) > 1:
            out.append(members)
    return out


def _fc_metadata(run: Run) -> dict[str, Any]:
    """The forgetting-curve task's metadata as the results file's `configs` kept it ({} when absent)."""
    task = forgetting_curve_task(run.data)
    return ((run.data.get("configs") or {}).get(task) or {}).get("metadata") or {}


def _forgetting_curve_sources_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    groups = source_groups(runs, labels)
    if not groups:
        return None
    section = Section("Forgetting curve by text source")
    section.blocks.append(
        "Runs of one model that differ only in where the copied text S and the irrelevant prefix I come from "
        "(`forgetting_curve_copy_source`, `forgetting_curve_prefix_source`), overlaid as the paper's Figure 3: (a) LM "
        "accuracy for each prefix source, (b) copy and LM accuracy for each copy source. A role whose source did not "
        "change keeps its tokens, so the curves are paired sample by sample."
    )
    for members in groups:
        rows, curves = [], []
        for label, run in members:
            copy, prefix = fc_plot.run_sources(_fc_metadata(run))
            task = forgetting_curve_task(run.data)
            metrics = run.metrics(task) if task else {}
            summary = stored_summary(run.data, path=run.path)
            curves.append(fc_plot.SourcedCurve(copy, prefix, summary))
            rows.append([
                label, copy, prefix,
                memory_cell(metrics, "fine", summary),
                memory_cell(metrics, "coarse", summary),
            ])  # fmt: skip
        model = members[0][1].model
        section.blocks.append(Table(["run", "S from", "I from", "fine_memory_length", "coarse_memory_length"], rows))
        section.blocks.append(
            FigureBlock(f"forgetting_curve_sources_{slug(model)}", f"Forgetting curves of {model} by text source.",
                        fc_plot.sources_figure(curves, f"Forgetting curve by text source: {model}"))
        )  # fmt: skip
    return section

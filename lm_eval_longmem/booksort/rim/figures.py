"""Book-SORT accuracy by excerpt length and by segment distance, like Figure 1 a/b of Pink et al.

Panel (a): accuracy per excerpt length L_E (``acc@LE<words>``) at its tick; a little to the right of it, dashed
with square markers, the accuracy after removing the answer bias (``acc_calibrated@<cell>``, log-prob tasks;
ours, not the paper's), with its own intervals, in both panels; a little to the left, dotted, the share of
trials answered "A" (``pct_A@LE<words>``: a model stuck on one label sits at 0 or 1 there). Each axis spans
half a step beyond its outer ticks, so every point sits beside its own tick, never at the border.
Panel (b): accuracy per distance bin at L_E = 2500 words as in the paper (``acc@LE2500_bin<k>``), or pooled over excerpt lengths
(``acc@bin<k>``) when the run has no 2500-word trials. Error bars are the Wilson 95% intervals
the task reports (``_ci_low``/``_ci_high``); a star above an accuracy's bar marks a point whose drawn interval
lies wholly above chance (one rule, read off the bar itself; the one-sided binomial test the results also
store, ``_p_above_chance``, can reject at 5% while the two-sided interval still reaches chance, so it is not
what the star shows). One line per Book-SORT task in the file
(in-context, memory-less, generation). Reads results files only; names through
`common/metric_names.py`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lm_eval_longmem.booksort.rim.reader import booksort_tasks, distance_bins, excerpt_lengths
from lm_eval_longmem.booksort.scores import ACC, CALIBRATED, PCT_A, factor
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.readers.results import n_samples

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CHANCE = 0.5
PAPER_BIN_LENGTH = 2500


def can_plot(results: Any) -> bool:
    """True for an lm_eval results dict holding Book-SORT per-excerpt-length metrics."""
    return isinstance(results, dict) and bool(booksort_tasks(results))


CALIBRATED_OFFSET = 0.08
"""How far right of the accuracy the calibrated accuracy is drawn, and left of it the share answered "A" (in x
units: ticks are 1 apart), so every bar and marker shows and reads as its tick's."""
MARGIN = 0.5
"""How far past its outer ticks each panel's x axis reaches (half a step), so no point sits at the border."""


def _point(row: dict[str, Any], cell: str, score: str = ACC.name) -> tuple[float, float, float, bool]:
    """(value, distance down to the interval's low end, up to its high end, interval wholly above chance)."""
    value = row[metric_names.name(score, cell)]
    low = row.get(metric_names.name(score, cell, stat=metric_names.CI_LOW))
    high = row.get(metric_names.name(score, cell, stat=metric_names.CI_HIGH))
    above = low is not None and low > CHANCE
    low, high = (value if low is None else low), (value if high is None else high)
    return value, value - low, high - value, above


def _draw(
    ax: Any,
    x: Sequence[float],
    points: list[tuple[float, float, float, bool]],
    label: str,
    *,
    stars: bool = True,
    **style: Any,
) -> str:
    """One accuracy line with its error bars and (unless `stars` is False) stars; returns its colour."""
    values = [p[0] for p in points]
    container = ax.errorbar(
        x,
        values,
        yerr=[[p[1] for p in points], [p[2] for p in points]],
        **({"marker": "o"} | style),
        capsize=3,
        label=label,
    )
    for xi, (value, _, up, significant) in zip(x, points, strict=True):
        if significant and stars:
            ax.annotate("*", (xi, value + up), ha="center", va="bottom", color=container[0].get_color())
    return container[0].get_color()


def _draw_calibrated(
    ax: Any, x: Sequence[float], row: dict[str, Any], cells: list[str], color: str, label: str
) -> None:
    """The calibrated accuracy per cell (``acc_calibrated@<cell>``), dashed, squares, in the accuracy line's colour."""
    if not all(metric_names.name(CALIBRATED.name, cell) in row for cell in cells):
        return  # a generation task, or results written before `acc_calibrated` existed
    points = [_point(row, cell, CALIBRATED.name) for cell in cells]
    _draw(
        ax,
        [xi + CALIBRATED_OFFSET for xi in x],
        points,
        f"{label}: calibrated",
        stars=False,
        marker="s",
        linestyle="--",
        color=color,
    )


def _draw_answer_bias(ax: Any, x: list[float], row: dict[str, Any], cells: list[str], color: str, label: str) -> None:
    """The share of trials answered "A" per cell (``pct_A@<cell>``), dotted, in the accuracy line's colour."""
    values = [row.get(metric_names.name(PCT_A.name, cell)) for cell in cells]
    if any(v is None for v in values):
        return  # results written before `pct_A` existed
    left = [xi - CALIBRATED_OFFSET for xi in x]  # beside the accuracy, never under its star
    ax.plot(left, values, linestyle=":", marker="x", color=color, label=f'{label}: share answered "A"')


def line_label(name: str, trials: int | None) -> str:
    """A line's legend entry: its name and the trials behind it, when the results say."""
    return f"{name} (n={trials})" if trials else name


def plot(results: dict[str, Any], out_prefix: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write ``<out_prefix>_booksort.<fmt>`` for each format; returns the paths."""
    fig = figure({line_label(name, n_samples(results, name)): row for name, row in booksort_tasks(results).items()})
    import matplotlib.pyplot as plt

    written = []
    for fmt in formats:
        path = Path(f"{out_prefix}_booksort.{fmt}")
        fig.savefig(path)
        written.append(path)
    plt.close(fig)
    return written


def figure(tasks: dict[str, dict[str, Any]]) -> Figure:
    """Both panels, one line per entry of `tasks` (label -> a metric row, `booksort_tasks`); the caller saves and closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    all_lengths = sorted({le for row in tasks.values() for le in excerpt_lengths(row)})
    position = {le: i for i, le in enumerate(all_lengths)}
    paper_bins = any(distance_bins(row, PAPER_BIN_LENGTH) for row in tasks.values())
    bin_source = f"L_E = {PAPER_BIN_LENGTH} words" if paper_bins else "pooled over excerpt lengths"
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    calibrated = any(metric_names.cells_of(row, CALIBRATED.name) for row in tasks.values())
    all_bins: set[int] = set()
    for name, row in sorted(tasks.items()):
        lengths = excerpt_lengths(row)
        color = _draw(ax_a, [position[le] for le in lengths], [_point(row, factor("LE", le)) for le in lengths], name)
        excerpt_cells = [factor("LE", le) for le in lengths]
        _draw_calibrated(ax_a, [position[le] for le in lengths], row, excerpt_cells, color, name)
        _draw_answer_bias(ax_a, [position[le] for le in lengths], row, excerpt_cells, color, name)
        if paper_bins:
            bins = distance_bins(row, PAPER_BIN_LENGTH)
            cells = [metric_names.cell(factor("LE", PAPER_BIN_LENGTH), factor("bin", k)) for k in bins]
        else:
            bins = distance_bins(row)
            cells = [factor("bin", k) for k in bins]
        color = _draw(ax_b, bins, [_point(row, cell) for cell in cells], name)
        _draw_calibrated(ax_b, bins, row, cells, color, name)
        all_bins |= set(bins)
    ax_a.set_xticks(range(len(all_lengths)), [str(le) for le in all_lengths])
    ax_a.set_xlim(-MARGIN, len(all_lengths) - 1 + MARGIN)
    ax_b.set_xticks(sorted(all_bins), [f"d{k}" for k in sorted(all_bins)])
    if all_bins:
        ax_b.set_xlim(min(all_bins) - MARGIN, max(all_bins) + MARGIN)
    for ax, title, xlabel in (
        (ax_a, "(a) accuracy by excerpt length", "excerpt length L_E (words)"),
        (ax_b, f"(b) accuracy by segment distance ({bin_source})", "distance bin (d0 nearest)"),
    ):
        ax.axhline(CHANCE, color="grey", linestyle="--", linewidth=1, label="chance")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(xlabel)
        notes = (["dashed: calibrated"] if calibrated else []) + (["dotted: share answered A"] if ax is ax_a else [])
        ax.set_ylabel("accuracy" + (f" ({'; '.join(notes)})" if notes else ""))
        ax.set_title(title, fontsize=10)
    ax_a.legend(fontsize=8, loc="lower left")
    fig.suptitle("Book-SORT (95% Wilson intervals; * where the accuracy's interval lies above chance)", fontsize=11)
    fig.tight_layout()
    return fig

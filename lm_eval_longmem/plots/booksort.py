"""Book-SORT accuracy by excerpt length and by segment distance, like Figure 1 a/b of Pink et al.

Panel (a): accuracy per excerpt length L_E (``acc@LE<words>``), and dotted beside it the share of
trials answered "A" (``pct_A@LE<words>``: a model stuck on one label sits at 0 or 1 there). Panel (b): accuracy per distance
bin at L_E = 2500 words as in the paper (``acc@LE2500_bin<k>``), or pooled over excerpt lengths
(``acc@bin<k>``) when the run has no 2500-word trials. Error bars are the Wilson 95% intervals
the task reports (``_ci_low``/``_ci_high``); a star marks a point significantly above chance
(one-sided binomial p < 0.05, ``_p_above_chance``). One line per Book-SORT task in the file
(in-context, memory-less, generation). Reads results files only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CHANCE = 0.5
PAPER_BIN_LENGTH = 2500
_LE = re.compile(r"^acc@LE(\d+),")
_LE_BIN = re.compile(r"^acc@LE(\d+)_bin(\d+),")
_BIN = re.compile(r"^acc@bin(\d+),")


def booksort_tasks(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-task metric dicts of every Book-SORT task in an lm_eval results dict."""
    per_task = (results.get("results") or {}) if isinstance(results, dict) else {}
    return {name: row for name, row in per_task.items() if any(_LE.match(key) for key in row)}


def can_plot(results: Any) -> bool:
    """True for an lm_eval results dict holding Book-SORT per-excerpt-length metrics."""
    return isinstance(results, dict) and bool(booksort_tasks(results))


def _point(row: dict[str, Any], cell: str) -> tuple[float, float, float, bool]:
    value = row[f"acc@{cell},none"]
    low = row.get(f"acc@{cell}_ci_low,none", value)
    high = row.get(f"acc@{cell}_ci_high,none", value)
    p = row.get(f"acc@{cell}_p_above_chance,none", 1.0)
    return value, value - low, high - value, p < 0.05


def _draw(ax: Any, x: list[float], points: list[tuple[float, float, float, bool]], label: str) -> str:
    """One accuracy line with its error bars and stars; returns its colour."""
    values = [p[0] for p in points]
    container = ax.errorbar(
        x, values, yerr=[[p[1] for p in points], [p[2] for p in points]], marker="o", capsize=3, label=label
    )
    for xi, (value, _, up, significant) in zip(x, points, strict=True):
        if significant:
            ax.annotate("*", (xi, value + up), ha="center", va="bottom", color=container[0].get_color())
    return container[0].get_color()


def _draw_answer_bias(ax: Any, x: list[float], row: dict[str, Any], cells: list[str], color: str, label: str) -> None:
    """The share of trials answered "A" per cell (``pct_A@<cell>``), dotted, in the accuracy line's colour."""
    values = [row.get(f"pct_A@{cell},none") for cell in cells]
    if any(v is None for v in values):
        return  # results written before `pct_A` existed
    ax.plot(x, values, linestyle=":", marker="x", color=color, label=f'{label}: share answered "A"')


def plot(results: dict[str, Any], out_prefix: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write ``<out_prefix>_booksort.<fmt>`` for each format; returns the paths."""
    fig = figure(booksort_tasks(results))
    import matplotlib.pyplot as plt

    written = []
    for fmt in formats:
        path = Path(f"{out_prefix}_booksort.{fmt}")
        fig.savefig(path)
        written.append(path)
    plt.close(fig)
    return written


def figure(tasks: dict[str, dict[str, Any]]) -> Figure:
    """Both panels, one line per entry of `tasks` (label -> an lm_eval metric row); the caller saves and closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    all_lengths = sorted({int(m.group(1)) for row in tasks.values() for key in row if (m := _LE.match(key))})
    position = {le: i for i, le in enumerate(all_lengths)}
    paper_bins = any(
        int(m.group(1)) == PAPER_BIN_LENGTH for row in tasks.values() for key in row if (m := _LE_BIN.match(key))
    )
    bin_pattern, bin_source = (
        (_LE_BIN, f"L_E = {PAPER_BIN_LENGTH} words") if paper_bins else (_BIN, "pooled over excerpt lengths")
    )
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    all_bins: set[int] = set()
    for name, row in sorted(tasks.items()):
        lengths = sorted({int(m.group(1)) for key in row if (m := _LE.match(key))})
        color = _draw(ax_a, [position[le] for le in lengths], [_point(row, f"LE{le}") for le in lengths], name)
        _draw_answer_bias(ax_a, [position[le] for le in lengths], row, [f"LE{le}" for le in lengths], color, name)
        if paper_bins:
            bins = sorted(
                {int(m.group(2)) for key in row if (m := _LE_BIN.match(key)) and int(m.group(1)) == PAPER_BIN_LENGTH}
            )
            cells = [f"LE{PAPER_BIN_LENGTH}_bin{k}" for k in bins]
        else:
            bins = sorted({int(m.group(1)) for key in row if (m := bin_pattern.match(key))})
            cells = [f"bin{k}" for k in bins]
        _draw(ax_b, bins, [_point(row, cell) for cell in cells], name)
        all_bins |= set(bins)
    ax_a.set_xticks(range(len(all_lengths)), [str(le) for le in all_lengths])
    ax_b.set_xticks(sorted(all_bins), [f"d{k}" for k in sorted(all_bins)])
    for ax, title, xlabel in (
        (ax_a, "(a) accuracy by excerpt length", "excerpt length L_E (words)"),
        (ax_b, f"(b) accuracy by segment distance ({bin_source})", "distance bin (d0 nearest)"),
    ):
        ax.axhline(CHANCE, color="grey", linestyle="--", linewidth=1, label="chance")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("accuracy (dotted: share answered A)" if ax is ax_a else "accuracy")
        ax.set_title(title, fontsize=10)
    ax_a.legend(fontsize=8, loc="lower left")
    fig.suptitle("Book-SORT (95% Wilson intervals; * above chance, p < 0.05)", fontsize=11)
    fig.tight_layout()
    return fig

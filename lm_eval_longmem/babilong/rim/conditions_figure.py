"""BABILong accuracy against length, one line per condition: the layout of the paper's Figure 3a.

The paper draws qa1 accuracy against context length with one line per model and condition (GPT-4
and Llama-3 in-context, with RAG-C and with RAG-S). Here there is one panel per bAbI task that
ran (qa1 first), one solid line per run and condition, and a dashed line per reference series (the
authors' prediction files); shaded bands are 95% intervals. `lm-eval-longmem report` draws it when
its BABILong runs hold more than one condition or a reference is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.stats import Interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Series(NamedTuple):
    """One line: its label, whether it is a reference (dashed), and accuracy per (task, length in tokens)."""

    label: str
    reference: bool
    cells: dict[tuple[str, int], Interval]


def figure(series: Sequence[Series], tasks: Sequence[str]) -> Figure:
    """One panel per task in `tasks`: accuracy (%) against length, a line per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = sorted({ln for s in series for (qa, ln) in s.cells if qa in tasks})
    position = {ln: i for i, ln in enumerate(lengths)}
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.4), squeeze=False, sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, qa in zip(axes[0], tasks):
        for i, line in enumerate(series):
            points = sorted(((ln, v) for (q, ln), v in line.cells.items() if q == qa), key=lambda p: p[0])
            if not points:
                continue
            xs = [position[ln] for ln, _ in points]
            color = "0.35" if line.reference else colors[i % len(colors)]
            style = "--" if line.reference else "-"
            ax.plot(xs, [100 * v.estimate for _, v in points], style, marker="o", ms=3, color=color, label=line.label)
            ax.fill_between(
                xs, [100 * v.low for _, v in points], [100 * v.high for _, v in points], color=color, alpha=0.12
            )
        ax.set_title(qa)
        ax.set_xticks(range(len(lengths)), [format_length(ln) for ln in lengths], rotation=45)
        ax.set_xlabel("context length")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy (%)")
    handles, names = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:  # a series may be absent from the first panel
        for handle, name in zip(*ax.get_legend_handles_labels()):
            if name not in names:
                handles.append(handle)
                names.append(name)
    rows = len(names)
    fig.legend(handles, names, loc="lower center", fontsize=8, ncol=1, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * rows, 1, 1))
    fig.set_figheight(3.4 + 0.25 * rows)
    return fig

"""Book-SORT's fine-tuned memory condition by epoch, like Figure 2 (right) of Pink et al.

Panel (a): memory-less accuracy after each epoch of fine-tuning with the book chunks and without
them (control), with the 95% intervals the task reported; epoch 0 is the base model, shared by
both arms; a star marks an epoch where the epoch-matched test finds the arms different (p < 0.05).
Panel (b): the mean loss on the book chunks, i.e. how much of the text each arm has learnt.
Reads the summary `lm-eval-longmem booksort finetune` writes (``booksort_finetune.json``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lm_eval_longmem.booksort.scores import ACC
from lm_eval_longmem.common import metric_names

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CHANCE = 0.5
ACC_MEAN, ACC_LOW, ACC_HIGH = metric_names.with_interval(ACC.name)
"""The memory-less accuracy with its interval, as each row of the summary holds them (names of the results)."""
_STYLE = {"book": ("#d55e00", "with book chunks"), "control": ("#0072b2", "control (instructions only)")}


def arm_series(summary: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    """The rows of `arm` by epoch, epoch 0 (the base model) first."""
    rows = [r for r in summary["rows"] if r["arm"] in ("base", arm)]
    return sorted(rows, key=lambda r: r["epoch"])


def figure(summary: dict[str, Any]) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    acc_ax, loss_ax = fig.subplots(1, 2)
    for arm, (color, label) in _STYLE.items():
        rows = arm_series(summary, arm)
        epochs = [r["epoch"] for r in rows]
        acc = [r[ACC_MEAN] for r in rows]
        acc_ax.plot(epochs, acc, marker="o", color=color, label=label)
        acc_ax.fill_between(epochs, [r[ACC_LOW] for r in rows], [r[ACC_HIGH] for r in rows], color=color, alpha=0.15)
        losses = [(r["epoch"], r["book_chunk_loss"]) for r in rows if r["book_chunk_loss"] is not None]
        if losses:
            loss_ax.plot(*zip(*losses), marker="o", color=color, label=label)
    top = max((r[ACC_HIGH] for r in summary["rows"]), default=1.0)
    for test in summary["epoch_matched"]:
        if test["differs"]:
            acc_ax.annotate("*", (test["epoch"], top), ha="center", va="bottom")
    acc_ax.axhline(CHANCE, color="grey", linestyle="--", linewidth=1, label="chance")
    acc_ax.set(xlabel="epoch", ylabel="memory-less accuracy", ylim=(0, 1), title="(a) order recall after fine-tuning")
    loss_ax.set(xlabel="epoch", ylabel="mean loss on the book chunks", title="(b) memory of the text")
    for ax in (acc_ax, loss_ax):
        ax.set_xticks(sorted({r["epoch"] for r in summary["rows"]}))
        ax.legend(fontsize=8)
    fig.suptitle(f"Book-SORT fine-tuned memory: {summary['model'].rstrip('/').rsplit('/', 1)[-1]}")
    fig.tight_layout()
    return fig

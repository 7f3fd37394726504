"""The summary `lm-eval-longmem booksort finetune` writes (`booksort_finetune.json`), read back and shown as text.

`report` and the command's own Markdown show it with these, so the reader never imports the trainer
(`booksort/finetune.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lm_eval_longmem.booksort.scores import ACC
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.readers.results import ResultsFileError, read_json

SUMMARY = "booksort_finetune.json"
"""The summary's file name, in the command's output folder."""
TASK = "booksort_memoryless"
"""The task every checkpoint is evaluated on (the memory-less prompt: the question without the excerpt)."""


def _pct(value: Any, low: Any = None, high: Any = None) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    interval = (
        f" [{100 * low:.1f}, {100 * high:.1f}]"
        if isinstance(low, (int, float)) and isinstance(high, (int, float))
        else ""
    )
    return f"{100 * value:.1f}{interval}"


def _num(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


TABLE_HEADER = [
    "epoch",
    "book acc",
    "control acc",
    "book - control",
    "p (epoch-matched)",
    "book chunk loss",
    "control chunk loss",
]


def summary_table(summary: dict[str, Any]) -> list[list[str]]:
    """One row of text cells per epoch (0 = the base model) under `TABLE_HEADER`: accuracy (%, 95%
    interval) of each arm, their difference and the epoch-matched p-value, each arm's chunk loss."""
    rows = {(r["arm"], r["epoch"]): r for r in summary["rows"]}
    tests = {t["epoch"]: t for t in summary["epoch_matched"]}
    out = []
    for epoch in sorted({r["epoch"] for r in summary["rows"]}):
        book = rows.get(("book", epoch)) or rows[("base", epoch)]
        control = rows.get(("control", epoch)) or rows[("base", epoch)]
        test = tests.get(epoch) or {}
        diff = test.get("book_minus_control")
        out.append([
            str(epoch), _pct(*(book[key] for key in metric_names.with_interval(ACC.name))),
            _pct(*(control[key] for key in metric_names.with_interval(ACC.name))),
            "-" if diff is None else f"{100 * diff:+.1f}", _num(test.get("p_value")),
            _num(book.get("book_chunk_loss")), _num(control.get("book_chunk_loss")),
        ])  # fmt: skip
    return out


def verdict(summary: dict[str, Any]) -> str:
    """One sentence: the epochs at which the arms differ (p < 0.05), or that they differ at none."""
    differing = [t["epoch"] for t in summary["epoch_matched"] if t["differs"]]
    if differing:
        return "The arms differ (p < 0.05) at epoch " + ", ".join(map(str, differing)) + "."
    return "The arms do not differ (p < 0.05) at any epoch (the paper's finding for Llama-3-8B-Instruct)."


def describe(summary: dict[str, Any]) -> str:
    """What the table shows, for the Markdown summary and the report."""
    data = summary["data"]
    return (
        f"`{TASK}` accuracy (%, 95% interval) after each epoch of fine-tuning with the book chunks "
        f"({data['book_chunks']} chunks, {data['book_words']} words) and without them (control); both arms also "
        f"train on {data['instructions']} instruction conversations. Epoch 0 is the base model. p: paired t-test of "
        "the two arms' per-trial correctness at the same epoch. Chunk loss: mean loss on the book chunks."
    )


def render_markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown: what it shows, the per-epoch table and the verdict."""
    lines = [f"# Book-SORT fine-tuned memory: {summary['model']}", "", describe(summary), ""]
    lines += ["| " + " | ".join(TABLE_HEADER) + " |", "|" + "---|" * len(TABLE_HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in summary_table(summary)]
    return "\n".join(lines + ["", verdict(summary), ""])


def read_summary(path: Path) -> dict[str, Any]:
    """A `booksort_finetune.json`, checked to hold what `report` reads; a bad file is one line naming it."""
    data = read_json(path)
    if not (
        isinstance(data, dict)
        and isinstance(data.get("model"), str)
        and isinstance(data.get("rows"), list)
        and all(
            isinstance(r, dict) and {"arm", "epoch", *metric_names.with_interval(ACC.name), "results"} <= r.keys()
            for r in data["rows"]
        )
        and any(r["arm"] == "base" for r in data["rows"])
        and isinstance(data.get("epoch_matched"), list)
        and all(isinstance(t, dict) and {"epoch", "p_value", "differs"} <= t.keys() for t in data["epoch_matched"])
        and isinstance(data.get("data"), dict)
        and {"book_chunks", "book_words", "instructions"} <= data["data"].keys()
    ):
        raise ResultsFileError(
            f"{path} is not a summary of `lm-eval-longmem booksort finetune`: rerun that command with the same --output_path"
        )
    return data


def summary_of(results_file: Path) -> Path | None:
    """The `booksort_finetune.json` of the run `results_file` belongs to: the nearest one above it, if its rows name it."""
    results_file = Path(results_file).resolve()
    for folder in results_file.parents:
        candidate = folder / SUMMARY
        if candidate.is_file():
            rows = read_summary(candidate)["rows"]
            return candidate if any((folder / str(r["results"])).resolve() == results_file for r in rows) else None
    return None

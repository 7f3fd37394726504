"""The report's document model (tables, figures, paragraphs in sections, defined in `common.document`, below the
registry whose report parts return them; rendered by `render.py`) and the formatting of its cells, shared by every
section builder."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.document import FigureBlock as FigureBlock
from lm_eval_longmem.common.document import Section as Section
from lm_eval_longmem.common.document import Table as Table
from lm_eval_longmem.common.evaluations import names
from lm_eval_longmem.readers.results import Run

RUN_COLORS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")


@dataclass
class Report:
    runs: list[Run]
    labels: list[str]
    sections: list[Section]

    def figures(self) -> list[FigureBlock]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, FigureBlock)]


class ReportFiles(NamedTuple):
    markdown: Path
    html: Path
    figures: list[Path]


def number(value: Any) -> float | None:
    return None if isinstance(value, bool) else metric_names.number(value)


def is_nan(value: Any) -> bool:
    """A NaN stored as a value: shown as "NaN", never as absent (our tasks write an interval they cannot give as
    null; a NaN is something else, `report.nan_values`)."""
    return isinstance(value, float) and math.isnan(value)


def _shown(value: Any, scale: float, digits: int) -> str | None:
    """`value` scaled and rounded, "NaN" for a NaN, None when absent."""
    if is_nan(value):
        return "NaN"
    v = number(value)
    return None if v is None else f"{scale * v:.{digits}f}"


def pct(value: Any, low: Any = None, high: Any = None) -> str:
    """`62.5 [55.1, 69.4]` (percent) or `-` when absent."""
    text, lo, hi = (_shown(v, 100, 1) for v in (value, low, high))
    if text is None:
        return "-"
    return text + (f" [{lo}, {hi}]" if lo is not None and hi is not None else "")


def no_interval_note(n: int | None) -> str:
    """How a table shows a value stored without an interval: one sample, or samples that all agree."""
    return " (n=1)" if n == 1 else " (all equal)" if n else " (no interval)"


def estimate(value: Any, low: Any, high: Any, n: int | None, scale: float = 1.0, digits: int = 1) -> str:
    """`96.5 [94.3, 98.6]`, or the value with `no_interval_note` when its bounds are null; `-` when absent."""
    text, lo, hi = (_shown(v, scale, digits) for v in (value, low, high))
    if text is None:
        return "-"
    return text + (f" [{lo}, {hi}]" if lo is not None and hi is not None else no_interval_note(n))


def tokens(value: Any, censored: Any = False, low: Any = None, high: Any = None, *, shortest: int | None = None) -> str:
    """`512 [256, 1024]`, `>2048` when censored, `-` when absent; with `shortest` (the shortest length
    tested), a length of 0 (none tested met the criterion) reads `<shortest`, in the value and its bounds."""

    def length(v: float) -> str:
        return f"<{shortest}" if v == 0 and shortest else str(int(v))

    if is_nan(value):
        return "NaN"
    v = number(value)
    if v is None:
        return "-"
    text = (">" if censored is True or number(censored) == 1 else "") + length(v)
    lo, hi = number(low), number(high)
    return text + (f" [{length(lo)}, {length(hi)}]" if lo is not None and hi is not None else "")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def figure_stem(block: FigureBlock) -> str:
    """The file stem of `block` under `figures/`, in its file name and its Markdown link: `slug(block.name)`."""
    return slug(block.name)


def interval_of(metrics: dict[str, Any], score: str, *parts: str | int) -> tuple[Any, Any, Any]:
    """(mean, low, high) of `score` over the cell of `parts` (none: the whole run) in canonical metrics."""
    mean, low, high = (metrics.get(key) for key in metric_names.with_interval(score, *parts))
    return mean, low, high


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def is_ours(run: Run, task: str) -> bool:
    """True for the tasks and groups of an evaluation registered here (`Run.evaluation`); a harness task merely
    named like one of ours is not, nor a task of an evaluation not installed here."""
    return run.evaluation(task) in names()


def absent_cells(run: Run, task: str) -> list[str]:
    """Cells of `task`'s sweep (`sweep_cells`, when the run stored them) that no doc was scored or skipped in."""
    facts = run.facts(task)
    seen = set(facts.get("docs_per_cell") or {}) | set(run.skip_reasons(task))
    return [c for c in facts.get("sweep_cells") or [] if c not in seen]


def scored_docs(run: Run, task: str) -> int | None:
    """The docs `task`'s numbers rest on: those scored over its cells (`docs_per_cell`: skipped docs left out),
    else the harness's count of docs evaluated; None when the run says neither."""
    counts = run.facts(task).get("docs_per_cell") or {}
    total = sum(int(n) for n in counts.values() if isinstance(n, (int, float)))
    return total or run.n_samples(task)

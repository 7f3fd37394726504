"""Every metric name of ours follows one grammar, formatted and parsed here; and what a score is.

The names lm_eval writes under ``results.<task>`` (before its ``,<filter>`` suffix, ``,none`` for
our tasks) follow one grammar::

    NAME = SCORE [ "@" CELL ] [ STAT ]        copy_acc@1024   acc@qa1_4096_ci_low   acc@LE250_bin2
    CELL = PART { "_" PART }
    STAT = "_ci_low" | "_ci_high" | "_p_above_chance"        (none: the mean, or the summary itself)

* SCORE: a per-doc score (``acc``, declared as a `ScoreSpec`) or a whole-run summary.
* CELL: the docs a statistic is over. One length spelling for every evaluation: **a length in tokens
  is written as its plain integer** (``acc@1024``, ``acc@qa1_4096``, ``acc@0``); any other part is a
  word an evaluation chooses (``qa1``, ``LE250``: not token counts).
* STAT: the 95% interval's bounds, and a one-sided p-value against chance (for an answer of two
  choices).

The grammar is built and parsed here (`name`, `cell`, `length_part`, `with_interval`; `parse`,
`cells_of`, `canonical_row`) and nowhere else. An evaluation's own names (a part of its cells, a
whole-run summary) are each built by one function of its package on this grammar, and spellings of its
own that the grammar reads otherwise (an older file's, a bound written the old way) are rewritten by its
registry entry's `Evaluation.results_reading` when a reader takes a task's metrics
(`common.run.task_metrics`): readers see one shape whatever the file's age.

Results files written before this schema spelt lengths "4k": `parse` reads every length part that
`lengths.parse_length` reads as its integer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from lm_eval_longmem.common.lengths import parse_length

NO_FILTER = "none"
"""The filter name lm_eval appends to metrics of tasks without a filter pipeline (``acc,none``)."""
CI_LOW, CI_HIGH, P_ABOVE_CHANCE = "_ci_low", "_ci_high", "_p_above_chance"
STATS = (CI_LOW, CI_HIGH, P_ABOVE_CHANCE)
"""Statistic suffixes; a name without one is the mean (or the summary itself)."""
MEAN_AND_INTERVAL = ("", CI_LOW, CI_HIGH)
"""The mean and its 95% interval's bounds, in this order: what every cell and mean over cells reports."""
HARNESS_STDERR = "_stderr"
"""The suffix lm_eval gives the standard error it adds beside a metric (``acc_stderr,none``)."""

CELLS_KEY = "cells"
"""Per-doc payload: the cells the doc counts in (`LongmemTask.process_results`)."""
SUMMARY_KEY = "summary"
"""Per-doc payload: the doc's item for the whole-run summaries."""
CONFIG_KEY = "longmem"
"""Key of our non-metric facts (skip reasons, length names) in the task's entry of the results'
``configs``: ``configs.<task>.longmem``."""


Family = Literal["binary", "share", "perplexity"]
"""What kind of number a per-doc score is, which decides its interval (`common.task.cell_interval`):

* ``binary``: 0 or 1 per doc (an answer right or wrong): Wilson score interval of the cell's count;
* ``share``: a share of `ScoreSpec.units` scored items (tokens) in [0, 1]: Wilson on the
  Korn-Graubard effective size (`stats.share_interval`), null bounds for one doc;
* ``perplexity``: a perplexity (>= 1, lower is better): the geometric mean with the exponentiated
  t interval of the logs (`stats.log_mean_interval`), null bounds for one doc or equal values.
"""


@dataclass(frozen=True)
class ScoreSpec:
    """What one per-doc score is, so its per-cell statistics are the right ones."""

    name: str
    """The score's name (``acc``), the SCORE of its metric names."""
    family: Family = "binary"
    """What kind of number it is, which decides its interval (`Family`)."""
    higher_is_better: bool | None = True
    """Direction of the mean (lm_eval's ``higher_is_better``); None for a score with no better side."""
    units: str | None = None
    """For a ``share``: the payload key holding the number of scored items behind it (the doc's tokens)."""

    def __post_init__(self) -> None:
        if (self.family == "share") != (self.units is not None):
            raise ValueError(f"score {self.name!r}: a share names its units (and only a share does)")


class Name(NamedTuple):
    """A parsed metric name."""

    score: str
    cell: tuple[str, ...] = ()
    stat: str = ""

    def __str__(self) -> str:
        return self.score + (f"@{'_'.join(self.cell)}" if self.cell else "") + self.stat


def length_part(tokens: int) -> str:
    """The one spelling of a length in tokens inside a cell: its plain integer."""
    return str(int(tokens))


def cell(*parts: str | int) -> str:
    """A cell from its parts (``cell("qa1", 4096)`` -> ``qa1_4096``); an int is a length in tokens."""
    return "_".join(length_part(p) if isinstance(p, int) and not isinstance(p, bool) else str(p) for p in parts)


def cell_parts(text: str) -> tuple[str, ...]:
    """The parts of a cell (``qa1_4096`` -> ("qa1", "4096")); old length spellings rewritten."""
    name = parse(f"x@{text}") if text else None
    return name.cell if name else ()


def name(score: str, *parts: str | int, stat: str = "") -> str:
    """The metric name of `score` over the cell of `parts` (none: the whole run) with statistic `stat`."""
    if stat and stat not in STATS:
        raise ValueError(f"unknown statistic {stat!r}: one of {STATS}")
    return score + (f"@{cell(*parts)}" if parts else "") + stat


def with_interval(score: str, *parts: str | int) -> tuple[str, ...]:
    """The names of `score`'s mean over the cell of `parts` and of its interval's bounds (`MEAN_AND_INTERVAL`)."""
    return tuple(name(score, *parts, stat=stat) for stat in MEAN_AND_INTERVAL)


SKIPPED = "skipped"
"""Every task of ours: the docs skipped (never truncated); the reasons are in the run's facts."""


def part_length(part: str) -> int | None:
    """The token count of a length part ("4096", or "4k" in old files), None for any other part."""
    try:
        return parse_length(part)
    except ValueError:
        return None


def split_filter(key: str) -> tuple[str, str | None]:
    """(name, filter) of a results key: ``acc@1024,none`` -> (``acc@1024``, ``none``); no comma: (key, None)."""
    head, sep, tail = key.partition(",")
    return head, (tail if sep else None)


def parse(key: str) -> Name | None:
    """The parts of a metric name (a ``,filter`` suffix is ignored); None for lm_eval's own
    ``_stderr`` entries and its non-metric keys (``alias``, ``name``, ``sample_len``)."""
    text, _ = split_filter(key)
    if not text or text.endswith(HARNESS_STDERR) or text in ("alias", "name", "sample_len"):
        return None
    stat = next((s for s in STATS if text.endswith(s)), "")
    text = text[: len(text) - len(stat)]
    score, at, rest = text.partition("@")
    if not score or (at and not rest):
        return None
    parts = tuple(rest.split("_")) if at else ()
    return Name(score, tuple(length_part(n) if (n := part_length(p)) is not None else p for p in parts), stat)


def canonical_row(row: dict[str, Any], filter_name: str | None = None) -> dict[str, Any]:
    """One filter's metrics of a results row, under today's names (old length spellings rewritten).

    `filter_name`: the filter to read; default ``none`` when the row has it, else its first filter
    (``exact_match,strict-match``). Names that are not ours (the harness's ``acc_stderr``) are kept
    as they are. What an evaluation spells its own way is its entry's to rewrite
    (`Evaluation.results_reading`, applied by `common.run.task_metrics`).
    """
    filters = [f for key in row if (f := split_filter(key)[1]) is not None]
    chosen = filter_name or (NO_FILTER if NO_FILTER in filters else (filters[0] if filters else None))
    out: dict[str, Any] = {}
    for key, value in row.items():
        text, found = split_filter(key)
        if found != chosen:
            continue
        parsed = parse(key)
        out[text if parsed is None else str(parsed)] = value
    return out


def number(value: Any) -> float | None:
    """A finite number (booleans as 0/1) or None: what readers take from a metric value."""
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def cells_of(metrics: Iterable[str], score: str) -> list[tuple[str, ...]]:
    """The cells `score` has a mean for among metric names `metrics`, in their order."""
    found: dict[tuple[str, ...], None] = {}
    for key in metrics:
        parsed = parse(key)
        if parsed is not None and parsed.score == score and parsed.cell and not parsed.stat:
            found[parsed.cell] = None
    return list(found)

"""The `forgetting_curve_*` options, declared once (the task card's table is checked against this)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lm_eval_longmem.common.options import flag, length, lengths, limit_order_option, one_of, option, text, whole_number

NAME = "forgetting_curve"
"""The evaluation's name (its registry entry, group task, task folder and the `evaluation` its tasks record)."""
PREFIX = f"{NAME}_"
DEFAULT_POINTS = 32
"""The paper's grid granularity n (section 4, footnote 10)."""
DEFAULT_SAMPLES = 10
"""Samples per length, as in the paper (section 3.3)."""
RANDOM = "random"
"""The source value for uniform random token ids (the paper's `random` setting, Table 2)."""
OURS, AUTHORS = "ours", "authors"
"""The two sample constructions (`forgetting_curve_protocol`): ours, and the authors' tool's (`data.py`)."""
LINEAR, LOG = "linear", "log"
"""The grid's spacing (`forgetting_curve_grid`): the paper's linear grid, or the authors' tool's `log` one."""


def sweep_lengths(value: Any) -> tuple[int, ...]:
    """Lengths of at least 2 tokens (half of S is the cue, half is scored)."""
    parsed = lengths(value)
    if min(parsed) < 2:
        raise ValueError("every length must be at least 2 tokens (half of S is the cue, half is scored)")
    return parsed


def source(value: Any) -> str:
    """`random` (any case), or a text source as `corpus` takes it."""
    given = str(value).strip()
    return RANDOM if given.lower() == RANDOM else given


@dataclass(frozen=True)
class SweepOptions:
    """What `--metadata forgetting_curve_*` can set."""

    lengths: tuple[int, ...] | None = option(
        None,
        sweep_lengths,
        "explicit lengths L (tokens of S); default: the paper's grid up to the claimed window",
        "[1k,2k,4k]",
    )
    claimed_length: int | None = option(
        None, length, "the claimed window l the grid runs up to; default: the model's window", "8k"
    )
    points: int = option(DEFAULT_POINTS, whole_number(1), "grid granularity n: lengths l/n, 2l/n, ..., l", "16")
    grid: str = option(
        LINEAR,
        one_of(LINEAR, LOG),
        "spacing of the grid: linear, or log (authors protocol only: their --granularity_type log, points lengths "
        "from 8 to the claimed window in equal ratios, repeats dropped)",
        LOG,
    )
    samples: int = option(DEFAULT_SAMPLES, whole_number(1), "samples per length", "10")
    seed: int = option(0, whole_number(0), "seed of every sample's span draw", "1")
    corpus: str | None = option(
        None,
        text,
        "text source: a .txt file or folder of books, or hf:OWNER/NAME[:SPLIT][#FIELD]; default: PG-19 test books",
        "/path/to/books",
        local_input=True,
    )
    copy_source: str | None = option(
        None,
        source,
        "where the copied text S comes from: a text source as for corpus, or random (uniform token ids of the "
        "model's vocabulary, special tokens excluded, seeded); default: the corpus",
        "random",
        local_input=True,
    )
    prefix_source: str | None = option(
        None,
        source,
        "where the irrelevant prefix I comes from: a text source as for corpus, or random; default: the corpus",
        "/path/to/other/books",
        local_input=True,
    )
    max_tokens: int | None = option(
        None, length, "longest model input the backend may run; default: what it can run (backend limit)", "16k"
    )
    beyond_window: bool = option(
        True, flag, "let sequences run past the claimed window (the paper's grid needs up to 2l+2 tokens)", "false"
    )
    separator: str | None = option(
        None,
        text,
        "token (string or id) used as [bos]; default: BOS, else EOS (authors protocol: id 1)",
        "<|endoftext|>",
    )
    protocol: str = option(
        OURS,
        one_of(OURS, AUTHORS),
        "sample construction: ours, or authors (the authors' tool: its grid, stream, spans, separators and random "
        "ids, to set a curve beside a published one)",
        AUTHORS,
    )
    limit_order: str = limit_order_option()

"""The `booksort_*` options, declared once (the task card's table is checked against this)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lm_eval_longmem.booksort.prompts import AUTHORS_PROMPTS, DEFAULT_VARIANT, VARIANTS
from lm_eval_longmem.common.options import (
    distinct,
    items,
    limit_order_option,
    one_of,
    option,
    text,
    whole_number,
    words,
)

NAME = "booksort"
"""The evaluation's name (its registry entry, group task, task folder and the `evaluation` its tasks record)."""
PREFIX = f"{NAME}_"
HEADLINE_TASK = f"{NAME}_in_context"
"""The task of the paper's headline number: the in-context condition."""
OURS, AUTHORS = "ours", "authors"
"""The two protocols (`booksort_protocol`): our readout, or the authors' (`task.py`, `prompts.py`)."""


def book_ids(value: Any) -> tuple[str, ...]:
    """Books by Gutenberg number or (local builds) file stem."""
    return tuple(distinct([str(item) for item in items(value)], "book"))


def distance_bins(value: Any) -> tuple[int, ...]:
    """Distance bins by index, 0 (nearest) to 3."""
    return tuple(distinct([whole_number(0, 3)(item) for item in items(value)], "bin"))


@dataclass(frozen=True)
class BooksortOptions:
    """What `--metadata booksort_*` can set; the selections keep only the listed conditions (None: all)."""

    data: str = option(
        "hub",
        text,
        "trials: hub (memari/booksort, gated), hf:OWNER/NAME, or a folder from `lm-eval-longmem booksort build`",
        "booksort_data/",
        local_input=True,
    )
    excerpt_lengths: tuple[int, ...] | None = option(
        None, words, "keep these excerpt lengths L_E (words)", "[250,1000]"
    )
    segment_lengths: tuple[int, ...] | None = option(None, words, "keep these segment lengths L_S (words)", "[20,50]")
    books: tuple[str, ...] | None = option(
        None, book_ids, "keep these books (Gutenberg number or file stem)", "[69087]"
    )
    distance_bins: tuple[int, ...] | None = option(
        None, distance_bins, "keep these distance bins (0 nearest .. 3)", "[0,3]"
    )
    prompt: str = option(
        DEFAULT_VARIANT,
        one_of(*VARIANTS, *AUTHORS_PROMPTS),
        f"prompt: one of ours ({', '.join(VARIANTS)}) or of the authors' configs (prompt_0 .. prompt_12)",
        DEFAULT_VARIANT,
    )
    protocol: str = option(
        OURS,
        one_of(OURS, AUTHORS),
        "ours, or authors: their readout (bare label tokens), their title casing; needs one of their prompts",
        AUTHORS,
    )
    limit_order: str = limit_order_option()

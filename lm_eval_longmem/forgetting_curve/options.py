"""The `forgetting_curve_*` options, declared once (the task card's table is checked against this)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lm_eval_longmem.common.options import flag, length, lengths, option, text, whole_number

PREFIX = "forgetting_curve_"
DEFAULT_POINTS = 32
"""The paper's grid granularity n (section 4, footnote 10)."""
DEFAULT_SAMPLES = 10
"""Samples per length, as in the paper (section 3.3)."""


def sweep_lengths(value: Any) -> tuple[int, ...]:
    """Lengths of at least 2 tokens (half of S is the cue, half is scored)."""
    parsed = lengths(value)
    if min(parsed) < 2:
        raise ValueError("every length must be at least 2 tokens (half of S is the cue, half is scored)")
    return parsed


@dataclass(frozen=True)
class SweepOptions:
    """What `--metadata forgetting_curve_*` can set."""

    lengths: tuple[int, ...] | None = option(
        None, sweep_lengths, "explicit lengths L (tokens of S); default: the paper's grid up to the claimed window", "[1k,2k,4k]"
    )
    claimed_length: int | None = option(
        None, length, "the claimed window l the grid runs up to; default: the model's window", "8k"
    )
    points: int = option(DEFAULT_POINTS, whole_number(1), "grid granularity n: lengths l/n, 2l/n, ..., l", "16")
    samples: int = option(DEFAULT_SAMPLES, whole_number(1), "samples per length", "10")
    seed: int = option(0, whole_number(0), "seed of every sample's span draw", "1")
    corpus: str | None = option(
        None,
        text,
        "text source: a .txt file or folder of books, or hf:OWNER/NAME[:SPLIT][#FIELD]; default: PG-19 test books",
        "/path/to/books",
        local_input=True,
    )
    max_tokens: int | None = option(
        None, length, "longest model input the backend may run; default: what it can run (backend limit)", "16k"
    )
    beyond_window: bool = option(
        True, flag, "let sequences run past the claimed window (the paper's grid needs up to 2l+2 tokens)", "false"
    )
    separator: str | None = option(None, text, "token (string or id) used as [bos]; default: BOS, else EOS", "<|endoftext|>")

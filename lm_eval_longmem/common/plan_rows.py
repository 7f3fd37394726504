"""What `lm-eval-longmem plan` asks of an evaluation's planner and gets back: a task's facts and its rows.

Plain dataclasses below the registry (`common.evaluations.Planner` takes a `TaskFacts` and gives `Row`s); `plan`
turns the rows into memory, FLOPs and time, and hands these names on (evaluations import them from there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskFacts:
    """What a task's YAML says that the plan needs."""

    name: str
    evaluation: str
    """The name of its evaluation (`common.evaluations`): the one whose task folder holds its YAML."""
    output_type: str
    dataset_kwargs: dict[str, Any]
    """Its YAML's `dataset_kwargs` (what it fixes of its data, e.g. a prompt's condition)."""
    max_gen_toks: int
    description: str = ""
    """Its YAML's `description` (a system message when a chat template is applied), or the doc field holding it."""
    gen_prefix: str = ""
    """Its YAML's `gen_prefix` (the start of the answer turn), or the doc field holding it."""
    target_delimiter: str = " "


@dataclass(frozen=True)
class Row:
    """One task's cell, as the run will hold it (counts only; costs come from `row_costs`)."""

    task: str
    output_type: str
    cell: str
    """The cell as the task names it: a length ("4096", "4k") or another part of its sweep ("LE2500")."""
    length: int
    """Tokens of the cell: its length, or for a cell not measured in tokens a doc's estimated prompt tokens."""
    docs: int
    requests: int
    forwards: int
    """Forward passes the HF backend runs (it scores a multiple-choice doc's one-token labels in one)."""
    input_tokens: int
    """Tokens of every request of the cell (prompt and answer)."""
    sequence_tokens: int
    """Tokens of the cell's longest sequence."""
    forward_positions: int
    """Positions one forward runs, on average over the cell (a prefill, for generation)."""
    head_positions: int
    """Positions of one forward where the LM head runs."""
    new_tokens: int
    """Tokens generated per forward (at most)."""
    data_tokens: int = 0
    build_tokens: int = 0
    skipped: int = 0
    estimated: bool = False
    note: str = ""
    groups: int = 0
    """Groups of forwards that share a prefix, computed once per group with its KV cache reused for each
    forward's suffix (e.g. trials asked about one passage); 0: every forward computes all its positions."""
    shared_positions: int = 0
    """Positions of a group's shared prefix, on average (part of `forward_positions`)."""
    group_kv_tokens: int = 0
    """Tokens of the KV cache a group holds at most (its prefix and every suffix)."""
    scoring: str = ""
    """The request type the HF backend scores the row with, when not its task's output type (the peak follows it)."""
    refused: str = ""
    """Why the run will refuse the cell ("" when it runs it): counted with no docs, and said as a warning."""

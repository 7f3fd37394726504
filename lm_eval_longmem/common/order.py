"""The one order of docs for all three evaluations: cells interleaved for `--limit`, work balanced over ranks.

The harness hands data-parallel rank r of N the docs at positions r, r+N, r+2N, ... and `--limit n`
takes the first n positions (harness R20, `harness.tasks.deal_docs`). So the order decides both what a
limited run covers and how much work each rank gets:

* Docs go in rounds: round k holds the k-th doc of every cell that has one (as
  `more_itertools.interleave_longest` would), so the first round covers every cell and
  `--limit n` takes about n / cells docs of each.
* Within a round, docs are only permuted, to balance the estimated work of the `BALANCED_RANKS`
  "virtual ranks" (position mod 64): rank r of N, for any N dividing 64, holds exactly the virtual
  ranks congruent to r mod N, so 1, 2, 4, ..., 64 ranks are balanced at once (other counts mix
  the virtual ranks and come out close). Most expensive doc first, each doc goes to the free
  position of its round whose virtual rank has the least work so far; then, while the busiest
  virtual rank is more than 0.1% above the mean, the swap within a round that lowers it most is
  made. `benchmarks/rank_balance.py` prints the result for the default grids.

Only positions change: the order is a pure function of the cells and their integer costs (ties go
to the earlier cell and position), and every score is computed per doc and summed in a fixed
order, so results do not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np
from more_itertools import interleave_longest

T = TypeVar("T")

BALANCED_RANKS = 64
"""Every rank count dividing this is balanced exactly (see the module docstring)."""

ATTENTION_TOKENS = 32_768
"""Context length at which attention costs as much as the rest of a forward, per token.

Per token a forward costs about 2 x parameters in matmuls plus 4 x layers x hidden x context in
attention; for a Llama-3-8B shape (8e9 parameters, 32 layers, hidden 4096) the two are equal near
32k tokens. Only the shape of the cost curve matters for balancing, not its scale."""

_TOLERANCE = 1e-3
_MAX_SWAPS = 1_000


def forward_work(tokens: int) -> int:
    """Estimated work of one forward over `tokens` positions: the linear part plus attention."""
    return tokens + tokens * tokens // ATTENTION_TOKENS


def interleave(cells: Iterable[Sequence[T]], cost: Callable[[T], int] | None = None) -> list[T]:
    """Docs of every cell in rounds (k-th doc of each cell), each round permuted to balance ranks.

    Args:
        cells: The docs of each cell, in the cell order and within-cell order to keep.
        cost: Estimated work of a doc (e.g. `forward_work` of its tokens); None keeps every round in
            cell order (all docs cost alike).
    """
    cells = [list(cell) for cell in cells]
    if cost is None:
        return list(interleave_longest(*cells))
    rounds = [[cell[k] for cell in cells if k < len(cell)] for k in range(max(map(len, cells), default=0))]
    load = np.zeros(BALANCED_RANKS, dtype=np.int64)
    order: list[T] = []
    for docs in rounds:
        virtual = np.arange(len(order), len(order) + len(docs)) % BALANCED_RANKS
        free = np.ones(len(docs), dtype=bool)
        placed: list[T] = list(docs)
        for i in sorted(range(len(docs)), key=lambda i: -cost(docs[i])):  # stable: ties keep cell order
            slot = int(np.argmin(np.where(free, load[virtual], np.iinfo(np.int64).max)))
            free[slot] = False
            placed[slot] = docs[i]
            load[virtual[slot]] += cost(docs[i])
        order.extend(placed)
    _swap_towards_balance(order, rounds, np.array([cost(doc) for doc in order], dtype=np.int64), load)
    return order


def _swap_towards_balance(order: list, rounds: list[list], costs: np.ndarray, load: np.ndarray) -> None:
    """Swap docs within rounds (in place) while that lowers the busiest virtual rank's work."""
    starts = np.cumsum([0] + [len(docs) for docs in rounds])
    round_of = np.repeat(np.arange(len(rounds)), np.diff(starts))
    for _ in range(_MAX_SWAPS):
        busiest = int(np.argmax(load))
        if load[busiest] <= (1 + _TOLERANCE) * load.mean():
            return
        best = (load[busiest], -1, -1)
        for p in range(busiest, len(order), BALANCED_RANKS):
            peers = np.arange(starts[round_of[p]], starts[round_of[p] + 1])
            moved = costs[p] - costs[peers]
            after = np.maximum(load[busiest] - moved, load[peers % BALANCED_RANKS] + moved)
            after[(moved <= 0) | (peers % BALANCED_RANKS == busiest)] = np.iinfo(np.int64).max
            j = int(np.argmin(after))
            if after[j] < best[0]:
                best = (after[j], p, int(peers[j]))
        _, p, q = best
        if p < 0:
            return
        load[busiest] -= costs[p] - costs[q]
        load[q % BALANCED_RANKS] += costs[p] - costs[q]
        order[p], order[q] = order[q], order[p]
        costs[p], costs[q] = costs[q], costs[p]


def rank_work(costs: Sequence[int], ranks: int) -> list[int]:
    """Work per rank when the harness splits docs of these costs every-`ranks`-th."""
    return [sum(costs[r::ranks]) for r in range(ranks)]

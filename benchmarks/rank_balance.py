"""How evenly the harness's every-N-th data-parallel split shares the work of our default sweeps.

Rank r of N runs the docs at positions r, r+N, ... (`lm_eval.utils.create_iterator`). For each
default grid this prints max / mean estimated work per rank, for 2, 8 and 32 ranks, with the docs
in plain round-robin order (sample k of every cell, cells in grid order) and in the order the
tasks use (`common.order.interleave`). Work is estimated per doc by the tasks' own `doc_work`
(tokens plus attention, `common.order.forward_work`); no model or data is needed.

    python benchmarks/rank_balance.py
"""

from __future__ import annotations

import time

from lm_eval_longmem.babilong import data as babilong
from lm_eval_longmem.babilong.options import DEFAULT_TASKS, STANDARD_LENGTHS
from lm_eval_longmem.common.order import interleave, rank_work
from lm_eval_longmem.forgetting_curve import data as forgetting_curve
from lm_eval_longmem.forgetting_curve.options import DEFAULT_SAMPLES

RANKS = (2, 8, 32)
WINDOWS = (8192, 32_768, 131_072, 1_048_576)
HUB_SAMPLES = 100
"""Samples per BABILong cell in the default source (`RMT-team/babilong`)."""


def forgetting_curve_cells(window: int) -> list[list[dict]]:
    """The default grid (32 lengths up to the window, 10 samples each); every length runs."""
    lengths = forgetting_curve.length_grid(window)
    return [[{"length": L} for _ in range(DEFAULT_SAMPLES)] for L in lengths]


def babilong_cells(window: int) -> list[list[dict]]:
    """The default run: qa1-qa5 at every standard length within the window, 100 samples each."""
    lengths = [n for n in STANDARD_LENGTHS if n <= window]
    return [[{"length": L}] * HUB_SAMPLES for L in lengths for _ in DEFAULT_TASKS]


def spread(costs: list[int]) -> str:
    figures = []
    for n in RANKS:
        work = rank_work(costs, n)
        figures.append(f"{max(work) / (sum(work) / n):.3f}")
    return " ".join(f"{f:>6}" for f in figures)


def main() -> None:
    print("max / mean estimated work per rank (1.000 = perfectly even); ranks: " + ", ".join(map(str, RANKS)))
    print(f"{'sweep':<32} {'docs':>6}  {'round-robin':>20}  {'ours':>20}  {'order time':>10}")
    for name, cells_of, work in (
        ("forgetting_curve", forgetting_curve_cells, forgetting_curve.doc_work),
        ("babilong qa1-qa5 hub", babilong_cells, babilong.doc_work),
    ):
        for window in WINDOWS:
            cells = cells_of(window)
            plain = [work(doc) for doc in interleave(cells)]
            start = time.perf_counter()
            ours = [work(doc) for doc in interleave(cells, cost=work)]
            seconds = time.perf_counter() - start
            label = f"{name} @ {window // 1024}k"
            print(f"{label:<32} {len(ours):>6}  {spread(plain):>20}  {spread(ours):>20}  {seconds:>9.2f}s")


if __name__ == "__main__":
    main()

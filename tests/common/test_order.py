"""The one doc order: rounds that cover every cell first, permuted so that every-N-th ranks get equal work."""

from __future__ import annotations

from collections import Counter

import pytest

from lm_eval_longmem.common.order import forward_work, interleave, rank_work

LENGTHS = [i * 8192 // 32 for i in range(1, 33)]  # the forgetting curve's default grid at an 8k window


def max_over_mean(costs, ranks):
    work = rank_work(costs, ranks)
    return max(work) / (sum(work) / ranks)


def test_without_cost_it_is_plain_round_robin():
    assert interleave([[1, 2, 3], [4], [5, 6]]) == [1, 4, 5, 2, 6, 3]


def test_rounds_hold_the_kth_doc_of_every_cell():
    cells = [[(length, k) for k in range(10)] for length in LENGTHS] + [[(99_999, k) for k in range(3)]]
    order = interleave(cells, cost=lambda doc: forward_work(2 * doc[0]))
    assert Counter(order) == Counter(doc for cell in cells for doc in cell)
    start = 0
    for k in range(10):
        size = 33 if k < 3 else 32
        assert {doc[1] for doc in order[start : start + size]} == {k}  # --limit 33 covers every cell
        start += size


def test_order_is_a_pure_function_of_cells_and_costs():
    cells = [[(length, k) for k in range(10)] for length in LENGTHS]
    cost = lambda doc: forward_work(2 * doc[0])  # noqa: E731
    assert interleave(cells, cost) == interleave([list(c) for c in cells], cost)


@pytest.mark.parametrize("window", [8192, 131_072])
@pytest.mark.parametrize("ranks", [2, 8, 32])
def test_every_nth_split_balances_the_forgetting_curve_grid(window, ranks):
    lengths = [i * window // 32 for i in range(1, 33)]
    cells = [[length] * 10 for length in lengths]
    cost = lambda length: forward_work(2 * length + 1)  # noqa: E731
    plain = [cost(length) for length in interleave(cells)]
    balanced = [cost(length) for length in interleave(cells, cost)]
    assert max_over_mean(balanced, ranks) <= 1.05
    if ranks > 2:  # plain round-robin hands the last rank the longest lengths
        assert max_over_mean(plain, ranks) > 1.05

"""Book-SORT's rows of `lm-eval-longmem plan` (`booksort/rim/planner.py`): counts that agree with the data the run builds."""

from __future__ import annotations

from collections import Counter

import pytest
from kit import build_booksort, build_llama3_8b_shape

from lm_eval_longmem.common import cost
from lm_eval_longmem.plan import RunSettings, make_plan

pytestmark = pytest.mark.usefixtures("no_live_model")


def test_booksort_hub_counts_follow_the_published_layout(tiny_llama_dir):
    metadata = {"pretrained": str(tiny_llama_dir), "max_length": 10**6}
    rows = make_plan(["booksort"], metadata).rows
    assert sum(r.docs for r in rows) == 34_400  # 9 books x 5 L_E x 2 L_S x 100 x 4 bins, Pomona without 10k/20k
    assert {r.cell: r.docs for r in rows} == {
        "LE250": 7200,
        "LE1000": 7200,
        "LE2500": 7200,
        "LE10000": 6400,
        "LE20000": 6400,
    }
    chosen = {
        **metadata,
        "booksort_books": "[73017,69087]",
        "booksort_excerpt_lengths": "[250,20000]",
        "booksort_distance_bins": 0,
    }
    assert {r.cell: r.docs for r in make_plan(["booksort"], chosen).rows} == {"LE250": 400, "LE20000": 200}
    assert all(r.estimated and r.requests == 2 * r.docs and r.forwards == r.docs and not r.note for r in rows)
    copy = make_plan(["booksort"], {**metadata, "booksort_data": "hf:someone/booksort-copy"}).rows
    assert [r.docs for r in copy] == [r.docs for r in rows] and all("docs unknown offline" in r.note for r in copy)


@pytest.mark.slow
def test_booksort_local_build_counts_and_tokens_agree_with_the_run(tiny_llama_dir, embedded_books_dir, tmp_path):
    """A local build: docs per excerpt length are the trials the task loads; the estimated tokens of a trial
    are within 10% of what the fit check counts for its rendered prompt."""
    from lm_eval.tasks import TaskManager

    from lm_eval_longmem.paths import task_configs_dir

    data = build_booksort(embedded_books_dir / "macbeth.txt", tmp_path / "build", excerpt_lengths="250,1000")
    metadata = {"pretrained": str(tiny_llama_dir), "max_length": 10**6, "booksort_data": str(data)}
    rows = {r.cell: r for r in make_plan(["booksort"], metadata).rows}
    task = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata).load(
        ["booksort_in_context"]
    )["tasks"]["booksort_in_context"]
    docs = list(task.eval_docs)
    assert {cell: r.docs for cell, r in rows.items()} == {
        f"LE{k}": n for k, n in Counter(d["excerpt_length"] for d in docs).items()
    }
    for cell, row in rows.items():
        counted = [task.answer_tokens(d, task.rendered_prompt(d)) for d in docs if f"LE{d['excerpt_length']}" == cell]
        assert row.sequence_tokens == pytest.approx(max(counted), rel=0.10)
        assert row.input_tokens == pytest.approx(2 * sum(counted), rel=0.10)


def test_the_default_sweep_shares_each_excerpt_on_the_llama3_8b_shape(tiny_llama_dir, tmp_path):
    """Book-SORT's trials of one excerpt share its prefix, computed once, and the LM head runs at the
    answer position only; the default sweep on a Llama-3-8B shape at 128k is at most 1.2 hours on one H100
    (3.3 hours when every trial computed its whole prompt with full-vocabulary logits)."""
    folder = build_llama3_8b_shape(tmp_path / "llama3", tiny_llama_dir)
    plan = make_plan(["booksort"], {"pretrained": str(folder)}, gpu="h100")
    seconds = sum(plan.costs(r)["est_seconds"] for r in plan.rows)
    assert seconds <= 1.2 * 3600
    for row in plan.rows:  # four distance bins: four trials per excerpt, in every cell
        assert row.groups * 4 == row.docs and row.head_positions == 1 and row.scoring == "loglikelihood_accuracy"
        excerpt = round(int(row.cell.removeprefix("LE")) * 4 / 3)
        assert excerpt < row.shared_positions < row.forward_positions  # the prefix holds the excerpt, not the segments
        assert row.forward_positions - row.shared_positions < 500  # segments of 20 and 50 words, question, template
    longest = plan.rows[-1]
    alone = longest.forwards * cost.forward_flops(plan.shape, longest.forward_positions, longest.forward_positions)
    once = longest.groups * cost.forward_flops(plan.shape, longest.forward_positions, 1)
    assert once < plan.costs(longest)["prefill_flops"] < alone / 3
    memoryless = make_plan(["booksort_memoryless"], {"pretrained": str(folder)}).rows
    assert all(r.groups == 0 and r.head_positions == 1 for r in memoryless)
    # on vLLM our requests read no prefix cache (order-independent scores): every trial computes its whole prompt
    on_vllm = make_plan(["booksort"], {"pretrained": str(folder)}, gpu="h100", settings=RunSettings(model="vllm"))
    whole = on_vllm.costs(on_vllm.rows[-1])["prefill_flops"]
    assert whole == longest.forwards * cost.forward_flops(plan.shape, longest.forward_positions, 1)

"""Book-SORT's rows of `lm-eval-longmem plan` (`booksort/rim/planner.py`): counts that agree with the data the run builds."""

from __future__ import annotations

from collections import Counter

import pytest
from kit import build_booksort

from lm_eval_longmem.harness import models
from lm_eval_longmem.plan import make_plan


@pytest.fixture(autouse=True)
def no_live_model(monkeypatch):
    """`plan` runs in its own process, where no harness model exists; other tests may have left one recorded."""
    monkeypatch.setattr(models, "_live", None)


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

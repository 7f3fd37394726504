"""The forgetting curve's rows of `lm-eval-longmem plan` (`forgetting_curve/rim/planner.py`): counts that agree with the data the run builds."""

from __future__ import annotations

from collections import Counter

import pytest

from lm_eval_longmem.plan import make_plan

pytestmark = pytest.mark.usefixtures("no_live_model")


RANDOM_SOURCES = {"forgetting_curve_copy_source": "random", "forgetting_curve_prefix_source": "random"}


def test_forgetting_curve_rows_are_the_sweep_the_run_builds(tiny_llama_dir):
    from lm_eval_longmem.forgetting_curve.data import build_sweep

    metadata = {"pretrained": str(tiny_llama_dir), "forgetting_curve_points": 4, "forgetting_curve_samples": 3,
                "forgetting_curve_max_tokens": 2100, **RANDOM_SOURCES}  # fmt: skip
    plan = make_plan(["forgetting_curve"], metadata)
    built = Counter(doc["length"] for doc in build_sweep(metadata).docs)
    assert {r.length: r.docs + r.skipped for r in plan.rows} == dict(built) == {512: 3, 1024: 3, 1536: 3, 2048: 3}
    runs = {r.length: r for r in plan.rows if r.docs}
    assert set(runs) == {512, 1024}, "lengths past forgetting_curve_max_tokens are skipped, as the task skips them"
    assert all(
        r.requests == 6 and r.sequence_tokens == 2 * r.length + 2 and r.input_tokens == 6 * r.sequence_tokens
        for r in runs.values()
    )
    skipped = next(r for r in plan.rows if r.length == 2048)
    assert skipped.skipped == 3 and "4097 input positions exceed 2100" in skipped.note

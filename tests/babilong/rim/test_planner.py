"""BABILong's rows of `lm-eval-longmem plan` (`babilong/rim/planner.py`): counts that agree with the data the run builds."""

from __future__ import annotations

import shutil

import pytest

from lm_eval_longmem.plan import make_plan

pytestmark = pytest.mark.usefixtures("no_live_model")


def test_babilong_counts_per_source(tiny_llama_dir):
    metadata = {"pretrained": str(tiny_llama_dir), "max_length": 4096}
    hub = make_plan(["babilong"], metadata).rows
    assert [(r.cell, r.docs) for r in hub] == [
        ("0k", 500),
        ("1k", 500),
        ("2k", 500),
        ("4k", 500),
    ]  # lengths within the window
    one_k = make_plan(["babilong"], {**metadata, "babilong_source": "hub-1k", "babilong_tasks": "qa1-qa2"}).rows
    assert [r.docs for r in one_k] == [2000] * 4
    missing = make_plan(["babilong"], {**metadata, "babilong_tasks": "qa1,qa15", "babilong_lengths": "[1k]"}).rows[0]
    assert missing.docs == 100 and "has no qa15 at 1k" in missing.note
    retrieval = {
        **metadata,
        "babilong_retrieval": "chunks",
        "babilong_lengths": "[64k]",
        "babilong_retrieval_chunk_tokens": 100,
    }
    (three,) = make_plan(["babilong"], {**retrieval, "babilong_retrieval_k": 3}).rows
    (six,) = make_plan(["babilong"], {**retrieval, "babilong_retrieval_k": 6}).rows
    assert three.length == 65536 and three.sequence_tokens < 4096, (
        "retrieval: the model reads k chunks, not the haystack"
    )
    assert six.sequence_tokens - three.sequence_tokens == 300


def test_babilong_generated_tokens_agree_with_the_built_samples(tiny_llama_dir, embedded_books_dir, tmp_path):
    from lm_eval_longmem.babilong.data import load_docs

    shutil.copy(embedded_books_dir / "macbeth.txt", tmp_path / "macbeth.txt")
    metadata = {"pretrained": str(tiny_llama_dir), "babilong_source": "generate", "babilong_facts": "simulated",
                "babilong_corpus": str(tmp_path), "babilong_samples": 2, "babilong_tasks": "qa1", "babilong_lengths": "[1k,2k]"}  # fmt: skip
    rows = {r.length: r for r in make_plan(["babilong"], metadata).rows}
    built = load_docs(**metadata)["test"]
    for length, row in rows.items():
        prompts = [d["prompt_tokens"] for d in built if d["length"] == length]
        assert row.docs == len(prompts) == 2 and row.build_tokens == row.data_tokens
        # samples are filled up to the length less the answer's 20, to within a sentence
        assert all(0.98 * (row.sequence_tokens - 20) <= n <= row.sequence_tokens - 20 for n in prompts), (
            prompts,
            row.sequence_tokens,
        )

"""`lm-eval-longmem plan`: counts that agree with the data the run builds, costs from the cost model, offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kit import build_booksort
from transformers import AutoConfig

from lm_eval_longmem import plan as plan_module
from lm_eval_longmem.common import cost
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.harness import models
from lm_eval_longmem.plan import make_plan, plan_lines, resolve_tasks

LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": False, "bos_token_id": 1,
    "eos_token_id": 2, "torch_dtype": "bfloat16",
}  # fmt: skip
"""Llama-3.1-8B's shape (its config.json's numbers); the weights never exist."""

RANDOM_SOURCES = {"forgetting_curve_copy_source": "random", "forgetting_curve_prefix_source": "random"}


@pytest.fixture(autouse=True)
def no_live_model(monkeypatch):
    """`plan` runs in its own process, where no harness model exists; other tests may have left one recorded."""
    monkeypatch.setattr(models, "_live", None)


@pytest.fixture(scope="module")
def llama3_dir(tiny_llama_dir, tmp_path_factory) -> Path:
    """A folder with only a Llama-3-8B-shaped config.json and a tokenizer: what `plan` needs, offline."""
    folder = tmp_path_factory.mktemp("llama3-8b-shape")
    for path in tiny_llama_dir.iterdir():
        if path.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(path, folder / path.name)
    (folder / "config.json").write_text(json.dumps(LLAMA3_8B))
    return folder


def test_tasks_and_groups_resolve_to_their_yaml_facts():
    facts = {
        t.name: t
        for t in resolve_tasks(
            ["forgetting_curve", "booksort", "booksort_memoryless", "booksort_in_context_gen", "babilong"]
        )
    }
    assert list(facts) == [
        "forgetting_curve",
        "booksort_in_context",
        "booksort_memoryless",
        "booksort_in_context_gen",
        "babilong",
    ]
    assert (
        facts["forgetting_curve"].output_type == "loglikelihood_accuracy"
        and facts["forgetting_curve"].evaluation == "forgetting_curve"
    )
    assert (facts["booksort_memoryless"].output_type, facts["booksort_memoryless"].condition) == (
        "multiple_choice",
        "memoryless",
    )
    assert (facts["booksort_in_context_gen"].output_type, facts["booksort_in_context_gen"].max_gen_toks) == (
        "generate_until",
        8,
    )
    assert (facts["babilong"].output_type, facts["babilong"].max_gen_toks) == ("generate_until", 20)
    with pytest.raises(UsageError, match="--tasks hellaswag: plan knows our tasks and groups only"):
        resolve_tasks(["hellaswag"])


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


def test_plan_of_a_weightless_llama3_8b_folder(llama3_dir):
    plan = make_plan(
        ["forgetting_curve", "babilong"],
        {"pretrained": str(llama3_dir), "forgetting_curve_points": 2, "babilong_lengths": "[128k]"},
        gpu="h100",
    )
    assert plan.shape.parameters == pytest.approx(8.03e9, rel=0.005) and plan.window.tokens == 131072
    rows = {(r.task, r.cell): plan.costs(r) | {"row": r} for r in plan.rows}
    longest = rows["forgetting_curve", "131072"]
    assert longest["row"].sequence_tokens == 262_146
    assert longest["kv_cache_bytes"] == 262_146 * 128 * 2**10  # Llama-3-8B in bf16: 128 KiB of K and V per token
    assert (
        longest["fits"]
        and longest["peak_bytes"] < 0.9 * 80 * 2**30
        and longest["est_seconds"] > rows["forgetting_curve", "65536"]["est_seconds"] * 3
    )
    text = "\n".join(plan_lines(plan))
    assert "8.03B parameters" in text and "vLLM on one h100: max_model_len=262147" in text


@pytest.mark.slow
def test_cli_json_rows_and_errors(llama3_dir, tiny_llama_dir):
    exe = str(Path(sys.executable).with_name("lm-eval-longmem"))
    out = subprocess.run(
        [exe, "plan", "--tasks", "forgetting_curve", "--model_args", f"pretrained={llama3_dir}", "--metadata",
         "forgetting_curve_lengths=[4k,8k]", "forgetting_curve_samples=2", "--gpu", "a100", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = json.loads(out.stdout)
    assert [(r["task"], r["length"], r["docs"], r["input_tokens"]) for r in rows] == [
        ("forgetting_curve", 4096, 2, 4 * 8194),
        ("forgetting_curve", 8192, 2, 4 * 16386),
    ]
    assert all({"prefill_flops", "kv_cache_bytes", "peak_bytes", "est_seconds", "fits"} <= set(r) for r in rows)
    shape = cost.ModelShape.from_config(AutoConfig.from_pretrained(llama3_dir))
    assert rows[0]["prefill_flops"] == 4 * cost.forward_flops(shape, 8193, 2048)
    bad = subprocess.run(
        [exe, "plan", "--tasks", "nope", "--model_args", f"pretrained={tiny_llama_dir}"], capture_output=True, text=True
    )
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "lm-eval-longmem: error: --tasks nope: plan knows our tasks and groups only: "
        + ", ".join(sorted(plan_module.our_tasks()))
    ]

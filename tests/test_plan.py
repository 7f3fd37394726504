"""`lm-eval-longmem plan`: counts that agree with the data the run builds, costs from the cost model, offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
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
    assert (facts["booksort_memoryless"].output_type, facts["booksort_memoryless"].dataset_kwargs["condition"]) == (
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

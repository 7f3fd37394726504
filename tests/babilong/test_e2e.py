"""`lm_eval --tasks babilong` on the real SmolLM2 with simulated facts at 0k and 1k, then report and plot."""

from __future__ import annotations

import json

import pytest
from kit import babilong_simulated, read_results, read_samples, run_lm_eval


@pytest.mark.slow
def test_lm_eval_babilong_end_to_end(smollm2_dir, books, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    metadata = babilong_simulated(books, babilong_lengths="[0k,1k]", babilong_tasks="qa1", babilong_samples=2)
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={smollm2_dir},dtype=float32", "--tasks", "babilong",
         "--device", "cpu", "--batch_size", "2", "--limit", "2", "--log_samples", "--metadata", json.dumps(metadata)],
        out,
        env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "2"},
    )  # fmt: skip
    results = read_results(out)
    metrics = results["results"]["babilong"]
    for name in ("acc@qa1_0", "acc@qa1_1024", "acc@0", "acc@1024", "acc", "acc_corrected"):
        assert 0.0 <= metrics[f"{name},none"] <= 1.0, name
    assert results["n-samples"]["babilong"]["effective"] == 2  # --limit 2 covers both cells
    samples = read_samples(out, "babilong")
    one_k = next(s for s in samples if s["doc"]["length"] == 1024)
    assert one_k["doc"]["prompt_tokens"] <= 1004
    prompt = one_k["arguments"]["gen_args_0"]["arg_0"]  # how lm_eval writes request arguments to samples files
    assert "<context>" in prompt and prompt.endswith(f"Question: {one_k['doc']['question']}")
    assert one_k["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"] == 20

    from lm_eval_longmem.babilong.rim.reader import format_report
    from lm_eval_longmem.plots import plot_results

    report = format_report(results)
    assert "qa1" in report and "effective context" in report
    written = plot_results(out, out_prefix=tmp_path / "fig", formats=("png",))
    assert [p.name for p in written if "babilong" in p.name] == ["fig_babilong.png"]


@pytest.mark.slow
def test_chat_template_and_system_instruction_reach_the_prompt(smollm2_dir, books, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    instruction = "You are a careful reader. Answer with one word."
    metadata = babilong_simulated(books, babilong_lengths="[0k]", babilong_tasks="[qa1,qa7]", babilong_samples=1)
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={smollm2_dir},dtype=float32", "--tasks", "babilong",
         "--device", "cpu", "--log_samples", "--apply_chat_template", "--system_instruction", instruction,
         "--metadata", json.dumps(metadata)],
        out,
        env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    metrics = read_results(out)["results"]["babilong"]
    assert {"acc@qa1_0,none", "acc@qa7_0,none"} <= set(metrics)
    for sample in read_samples(out, "babilong"):
        prompt = sample["arguments"]["gen_args_0"]["arg_0"]
        # SmolLM2's chat template wraps the system instruction and the user turn, then opens the answer.
        assert prompt.startswith("<|im_start|>system\n" + instruction)
        assert "<|im_start|>user\n" in prompt and "<context>" in prompt
        assert prompt.rstrip().endswith("<|im_start|>assistant")

"""`lm_eval --tasks babilong` on the real SmolLM2 with generated data at 0k and 1k, then report and plot."""

from __future__ import annotations

import shutil

import pytest

from kit import read_results, read_samples, run_lm_eval


@pytest.mark.slow
def test_lm_eval_babilong_end_to_end(smollm2_dir, shared_data, tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    shutil.copy(shared_data / "books" / "73017-0.txt", books)
    out = tmp_path / "out"
    out.mkdir()
    run_lm_eval(
        [
            "--model", "hf",
            "--model_args", f"pretrained={smollm2_dir},dtype=float32",
            "--tasks", "babilong",
            "--device", "cpu",
            "--batch_size", "2",
            "--limit", "1",
            "--log_samples",
            "--metadata",
            "babilong_source=generate",
            f"babilong_babi_dir={shared_data / 'babi' / 'en'}",
            f"babilong_corpus={books}",
            "babilong_lengths=[0k,1k]",
            "babilong_tasks=qa1",
            "babilong_samples=2",
        ],
        out,
        env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "2"},
    )  # fmt: skip
    results = read_results(out)
    for name in ("babilong_qa1_0k", "babilong_qa1_1k", "babilong_0k", "babilong_1k", "babilong"):
        metrics = results["results"][name]
        for metric in ("acc,none", "acc_corrected,none"):
            assert 0.0 <= metrics[metric] <= 1.0, (name, metric)
    assert results["n-samples"]["babilong_qa1_1k"]["effective"] == 1
    assert "acc,none" not in results["results"]["babilong_qa2_0k"]  # not selected: no docs, no metric
    sample = read_samples(out, "babilong_qa1_1k")[0]
    output = sample["resps"][0][0]
    assert sample["doc"]["length"] == 1024 and sample["doc"]["prompt_tokens"] <= 1004
    prompt = sample["arguments"]["gen_args_0"]["arg_0"]  # how lm_eval writes request arguments to samples files
    assert "<context>" in prompt and prompt.endswith(f"Question: {sample['doc']['question']}")
    assert isinstance(output, str) and sample["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"] == 20

    from lm_eval_longmem.babilong.report import format_report
    from lm_eval_longmem.plots import plot_results

    report = format_report(results)
    assert "qa1" in report and "effective context" in report
    written = plot_results(out, out_prefix=tmp_path / "fig", formats=("png",))
    assert [p.name for p in written if "babilong" in p.name] == ["fig_babilong.png"]


@pytest.mark.slow
def test_chat_template_and_system_instruction_reach_the_prompt(smollm2_dir, shared_data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    instruction = "You are a careful reader. Answer with one word."
    run_lm_eval(
        [
            "--model", "hf",
            "--model_args", f"pretrained={smollm2_dir},dtype=float32",
            "--tasks", "babilong_0k",
            "--device", "cpu",
            "--limit", "1",
            "--log_samples",
            "--apply_chat_template",
            "--system_instruction", instruction,
            "--metadata",
            "babilong_source=generate",
            f"babilong_babi_dir={shared_data / 'babi' / 'en'}",
            f"babilong_corpus={shared_data / 'books' / '73017-0.txt'}",
            "babilong_lengths=[0k]",
            "babilong_tasks=[qa1,qa7]",
            "babilong_samples=1",
        ],
        out,
        env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    results = read_results(out)["results"]
    for name in ("babilong_qa1_0k", "babilong_qa7_0k"):
        assert {"acc,none", "acc_corrected,none"} <= set(results[name])
        prompt = read_samples(out, name)[0]["arguments"]["gen_args_0"]["arg_0"]
        # SmolLM2's chat template wraps the system instruction and the user turn, then opens the answer.
        assert prompt.startswith("<|im_start|>system\n" + instruction)
        assert "<|im_start|>user\n" in prompt and "<context>" in prompt
        assert prompt.rstrip().endswith("<|im_start|>assistant")

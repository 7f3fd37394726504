"""End to end: the real `lm_eval` command on SmolLM2-135M-Instruct, in-context and memory-less, chat template on."""

from __future__ import annotations

import pytest
from kit import hf_run_args, read_results, read_samples, run_lm_eval

from lm_eval_longmem.booksort.task import Trial, calibrated_correct
from lm_eval_longmem.common.task import read_item
from lm_eval_longmem.plots import plot_results
from lm_eval_longmem.readers.results import skip_reasons

CELLS = ["LE250", "LS20", "bin0", "bin1", "bin2", "bin3", "book0", "LE250_bin0", "LE250_bin3"]


@pytest.mark.slow
def test_smollm2_in_context_and_memoryless_produce_every_metric(smollm2_dir, built_dir, tmp_path):
    run_lm_eval(
        hf_run_args(
            smollm2_dir,
            "booksort,booksort_memoryless",
            "--metadata",
            f'{{"booksort_data": "{built_dir}", "booksort_excerpt_lengths": 250, '
            '"booksort_segment_lengths": 20, "booksort_books": "hamlet"}',
            "--apply_chat_template",
            "--system_instruction",
            "Answer with one letter.",
            "--limit",
            "8",
            "--batch_size",
            "1",
            "--log_samples",
        ),
        tmp_path,
    )
    data = read_results(tmp_path)
    results = data["results"]
    for task in ("booksort_in_context", "booksort_memoryless"):
        row = results[task]
        assert row["skipped,none"] == 0 and skip_reasons(data, task) == {}  # 250-word prompts fit SmolLM2's 8k window
        for name in ("acc", "acc_ci_low", "acc_ci_high", "acc_p_above_chance"):
            assert 0.0 <= row[f"{name},none"] <= 1.0, (task, name)
        assert row["acc_ci_low,none"] <= row["acc,none"] <= row["acc_ci_high,none"]
        for cell in CELLS:
            for suffix in ("", "_ci_low", "_ci_high", "_p_above_chance"):
                assert 0.0 <= row[f"acc@{cell}{suffix},none"] <= 1.0, (task, cell, suffix)
            assert row[f"acc@{cell}_ci_low,none"] <= row[f"acc@{cell},none"] <= row[f"acc@{cell}_ci_high,none"]
        samples = read_samples(tmp_path, task)
        assert len(samples) == 8
        correct = sum(float(s["acc"]) for s in samples)
        assert row["acc@LE250,none"] == pytest.approx(correct / 8)  # one condition: paper acc == plain acc
        assert row["acc,none"] == pytest.approx(correct / 8)
        # Answer bias: the share of trials whose "A" log-probability is the higher (the log writes numbers as text).
        answered_a = sum(float(s["filtered_resps"][0][0]) >= float(s["filtered_resps"][1][0]) for s in samples)
        assert row["pct_A,none"] == pytest.approx(answered_a / 8) == pytest.approx(row["pct_A@LE250,none"])
        assert row["pct_A_ci_low,none"] <= row["pct_A,none"] <= row["pct_A_ci_high,none"]
        # Calibrated accuracy: the trials' logged log-odds and labels, decided by the condition's median.
        calibrated = calibrated_correct([read_item(Trial, s["summary"]) for s in samples])
        assert (
            row["acc_calibrated,none"]
            == pytest.approx(sum(calibrated) / 8)
            == pytest.approx(row["acc_calibrated@LE250,none"])
        )
        prompt = samples[0]["arguments"]["gen_args_0"]["arg_0"]
        assert prompt.startswith("<|im_start|>system\nAnswer with one letter.")
        assert prompt.endswith("<|im_start|>assistant\nAnswer: Segment")
        assert ("Hamlet, Prince of Denmark" in prompt) == (task == "booksort_in_context")
    assert results["booksort"]["acc,none"] == pytest.approx(results["booksort_in_context"]["acc,none"])
    written = plot_results(tmp_path, out_prefix=tmp_path / "fig", formats=("png",))
    assert tmp_path / "fig_booksort.png" in written and (tmp_path / "fig_booksort.png").stat().st_size > 10_000

"""The BABILong task class inside the real harness: empty tasks, the fit check, prompts and chat templates.

A tiny random model runs the whole `babilong` group in-process (seconds): the generated docs at 0k
fit, the 1k ones are pushed over the window by a long system instruction and must be skipped and
counted (never truncated), every other (task, length) has no docs and must not break the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_longmem.babilong.prompts import build_prompt



@pytest.fixture(scope="module")
def cache(tmp_path_factory, smollm2_dir):
    """This module's own cache (after the converted SmolLM2 was found in the normal one)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _metadata(model: Path, shared_data: Path, books: Path, **extra) -> dict:
    return {
        "pretrained": str(model),
        "babilong_source": "generate",
        "babilong_babi_dir": str(shared_data / "babi" / "en"),
        "babilong_corpus": str(books),
        "babilong_samples": 3,
        **extra,
    }


@pytest.fixture(scope="module")
def tiny_results(tiny_llama_dir, shared_data, books, cache) -> dict:
    import lm_eval

    from lm_eval_longmem import task_manager

    # The tiny model's tokenizer has one token per character. 2k samples (<= 2028 prompt tokens)
    # fit the window alone, not after the 150-character system instruction.
    window = 2100
    metadata = _metadata(
        tiny_llama_dir, shared_data, books, max_length=window, babilong_lengths="0k,2k", babilong_tasks="qa1,qa2"
    )
    return lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": str(tiny_llama_dir), "max_length": window, "dtype": "float32"},
        tasks=["babilong"],
        task_manager=task_manager(metadata=metadata),
        device="cpu",
        batch_size=4,
        system_instruction="S" * 150,
        log_samples=True,
        bootstrap_iters=0,
    )


def test_run_with_empty_and_skipped_tasks_reports_what_ran(tiny_results):
    results, configs, n_samples = tiny_results["results"], tiny_results["configs"], tiny_results["n-samples"]
    for qa in ("qa1", "qa2"):
        ran = results[f"babilong_{qa}_0k"]
        assert {"acc,none", "acc_corrected,none"} <= set(ran)
        assert n_samples[f"babilong_{qa}_0k"]["effective"] == 3
        skipped = f"babilong_{qa}_2k"
        assert "acc,none" not in results[skipped]
        reasons = configs[skipped]["metadata"]["babilong_skipped"]
        assert sum(reasons.values()) == 3
        assert reasons.get("prompt + 20 answer tokens exceed the window (2100)")
        assert configs[skipped]["metadata"]["babilong_not_run"] == "no doc fits"
    assert "acc,none" not in results["babilong_qa1_4k"]
    assert n_samples["babilong_qa1_4k"]["original"] == 0
    assert "not in babilong_lengths" in configs["babilong_qa1_4k"]["metadata"]["babilong_not_run"]
    assert "qa3 is not in babilong_tasks" in configs["babilong_qa3_0k"]["metadata"]["babilong_not_run"]


def test_groups_average_the_tasks_that_ran(tiny_results):
    results = tiny_results["results"]
    for metric in ("acc,none", "acc_corrected,none"):
        mean_0k = (results["babilong_qa1_0k"][metric] + results["babilong_qa2_0k"][metric]) / 2
        assert results["babilong_0k"][metric] == pytest.approx(mean_0k)
        assert results["babilong"][metric] == pytest.approx(mean_0k)
        assert metric not in results["babilong_2k"]
    assert set(tiny_results["group_subtasks"]["babilong"]) == {f"babilong_{ln}" for ln in (
        "0k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1M")}  # fmt: skip


def test_logged_prompt_is_the_papers_layout_after_the_system_instruction(tiny_results):
    sample = tiny_results["samples"]["babilong_qa1_0k"][0]
    prompt = sample["arguments"][0][0]
    doc = sample["doc"]
    assert prompt.startswith("S" * 150)
    assert prompt.endswith(build_prompt("qa1", doc["input"], doc["question"]))
    assert sample["arguments"][0][1]["max_gen_toks"] == 20 and sample["arguments"][0][1]["do_sample"] is False
    assert set(sample["metrics"]) == {"acc", "acc_corrected"}


def _smollm2_task(smollm2_dir, shared_data, books, **extra):
    from lm_eval_longmem import task_manager

    metadata = _metadata(smollm2_dir, shared_data, books, babilong_lengths="0k", **extra)
    return task_manager(metadata=metadata).load(["babilong_qa1_0k"])["tasks"]["babilong_qa1_0k"]


def test_chat_template_and_system_instruction_render_around_the_whole_prompt(smollm2_dir, shared_data, books, cache):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)

    def chat_template(messages, add_generation_prompt=True):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    task = _smollm2_task(smollm2_dir, shared_data, books)
    doc = task.eval_docs[0]
    rendered = task.fewshot_context(
        doc, 0, system_instruction="Answer briefly.", apply_chat_template=True, chat_template=chat_template
    )
    prompt = build_prompt("qa1", doc["input"], doc["question"])
    assert rendered == (
        f"<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "<context>" in prompt and prompt.index("<example>") < prompt.index("<context>")


def test_fit_check_measures_the_chat_rendered_prompt(smollm2_dir, shared_data, books, cache):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    probe = _smollm2_task(smollm2_dir, shared_data, books)
    lengths = [len(tokenizer(probe.doc_to_text(d))["input_ids"]) for d in probe.eval_docs]
    longest = lengths.index(max(lengths))
    window = max(lengths) + 20  # the longest raw prompt fits exactly; with the chat template it cannot

    def chat_template(messages, add_generation_prompt=True):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    plain = _smollm2_task(smollm2_dir, shared_data, books, max_length=window)
    plain.build_all_requests(limit=None, rank=0, world_size=1, tokenizer_name="t")
    assert sorted(i.doc_id for i in plain.instances) == [0, 1, 2]
    assert "babilong_skipped" not in plain.config.metadata

    chat = _smollm2_task(smollm2_dir, shared_data, books, max_length=window)
    chat.build_all_requests(
        limit=None, rank=0, world_size=1, apply_chat_template=True, chat_template=chat_template, tokenizer_name="t"
    )
    kept = [i.doc_id for i in chat.instances]
    assert longest not in kept
    assert sum(chat.config.metadata["babilong_skipped"].values()) == 3 - len(kept)
    for instance in chat.instances:  # what is sent is the chat-rendered prompt, and it fits
        assert instance.args[0].startswith("<|im_start|>")
        assert len(tokenizer(instance.args[0])["input_ids"]) + 20 <= window


def test_switches_drop_prompt_parts(smollm2_dir, shared_data, books, cache):
    task = _smollm2_task(smollm2_dir, shared_data, books, babilong_examples=False, babilong_instruction=False)
    text = task.doc_to_text(task.eval_docs[0])
    assert "<example>" not in text and not text.startswith("I will give you")
    assert text.startswith("Always return your answer")
    assert text.index("<context>") < text.index("Question:")

"""The Book-SORT tasks in the harness: names, prompts with/without chat template, scoring, skips, metrics."""

from __future__ import annotations

from pathlib import Path

import lm_eval
import pytest
from scipy import stats

from lm_eval_longmem.booksort.prompts import VARIANTS, get_variant, render
from lm_eval_longmem.booksort.task import (
    BooksortTask,
    binomial_p_above_chance,
    parse_label,
    wilson_high,
    wilson_low,
)
from lm_eval_longmem.paths import task_configs_dir

OUR_TASKS = {"booksort_in_context", "booksort_memoryless", "booksort_in_context_gen"}


def _task_manager(metadata=None):
    """Our tasks only (the start-up hook adds task_configs/; the harness's own are not indexed: faster)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_defaults=False, metadata=metadata or {})


def _load(task_name: str, metadata: dict) -> BooksortTask:
    from lm_eval.tasks import get_task_dict

    task = get_task_dict([task_name], _task_manager(metadata))[task_name]
    assert isinstance(task, BooksortTask)
    return task


def test_task_index_is_exact_and_names_are_new():
    from lm_eval.tasks import TaskManager

    manager = TaskManager()  # the start-up hook adds task_configs/ to the harness's own tasks
    index = manager.task_index
    folder = str(task_configs_dir() / "booksort")

    def names_under(path: str) -> set[str]:
        return {name for name, entry in index.items() if str(getattr(entry, "yaml_path", None) or "").startswith(path)}

    ours = names_under(folder)
    assert ours == OUR_TASKS | {"booksort"}
    assert "booksort" in manager.all_groups
    harness = names_under(str(Path(lm_eval.__file__).parent / "tasks"))
    assert "babilong_qa1" in harness  # the filter does see the built-in tasks
    assert not ours & harness


def test_group_holds_only_the_in_context_task():
    import yaml

    group = yaml.safe_load((task_configs_dir() / "booksort" / "booksort.yaml").read_text())
    assert group["group"] == "booksort" and group["task"] == ["booksort_in_context"]
    assert group["aggregate_metric_list"] == [{"metric": "acc", "aggregation": "mean", "weight_by_size": False}]


@pytest.mark.parametrize(
    "generated,label",
    [
        (" A", "A"),
        (" B.", "B"),
        ("B", "B"),
        (" Segment A comes first", "A"),
        ("  A) is first", "A"),
        (" a", None),  # lower case is not a label
        (" AB", None),
        (" Both", None),
        (" Answer: A", None),  # anything before the label is not allowed
        ("", None),
        (" B2", None),
    ],
)
def test_parse_label_is_strict(generated, label):
    assert parse_label(generated) == label


def test_cell_intervals_and_chance_test():
    items = [1.0] * 15 + [0.0] * 5
    ci = stats.binomtest(15, 20).proportion_ci(method="wilson")
    assert (wilson_low(items), wilson_high(items)) == pytest.approx((ci.low, ci.high))
    assert binomial_p_above_chance(items) == pytest.approx(stats.binomtest(15, 20, 0.5, alternative="greater").pvalue)
    assert binomial_p_above_chance(items) < 0.05 < binomial_p_above_chance([1.0] * 12 + [0.0] * 8)


def test_every_variant_renders_both_conditions():
    for name, variant in VARIANTS.items():
        full = render(variant, title="T", excerpt="EXCERPT", first="S1", second="S2", condition="in_context")
        bare = render(variant, title="T", excerpt="EXCERPT", first="S1", second="S2", condition="memoryless")
        assert "EXCERPT" in full.user and "EXCERPT" not in bare.user, name
        assert full.user.index("Segment A: S1") < full.user.index("Segment B: S2"), name
        assert full.answer_prefix.endswith("Segment") and full.user.endswith("\n"), name
    with pytest.raises(ValueError, match="choose one of"):
        get_variant("nope")


class _ChatLM:
    """The two pieces of HFLM that prompt rendering uses, on a real tokenizer (no model weights)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def apply_chat_template(self, chat_history, add_generation_prompt=True):  # same call as HFLM's
        return self.tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )


@pytest.fixture(scope="module")
def smollm2_task(smollm2_dir, built_dir):
    from transformers import AutoTokenizer

    meta = {
        "pretrained": str(smollm2_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_books": "72958",
    }
    return _load("booksort_in_context", meta), AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("system_instruction", [None, "Be brief."])
def test_prompt_rendering_and_one_token_labels(smollm2_task, chat, system_instruction):
    """The final prompt ends in the answer prefix (inside the assistant turn under a chat template),
    keeps our system prompt and the user's --system_instruction, and each label is one token after it."""
    task, tokenizer = smollm2_task
    doc = task.test_docs()[0]
    ctx = task.fewshot_context(
        doc,
        num_fewshot=0,
        system_instruction=system_instruction,
        apply_chat_template=chat,
        chat_template=_ChatLM(tokenizer).apply_chat_template if chat else None,
        gen_prefix=task.doc_to_prefix(doc),
    )
    requests = task.construct_requests(
        doc=doc, ctx=ctx, metadata=("booksort_in_context", 0, 1), apply_chat_template=chat
    )
    assert [r.arguments[1] for r in requests] == [" A", " B"]
    assert doc["prompt_system"].strip() in ctx and doc["prompt_user"] in ctx
    assert (system_instruction or "") in ctx
    if chat:
        assert ctx.endswith("<|im_start|>assistant\nAnswer: Segment") and ctx.startswith("<|im_start|>system\n")
    else:
        assert ctx.startswith((f"{system_instruction}\n\n" if system_instruction else "") + doc["prompt_system"])
        assert ctx.endswith("?\nAnswer: Segment")
    context_ids = tokenizer(ctx, add_special_tokens=False)["input_ids"]
    for request in requests:
        whole = tokenizer(ctx + request.arguments[1], add_special_tokens=False)["input_ids"]
        assert whole[: len(context_ids)] == context_ids and len(whole) == len(context_ids) + 1


def test_context_runs_once_per_trial_not_per_label(tiny_llama_dir, built_dir):
    """HF groups the two label requests of a trial by context: one forward pass per trial.

    The tiny model's character tokenizer makes " A" two tokens (" ", "A"); the harness groups by
    context + all but the last label token, so this holds for merged and split spaces alike."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", batch_size=1)
    calls = []
    original = lm._model_call
    lm._model_call = lambda inps, *a, **k: calls.append(inps.shape) or original(inps, *a, **k)
    meta = {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
    }
    out = lm_eval.simple_evaluate(
        model=lm, tasks=["booksort_memoryless"], task_manager=_task_manager(meta), limit=6, log_samples=True
    )
    samples = out["samples"]["booksort_memoryless"]
    assert len(samples) == 6 and all(len(s["arguments"]) == 2 for s in samples)  # 12 loglikelihood requests
    assert len(calls) == 6


def _plain_prompt_tokens(doc, tokenizer) -> int:
    ctx = doc["prompt_system"] + doc["prompt_user"] + doc["prompt_answer"] + " A"
    return len(tokenizer(ctx)["input_ids"])


def test_trials_longer_than_the_window_are_skipped_and_counted(tiny_llama_dir, built_dir):
    import lm_eval
    from transformers import AutoTokenizer

    from lm_eval_longmem.booksort.data import build_docs

    meta = {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
        "booksort_books": "69087",
    }
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    docs = build_docs(meta, "test", "in_context")
    window = sorted(_plain_prompt_tokens(doc, tokenizer) for doc in docs[:40])[20]  # about half of the trials fit
    meta["max_length"] = window
    fits, skipped = [], 0
    for doc in docs:
        if len(fits) == 5:
            break
        if _plain_prompt_tokens(doc, tokenizer) <= window:
            fits.append(doc["trial_id"])
        else:
            skipped += 1
    assert skipped > 0

    out = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_llama_dir},device=cpu,max_length={window}",
        tasks=["booksort_in_context"],
        task_manager=_task_manager(meta),
        limit=5,
        log_samples=True,
    )
    row = out["results"]["booksort_in_context"]
    assert row["skipped,none"] == skipped
    assert [s["doc"]["trial_id"] for s in out["samples"]["booksort_in_context"]] == fits
    for sample in out["samples"]["booksort_in_context"]:
        ctx, cont = sample["arguments"][0]
        assert len(tokenizer(ctx + cont)["input_ids"]) <= window  # nothing was left-truncated by the harness

    with pytest.raises(ValueError, match="longer than the model's window.*booksort_excerpt_lengths"):
        lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={tiny_llama_dir},device=cpu,max_length=300",
            tasks=["booksort_in_context"],
            task_manager=_task_manager({**meta, "max_length": 300}),
            limit=2,
        )


def test_generation_task_counts_invalid_answers(tiny_llama_dir, built_dir):
    meta = {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
    }
    task = _load("booksort_in_context_gen", meta)
    doc = task.test_docs()[0]
    gold = "AB"[doc["label"]]
    right = task.process_results(doc, [f" {gold}. It is first."])
    wrong = task.process_results(doc, [" The first one"])
    assert right["invalid"] == 0.0 and right["acc"][1] == 1.0 and right[f"acc@LE{doc['excerpt_length']}"] == 1.0
    assert wrong["invalid"] == 1.0 and wrong["acc"][1] == 0.0
    assert task.aggregation()["invalid"]([right["invalid"], wrong["invalid"]]) == 1.0

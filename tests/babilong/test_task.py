"""The `babilong` task inside the real harness: one task over every cell, skips, prompts, chat templates.

A tiny random model runs the task in-process (seconds) on simulated facts: the 0k docs fit, the 2k
ones are pushed over the window by a long system instruction and must be skipped and counted
(never truncated).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kit import babilong_simulated as simulated
from kit import check_summary_schema, hf_run_args, read_results, run_lm_eval

from lm_eval_longmem.babilong.prompts import build_prompt
from lm_eval_longmem.babilong.task import BabilongTask
from lm_eval_longmem.common.cache import sha256_hex
from lm_eval_longmem.readers.results import skip_reasons


@pytest.fixture(scope="module")
def cache(tmp_path_factory, smollm2_dir):
    """This module's own cache (after the converted SmolLM2 was found in the normal one)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def tiny_results(tiny_llama_dir, books) -> dict:
    import lm_eval

    from lm_eval_longmem import task_manager

    # The tiny model's tokenizer has one token per character. 2k samples (<= 2028 prompt tokens)
    # fit the window alone, not after the 150-character system instruction.
    window = 2100
    metadata = {"pretrained": str(tiny_llama_dir), "max_length": window} | simulated(
        books, babilong_lengths="0k,2k", babilong_tasks="qa1,qa2"
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


@pytest.mark.slow
def test_one_task_reports_cells_lengths_and_skips(tiny_results):
    metrics = tiny_results["results"]["babilong"]
    assert list(tiny_results["results"]) == ["babilong"]  # one task, no per-length groups
    for check in ("acc", "acc_corrected", "corrected_abstained"):
        cells = [metrics[f"{check}@{qa}_0,none"] for qa in ("qa1", "qa2")]  # "0k": 0 tokens of haystack
        assert metrics[f"{check}@0,none"] == pytest.approx(sum(cells) / 2)
        assert metrics[f"{check},none"] == pytest.approx(sum(cells) / 2)  # only 0k ran
        assert metrics[f"{check}@qa1_0_ci_low,none"] <= cells[0] <= metrics[f"{check}@qa1_0_ci_high,none"]
        assert f"{check}@2048,none" not in metrics and f"{check}@qa1_2048,none" not in metrics
    assert metrics["skipped,none"] == 6
    reasons = skip_reasons(tiny_results, "babilong")
    assert set(reasons) == {"qa1_2048", "qa2_2048"}
    assert all(sum(r.values()) == 3 and "exceed the window (2100 tokens" in next(iter(r)) for r in reasons.values())
    assert metrics["effective_context@qa1,none"] in (0, None)  # tokens; None: below 85% even at the shortest
    assert "length_names" not in tiny_results["configs"]["babilong"]["longmem"]  # the display edge formats "0k"
    assert tiny_results["n-samples"]["babilong"]["effective"] == 6


@pytest.mark.slow
def test_logged_prompt_is_the_papers_layout_after_the_system_instruction(tiny_results):
    sample = tiny_results["samples"]["babilong"][0]
    prompt = sample["arguments"][0][0]
    doc = sample["doc"]
    assert prompt.startswith("S" * 150)
    assert (
        "input" not in doc and len(str(doc)) < 2000
    )  # the doc records what rebuilds its haystack; the prompt holds it
    context = prompt[prompt.index("<context>\n") + 10 : prompt.index("\n</context>")]
    assert sha256_hex(context) == doc["context_sha256"]
    assert prompt.endswith(build_prompt(doc["qa"], context, doc["question"]))
    assert sample["arguments"][0][1]["max_gen_toks"] == 20 and sample["arguments"][0][1]["do_sample"] is False
    assert sample["metrics"] == [
        "acc",
        "acc_corrected",
        "corrected_abstained",
        "cells",
        "summary",
    ]  # its own scores and cell
    assert sample["corrected_abstained"] in (0.0, 1.0)
    if sample["corrected_abstained"]:
        assert sample["acc_corrected"] == sample["acc"]  # abstained: the authors' verdict stands
    assert sample["acc"] in (0.0, 1.0) and sample["cells"] == [f"{doc['qa']}_{doc['length']}"]


@pytest.mark.slow
def test_skip_counts_are_the_same_from_the_request_cache(tiny_llama_dir, books, tmp_path):
    """Defect: a request-cache hit reported other skip counts than the fresh run (9 vs 1)."""
    metadata = simulated(books, babilong_lengths="0k,2k", babilong_tasks="qa1")
    counts = []
    for run in ("fresh", "cached"):
        out = tmp_path / run
        out.mkdir()
        run_lm_eval(
            hf_run_args(tiny_llama_dir, "babilong", "--cache_requests", "true", "--limit", "2",
                "--system_instruction", "S" * 150, "--metadata", __import__("json").dumps(metadata), max_length=2100),
            out, env={"LM_HARNESS_CACHE_PATH": str(tmp_path / "harness-cache"), "LM_EVAL_LONGMEM_CACHE": str(tmp_path / "c")},
        )  # fmt: skip
        data = read_results(out)
        counts.append((data["results"]["babilong"]["skipped,none"], skip_reasons(data, "babilong")))
    assert list((tmp_path / "harness-cache").glob("requests-babilong*"))  # the second run was a cache hit
    assert counts[0] == counts[1] and counts[0][0] >= 1  # --limit 2 runs two 0k docs; 2k docs before them are skipped


def _smollm2_chat(smollm2_dir):
    """SmolLM2's tokenizer and a task's `chat_template` callable rendering with it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)

    def chat_template(messages, add_generation_prompt=True):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    return tokenizer, chat_template


def _smollm2_task(smollm2_dir, books, **extra):
    from lm_eval_longmem import task_manager

    metadata = {"pretrained": str(smollm2_dir)} | simulated(books, babilong_lengths="0k", babilong_tasks="qa1", **extra)
    return task_manager(metadata=metadata).load(["babilong"])["tasks"]["babilong"]


@pytest.mark.slow
def test_chat_template_and_system_instruction_render_around_the_whole_prompt(smollm2_dir, books, cache):
    _, chat_template = _smollm2_chat(smollm2_dir)

    task = _smollm2_task(smollm2_dir, books)
    doc = task.eval_docs[0]
    rendered = task.fewshot_context(
        doc, 0, system_instruction="Answer briefly.", apply_chat_template=True, chat_template=chat_template
    )
    prompt = build_prompt("qa1", task.haystack(doc), doc["question"])
    assert rendered == (
        f"<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "<context>" in prompt and prompt.index("<example>") < prompt.index("<context>")


@pytest.mark.slow
def test_fit_check_measures_the_chat_rendered_prompt(smollm2_dir, books, cache):
    tokenizer, chat_template = _smollm2_chat(smollm2_dir)

    probe = _smollm2_task(smollm2_dir, books)
    chat_lengths = [
        len(tokenizer(probe.rendered_prompt(d, apply_chat_template=True, chat_template=chat_template))["input_ids"])
        for d in probe.eval_docs
    ]
    longest = chat_lengths.index(max(chat_lengths))
    window = max(chat_lengths) + 20 - 1  # every raw prompt fits; the longest chat-rendered one does not

    plain = _smollm2_task(smollm2_dir, books, max_length=window)
    plain.build_all_requests(limit=None, rank=0, world_size=1, tokenizer_name="t")
    assert sorted(i.doc_id for i in plain.instances) == [0, 1, 2]
    assert plain.skips == {}

    chat = _smollm2_task(smollm2_dir, books, max_length=window)
    chat.build_all_requests(
        limit=None, rank=0, world_size=1, apply_chat_template=True, chat_template=chat_template, tokenizer_name="t"
    )
    kept = [i.doc_id for i in chat.instances]
    assert longest not in kept
    assert sum(chat.skips["qa1_0"].values()) == 3 - len(kept)
    assert len(chat.eval_docs) == 3  # the dataset is never changed
    for instance in chat.instances:  # what is sent is the chat-rendered prompt, and it fits
        assert instance.args[0].startswith("<|im_start|>")
        assert len(tokenizer(instance.args[0])["input_ids"]) + 20 <= window


@pytest.mark.slow
def test_switches_drop_prompt_parts(smollm2_dir, books, cache):
    task = _smollm2_task(smollm2_dir, books, babilong_examples=False, babilong_instruction=False)
    text = task.doc_to_text(task.eval_docs[0])
    assert "<example>" not in text and not text.startswith("I will give you")
    assert text.startswith("Always return your answer")
    assert text.index("<context>") < text.index("Question:")


@pytest.mark.parametrize("docs", [[1.0], [0.0], [1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]], ids=str)
def test_cells_and_means_on_degenerate_docs(docs):
    """A cell (Wilson) and the mean over cells (Wilson on the effective size) from one doc on:
    inside [0, 1], never of zero width, whether the docs agree or not."""
    from lm_eval_longmem.babilong.summary import Cell, mean_interval
    from lm_eval_longmem.babilong.task import CHECKS, RECALL
    from lm_eval_longmem.common.stats import proportion_interval
    from lm_eval_longmem.common.task import cell_interval

    for spec in (*CHECKS, RECALL):
        iv = cell_interval(docs, spec)
        assert spec.family == "binary" and 0.0 <= iv.low <= iv.estimate <= iv.high <= 1.0 and iv.low < iv.high
    cell = proportion_interval(round(sum(docs)), len(docs))
    cells = [
        Cell("qa1", 0, len(docs), cell, cell),
        Cell("qa2", 0, 1, proportion_interval(1, 1), proportion_interval(1, 1)),
    ]
    mean = mean_interval(cells, CHECKS[0])
    assert 0.0 <= mean.low <= mean.estimate <= mean.high <= 1.0 and mean.low < mean.high


@pytest.mark.slow
def test_window_fit_reads_the_generators_exact_counts(smollm2_dir, books, cache):
    """The fit of a generated doc reads the count stored with it (no tokenization), and it is exact to the token;
    a prompt the generator did not count (a system instruction added) is counted once, then read by content."""
    from transformers import AutoTokenizer

    from lm_eval_longmem import task_manager
    from lm_eval_longmem.common.model_info import Window

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    metadata = {"pretrained": str(smollm2_dir), "max_length": 8192} | simulated(
        books, babilong_lengths="1k", babilong_tasks="qa1"
    )

    def task():
        return task_manager(metadata=metadata).load(["babilong"])["tasks"]["babilong"]

    plain = task()
    docs = list(plain.eval_docs)
    for doc in docs:
        assert doc["prompt_tokens"] == len(tokenizer(plain.rendered_prompt(doc))["input_ids"])
    edge = docs[0]["prompt_tokens"] + 20  # prompt + the 20 answer tokens
    plain.__dict__["window"] = Window(edge, None, "hf", "a test window")
    assert plain.fit_reason(docs[0]) == ""
    plain.__dict__["window"] = Window(edge - 1, None, "hf", "a test window")
    assert "exceed the window" in plain.fit_reason(docs[0])
    assert plain.token_counts.counted == 0 and plain.token_counts.read == 0  # every count came from the docs

    first = task()
    first.build_all_requests(limit=None, rank=0, world_size=1, tokenizer_name="t", system_instruction="Be brief.")
    assert first.token_counts.counted == len(docs) and not first.skips
    again = task()
    again.build_all_requests(limit=None, rank=0, world_size=1, tokenizer_name="t", system_instruction="Be brief.")
    assert again.token_counts.counted == 0 and again.token_counts.read == len(docs)


def test_summaries_are_named_items_and_old_logged_items_give_the_same_row():
    """`summarize` over `Answer`s: the row from named records equals the one from positional lists (old logs)."""
    task = BabilongTask.__new__(BabilongTask)  # aggregation reads only cells, skips, options and declarations
    task._config = SimpleNamespace(metadata={})  # default options: in-context
    task.cells, task.skips, task.docs_per_cell = ["qa1_0", "qa1_1024", "qa2_0", "qa2_1024"], {}, {}
    task.__dict__["dataset_docs_per_cell"] = dict.fromkeys(task.cells, 5)  # every doc ran
    task.score = lambda doc, results: {
        "acc": results[0],
        "acc_corrected": results[1],
        "corrected_abstained": results[2],
    }
    docs = [({"qa": qa, "length": length}, [float(k % 3 > 0), float(k % 2), float(k == 0)])
            for qa in ("qa1", "qa2") for length in (0, 1024) for k in range(5)]  # fmt: skip
    row = check_summary_schema(task, [task.process_results(doc, r) for doc, r in docs])
    assert row["acc@qa1_0,none"] == pytest.approx(0.6) and row["acc@0,none"] == pytest.approx(0.6)
    assert row["effective_context@qa1,none"] is None and row["corrected_abstained,none"] == pytest.approx(0.2)


def test_an_effective_context_over_short_cells_is_null_with_the_reason():
    """An effective context reads every length of its task, so a task whose cell
    ran fewer docs than the sweep holds (a --limit) gets null, with the reason; a whole task keeps its value."""
    task = BabilongTask.__new__(BabilongTask)
    task._config = SimpleNamespace(metadata={})
    task.cells, task.skips, task.docs_per_cell = ["qa1_0", "qa1_1024", "qa2_0", "qa2_1024"], {}, {}
    task.__dict__["dataset_docs_per_cell"] = {"qa1_0": 3, "qa1_1024": 3, "qa2_0": 3, "qa2_1024": 5}
    task.score = lambda doc, results: {"acc": 1.0, "acc_corrected": 1.0, "corrected_abstained": 0.0}
    docs = [{"qa": qa, "length": length} for qa in ("qa1", "qa2") for length in (0, 1024) for _ in range(3)]
    row = check_summary_schema(task, [task.process_results(doc, []) for doc in docs])
    assert row["effective_context@qa1,none"] == 1024  # every doc of qa1 ran, all right
    assert row["effective_context@qa2,none"] is None and row["effective_context_corrected@qa2,none"] is None
    assert set(task.null_reasons) == {"effective_context@qa2", "effective_context_corrected@qa2"}
    assert task.null_reasons["effective_context@qa2"].startswith(
        "lengths ran fewer docs than the sweep holds (1k: 3 of 5)"
    )

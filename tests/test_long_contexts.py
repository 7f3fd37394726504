"""Every evaluation at the lengths users run (32k to 1M tokens), through the real `lm_eval` command line on CPU.

Models: tiny random Llamas (2 layers, hidden size 64) that claim a 128k or a 1M window, with SmolLM2's
real tokenizer, so token counts are those of a real model (`conftest.llama_128k_dir`, `llama_1m_dir`);
requests at 1M run on lm_eval's `dummy` model. Background text: copies of two embedded plays (1.11M
tokens; each play is split into sentences once, the copies are read from the cache).

What each test asserts is what a user relies on at these lengths: prompts as long as their length
bin says (counted in the model's tokenizer), every fact where the doc says it is, nothing cut (what
was sent is what was built), and every doc that does not fit skipped and counted.
"""

from __future__ import annotations

import bisect
import json
import shutil
from pathlib import Path

import pytest
from kit import build_booksort, hf_run_args, read_results, read_samples, run_lm_eval

from lm_eval_longmem.common.cache import sha256_hex
from lm_eval_longmem.readers.results import skip_reasons

pytestmark = [pytest.mark.long, pytest.mark.slow]

COPIES = 20
"""Copies of the two plays in the background folder: 1.11M tokens of sentences, enough for a 1M BABILong sample."""
THREADS = {"OMP_NUM_THREADS": "2", "LMEVAL_LOG_LEVEL": "INFO"}


@pytest.fixture(scope="module")
def long_books(embedded_books_dir, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("long-books")
    for i in range(COPIES):
        for name in ("macbeth.txt", "tempest.txt"):
            shutil.copy(embedded_books_dir / name, folder / f"copy{i:02d}-{name}")
    return folder


def _babilong(books: Path, **extra) -> dict:
    return {
        "babilong_source": "generate", "babilong_facts": "simulated", "babilong_corpus": str(books),
        "babilong_tasks": "qa1", "babilong_samples": 1, **extra,
    }  # fmt: skip


def _context(prompt: str) -> str:
    return prompt[prompt.index("<context>\n") + len("<context>\n") : prompt.index("\n</context>")]


def _assert_in_bin(tokenizer, prompt: str, doc: dict) -> None:
    """The prompt has exactly the tokens the doc records, at most 20 (answer) and at least 23 below its length."""
    tokens = len(tokenizer(prompt)["input_ids"])
    assert tokens == doc["prompt_tokens"] and doc["length"] - 23 <= tokens <= doc["length"] - 20, (
        tokens,
        doc["length"],
    )


def _assert_facts_at_their_depths(tokenizer, context: str, doc: dict) -> None:
    """Every fact is in the haystack, in story order, at the depth (share of its tokens before the fact) the doc records."""
    assert sha256_hex(context) == doc["context_sha256"]
    starts = [
        start
        for start, _ in tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    ]
    position = 0
    for fact, depth in zip(doc["facts"], doc["fact_depths"], strict=True):
        found = context.find(fact, position)
        assert found >= position, f"fact {fact!r} missing or out of order"
        measured = bisect.bisect_left(starts, found) / len(starts)
        assert abs(measured - depth) <= 2 / len(starts), (fact, measured, depth)
        position = found + len(fact)
    for (start, end), index in zip(doc["supporting_spans"], doc["supporting"], strict=True):
        assert context[start:end] == doc["facts"][index]


def test_forgetting_curve_at_32k_sends_every_token_and_skips_what_the_limit_excludes(
    llama_128k_dir, long_books, tmp_path
):
    from lm_eval_longmem.backends.request_type import compact_ids
    from lm_eval_longmem.forgetting_curve.data import Spans, sequences, source_stream

    metadata = {
        "forgetting_curve_corpus": str(long_books), "forgetting_curve_lengths": "[32k,64k]",
        "forgetting_curve_samples": 1, "forgetting_curve_max_tokens": 100_000,
    }  # fmt: skip
    run_lm_eval(
        hf_run_args(llama_128k_dir, "forgetting_curve", "--batch_size", "1", "--log_samples", "--metadata",
            json.dumps(metadata)),
        tmp_path, env=THREADS,
    )  # fmt: skip
    results = read_results(tmp_path)
    metrics = results["results"]["forgetting_curve"]
    assert metrics["skipped,none"] == 1
    assert skip_reasons(results, "forgetting_curve") == {
        "65536": {"its 131073 input positions exceed 100000 (forgetting_curve_max_tokens)": 1}
    }
    for score in ("copy_acc", "lm_acc"):
        assert 0.0 <= metrics[f"{score}@32768,none"] <= 1.0
    (record,) = read_samples(tmp_path, "forgetting_curve")
    doc = record["doc"]
    assert doc["length"] == 32768 and doc["scored"] == 16384
    (copy_bits, _), (lm_bits, _) = record["filtered_resps"]
    assert len(copy_bits) == len(lm_bits) == 16384  # every scored token came back
    stream = source_stream(str(long_books), {"pretrained": str(llama_128k_dir)})
    built = sequences(stream, doc["separator_id"], 32768, Spans(doc["s_start"], doc["i_start"]))
    for request, (context, continuation) in zip(("gen_args_0", "gen_args_1"), (built.copy, built.lm), strict=True):
        sent = record["arguments"][request]
        assert (sent["arg_0"], sent["arg_1"]) == (compact_ids(context.tolist()), compact_ids(continuation.tolist()))
        assert sent["arg_0"].startswith("<49154 token ids")  # [bos] S [bos] S[:L/2], all 49,154 of them


def test_babilong_generates_at_128k(llama_128k_dir, long_books, smollm2_tokenizer, tmp_path):
    run_lm_eval(
        hf_run_args(llama_128k_dir, "babilong", "--batch_size", "1", "--log_samples", "--metadata",
            json.dumps(_babilong(long_books, babilong_lengths="[128k]"))),
        tmp_path, env=THREADS,
    )  # fmt: skip
    results = read_results(tmp_path)
    metrics = results["results"]["babilong"]
    assert metrics["skipped,none"] == 0 and results["n-samples"]["babilong"]["effective"] == 1
    assert metrics["acc@qa1_131072,none"] in (0.0, 1.0)
    (record,) = read_samples(tmp_path, "babilong")
    doc, prompt = record["doc"], record["arguments"]["gen_args_0"]["arg_0"]
    assert "input" not in doc and len(json.dumps(doc)) < 4000  # the haystack is logged once, in the prompt
    _assert_in_bin(smollm2_tokenizer, prompt, doc)
    _assert_facts_at_their_depths(smollm2_tokenizer, _context(prompt), doc)
    assert record["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"] == 20 and len(record["resps"][0][0]) > 0


def test_babilong_at_1m_fits_from_stored_counts_and_counts_its_skips(
    llama_1m_dir, long_books, smollm2_tokenizer, tmp_path
):
    """Data at 512k and 1M, the window fit of 1M prompts without tokenizing them, skips counted; requests on `dummy`.

    40 answer tokens (--gen_kwargs) push every 1M prompt (20 tokens below the window, plus up to 3) over the 1M
    window by 17 to 20 tokens: a fit that were off by so little would let them through.
    """
    metadata = _babilong(long_books, babilong_lengths="[512k,1M]", babilong_samples=2)
    proc = run_lm_eval(
        ["--model", "dummy", "--model_args", f"pretrained={llama_1m_dir}", "--tasks", "babilong", "--log_samples",
         "--gen_kwargs", "max_gen_toks=40", "--metadata", json.dumps(metadata)],
        tmp_path, env=THREADS,
    )  # fmt: skip
    results = read_results(tmp_path)
    assert results["results"]["babilong"]["skipped,none"] == 2 and results["n-samples"]["babilong"]["effective"] == 2
    assert skip_reasons(results, "babilong") == {
        "qa1_1048576": {"prompt + answer exceed the window (1048576 tokens, the model config)": 2}
    }
    assert (
        "babilong: window fit: 4 prompt count(s) stored with the docs, 0 read from the count cache, 0 tokenized"
        in proc.stderr
    )
    for record in read_samples(tmp_path, "babilong"):
        doc, prompt = record["doc"], record["arguments"]["gen_args_0"]["arg_0"]
        assert doc["length"] == 524288
        _assert_in_bin(smollm2_tokenizer, prompt, doc)
        _assert_facts_at_their_depths(smollm2_tokenizer, _context(prompt), doc)

    from lm_eval_longmem import task_manager

    task = task_manager(metadata={"pretrained": str(llama_1m_dir)} | metadata).load(["babilong"])["tasks"]["babilong"]
    one_m = next(doc for doc in task.eval_docs if doc["length"] == 1048576)  # built above: read from the cache
    prompt = task.doc_to_text(one_m)
    _assert_in_bin(smollm2_tokenizer, prompt, one_m)
    _assert_facts_at_their_depths(smollm2_tokenizer, _context(prompt), one_m)


def test_babilong_retrieval_reads_a_128k_haystack_into_a_short_prompt(
    llama_128k_dir, long_books, smollm2_tokenizer, tmp_path
):
    from lm_eval_longmem.babilong.data import Haystacks, babilong_options

    metadata = _babilong(long_books, babilong_lengths="[128k]", babilong_samples=2, babilong_retrieval="sentences")
    run_lm_eval(
        hf_run_args(llama_128k_dir, "babilong", "--batch_size", "2", "--log_samples", "--metadata",
            json.dumps(metadata)),
        tmp_path, env=THREADS,
    )  # fmt: skip
    results = read_results(tmp_path)
    metrics = results["results"]["babilong"]
    assert metrics["skipped,none"] == 0 and results["n-samples"]["babilong"]["effective"] == 2
    facts = results["configs"]["babilong"]["longmem"]
    assert (facts["condition"], facts["retrieval"]) == ("retrieval", "sentences top-5 bm25")
    haystacks = Haystacks(babilong_options(metadata))
    recalls = []
    for record in read_samples(tmp_path, "babilong"):
        doc, prompt = record["doc"], record["arguments"]["gen_args_0"]["arg_0"]
        haystack = haystacks(doc)
        assert (
            len(smollm2_tokenizer(haystack, add_special_tokens=False)["input_ids"]) > 130_000
        )  # the 128k haystack was searched
        assert len(doc["retrieved"]) == 5 and all(piece in haystack for piece in doc["retrieved"])
        assert _context(prompt) == " ".join(doc["retrieved"]) and len(smollm2_tokenizer(prompt)["input_ids"]) < 4096
        found = all(haystack[start:end] in _context(prompt) for start, end in doc["supporting_spans"])
        assert doc["retrieval_recall"] == float(found)
        recalls.append(doc["retrieval_recall"])
    assert metrics["retrieval_recall@qa1_131072,none"] == pytest.approx(sum(recalls) / 2)


def test_booksort_at_20000_words_sends_whole_excerpts_and_skips_what_does_not_fit(
    llama_128k_dir, embedded_books_dir, smollm2_tokenizer, tmp_path
):
    from lm_eval_longmem import task_manager

    data = build_booksort(embedded_books_dir / "hamlet.txt", tmp_path / "booksort", excerpt_lengths="20000")
    metadata = {"pretrained": str(llama_128k_dir), "booksort_data": str(data)}
    task = task_manager(metadata=metadata).load(["booksort_in_context_gen"])["tasks"]["booksort_in_context_gen"]
    needs = [
        len(smollm2_tokenizer(task.rendered_prompt(task.eval_docs[i]))["input_ids"]) + 8 for i in range(8)
    ]  # + max_gen_toks

    def considered(window: int) -> tuple[int, int]:
        """(kept, skipped) of the docs --limit 2 considers, in the dataset's order."""
        kept, skipped = 0, 0
        for need in needs:
            if kept == 2:
                break
            kept, skipped = (kept + 1, skipped) if need <= window else (kept, skipped + 1)
        return kept, skipped

    window = next(w for w in sorted(needs) if considered(w)[0] == 2 and considered(w)[1] >= 1)  # 20k-word prompts vary
    skipped = considered(window)[1]

    run_lm_eval(
        hf_run_args(llama_128k_dir, "booksort_in_context_gen", "--batch_size", "1", "--limit", "2", "--log_samples",
            "--metadata", json.dumps({"booksort_data": str(data)}), max_length=window),
        tmp_path, env=THREADS,
    )  # fmt: skip
    results = read_results(tmp_path)
    assert results["results"]["booksort_in_context_gen"]["skipped,none"] == skipped
    assert skip_reasons(results, "booksort_in_context_gen") == {
        "LE20000": {f"prompt + answer exceed the window ({window} tokens, the hf backend's max_length)": skipped}
    }
    words = (data / "books" / "hamlet.txt").read_text(encoding="utf-8").split()
    for record in read_samples(tmp_path, "booksort_in_context_gen"):
        doc, prompt = record["doc"], record["arguments"]["gen_args_0"]["arg_0"]
        assert len(smollm2_tokenizer(prompt)["input_ids"]) + 8 <= window  # nothing cut: it fits whole
        excerpt = words[doc["excerpt_start"] : doc["excerpt_start"] + 20000]
        assert " ".join(excerpt) in prompt  # all 20,000 words
        for key, position in (("segment_1", doc["seg1_pos"]), ("segment_2", doc["seg2_pos"])):
            assert " ".join(excerpt[position : position + 20]) == doc[key] and doc[key] in prompt

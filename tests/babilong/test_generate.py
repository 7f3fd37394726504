"""Fresh BABILong samples in the real SmolLM2 tokenizer: lengths, order, determinism, depth."""

from __future__ import annotations

import os

import pytest
from kit import hf_run_args

from lm_eval_longmem.babilong.babi import read_babi, task_file
from lm_eval_longmem.babilong.generate import (
    GenerationSpec,
    generated_context,
    generated_docs,
    prompt_tokens,
    split_sentences,
)
from lm_eval_longmem.babilong.prompts import build_prompt
from lm_eval_longmem.babilong.simulate import simulate
from lm_eval_longmem.common.errors import UsageError


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory, smollm2_dir):
    """A cache directory of this module's own, so every sample is built here (after the converted
    model was found in the normal cache)."""
    with pytest.MonkeyPatch.context() as patch:
        cache = tmp_path_factory.mktemp("cache")
        patch.setenv("LM_EVAL_LONGMEM_CACHE", str(cache))
        yield cache


def _generate(tokenizer, books, **spec):
    """Fresh samples with simulated facts (nothing from outside the package's dependencies)."""
    spec = {"samples": 6, **spec}
    return generated_docs(
        GenerationSpec(**spec), facts="simulated", babi_dir=None, corpus=str(books), tokenizer=tokenizer
    )


def _text(row, books):
    """The haystack of a generated row, rebuilt from what it records (rows do not hold it)."""
    return generated_context(row, str(books))


def _facts(qa, row, samples=6, seed=0):
    """The simulated bAbI sample a generated row was built from."""
    return simulate(qa, samples, seed)[row["sample_id"]]


@pytest.mark.slow
@pytest.mark.parametrize("qa", ["qa1", "qa2"])
@pytest.mark.parametrize("length", [0, 1024, 4096])
def test_prompt_lengths_hit_the_target_and_never_exceed_it(smollm2_tokenizer, books, fresh_cache, qa, length):
    rows = _generate(smollm2_tokenizer, books, qa=qa, length=length)
    assert len(rows) == 6
    for row in rows:
        assert not row["skip_reason"]
        measured = prompt_tokens(smollm2_tokenizer, build_prompt(qa, _text(row, books), row["question"]))
        assert measured == row["prompt_tokens"]  # the count made without tokenizing the prompt is exact
        if length:
            target = length - 20
            assert target - 3 <= measured <= target, (length, measured)
        else:
            assert measured < 1024  # facts only


def test_facts_appear_in_story_order_and_question_is_the_babi_one(smollm2_tokenizer, books, fresh_cache):
    for row in _generate(smollm2_tokenizer, books, qa="qa2", length=4096):
        sample = _facts("qa2", row)
        assert (row["question"], row["target"]) == (sample.question, sample.answer)
        position = 0
        for fact in sample.facts:
            found = _text(row, books).find(fact, position)
            assert found >= position, f"fact {fact!r} missing or out of order"
            position = found + len(fact)
        depths = row["fact_depths"]
        assert depths == sorted(depths) and len(depths) == len(sample.facts)


def test_same_seed_gives_identical_samples_from_scratch(smollm2_tokenizer, books, tmp_path, monkeypatch, smollm2_dir):
    runs = []
    for name in ("a", "b"):
        monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path / name))
        runs.append(_generate(smollm2_tokenizer, books, qa="qa1", length=1024, seed=7))
    assert runs[0] == runs[1]
    other = _generate(smollm2_tokenizer, books, qa="qa1", length=1024, seed=8)
    assert [_text(r, books) for r in other] != [_text(r, books) for r in runs[0]]
    assert os.listdir(tmp_path / "a")  # it was cached


def test_the_same_questions_are_used_at_every_length(smollm2_tokenizer, books, fresh_cache):
    ids = [[r["sample_id"] for r in _generate(smollm2_tokenizer, books, qa="qa1", length=n)] for n in (0, 1024)]
    assert ids[0] == ids[1]


@pytest.mark.slow
@pytest.mark.parametrize("band", [(0.0, 0.25), (0.5, 0.75)])
def test_depth_band_is_respected(smollm2_tokenizer, books, fresh_cache, band):
    low, high = band
    rows = _generate(smollm2_tokenizer, books, qa="qa1", length=4096, depth=band)
    for row in rows:
        assert not row["skip_reason"]
        context = _text(row, books)
        total = len(smollm2_tokenizer(context, add_special_tokens=False)["input_ids"])
        babi = _facts("qa1", row)
        position = 0
        for fact in babi.facts:
            start = context.find(fact, position)
            end = start + len(fact)
            before = len(smollm2_tokenizer(context[:start], add_special_tokens=False)["input_ids"])
            through = len(smollm2_tokenizer(context[:end], add_special_tokens=False)["input_ids"])
            # a token or two of slack for merges at the cut points
            assert before >= low * total - 2 and through <= high * total + 2, (fact, before, through, total)
            position = end


def test_prompt_too_long_for_the_length_is_skipped_and_counted(smollm2_tokenizer, books, fresh_cache):
    rows = _generate(smollm2_tokenizer, books, qa="qa3", length=512, samples=10)
    skipped = [r for r in rows if r["skip_reason"]]
    assert skipped, "qa3 stories are long: some cannot fit in 512 tokens"
    assert all(r["prompt_tokens"] == 0 and r["context_sha256"] == "" and _text(r, books) == "" for r in skipped)
    assert all(r["prompt_tokens"] <= 512 - 20 for r in rows if not r["skip_reason"])


def test_corpus_too_short_is_one_line_naming_corpus_tokens_and_fix(smollm2_tokenizer, tmp_path, fresh_cache):
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "a.txt").write_text("One short sentence. And another one.")
    with pytest.raises(UsageError) as raised:
        _generate(smollm2_tokenizer, tiny, qa="qa1", length=4096)
    message = str(raised.value)
    assert "\n" not in message and f"babilong_corpus={tiny} has 8 tokens of text" in message, message
    assert "fewer than the 3," in message and "one 4k BABILong sample needs" in message, (
        message
    )  # ~3,5xx tokens of background
    assert "point --metadata babilong_corpus at more books" in message and "choose shorter babilong_lengths" in message


@pytest.mark.slow
def test_corpus_too_short_through_lm_eval_is_one_line_without_traceback(tiny_llama_dir, tmp_path):
    """It used to end in a 20-frame ValueError traceback."""
    import json

    from kit import run_lm_eval

    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "a.txt").write_text("One short sentence. And another one.")
    metadata = {"babilong_source": "generate", "babilong_facts": "simulated", "babilong_corpus": str(tiny),
                "babilong_lengths": "[1k]", "babilong_tasks": "qa1", "babilong_samples": 1}  # fmt: skip
    proc = run_lm_eval(
        hf_run_args(tiny_llama_dir, "babilong", "--metadata", json.dumps(metadata)),
        tmp_path, env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")}, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"lm-eval-longmem: error: babilong_corpus={tiny} has 37 tokens of text, fewer than the "), (
        last
    )  # one per character
    assert "one 1k BABILong sample needs: point --metadata babilong_corpus at more books" in last, last


def test_sentence_splitting_joins_wrapped_lines():
    text = "It was a dark\nnight. The wind\nhowled.\n\nA new paragraph starts here. Mr. Smith left."
    assert split_sentences(text) == [
        "It was a dark night.",
        "The wind howled.",
        "A new paragraph starts here.",
        "Mr. Smith left.",
    ]


def test_babi_file_facts_give_the_published_questions(smollm2_tokenizer, shared_data, books, fresh_cache):
    """With `facts="babi"`, the questions and answers are the published test file's."""
    babi = read_babi(task_file(shared_data / "babi" / "en", "qa2"))
    spec = GenerationSpec(qa="qa2", length=1024, samples=4)
    rows = generated_docs(
        spec, facts="babi", babi_dir=shared_data / "babi" / "en", corpus=str(books), tokenizer=smollm2_tokenizer
    )
    for row in rows:
        sample = babi[row["sample_id"]]
        assert (row["question"], row["target"]) == (sample.question, sample.answer)
        assert all(fact in _text(row, books) for fact in sample.facts)


def test_a_truncated_samples_cache_is_rebuilt_with_one_log_line(tiny_llama_dir, tmp_path, monkeypatch, caplog):
    """A generated-samples entry with a line deleted must not yield fewer samples (it is rebuilt, and says so)."""
    from transformers import AutoTokenizer

    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    spec = GenerationSpec(qa="qa1", length=0, samples=2)
    first = generated_docs(spec, facts="simulated", babi_dir=None, corpus=None, tokenizer=tok)
    (entry,) = (tmp_path / "babilong-generated").glob("*/*.jsonl")
    entry.write_text(entry.read_text().splitlines(keepends=True)[0])
    with caplog.at_level("WARNING"):
        again = generated_docs(spec, facts="simulated", babi_dir=None, corpus=None, tokenizer=tok)
    assert len(first) == 2 and again == first
    lines = [r.getMessage() for r in caplog.records if r.levelno >= 30]
    assert len(lines) == 1 and str(entry) in lines[0] and "rebuilding" in lines[0], lines

"""Data builder: grid, options, S/I sampling (disjoint, seeded), exact sequence layout, skips."""

import numpy as np
import pytest
from transformers import AutoTokenizer

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.forgetting_curve.data import (
    Spans,
    build_dataset,
    build_sweep,
    length_grid,
    position_limit,
    resolve_lengths,
    sample_spans,
    separator_id,
    sequences,
    sweep_options,
)


@pytest.fixture(scope="module")
def book(embedded_books_dir):
    return embedded_books_dir / "macbeth.txt"  # a short play (18k words)


def test_default_grid_is_the_papers():
    assert length_grid(8192) == list(range(256, 8193, 256))  # l/n, 2l/n, ..., l with n = 32
    assert length_grid(2048, 8) == [256, 512, 768, 1024, 1280, 1536, 1792, 2048]
    assert length_grid(100, 3) == [33, 66, 100]
    assert length_grid(4, 32) == [2, 3, 4]  # duplicates and L < 2 dropped


def test_lengths_come_from_options_or_the_model():
    explicit = sweep_options({"forgetting_curve_lengths": "1k,512"})
    assert resolve_lengths(explicit, {}) == ([512, 1024], None)
    grid = sweep_options({"forgetting_curve_claimed_length": "4k", "forgetting_curve_points": 4})
    assert resolve_lengths(grid, {}) == ([1024, 2048, 3072, 4096], 4096)
    from_model = sweep_options({"forgetting_curve_points": 2})
    assert resolve_lengths(from_model, {"max_length": 1000}) == ([500, 1000], 1000)
    with pytest.raises(ValueError, match="forgetting_curve_claimed_length"):
        resolve_lengths(from_model, {})


@pytest.mark.parametrize(
    "metadata,match",
    [
        (
            {"forgetting_curve_points": 0},
            "forgetting_curve_points=0: expected a whole number >= 1; e.g. forgetting_curve_points=16",
        ),
        ({"forgetting_curve_samples": "ten"}, "forgetting_curve_samples='ten': expected a whole number"),
        ({"forgetting_curve_seed": "abc"}, "forgetting_curve_seed='abc': expected a whole number >= 0; e.g."),
        ({"forgetting_curve_lengths": "4q"}, "unknown length spec"),
        ({"forgetting_curve_lengths": "1,8"}, "at least 2 tokens"),
        ({"forgetting_curve_beyond_window": "maybe"}, "true or false"),
        ({"forgetting_curve_lenghts": "1k"}, "no such option; did you mean forgetting_curve_lengths"),
    ],
)
def test_bad_options_name_the_key_and_an_example(metadata, match):
    with pytest.raises(UsageError, match=match):
        sweep_options(metadata)


@pytest.mark.parametrize("n_tokens,length", [(10_000, 100), (200, 100), (201, 100), (299, 100), (5, 2)])
def test_spans_are_disjoint_and_inside_the_stream(n_tokens, length):
    for k in range(200):
        s, i = sample_spans(n_tokens, length, k, seed=7)
        assert 0 <= s <= n_tokens - length and 0 <= i <= n_tokens - length
        assert i + length <= s or s + length <= i, (s, i)


def test_spans_cover_both_sides_of_s():
    spans = [sample_spans(1000, 100, k, seed=0) for k in range(300)]
    assert any(i < s for s, i in spans) and any(i > s for s, i in spans)


def test_sampling_is_deterministic_and_local():
    first = [sample_spans(50_000, 512, k, seed=1) for k in range(5)]
    assert first == [sample_spans(50_000, 512, k, seed=1) for k in range(5)]
    assert first != [sample_spans(50_000, 512, k, seed=2) for k in range(5)]
    # Each (seed, length, sample) has its own RNG: asking for sample 3 alone gives the same span.
    assert sample_spans(50_000, 512, 3, seed=1) == first[3]
    # Pinned values: the same seed must give the same samples on every machine and version.
    assert [tuple(sample_spans(50_000, 512, k, seed=0)) for k in range(3)] == [
        (36716, 44668),
        (24176, 11640),
        (29047, 758),
    ]


def test_corpus_too_short_is_a_clear_error():
    with pytest.raises(ValueError, match="fewer than the 200 that length 100 needs"):
        sample_spans(199, 100, 0, seed=0)


def test_sequence_layout_is_exact():
    stream = np.arange(1000, 2000, dtype=np.int32)
    pair = sequences(stream, 7, 10, Spans(s_start=100, i_start=500))
    s = list(range(1100, 1110))
    i = list(range(1500, 1510))
    (copy_ctx, copy_cont), (lm_ctx, lm_cont) = pair.copy, pair.lm
    assert list(copy_ctx) + list(copy_cont) == [7, *s, 7, *s]  # [bos] S [bos] S
    assert list(lm_ctx) + list(lm_cont) == [7, *i, 7, *s]  # [bos] I [bos] S
    assert list(copy_cont) == list(lm_cont) == s[5:]  # only the later half of the second S is scored
    assert len(copy_ctx) + len(copy_cont) == 2 * 10 + 2
    odd = sequences(stream, 7, 11, Spans(0, 20))
    assert len(odd.copy[1]) == 6 and len(odd.copy[0]) == 1 + 11 + 1 + 5  # 11 // 2 = 5 cue tokens, 6 scored


def test_separator_is_bos_else_eos_else_an_error(tiny_llama_dir):
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    assert separator_id(tok) == tok.bos_token_id
    assert separator_id(tok, "</s>") == tok.eos_token_id and separator_id(tok, "3") == 3
    with pytest.raises(ValueError, match="not a single token"):
        separator_id(tok, "not-a-token")
    tok.bos_token = None
    assert separator_id(tok) == tok.eos_token_id
    tok.eos_token = None
    with pytest.raises(ValueError, match="forgetting_curve_separator"):
        separator_id(tok)


def test_the_cards_separator_example_is_a_token_of_smollm2_and_ids_outside_the_vocabulary_are_refused(
    smollm2_dir, tiny_llama_dir
):
    """`<|endoftext|>` is SmolLM2's id 0, which it also uses as its unknown token, and was
    refused; `99999` was accepted and failed once the model ran, with a traceback."""
    from lm_eval_longmem.forgetting_curve.data import build_sweep
    from lm_eval_longmem.forgetting_curve.options import SweepOptions

    example = next(
        f.metadata["lm_eval_longmem"].example
        for f in SweepOptions.__dataclass_fields__.values()
        if f.name == "separator"
    )
    smollm2 = AutoTokenizer.from_pretrained(smollm2_dir)
    assert example == "<|endoftext|>" and smollm2.unk_token_id == 0
    assert separator_id(smollm2, example) == 0
    with pytest.raises(
        UsageError, match=r"separator=99999: not a token id of this tokenizer \(its ids run from 0 to 49151\)"
    ):
        separator_id(smollm2, "99999")
    metadata = {
        "pretrained": str(tiny_llama_dir),
        "forgetting_curve_lengths": "16",
        "forgetting_curve_separator": 99999,
    }
    with pytest.raises(
        UsageError, match=r"^--metadata forgetting_curve_separator=99999: not a token id .* from 0 to 100\)"
    ):
        build_sweep(metadata)  # the data builder: before any request reaches the model


def test_position_limit(tiny_llama_dir, tmp_path):
    from transformers import GPT2Config

    options = sweep_options({})
    assert position_limit(options, {"pretrained": str(tiny_llama_dir)}, 2048)[0] is None  # rotary: no table
    GPT2Config(
        n_positions=128, n_embd=16, n_layer=1, n_head=2, vocab_size=300, bos_token_id=0, eos_token_id=0
    ).save_pretrained(tmp_path)
    assert position_limit(options, {"pretrained": str(tmp_path)}, 128)[0] == 128  # learned position table
    assert position_limit(options, {"max_model_len": 4096}, 2048)[0] == 4094  # vLLM: 2L+2 tokens <= max_model_len - 1
    assert position_limit(sweep_options({"forgetting_curve_max_tokens": "1k"}), {}, None)[0] == 1024
    strict = sweep_options({"forgetting_curve_beyond_window": "false"})
    assert position_limit(strict, {"pretrained": str(tiny_llama_dir)}, 2048)[0] == 2048


def test_sweep_interleaves_lengths_and_keeps_every_length(tiny_llama_dir, book):
    metadata = {
        "pretrained": str(tiny_llama_dir),
        "forgetting_curve_corpus": str(book),
        "forgetting_curve_lengths": [16, 32, 64, 128],
        "forgetting_curve_samples": 3,
        "forgetting_curve_max_tokens": 130,
    }
    sweep = build_sweep(metadata)
    assert sweep.lengths == [16, 32, 64, 128]
    assert [sorted((d["length"], d["sample"]) for d in sweep.docs[k * 4 : k * 4 + 4]) for k in range(3)] == [
        [(16, k), (32, k), (64, k), (128, k)] for k in range(3)
    ]  # sample k of every length, then sample k+1: --limit 4 covers the curve
    assert all(d["scored"] == d["length"] // 2 for d in sweep.docs)
    assert all(d["s_start"] == -1 for d in sweep.docs if d["length"] == 128)  # never runs: needs no span
    again = build_dataset(**metadata)["test"]
    assert again.to_list() == sweep.docs  # same seed, same docs


def test_a_length_far_past_the_corpus_but_beyond_the_limit_is_no_error(tiny_llama_dir, book):
    sweep = build_sweep(
        {
            "pretrained": str(tiny_llama_dir),
            "forgetting_curve_corpus": str(book),
            "forgetting_curve_lengths": "64,100000",
            "forgetting_curve_max_tokens": 1000,
        }
    )
    assert {d["length"] for d in sweep.docs} == {64, 100000}


def test_default_corpus_offline_says_how_to_use_local_text(tiny_llama_dir):
    with pytest.raises(UsageError, match="forgetting_curve_corpus=/path/to/books"):
        build_sweep({"pretrained": str(tiny_llama_dir), "forgetting_curve_lengths": "64"})

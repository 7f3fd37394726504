"""Exact token counts without tokenizing again: which tokenizers add up over joins, and counts kept by content."""

from __future__ import annotations

import logging

import numpy as np

from lm_eval_longmem.common import cache
from lm_eval_longmem.common.token_counts import TokenCounts, join_additive


def _word_level(pre_tokenizer=None, normalizer=None):
    """A small fast tokenizer over a few words (any other text maps to <unk>), with the given pipeline pieces."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "a": 1, "b": 2, " a": 3, " b": 4, "a ": 5, "b ": 6, " ": 7}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    if pre_tokenizer is not None:
        backend.pre_tokenizer = pre_tokenizer
    if normalizer is not None:
        backend.normalizer = normalizer
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


def test_byte_level_and_character_tokenizers_add_up(smollm2_tokenizer, tiny_tokenizer):
    assert join_additive(smollm2_tokenizer)  # GPT-2 style byte-level BPE
    assert join_additive(tiny_tokenizer)  # one token per character


def test_tokenizers_whose_words_span_a_join_do_not(smollm2_tokenizer):
    from tokenizers import Regex, normalizers, pre_tokenizers

    trailing_space = pre_tokenizers.Split(
        Regex(r"[^ ]+ ?| "), behavior="isolated"
    )  # "a b" -> "a ", "b": the space joins what precedes it
    assert not join_additive(_word_level(trailing_space))
    assert not join_additive(_word_level(None))  # no pre-tokenizer: the model may merge across spaces
    marker = normalizers.Sequence(
        [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
    )  # SentencePiece style
    assert not join_additive(_word_level(pre_tokenizers.Metaspace(), marker))
    assert join_additive(_word_level(pre_tokenizers.WhitespaceSplit())) and not join_additive(
        object()
    )  # a slow tokenizer


def test_counts_of_real_sentences_add_up_to_the_whole(smollm2_tokenizer, embedded_books_dir):
    """The claim `join_additive` makes, on real text: 300 random runs of a play's sentences (and bAbI-like facts)."""
    from lm_eval_longmem.babilong.generate import split_sentences

    sentences = split_sentences((embedded_books_dir / "hamlet.txt").read_text(encoding="utf-8"))
    sentences += [
        "Mary went to the kitchen.",
        "John picked up the apple there.",
        "\u201cWhere is it?\u201d she said\u2026",
        "42!",
    ]
    rng = np.random.default_rng(0)
    tok = smollm2_tokenizer
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    for _ in range(300):
        pieces = [sentences[i] for i in rng.integers(0, len(sentences), size=int(rng.integers(2, 30)))]
        assert count(" ".join(pieces)) == count(pieces[0]) + sum(count(" " + p) for p in pieces[1:]), pieces


class _Counting:
    """A tokenizer that counts the texts it was asked to tokenize."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0
        self.backend_tokenizer = tokenizer.backend_tokenizer
        self.special_tokens_map, self.bos_token_id, self.eos_token_id = (
            tokenizer.special_tokens_map, tokenizer.bos_token_id, tokenizer.eos_token_id,
        )  # fmt: skip

    def __call__(self, text):
        self.calls += 1
        return self.tokenizer(text)


def test_counts_are_made_once_then_read_by_content(tiny_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    texts = ["The first prompt.", "A second, longer prompt." * 50]
    first = TokenCounts(_Counting(tiny_tokenizer))
    counts = [first.count(t) for t in texts + texts]
    assert counts == [len(tiny_tokenizer(t)["input_ids"]) for t in texts + texts]
    assert first.tokenizer.calls == 2 and first.counted == 2  # each text once
    first.save()
    later = TokenCounts(_Counting(tiny_tokenizer))  # another run
    assert [later.count(t) for t in texts] == counts[:2] and later.tokenizer.calls == 0 and later.read == 2
    assert later.count(texts[0] + " ") == counts[0] + 1 and later.tokenizer.calls == 1  # other content, counted


def test_a_damaged_count_table_is_dropped_and_counted_again(tiny_tokenizer, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    store = TokenCounts(tiny_tokenizer)
    store.count("Some prompt.")
    store.save()
    (table,) = [
        p for p in (tmp_path / TokenCounts.NAMESPACE).glob("*.json") if not p.name.endswith(cache.MANIFEST_SUFFIX)
    ]
    table.write_text(table.read_text().replace(": 13", ": 3"))  # a wrong count must never be read
    with caplog.at_level(logging.WARNING):
        again = TokenCounts(_Counting(tiny_tokenizer))
    assert again.known == {} and any(str(table) in r.getMessage() and "anew" in r.getMessage() for r in caplog.records)
    assert again.count("Some prompt.") == 13 and again.tokenizer.calls == 1


def test_tables_merge_what_several_writers_add(tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    cache.merge_table("t", "x", {"a": 1})
    cache.merge_table("t", "x", {"b": 2})
    cache.merge_table("t", "x", {})
    assert cache.read_table("t", "x") == {"a": 1, "b": 2} and cache.read_table("t", "missing") == {}
    assert cache.verify(tmp_path / "t" / "x.json") == ""

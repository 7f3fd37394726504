"""BABILong's retrieval condition: splitting, retrievers, ranking, recall, fact positions, option errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from kit import babilong_simulated as simulated

from lm_eval_longmem.babilong import retrieval
from lm_eval_longmem.babilong.babi import BabiSample
from lm_eval_longmem.babilong.data import Haystacks, babilong_options, load_docs
from lm_eval_longmem.babilong.generate import GenerationSpec, generated_context, generated_docs
from lm_eval_longmem.babilong.options import BabilongOptions
from lm_eval_longmem.babilong.retrieval import (
    Span,
    chunk_spans,
    covered,
    locate_supporting,
    ranked,
    recall,
    sentence_spans,
)
from lm_eval_longmem.babilong.simulate import simulate
from lm_eval_longmem.common.errors import UsageError


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path / "cache"))


def haystack(doc, metadata) -> str:
    """A doc's haystack, rebuilt as the task does (docs do not hold it)."""
    return Haystacks(babilong_options(metadata))(doc)


def texts(text: str, spans) -> list[str]:
    return [text[s:e] for s, e in spans]


# --- splitting ----------------------------------------------------------------------------------


def test_sentences_end_at_stops_closing_quotes_and_blank_lines():
    text = 'He said "Go home." Then he left!  Is it so?\n\nCHAPTER II\n\nMary went to the kitchen. done'
    assert texts(text, sentence_spans(text)) == [
        'He said "Go home."', "Then he left!", "Is it so?", "CHAPTER II", "Mary went to the kitchen.", "done",
    ]  # fmt: skip
    assert sentence_spans("   ") == []


def test_a_fact_after_an_unpunctuated_heading_is_inside_one_sentence():
    text = "CHAPTER I Mary went to the kitchen. The sun rose."
    spans = sentence_spans(text)
    fact = [text.index("Mary"), text.index("kitchen.") + len("kitchen.")]
    assert texts(text, spans)[0] == "CHAPTER I Mary went to the kitchen."
    assert recall([fact], spans[:1]) == 1.0 and recall([fact], spans[1:]) == 0.0


def test_chunks_tile_the_text_with_at_most_n_tokens_each(tiny_tokenizer):
    text = "Mary went to the kitchen. " * 20 + "The end"  # the tiny tokenizer: one token per character
    spans = chunk_spans(text, tiny_tokenizer, 64)
    assert spans[0].start == 0 and spans[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(spans, spans[1:]))  # no gap, no overlap
    assert all(len(tiny_tokenizer(text[s:e], add_special_tokens=False)["input_ids"]) <= 64 for s, e in spans)
    assert len(spans) == -(-len(text) // 64)


def test_chunks_need_character_offsets():
    class Slow:
        def __call__(self, text, **kwargs):
            raise NotImplementedError("return_offset_mapping is not available when using Python tokenizers")

    with pytest.raises(UsageError, match="babilong_retrieval=sentences"):
        chunk_spans("Some text.", Slow(), 8)


# --- recall -------------------------------------------------------------------------------------


def test_a_fact_split_between_two_chunks_needs_both():
    fact = [10, 30]
    assert covered(fact, [Span(0, 20), Span(20, 40)])
    assert not covered(fact, [Span(0, 20)]) and not covered(fact, [Span(20, 40)])
    assert not covered(fact, [Span(0, 19), Span(20, 40)])  # one character missing
    assert covered(fact, [Span(20, 40), Span(0, 25)])  # any order, overlapping


def test_recall_is_all_supporting_facts_or_nothing():
    pieces = [Span(0, 10), Span(50, 60)]
    assert recall([[0, 10], [50, 60]], pieces) == 1.0
    assert recall([[0, 10], [20, 30]], pieces) == 0.0  # one of two facts missed: 0, the paper's binary metric
    assert recall([], pieces) is None  # facts unknown: no recall


# --- ranking and retrievers ----------------------------------------------------------------------


def test_ranking_by_score_or_text_order_ties_earlier_first():
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.0])
    assert ranked(scores, 3, "score") == [1, 3, 2]
    assert ranked(scores, 3, "text") == [1, 2, 3]
    assert ranked(scores, 10, "score") == [1, 3, 2, 0, 4]  # k beyond the pieces: all of them


QA2_STORY = [
    "Mary got the milk there.",
    "John went to the office.",
    "The weather was fine that day.",
    "Mary travelled to the hallway.",
    "Daniel moved to the garden.",
]


def test_bm25_finds_the_fact_that_names_the_object_but_not_the_move():
    """The paper's qa2 failure: 'Where is the milk?' retrieves the pick-up, not where Mary went."""
    scores = retrieval.Retriever("bm25").scores(QA2_STORY, "Where is the milk?")
    best = ranked(scores, 1, "score")
    assert best == [0]
    text = " ".join(QA2_STORY)
    spans = sentence_spans(text)
    support = [[text.index(f), text.index(f) + len(f)] for f in (QA2_STORY[0], QA2_STORY[3])]
    assert recall(support, [spans[i] for i in best]) == 0.0
    assert recall(support, spans) == 1.0


@pytest.mark.slow
def test_embedded_minilm_ranks_the_persons_sentence_first():
    retriever = retrieval.Retriever("minilm")
    pieces = ["The weather was fine that day.", "Sandra journeyed to the bathroom.", "Ships sailed to the west."]
    scores = retriever.scores(pieces, "Where is Sandra?")
    assert ranked(scores, 1, "score") == [1]
    assert scores.shape == (3,) and np.all(np.abs(scores) <= 1.0 + 1e-5)  # cosine similarities
    assert len(retriever.fingerprint) == 64  # the model folder's content digest


@pytest.mark.parametrize("module", ["bm25s", "sentence_transformers"])
def test_a_missing_extra_is_one_line_naming_it(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    retrieval.dense_model.cache_clear()
    with pytest.raises(UsageError) as err:
        retrieval.Retriever("bm25" if module == "bm25s" else "minilm")
    message = str(err.value)
    assert "\n" not in message and module in message and 'pip install "lm-eval-longmem[retrieval]"' in message
    retrieval.dense_model.cache_clear()


def test_an_unloadable_dense_retriever_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="babilong_retriever"):
        retrieval.Retriever(str(tmp_path))  # an empty folder is no model


# --- fact positions ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("length", [0, 2048])
def test_generated_docs_know_where_their_supporting_facts_are(tiny_tokenizer, books, fresh_cache, length):
    spec = GenerationSpec(qa="qa2", length=length, samples=4)
    rows = generated_docs(spec, facts="simulated", babi_dir=None, corpus=str(books), tokenizer=tiny_tokenizer)
    stories = simulate("qa2", 4, 0)
    checked = 0
    for row in rows:
        if row["skip_reason"]:
            continue
        sample = stories[row["sample_id"]]
        assert texts(generated_context(row, str(books)), row["supporting_spans"]) == [
            sample.facts[i] for i in sample.supporting
        ]
        checked += 1
    assert checked >= 2


def test_generated_docs_from_babi_files_carry_spans_too(tiny_tokenizer, tmp_path, fresh_cache):
    babi = tmp_path / "en"
    babi.mkdir()
    (babi / "qa1_single-supporting-fact_test.txt").write_text(
        "1 Mary moved to the bathroom.\n2 John went to the hallway.\n3 Where is Mary? \tbathroom\t1\n"
        "4 Daniel went back to the hallway.\n5 Mary went to the garden.\n6 Where is Mary? \tgarden\t5\n"
    )
    rows = generated_docs(
        GenerationSpec(qa="qa1", length=0, samples=2),
        facts="babi",
        babi_dir=babi,
        corpus=None,
        tokenizer=tiny_tokenizer,
    )
    assert [texts(generated_context(r, None), r["supporting_spans"]) for r in rows] == [
        ["Mary moved to the bathroom."],
        ["Mary went to the garden."],
    ]


def test_hub_facts_are_located_by_their_babi_question():
    story = ("Mary moved to the bathroom.", "John went to the hallway.", "Mary went to the garden.", "John left.")
    samples = [
        BabiSample(story[:2], "Where is Mary?", "bathroom", (0,), 0),
        BabiSample(story[:3], "Where is Mary?", "garden", (2,), 0),
        BabiSample(story[:4], "Where is John?", "hallway", (1,), 0),
        BabiSample(("Mary went to the garden.",), "Where is Mary?", "garden", (0,), 1),  # a shorter match elsewhere
    ]
    text = "It was late. Mary moved to the bathroom. A dog barked. John went to the hallway. Rain. Mary went to the garden. End."
    spans = locate_supporting(text, "Where is Mary?", "garden", samples)
    assert texts(text, spans) == ["Mary went to the garden."]
    assert spans[0][0] == text.index("Mary went to the garden.")
    assert locate_supporting(text, "Where is John?", "hallway", samples) == []  # its fact "John left." is absent


# --- the condition end to end in the data ----------------------------------------------------------


def test_retrieved_pieces_replace_the_context_with_recall(tiny_llama_dir, books, fresh_cache):
    base = {"pretrained": str(tiny_llama_dir)} | simulated(books, babilong_lengths="[0k,2k]", babilong_tasks="qa1")
    docs = load_docs(**base, babilong_retrieval="sentences", babilong_retrieval_k=2)["test"]
    ran = [d for d in docs if not d["skip_reason"]]
    assert {d["length_name"] for d in ran} == {"0k", "2k"}
    for doc in ran:
        text = haystack(doc, base)
        assert 1 <= len(doc["retrieved"]) <= 2 and all(piece in text for piece in doc["retrieved"])
        found = all(text[s:e] in " ".join(doc["retrieved"]) for s, e in doc["supporting_spans"])
        assert doc["retrieval_recall"] == float(found)
    plain = load_docs(**base)["test"]
    assert all(d["retrieved"] == [] and d["retrieval_recall"] is None for d in plain)
    assert [haystack(d, base) for d in plain] == [haystack(d, base) for d in docs]  # the haystack itself is unchanged


def test_chunks_in_text_order(tiny_llama_dir, books, fresh_cache):
    base = {"pretrained": str(tiny_llama_dir)} | simulated(books, babilong_lengths="[2k]", babilong_tasks="qa1")
    docs = load_docs(**base, babilong_retrieval="chunks", babilong_retrieval_chunk_tokens=100,
                     babilong_retrieval_k=3, babilong_retrieval_order="text")["test"]  # fmt: skip
    ran = [d for d in docs if not d["skip_reason"]]
    assert ran
    for doc in ran:
        positions = [haystack(doc, base).index(piece) for piece in doc["retrieved"]]
        assert positions == sorted(positions) and len(positions) == 3
        assert all(len(piece) <= 100 for piece in doc["retrieved"])  # one character per token


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"babilong_retrieval_k": 20}, "applies only to the retrieval condition"),
        ({"babilong_retriever": "minilm"}, "add babilong_retrieval=sentences"),
        ({"babilong_retrieval": "sentences", "babilong_retrieval_chunk_tokens": 256}, "retrieval=chunks"),
        ({"babilong_retrieval": "paragraphs"}, "expected one of none, sentences, chunks"),
        ({"babilong_retrieval": "sentences", "babilong_retrieval_k": 0}, "babilong_retrieval_k"),
        ({"babilong_retrieval": "sentences", "babilong_retrieval_order": "random"}, "expected one of score, text"),
        ({"babilong_retrival": "sentences"}, "did you mean babilong_retrieval"),
    ],
)
def test_option_errors(tiny_llama_dir, books, extra, match):
    with pytest.raises(UsageError, match=match):
        load_docs(pretrained=str(tiny_llama_dir), **simulated(books, babilong_lengths="0k"), **extra)


def test_setting_labels():
    assert not BabilongOptions().uses_retrieval
    rag_s = BabilongOptions(retrieval="sentences", retrieval_k=20)
    assert rag_s.uses_retrieval and retrieval.setting_label(rag_s) == "sentences top-20 bm25"
    rag_c = BabilongOptions(retrieval="chunks", retriever="/models/all-MiniLM-L6-v2/", retrieval_order="text")
    assert retrieval.setting_label(rag_c) == "chunks-512 top-5 all-MiniLM-L6-v2, text order"


def test_lengths_beyond_the_window_are_allowed_under_retrieval(tiny_llama_dir, books, fresh_cache):
    metadata = {"pretrained": str(tiny_llama_dir), "max_length": 512} | simulated(
        books, babilong_lengths="[1k]", babilong_tasks="qa1"
    )
    with pytest.raises(UsageError, match="window"):
        load_docs(**metadata)
    docs = load_docs(**metadata, babilong_retrieval="sentences")["test"]
    assert {d["length"] for d in docs} == {1024}


QA1_FILE = (
    "1 Mary moved to the bathroom.\n2 John went to the hallway.\n3 Where is Mary? \tbathroom\t1\n"
    "4 Daniel went back to the hallway.\n5 Mary went to the garden.\n6 Where is Mary? \tgarden\t5\n"
)


def test_hub_docs_get_recall_from_the_babi_files(monkeypatch, tiny_llama_dir, tmp_path, fresh_cache):
    import datasets

    from lm_eval_longmem.babilong import data

    babi = tmp_path / "en"
    babi.mkdir()
    (babi / "qa1_single-supporting-fact_test.txt").write_text(QA1_FILE)
    text = (
        "The ship sailed at dawn. Mary moved to the bathroom. The wind rose. John went to the hallway. "
        "Daniel went back to the hallway. It rained all day on the garden. Mary went to the garden. The end came."
    )
    rows = {
        "input": [text, text.replace("Mary went to the garden. ", "")],
        "question": ["Where is Mary?"] * 2,
        "target": ["garden", "garden"],
    }
    monkeypatch.setattr(data.datasets, "load_dataset", lambda path, name, split: datasets.Dataset.from_dict(rows))
    metadata = {
        "pretrained": str(tiny_llama_dir),
        "babilong_lengths": "[1k]",
        "babilong_tasks": "qa1",
        "babilong_retrieval": "sentences",
    }
    found, missing = load_docs(**metadata, babilong_babi_dir=str(babi), babilong_retrieval_k=2)["test"]
    assert texts(haystack(found, metadata), found["supporting_spans"]) == ["Mary went to the garden."]
    assert found["retrieval_recall"] == 1.0  # BM25 on "mary": the two sentences naming her
    assert missing["supporting_spans"] == [] and missing["retrieval_recall"] is None  # its story is not in the file
    unknown = load_docs(**metadata)["test"]  # without the bAbI files: no recall, the condition still runs
    assert [d["retrieval_recall"] for d in unknown] == [None, None] and all(d["retrieved"] for d in unknown)

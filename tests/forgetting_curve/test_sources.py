"""Sources of S and I (section 3.4): the default is today's sweep, `random` and other corpora pair with it."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import load_tokenizer
from lm_eval_longmem.forgetting_curve.data import (
    COPY,
    PREFIX_ROLE,
    build_sweep,
    pair_sequences,
    random_tokens,
    role_tokens,
    sweep_options,
    sweep_sources,
    vocabulary_ids,
)

BASELINE = Path(__file__).parent / "fixtures" / "default_sources_baseline.json"


@pytest.fixture(scope="module")
def book(embedded_books_dir):
    return embedded_books_dir / "macbeth.txt"


def _metadata(model, book, **extra):
    return {
        "pretrained": str(model),
        "forgetting_curve_corpus": str(book),
        "forgetting_curve_lengths": "16,32,64,128",
        "forgetting_curve_samples": 3,
        "forgetting_curve_max_tokens": 200,
        **extra,
    }


def _tokens(metadata, doc):
    """S and I of one doc, the way the task cuts or draws them."""
    sources = sweep_sources(sweep_options(metadata))
    streams = sources.streams(metadata)
    vocabulary = vocabulary_ids(load_tokenizer(metadata))
    return [role_tokens(doc, sources, role, streams[role], vocabulary) for role in (COPY, PREFIX_ROLE)]


def _digest(pair):
    return hashlib.sha256(json.dumps([int(t) for t in [*pair[0], *pair[1]]]).encode()).hexdigest()[:16]


@pytest.mark.parametrize("model", ["tiny", "smollm2"])
@pytest.mark.parametrize("seed", [0, 5])
def test_default_sources_give_the_docs_and_sequences_of_before(model, seed, request, embedded_books_dir):
    """Captured with the code before sources existed (commit 047afc2): docs and every token sent are unchanged."""
    case = json.loads(BASELINE.read_text())[f"{model}-seed{seed}"]
    pretrained = request.getfixturevalue("tiny_llama_dir" if model == "tiny" else "smollm2_dir")
    metadata = {**case["metadata"], "pretrained": str(pretrained)}
    metadata["forgetting_curve_corpus"] = str(embedded_books_dir / metadata["forgetting_curve_corpus"])
    built = build_sweep(metadata).docs
    # Since ranks are balanced (`common.order`) only the places of docs within a round of samples moved.
    assert [d["sample"] for d in built] == [d["sample"] for d in case["docs"]]
    docs = sorted(built, key=lambda d: (d["sample"], d["length"]))
    assert docs == case["docs"]
    for doc, expected in zip(docs, case["sequences"], strict=True):
        if doc["s_start"] < 0:
            assert expected is None
            continue
        pair = pair_sequences(*_tokens(metadata, doc), doc["separator_id"])
        assert [_digest(pair.copy), _digest(pair.lm)] == expected
    # Naming the corpus as both sources is the same run.
    explicit = {**metadata, "forgetting_curve_copy_source": metadata["forgetting_curve_corpus"]}
    explicit["forgetting_curve_prefix_source"] = metadata["forgetting_curve_corpus"]
    assert build_sweep(explicit).docs == built


def test_vocabulary_leaves_out_special_tokens(tiny_llama_dir, smollm2_dir):
    tiny = AutoTokenizer.from_pretrained(tiny_llama_dir)
    assert vocabulary_ids(tiny).tolist() == list(range(4, len(tiny)))  # <unk> <s> </s> <pad> are 0-3
    smol = AutoTokenizer.from_pretrained(smollm2_dir)
    ids = set(vocabulary_ids(smol).tolist())
    assert not ids & set(smol.all_special_ids) and smol.convert_tokens_to_ids("<|im_start|>") not in ids
    assert len(ids) > 0.99 * len(smol)


def test_a_random_prefix_keeps_every_copy_target(tiny_llama_dir, book):
    base = build_sweep(_metadata(tiny_llama_dir, book)).docs
    metadata = _metadata(tiny_llama_dir, book, forgetting_curve_prefix_source="RANDOM")
    docs = build_sweep(metadata).docs
    assert [d["s_start"] for d in docs] == [d["s_start"] for d in base]  # paired with the one-corpus run
    assert all(
        d["i_start"] == -1 and d["prefix_tokens"] == 0 and d["copy_tokens"] == base[0]["corpus_tokens"] for d in docs
    )
    running = [d for d in docs if d["s_start"] >= 0]
    prefixes = [_tokens(metadata, d)[1] for d in running]
    vocabulary = set(vocabulary_ids(AutoTokenizer.from_pretrained(tiny_llama_dir)).tolist())
    for doc, prefix in zip(running, prefixes):
        assert len(prefix) == doc["length"] and set(prefix.tolist()) <= vocabulary
        assert np.array_equal(prefix, _tokens(metadata, doc)[1])  # seeded: drawn again, the same
    assert len({p.tobytes() for p in prefixes}) == len(prefixes)  # every sample its own prefix


def test_random_tokens_are_uniform_over_the_vocabulary():
    vocabulary = np.arange(10, 107, dtype=np.int32)  # 97 ids
    draws = random_tokens(vocabulary, 20_000, sample=0, seed=0, role=PREFIX_ROLE)
    counts = np.bincount(draws - 10, minlength=97)
    # Each count is Binomial(20000, 1/97): mean 206, sd 14.3; 6 sd either side fails with p < 1e-6 over 97 ids.
    assert len(counts) == 97 and counts.min() > 206 - 6 * 14.3 and counts.max() < 206 + 6 * 14.3
    assert np.array_equal(draws, random_tokens(vocabulary, 20_000, sample=0, seed=0, role=PREFIX_ROLE))
    assert not np.array_equal(draws[:50], random_tokens(vocabulary, 20_000, sample=0, seed=0, role=COPY)[:50])


def test_a_random_copy_target_keeps_every_prefix(tiny_llama_dir, book):
    base = build_sweep(_metadata(tiny_llama_dir, book)).docs
    metadata = _metadata(tiny_llama_dir, book, forgetting_curve_copy_source="random")
    docs = build_sweep(metadata).docs
    assert [d["i_start"] for d in docs] == [d["i_start"] for d in base]
    assert all(d["s_start"] == -1 and d["copy_tokens"] == 0 for d in docs)


def test_both_random_draw_different_s_and_i(tiny_llama_dir, book):
    metadata = _metadata(
        tiny_llama_dir, book, forgetting_curve_copy_source="random", forgetting_curve_prefix_source="random"
    )
    doc = next(d for d in build_sweep(metadata).docs if d["length"] == 64)
    s, i = _tokens(metadata, doc)
    assert len(s) == len(i) == 64 and not np.array_equal(s, i)


def test_another_corpus_for_one_role(tiny_llama_dir, book, embedded_books_dir):
    other = embedded_books_dir / "hamlet.txt"
    base = build_sweep(_metadata(tiny_llama_dir, book)).docs
    metadata = _metadata(tiny_llama_dir, book, forgetting_curve_prefix_source=str(other))
    docs = build_sweep(metadata).docs
    assert [d["s_start"] for d in docs] == [d["s_start"] for d in base]
    n_other = docs[0]["prefix_tokens"]
    assert n_other > 0 and n_other != docs[0]["copy_tokens"]
    assert all(0 <= d["i_start"] <= n_other - d["length"] for d in docs if d["length"] < 128)
    text = other.read_text()
    doc = docs[1]
    _, prefix = _tokens(metadata, doc)
    decoded = AutoTokenizer.from_pretrained(tiny_llama_dir).decode(prefix.tolist())
    assert decoded in text  # I is a span of the other book (the character tokenizer is lossless)


def test_one_other_corpus_for_both_roles_keeps_them_disjoint(tiny_llama_dir, book, embedded_books_dir):
    other = str(embedded_books_dir / "hamlet.txt")
    both = build_sweep(
        _metadata(tiny_llama_dir, book, forgetting_curve_copy_source=other, forgetting_curve_prefix_source=other)
    ).docs
    alone = build_sweep(_metadata(tiny_llama_dir, other)).docs
    assert [(d["s_start"], d["i_start"]) for d in both] == [(d["s_start"], d["i_start"]) for d in alone]


def test_a_bad_source_names_its_key(tiny_llama_dir, book, tmp_path):
    with pytest.raises(UsageError, match=r"^--metadata forgetting_curve_prefix_source=.*missing.*neither a file"):
        build_sweep(_metadata(tiny_llama_dir, book, forgetting_curve_prefix_source=str(tmp_path / "missing")))
    short = tmp_path / "short.txt"
    short.write_text("too short for 128 tokens")
    with pytest.raises(
        UsageError, match="forgetting_curve_copy_source: the source has 24 tokens, fewer than length 32"
    ):
        build_sweep(_metadata(tiny_llama_dir, book, forgetting_curve_copy_source=str(short)))


@pytest.mark.slow
def test_runs_that_differ_in_the_prefix_share_the_copy_curve(tiny_llama_dir, book):
    """Through the harness: a random prefix changes only the LM requests; the copy requests and bits are the same."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_longmem.paths import task_configs_dir

    def run(**extra):
        metadata = {
            **_metadata(tiny_llama_dir, book),
            "forgetting_curve_lengths": "8,24",
            "forgetting_curve_samples": 2,
            **extra,
        }
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={tiny_llama_dir},dtype=float32",
            tasks=["forgetting_curve"],
            device="cpu",
            batch_size=2,
            log_samples=True,
            bootstrap_iters=0,
            task_manager=TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata),
        )
        return results["results"]["forgetting_curve"], results["samples"]["forgetting_curve"]

    (base, base_samples), (rand, rand_samples) = run(), run(forgetting_curve_prefix_source="random")
    for L in (8, 24):
        assert rand[f"copy_acc@{L},none"] == base[f"copy_acc@{L},none"]
    for one, other in zip(base_samples, rand_samples, strict=True):
        assert one["filtered_resps"][0] == other["filtered_resps"][0]  # copy: same bits, same log-probability
        (copy_one, lm_one), (copy_other, lm_other) = one["arguments"], other["arguments"]
        assert copy_one == copy_other and lm_one[1] == lm_other[1]  # same S; logged as digests of the token ids
        assert lm_one[0] != lm_other[0]  # LM context: I differs


# --- sources are compared as texts, not as option strings ----------------------------------------


def _docs(metadata):
    return [{k: v for k, v in d.items()} for d in build_sweep(metadata).docs]


@pytest.mark.parametrize("spelling", ["trailing_slash", "relative", "containing_folder"])
@pytest.mark.parametrize("role", ["forgetting_curve_prefix_source", "forgetting_curve_copy_source"])
def test_a_source_that_reads_the_corpus_texts_is_the_corpus(
    spelling, role, tiny_llama_dir, book, tmp_path, monkeypatch
):
    """`<corpus folder>/`, a relative path to it or a folder holding just its book: the plain run's docs, S and I
    disjoint (it was drawn with its own RNG and no disjointness check, so I could contain S)."""
    books = tmp_path / "books"
    books.mkdir()
    (books / book.name).write_bytes(book.read_bytes())
    corpus = str(books / book.name) if spelling == "containing_folder" else str(books)
    spelled = {"trailing_slash": f"{books}/", "relative": "books", "containing_folder": str(books)}[spelling]
    monkeypatch.chdir(tmp_path)
    plain = _docs(_metadata(tiny_llama_dir, corpus))
    named = _docs(_metadata(tiny_llama_dir, corpus, **{role: spelled}))
    assert named == plain and "corpus_tokens" in named[0]
    for doc in (d for d in named if d["s_start"] >= 0):  # (lengths beyond max_tokens never run and have no spans)
        s, i = doc["s_start"], doc["i_start"]
        assert s + doc["length"] <= i or i + doc["length"] <= s  # disjoint spans of one stream


def test_sources_that_share_a_text_but_differ_are_refused(tiny_llama_dir, book, embedded_books_dir, tmp_path):
    both = tmp_path / "both"
    both.mkdir()
    for name in (book.name, "hamlet.txt"):
        (both / name).write_bytes((embedded_books_dir / name).read_bytes())
    with pytest.raises(
        UsageError,
        match=r"forgetting_curve_corpus=.*forgetting_curve_prefix_source=.*both share 1 text\(s\) but are not the same source",
    ):
        build_sweep(_metadata(tiny_llama_dir, book, forgetting_curve_prefix_source=str(both)))
    # a source with no text in common with the corpus is still another source
    other = build_sweep(
        _metadata(tiny_llama_dir, book, forgetting_curve_prefix_source=str(embedded_books_dir / "hamlet.txt"))
    ).docs
    assert "prefix_tokens" in other[0]

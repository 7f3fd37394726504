"""`forgetting_curve_protocol=authors`: the authors' tool's sample construction, token for token.

The expected sequences are derived here, independently of `data.py`, from the procedure as the
authors' tool defines it (1azybug/ForgettingCurve, draw.py): the stream is the pieces tokenized one
by one with the tokenizer's default special tokens; Python's `random` is seeded once; per length of
the grid `np.linspace(8, last, points, dtype=int)` and per sample, S starts at `randint(0, N - 3L)`
and I is the stream's last L tokens; the sequences are `[1] I [1] S [2]` and `[1] S [1] S [2]`, ids 1
and 2 whatever the tokenizer, with the last ceil(L/2) tokens of the second S scored. Their random data
type draws L ids for S and then L for I with `randint(10, 31999)`.
"""

import json
import random

import numpy as np
import pytest
from transformers import AutoTokenizer

from lm_eval_longmem import task_manager
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.forgetting_curve import data
from lm_eval_longmem.forgetting_curve.data import authors_grid, build_sweep

BOOKS = {
    "a.txt": " ".join(["It was a bright cold day in April, and the clocks were striking thirteen."] * 5),
    "b.txt": " ".join(["Call me Ishmael. Some years ago, never mind how long precisely, I went to sea."] * 5),
}
"""Two small books (no surrounding whitespace and no Gutenberg header, so our reader returns them as written)."""


def their_sequences(pieces, tokenizer, lengths, samples, seed, *, random_copy=False, random_prefix=False):
    """The authors' procedure, written out: {(L, k): (LM sequence, copy sequence, scored count)}."""
    tokens = [t for piece in pieces for t in tokenizer(piece)["input_ids"]]  # default special tokens, piece by piece
    rng = random.Random(seed)  # their `random.seed(0)`, once for the whole run
    out = {}
    for L in lengths:
        for k in range(samples):
            if random_copy:
                s = [rng.randint(10, 31999) for _ in range(L)]
                i = [rng.randint(10, 31999) for _ in range(L)]
                if not random_prefix:
                    i = tokens[-L:]
            else:
                begin = rng.randint(0, len(tokens) - 3 * L)
                s, i = tokens[begin : begin + L], tokens[-L:]
            out[L, k] = ([1, *i, 1, *s, 2], [1, *s, 1, *s, 2], len(s[-L // 2 :]))
    return out


def our_sequences(metadata):
    """{(L, k): (LM sequence, copy sequence, scored count)} as the task sends them (context + scored continuation)."""
    task = task_manager(metadata=metadata, include_defaults=False).load(["forgetting_curve"])["tasks"][
        "forgetting_curve"
    ]
    out = {}
    for doc in task.eval_docs:
        (copy_context, copy_scored), (lm_context, lm_scored) = task.accuracy_requests(doc)
        assert list(copy_scored) == list(lm_scored)
        out[doc["length"], doc["sample"]] = (
            [*map(int, lm_context), *map(int, lm_scored)],
            [*map(int, copy_context), *map(int, copy_scored)],
            len(copy_scored),
        )
    return task, out


def assert_same(theirs, ours):
    """Ours are theirs without the final [eos] (id 2), which is never scored; the scored spans are equal."""
    assert ours.keys() == theirs.keys()
    for key, (lm, copy, scored) in theirs.items():
        assert lm[-1] == copy[-1] == 2
        assert ours[key] == (lm[:-1], copy[:-1], scored), key


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    folder = tmp_path_factory.mktemp("authors-books")
    for name, text in BOOKS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _metadata(model, books, **extra):
    return {
        "pretrained": str(model),
        "forgetting_curve_corpus": str(books),
        "forgetting_curve_protocol": "authors",
        "forgetting_curve_claimed_length": 100,
        "forgetting_curve_points": 4,
        "forgetting_curve_samples": 3,
        **extra,
    }


@pytest.mark.parametrize("seed", [0, 7])
def test_text_samples_are_built_as_the_authors_tool_builds_them(tiny_llama_dir, books, seed):
    """Local books: their API's stream (each text tokenized as given, with the BOS this tokenizer adds)."""
    metadata = _metadata(tiny_llama_dir, books, forgetting_curve_seed=seed)
    pieces = [BOOKS[name] for name in sorted(BOOKS)]
    theirs = their_sequences(pieces, AutoTokenizer.from_pretrained(tiny_llama_dir), [8, 38, 69, 100], 3, seed)
    task, ours = our_sequences(metadata)
    assert_same(theirs, ours)
    assert task.dump_config()["longmem"]["protocol"] == "authors"
    # The prefix is the same for every sample of a length: the stream's last L tokens.
    assert len({doc["i_start"] for doc in task.eval_docs if doc["length"] == 38}) == 1


def test_pg19_rows_put_each_title_and_a_newline_before_the_book(tiny_llama_dir, monkeypatch):
    """The default source (PG-19 test) as their script reads it: title + newline, text + newline, per book."""
    import datasets

    rows = {"short_book_title": ["The First Book", "The Second Book"], "text": list(BOOKS.values())}
    monkeypatch.setattr(data, "load_hub_dataset", lambda name, split, hint_default: datasets.Dataset.from_dict(rows))
    metadata = {**_metadata(tiny_llama_dir, None), "forgetting_curve_corpus": None}
    pieces = [piece for title, text in zip(*rows.values(), strict=True) for piece in (f"{title}\n", f"{text}\n")]
    theirs = their_sequences(pieces, AutoTokenizer.from_pretrained(tiny_llama_dir), [8, 38, 69, 100], 3, 0)
    _, ours = our_sequences(metadata)
    assert_same(theirs, ours)


@pytest.mark.parametrize("random_prefix", [True, False])
def test_random_samples_are_drawn_as_the_authors_tool_draws_them(smollm2_dir, books, random_prefix):
    """Their `random` data type: ids 10-31999 from the same global sequence, S first; I random or the stream's tail."""
    extra = {"forgetting_curve_copy_source": "random"}
    if random_prefix:
        extra["forgetting_curve_prefix_source"] = "random"
    metadata = _metadata(smollm2_dir, books, **extra)
    pieces = [BOOKS[name] for name in sorted(BOOKS)]
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    theirs = their_sequences(pieces, tokenizer, [8, 38, 69, 100], 3, 0, random_copy=True, random_prefix=random_prefix)
    _, ours = our_sequences(metadata)
    assert_same(theirs, ours)


def test_the_grid_is_the_one_of_their_llama3_result(shared_data):
    """Their Llama-3-8B file was run with --test_max_length 16000 and 32 points; it stops where the model ran out."""
    published = [
        row["length"] for row in json.loads((shared_data / "forgetting_curve" / "Meta-Llama-3-8B.json").read_text())
    ]
    grid = authors_grid(16000, 32)
    assert grid[: len(published)] == published and grid[-1] == 16000 and len(grid) == 32


@pytest.mark.parametrize(
    "last, points, expected",
    [(100, 6, [8, 13, 21, 36, 60, 100]), (20, 10, [8, 9, 10, 12, 13, 14, 16, 18, 20])],
)
def test_their_log_grid_is_equal_ratios_from_8_floored_repeats_dropped(last, points, expected):
    """Their `--granularity_type log`: 8 * (last / 8) ** (k / (points - 1)), floored; 8.86 and 8 both give 8, kept once."""
    assert authors_grid(last, points, "log") == expected


def test_a_log_grid_run_draws_its_samples_as_their_tool(tiny_llama_dir, books):
    """Their one random sequence runs over the log grid's lengths in order, as over the linear one."""
    metadata = _metadata(tiny_llama_dir, books, forgetting_curve_grid="log", forgetting_curve_points=6)
    pieces = [BOOKS[name] for name in sorted(BOOKS)]
    theirs = their_sequences(pieces, AutoTokenizer.from_pretrained(tiny_llama_dir), [8, 13, 21, 36, 60, 100], 3, 0)
    _, ours = our_sequences(metadata)
    assert_same(theirs, ours)


def test_the_log_grid_is_refused_under_ours(tiny_llama_dir, books):
    metadata = {**_metadata(tiny_llama_dir, books, forgetting_curve_grid="log"), "forgetting_curve_protocol": "ours"}
    with pytest.raises(UsageError, match="forgetting_curve_grid=log is the authors' tool's grid: add"):
        build_sweep(metadata)


def test_ours_stays_the_default(tiny_llama_dir, books):
    """Naming ours gives exactly the docs of a run that does not name a protocol."""
    plain = _metadata(tiny_llama_dir, books)
    del plain["forgetting_curve_protocol"]
    assert build_sweep({**plain, "forgetting_curve_protocol": "ours"}).docs == build_sweep(plain).docs
    assert build_sweep(plain).lengths == [25, 50, 75, 100]  # the paper's grid l/n .. l, not theirs


def test_an_explicit_separator_replaces_their_hard_coded_id(tiny_llama_dir, books):
    """The corrected authors' run: their construction with the tokenizer's own BOS (here id 1 too) or any token."""
    docs = build_sweep(_metadata(tiny_llama_dir, books, forgetting_curve_separator="3")).docs
    assert {doc["separator_id"] for doc in docs} == {3}
    assert {doc["separator_id"] for doc in build_sweep(_metadata(tiny_llama_dir, books)).docs} == {1}


@pytest.mark.parametrize(
    "extra, says",
    [
        ({"forgetting_curve_prefix_source": "random"}, "copy_source=random"),
        ({"forgetting_curve_copy_source": "random"}, "31999"),  # the tiny tokenizer has about 100 tokens
        ({"forgetting_curve_claimed_length": 10}, "repeats lengths"),
        ({"forgetting_curve_claimed_length": 2000, "forgetting_curve_points": 2}, "needs for length 2000"),
    ],
)
def test_what_their_tool_cannot_do_is_an_error_naming_the_fix(tiny_llama_dir, books, extra, says):
    with pytest.raises(UsageError, match=says):
        build_sweep(_metadata(tiny_llama_dir, books, **extra))


@pytest.mark.slow
def test_a_run_records_the_protocol_and_their_separator(tiny_llama_dir, books):
    """Through the harness: `configs.forgetting_curve.longmem.protocol` and the separator's source say it."""
    import lm_eval

    metadata = _metadata(tiny_llama_dir, books, forgetting_curve_points=2, forgetting_curve_samples=1)
    results = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={tiny_llama_dir},dtype=float32", tasks=["forgetting_curve"], device="cpu",
        batch_size=2, bootstrap_iters=0, task_manager=task_manager(metadata=metadata, include_defaults=False),
    )  # fmt: skip
    config = results["configs"]["forgetting_curve"]
    assert config["longmem"]["protocol"] == "authors"
    assert config["metadata"]["forgetting_curve_separator_used"]["source"] == "authors"
    assert config["metadata"]["forgetting_curve_separator_used"]["id"] == 1
    assert np.isfinite(results["results"]["forgetting_curve"]["copy_acc@100,none"])

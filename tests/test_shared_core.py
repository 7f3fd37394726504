"""The shared core through the real `lm_eval` command line: content-keyed caches, option errors, the window
warning, and the task cards' option tables.

Every run uses the tiny random model and a few docs; the request cache (`LM_HARNESS_CACHE_PATH`) and our
data cache (`LM_EVAL_LONGMEM_CACHE`) point at temporary folders, so no run sees another test's entries.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from kit import hf_run_args, read_results, read_samples, run_lm_eval

from lm_eval_longmem.babilong.options import PREFIX as BABILONG
from lm_eval_longmem.babilong.options import BabilongOptions
from lm_eval_longmem.booksort.build import BuildSpec, build, load_books, write_dataset
from lm_eval_longmem.booksort.options import PREFIX as BOOKSORT
from lm_eval_longmem.booksort.options import BooksortOptions
from lm_eval_longmem.common.cache import sha256_hex
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.options import parse_options
from lm_eval_longmem.forgetting_curve.options import PREFIX as FORGETTING_CURVE
from lm_eval_longmem.forgetting_curve.options import SweepOptions
from lm_eval_longmem.harness.cli import dict_flag_action


def _model_args(model: Path) -> str:
    # max_length: Book-SORT's 250-word excerpts need more than the tiny model's 2048-character config window
    return f"pretrained={model},dtype=float32,max_length=4096"


def _lm_eval(model: Path, tasks: str, metadata: dict, out: Path, *extra: str, check: bool = True):
    out.mkdir(parents=True, exist_ok=True)
    env = {
        "LM_HARNESS_CACHE_PATH": str(out.parent / "request-cache"),
        "LM_EVAL_LONGMEM_CACHE": str(out.parent / "data-cache"),
    }
    (out.parent / "request-cache").mkdir(exist_ok=True)
    args = ["--model", "hf", "--model_args", _model_args(model), "--device", "cpu", "--tasks", tasks,
            "--metadata", json.dumps(metadata), *extra]  # fmt: skip
    return run_lm_eval(args, out, env=env, check=check)


def _booksort_build(books: list[Path], out: Path) -> Path:
    """A small Book-SORT build (one condition: L_E = 250 words, L_S = 20) written to `out`, replacing a build there."""
    spec = BuildSpec(excerpt_lengths=(250,), segment_lengths=(20,))
    loaded = load_books(books)
    return write_dataset(loaded, build(loaded, spec), spec, out)


def _words(text: str) -> str:
    return " ".join(text.split())


# --- defect 1: --cache_requests never serves requests built from data that changed under the same path ------------


@pytest.fixture(scope="module")
def replaced_inputs(tiny_llama_dir, embedded_books_dir, tmp_path_factory):
    """Two runs of the three evaluations with `--cache_requests`, every local input replaced in place between them.

    * the forgetting-curve corpus: one file, same path, first Macbeth then The Tempest;
    * the Book-SORT build: one folder, rebuilt in place, first from Macbeth and The Tempest, then Hamlet and Othello;
    * the BABILong background corpus: one folder with the same two file names, first holding Macbeth and The
      Tempest, then Hamlet and Othello.
    """
    root = tmp_path_factory.mktemp("replaced")
    plays = {name: embedded_books_dir / f"{name}.txt" for name in ("macbeth", "tempest", "hamlet", "othello")}
    corpus, booksort_data, background = root / "corpus.txt", root / "booksort_data", root / "background"
    background.mkdir()
    metadata = {
        "forgetting_curve_corpus": str(corpus),
        "forgetting_curve_lengths": "16,32",
        "forgetting_curve_samples": 1,
        "booksort_data": str(booksort_data),
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": str(background),
        "babilong_samples": 2,
        "babilong_lengths": "2k",
        "babilong_tasks": "qa1",
    }  # fmt: skip  (2k: the prompt's instruction and examples take most of 1k characters)
    runs = {}
    for run, (first, second) in {"before": ("macbeth", "tempest"), "after": ("hamlet", "othello")}.items():
        shutil.copyfile(plays[first], corpus)
        _booksort_build([plays[first], plays[second]], booksort_data)
        shutil.copyfile(plays[first], background / "a.txt")
        shutil.copyfile(plays[second], background / "b.txt")
        out = root / run
        _lm_eval(tiny_llama_dir, "forgetting_curve,booksort_in_context,babilong", metadata, out,
                 "--limit", "2", "--cache_requests", "true", "--log_samples")  # fmt: skip
        runs[run] = {
            "books": (first, second),
            "texts": [_words(plays[name].read_text(encoding="utf-8")) for name in (first, second)],
            **{task: read_samples(out, task) for task in ("forgetting_curve", "booksort_in_context", "babilong")},
        }
    runs["request_cache"] = sorted(p.name for p in (root / "request-cache").iterdir())
    return runs


@pytest.mark.parametrize("task", ["forgetting_curve", "booksort_in_context", "babilong"])
@pytest.mark.slow
def test_request_cache_was_used_and_keyed_anew(replaced_inputs, task):
    """Both runs stored their requests (the cache was on) under two different keys (the data changed)."""
    entries = [name for name in replaced_inputs["request_cache"] if name.startswith(f"requests-{task}-")]
    assert len(entries) == 2, replaced_inputs["request_cache"]


@pytest.mark.slow
def test_forgetting_curve_corpus_replaced_in_place_gives_new_requests(replaced_inputs):
    """Defect 1a: the second run's docs and token ids come from the new corpus, not the cached old one."""
    before, after = replaced_inputs["before"]["forgetting_curve"], replaced_inputs["after"]["forgetting_curve"]
    assert {r["doc"]["corpus_tokens"] for r in before} != {r["doc"]["corpus_tokens"] for r in after}
    logged = lambda records: [json.dumps(r["arguments"], sort_keys=True) for r in records]  # noqa: E731
    assert not set(logged(before)) & set(logged(after))  # the token-id digests of every request differ


def _prompts(record: dict) -> str:
    """Every prompt the model was sent for one logged sample (lm_eval logs the doc of this run beside the
    requests it ran, which a stale request cache would have served from the old data)."""
    return " ".join(_words(str(request["arg_0"])) for request in record["arguments"].values())


def _context(record: dict) -> str:
    """The haystack a logged BABILong sample was sent (inside the prompt's `<context>` tags; the doc holds its digest)."""
    prompt = str(record["arguments"]["gen_args_0"]["arg_0"])
    return prompt[prompt.index("<context>\n") + len("<context>\n") : prompt.index("\n</context>")]


@pytest.mark.slow
def test_booksort_folder_rebuilt_in_place_gives_its_new_trials(replaced_inputs):
    """Defect 1b: after rebuilding `booksort_data` from other books, the prompts sent show the new build's trials."""
    for run in ("before", "after"):
        records = replaced_inputs[run]["booksort_in_context"]
        assert {r["doc"]["book_id"] for r in records} <= set(replaced_inputs[run]["books"]), run
        for record in records:  # the segments in the prompts are this build's, from this run's books
            segment = _words(record["doc"]["segment_1"])[:60]
            assert segment in _prompts(record), (run, segment)
            assert any(segment in text for text in replaced_inputs[run]["texts"])


@pytest.mark.slow
def test_babilong_corpus_replaced_in_place_gives_new_contexts(replaced_inputs):
    """Defect 1c: generated samples come from the background corpus the folder holds now."""
    for run, other in (("before", "after"), ("after", "before")):
        records = replaced_inputs[run]["babilong"]
        assert all(sha256_hex(_context(r)) == r["doc"]["context_sha256"] for r in records), (
            run
        )  # the context sent is this run's
        contexts = " ".join(_words(_context(r)) for r in records)
        pieces = [p for p in re.split(r"(?<=[.!?])\s+", contexts) if len(p) > 30]  # book sentences (facts are short)
        found = lambda texts: [p for p in pieces if any(p in text for text in texts)]  # noqa: E731, B023 (called in this iteration)
        assert found(replaced_inputs[run]["texts"]), (run, contexts[:300])
        assert not set(found(replaced_inputs[other]["texts"])) - set(found(replaced_inputs[run]["texts"])), run
    contexts = lambda run: {_context(r) for r in replaced_inputs[run]["babilong"]}  # noqa: E731
    assert not contexts("before") & contexts("after")


# --- defects 5 and 7: option errors through lm_eval are one line naming the key --------------------------------------


@pytest.fixture(scope="module")
def small_inputs(embedded_books_dir, tmp_path_factory):
    """Local inputs that let each evaluation start without the hub: a book, a Book-SORT build, a background folder."""
    root = tmp_path_factory.mktemp("inputs")
    background = root / "background"
    background.mkdir()
    shutil.copyfile(embedded_books_dir / "macbeth.txt", background / "macbeth.txt")
    books = [embedded_books_dir / "macbeth.txt", embedded_books_dir / "tempest.txt"]
    return {
        "forgetting_curve": {"forgetting_curve_corpus": str(background / "macbeth.txt"), "forgetting_curve_samples": 1},
        "booksort_in_context": {"booksort_data": str(_booksort_build(books, root / "booksort_data"))},
        "babilong": {
            "babilong_source": "generate",
            "babilong_facts": "simulated",
            "babilong_corpus": str(background),
            "babilong_samples": 1,
            "babilong_tasks": "qa1",
        },  # fmt: skip
    }


def assert_one_line_option_error(proc, *needles):
    """The run failed, exactly one stderr line names the problem (every needle), and no traceback was printed."""
    assert proc.returncode != 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if all(n in line for n in needles)]
    assert len(lines) == 1, (needles, proc.stderr[-4000:])
    # The harness module's excepthook prints a UsageError as its one line; until it is installed, lm_eval
    # prints the traceback around that line.
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]


MISSPELLED = [
    ("forgetting_curve", {"forgetting_curve_lenghts": "16,32"}, "forgetting_curve_lengths"),
    ("booksort_in_context", {"booksort_excerpt_length": "250"}, "booksort_excerpt_lengths"),
    ("babilong", {"babilong_lenghts": "0k"}, "babilong_lengths"),
]


@pytest.mark.parametrize(("task", "typo", "valid"), MISSPELLED, ids=[t for t, _, _ in MISSPELLED])
@pytest.mark.slow
def test_misspelled_key_fails_naming_the_closest_valid_key(task, typo, valid, tiny_llama_dir, small_inputs, tmp_path):
    """Defect 5: a misspelled key used to be ignored and the defaults ran; now the run stops on it."""
    proc = _lm_eval(tiny_llama_dir, task, {**small_inputs[task], **typo}, tmp_path / "out", "--limit", "1", check=False)
    assert_one_line_option_error(proc, next(iter(typo)), f"did you mean {valid}?")


@pytest.mark.slow
def test_bad_numeric_option_through_lm_eval_names_key_and_example(tiny_llama_dir, small_inputs, tmp_path):
    """Defect 7: `babilong_samples=0` gave a raw library error; now one line names the key and a valid value."""
    metadata = {**small_inputs["babilong"], "babilong_samples": 0, "babilong_lengths": "0k"}
    proc = _lm_eval(tiny_llama_dir, "babilong", metadata, tmp_path / "out", "--limit", "1", check=False)
    assert_one_line_option_error(proc, "babilong_samples=0", "e.g. babilong_samples=")


BAD_VALUES = [
    (BabilongOptions, BABILONG, "babilong_samples", 0),
    (BabilongOptions, BABILONG, "babilong_samples", -1),
    (BabilongOptions, BABILONG, "babilong_samples", "-1"),
    (SweepOptions, FORGETTING_CURVE, "forgetting_curve_seed", "abc"),
    (BabilongOptions, BABILONG, "babilong_seed", -1),
    (SweepOptions, FORGETTING_CURVE, "forgetting_curve_samples", "3.5"),
    (BooksortOptions, BOOKSORT, "booksort_excerpt_lengths", "1k"),
]


@pytest.mark.parametrize(("cls", "prefix", "key", "value"), BAD_VALUES, ids=[f"{k}={v}" for _, _, k, v in BAD_VALUES])
def test_bad_numeric_value_names_key_and_a_valid_example(cls, prefix, key, value):
    """Defect 7: every option error names its key and a valid example, and that example is accepted."""
    with pytest.raises(UsageError) as caught:
        parse_options(cls, prefix, {key: value})
    message = str(caught.value)
    assert "\n" not in message and f"--metadata {key}=" in message
    example = re.search(rf"e\.g\. {key}=(\S+)$", message)
    assert example, message
    parsed = parse_options(cls, prefix, {key: example[1]})
    assert getattr(parsed, key.removeprefix(prefix)) is not None


def list_options() -> list[tuple[type, str, str, str]]:
    """(options class, prefix, key, example) of every list option of every evaluation: an option whose parser takes
    its example's items as a list and gives a tuple (`babilong_depth`, a band of two fractions, is not one)."""
    from test_docs import option_classes

    from lm_eval_longmem.common.options import declared, items

    found = []
    for classes in option_classes().values():
        for cls, prefix in classes:
            for d in declared(cls, prefix):
                try:
                    is_list = isinstance(d.spec.parse(d.spec.example), tuple)
                    is_list = is_list and d.spec.parse(items(d.spec.example)) == d.spec.parse(d.spec.example)
                except ValueError:
                    is_list = False
                if is_list:
                    found.append((cls, prefix, d.key, d.spec.example))
    return found


@pytest.mark.parametrize(("cls", "prefix", "key", "example"), list_options(), ids=[k for _, _, k, _ in list_options()])
def test_a_list_option_refuses_a_value_given_twice(cls, prefix, key, example):
    """`booksort build --excerpt_lengths 250,250` wrote every trial twice, and a list option with a repeated value
    ran (or silently merged) it twice: every list option of every evaluation names the repeat in one line."""
    from lm_eval_longmem.common.options import items

    given = [*items(example), items(example)[0]]
    with pytest.raises(UsageError) as caught:
        parse_options(cls, prefix, {key: f"[{','.join(map(str, given))}]"})
    assert re.fullmatch(
        rf"--metadata {key}=.*: \S+ is given twice: name each \w+ once; e\.g\. {key}=\S+", str(caught.value)
    )


def test_list_options_are_found():
    keys = {key for _, _, key, _ in list_options()}
    assert {"forgetting_curve_lengths", "booksort_excerpt_lengths", "booksort_books", "babilong_lengths"} <= keys
    assert {"babilong_tasks", "booksort_segment_lengths", "booksort_distance_bins"} <= keys
    assert "babilong_depth" not in keys


def test_a_negative_whole_number_is_echoed_as_typed():
    """The command line types `-3` as the float -3.0, and errors echoed `forgetting_curve_samples=-3.0`."""
    given = metadata_words(["forgetting_curve_samples=-3"])
    with pytest.raises(
        UsageError, match=r"^--metadata forgetting_curve_samples=-3: expected a whole number >= 1; e\.g\."
    ):
        parse_options(SweepOptions, FORGETTING_CURVE, given)


# --- defect 15: a length far beyond the window is announced before any forward pass --------------------------------


@pytest.mark.slow
def test_lengths_beyond_the_window_are_announced_before_the_sweep(tiny_llama_dir, embedded_books_dir, tmp_path):
    """Defect 15: `forgetting_curve_lengths=[16,100000]` on a 2048-token model (rotary: the backend runs any
    length) used to start a 200k-token forward with no word. Before any request runs, one line now says which
    lengths will run past the window, what they need, and how to stay within it. `--samples` runs only the
    16-token doc (`--limit 1` would run the 200k-token one: the doc order puts the costliest first).
    """
    from lm_eval_longmem.forgetting_curve.data import build_sweep

    corpus = tmp_path / "three_plays.txt"  # 200k tokens of the character-level tokenizer for L = 100000
    corpus.write_text(
        "".join((embedded_books_dir / f"{n}.txt").read_text(encoding="utf-8") for n in ("macbeth", "hamlet", "tempest"))
    )
    metadata = {"forgetting_curve_corpus": str(corpus), "forgetting_curve_lengths": "16,100000", "forgetting_curve_samples": 1,
                "forgetting_curve_limit_order": "cheapest"}  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path / "data-cache"))
        docs = build_sweep({"pretrained": str(tiny_llama_dir), **metadata}).docs
    short = [i for i, doc in enumerate(docs) if doc["length"] == 16]
    args = hf_run_args(tiny_llama_dir, "forgetting_curve", "--samples", json.dumps({"forgetting_curve": short}),
        "--metadata", json.dumps(metadata))  # fmt: skip
    proc = run_lm_eval(args, out, env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "data-cache")})
    lines = proc.stderr.splitlines()
    said = [i for i, line in enumerate(lines) if "length(s) 100000 (200001 input positions: 2L+1)" in line]
    assert len(said) == 1, proc.stderr[-4000:]
    assert "claimed window of 2048 tokens" in lines[said[0]] and "will run anyway" in lines[said[0]]
    assert "hf backend runs any length" in lines[said[0]] and "forgetting_curve_beyond_window=false" in lines[said[0]]
    running = [i for i, line in enumerate(lines) if "Running loglikelihood_accuracy requests" in line]
    assert running and said[0] < running[0]
    results = read_results(out)["results"]["forgetting_curve"]
    assert results["copy_acc@16,none"] is not None and "copy_acc@100000,none" not in results


# --- the command line's --metadata words -----------------------------------------------------------------------


def metadata_words(words: list[str]) -> dict:
    """`--metadata WORDS` as `lm_eval run` (and every subcommand of ours) parses them (harness R12)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--metadata", nargs="+", action=dict_flag_action())
    return parser.parse_args(["--metadata", *words]).metadata

"""The three tasks through the harness's own data-parallel path: two ranks give the one-process numbers, bit for bit.

lm_eval's HF backend splits docs over processes only when it sees several GPUs; the launcher
(`fixtures/data_parallel_lm_eval.py`) runs the `lm_eval` CLI under torchrun on CPU (gloo) and
makes the backend see two, so this is the path a multi-GPU node takes: rank r takes every 2nd doc,
our request type is padded to equal lengths across ranks, per-doc results are gathered to rank 0.
Every task runs an odd number of docs, so the split is uneven. Slow: about 3 minutes on 2 cores.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit import build_booksort, build_guessing_model, hf_run_args, read_results, read_samples, run_lm_eval
from tolerances import logprob_tol

LAUNCHER = Path(__file__).parent / "fixtures" / "data_parallel_lm_eval.py"
TASKS = ("forgetting_curve", "booksort_in_context", "babilong")


@pytest.fixture(scope="module")
def guessing_model(tiny_llama_dir, tmp_path_factory):
    """The tiny model guessing " " or "e" (`kit.build_guessing_model`): scores are real fractions, not all 0."""
    return build_guessing_model(tiny_llama_dir, tmp_path_factory.mktemp("guessing-model"))


@pytest.fixture(scope="module")
def booksort_data(embedded_books_dir, tmp_path_factory):
    return build_booksort(embedded_books_dir / "macbeth.txt", tmp_path_factory.mktemp("booksort") / "data")


def lm_eval_args(model: Path, book: Path, booksort_data: Path, tasks: str, limit: int) -> list[str]:
    metadata = {
        "forgetting_curve_corpus": str(book),
        "forgetting_curve_lengths": [20, 36, 50],
        "forgetting_curve_samples": 3,
        "booksort_data": str(booksort_data),
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": str(book),
        "babilong_lengths": ["0k", "1k"],
        "babilong_tasks": ["qa1"],
        "babilong_samples": 3,
    }
    return hf_run_args(model, tasks, "--limit", str(limit), "--batch_size", "2", "--log_samples", "--metadata",
        json.dumps(metadata))  # fmt: skip


def two_ranks(args: list[str], out: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LM_EVAL_LONGMEM_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(LAUNCHER),
           *args, "--output_path", str(out)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out, timeout=900)


def same(a, b) -> bool:
    """Equal as stored (bit for bit for floats); NaN equals NaN."""
    nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return nan or (type(a) is type(b) and a == b)


@pytest.mark.slow
def test_two_ranks_give_the_one_process_results_bit_for_bit(
    guessing_model, embedded_books_dir, booksort_data, tmp_path
):
    args = lm_eval_args(guessing_model, embedded_books_dir / "macbeth.txt", booksort_data, ",".join(TASKS), limit=7)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    run_lm_eval(args, one, env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache-one"), "OMP_NUM_THREADS": "1"})
    proc = two_ranks(args, two, tmp_path / "cache-two")
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "Building contexts for babilong on rank 1" in proc.stderr  # the docs really were split

    expected, got = read_results(one)["results"], read_results(two)["results"]
    assert set(got) == set(expected)
    for task, metrics in expected.items():
        assert set(got[task]) == set(metrics), task
        differ = {k: (v, got[task][k]) for k, v in metrics.items() if not same(v, got[task][k])}
        assert not differ, (task, differ)
    fractions = [v for task in TASKS for v in expected[task].values() if isinstance(v, float) and 0 < v < 1]
    assert len(fractions) >= 10  # real fractions, so the sums' order could matter

    for task in TASKS:  # every doc's logged payload is the one-process one, whichever rank ran it
        by_doc = lambda out: {s["doc_id"]: s for s in read_samples(out, task)}  # noqa: E731, B023 (called in this iteration)
        a, b = by_doc(one), by_doc(two)
        assert sorted(a) == sorted(b) and len(a) % 2 == 1, task  # an odd count: the two ranks ran unequal shares
        keep = ("doc", "target", "filtered_resps", "resps")
        for doc_id, sample in a.items():
            payload = {k: v for k, v in sample.items() if k not in keep and not k.endswith("hash") and k != "arguments"}
            other = {k: b[doc_id][k] for k in payload}
            # a Book-SORT choice's log-likelihood sums at most one token per byte of its continuation
            tols = [logprob_tol(len(str(args["arg_1"]).encode())) for args in sample["arguments"].values()]
            if task.startswith("booksort"):  # its summary item holds the trial's log-odds: fp32 rounding, as below
                payload["summary"]["log_odds"] = pytest.approx(payload["summary"]["log_odds"], abs=sum(tols))
            assert payload == other, (task, doc_id)
            ours, theirs = sample["filtered_resps"], b[doc_id]["filtered_resps"]
            if task.startswith("booksort"):  # the harness's loglikelihood pads a batch to its longest request,
                # and a rank's batch-mates differ: log-probabilities agree to fp32 rounding, choices exactly
                assert [[float(lp), hit] for lp, hit in ours] == [
                    [pytest.approx(float(lp), abs=tol), hit] for (lp, hit), tol in zip(theirs, tols, strict=True)
                ]
            else:  # our request type runs each request at its own width, whatever its batch-mates
                assert ours == theirs, (task, doc_id)


@pytest.mark.slow
def test_fewer_docs_than_ranks_is_one_clear_line(guessing_model, embedded_books_dir, booksort_data, tmp_path):
    args = lm_eval_args(guessing_model, embedded_books_dir / "macbeth.txt", booksort_data, "forgetting_curve", limit=1)
    proc = two_ranks(args, tmp_path, tmp_path / "cache")
    assert proc.returncode != 0
    assert "forgetting_curve: 1 doc(s) to run for 2 data-parallel processes" in proc.stderr
    assert "did not find any docs" not in proc.stderr


@pytest.mark.slow
def test_auto_batch_size_on_two_ranks_with_unequal_shares_finishes_with_the_one_process_choices(
    guessing_model, embedded_books_dir, booksort_data, tmp_path
):
    """`--batch_size auto:2` probes the batch size in collective calls: Book-SORT's requests (which the harness does
    not pad, as they are not `loglikelihood`) must reach every rank's probes equally often, with 5 trials split
    3 and 2; the choices are the one-process ones."""
    args = lm_eval_args(guessing_model, embedded_books_dir / "macbeth.txt", booksort_data, "booksort_in_context", 5)
    args[args.index("--batch_size") + 1] = "auto:2"
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    run_lm_eval(args, one, env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache-one"), "OMP_NUM_THREADS": "1"})
    proc = two_ranks(args, two, tmp_path / "cache-two")
    assert proc.returncode == 0, proc.stderr[-6000:]
    choices = {
        out: {s["doc_id"]: max((float(lp), i) for i, (lp, _) in enumerate(s["filtered_resps"]))[1] for s in samples}
        for out in (one, two)
        for samples in [read_samples(out, "booksort_in_context")]
    }
    assert len(choices[one]) == 5 and choices[one] == choices[two]

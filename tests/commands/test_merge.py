"""`lm-eval-longmem merge`: shards of one sweep (one lm_eval run per node on `--samples`) give the one-run results.

The slow tests run the three tasks once on a set of docs and once as two shards splitting the same
docs unevenly, on the tiny model that guesses (real fractions, so the order of sums could matter),
and merge the shards. The other tests build shard files by hand: every refusal there happens
before any task is loaded.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from kit import build_booksort, build_guessing_model, hf_run_args, read_results, read_samples, run_lm_eval

from lm_eval_longmem import cli
from lm_eval_longmem.readers.results import load_run

TASKS = ("forgetting_curve", "booksort_in_context", "babilong")
ONE_RUN = {"forgetting_curve": list(range(9)), "booksort_in_context": list(range(7)), "babilong": list(range(6))}
SHARDS = (  # uneven, and not every doc of Book-SORT's 400: a partial sweep of it
    {"forgetting_curve": [0, 2, 4, 6, 8], "booksort_in_context": [0, 3, 6], "babilong": [0, 1, 2, 3]},
    {"forgetting_curve": [1, 3, 5, 7], "booksort_in_context": [1, 2, 4, 5], "babilong": [4, 5]},
)


def same(a, b) -> bool:
    """Equal as stored (bit for bit for floats); NaN equals NaN."""
    nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return nan or (type(a) is type(b) and a == b)


def command(capsys, name, *args) -> tuple[int, str, str]:
    """`lm-eval-longmem NAME ARGS` in this process: (exit status, stdout, stderr)."""
    try:
        cli.main([name, *map(str, args)])
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def merge(capsys, *args) -> tuple[int, str, str]:
    return command(capsys, "merge", *args)


@pytest.fixture(scope="module")
def sweep(tiny_llama_dir, embedded_books_dir, tmp_path_factory):
    """Folders of the one run and of the two shards (same metadata, same cache), and that cache."""
    root = tmp_path_factory.mktemp("sweep")
    model = build_guessing_model(tiny_llama_dir, root / "model")
    book = embedded_books_dir / "macbeth.txt"
    build_booksort(book, root / "booksort")
    metadata = {
        "forgetting_curve_corpus": str(book), "forgetting_curve_lengths": [20, 36, 50], "forgetting_curve_samples": 3,
        "booksort_data": str(root / "booksort"), "babilong_source": "generate", "babilong_facts": "simulated",
        "babilong_corpus": str(book), "babilong_lengths": ["0k", "1k"], "babilong_tasks": ["qa1"], "babilong_samples": 3,
    }  # fmt: skip
    env = {"LM_EVAL_LONGMEM_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}
    folders = {}
    for name, samples in (("one", ONE_RUN), ("shard0", SHARDS[0]), ("shard1", SHARDS[1])):
        folders[name] = root / name
        folders[name].mkdir()
        run_lm_eval(
            hf_run_args(model, "forgetting_curve,booksort,babilong", "--batch_size", "2", "--log_samples",
                "--metadata", json.dumps(metadata), "--samples", json.dumps(samples)),
            folders[name], env=env,
        )  # fmt: skip
    return folders | {"cache": root / "cache"}


@pytest.mark.slow
def test_merged_shards_give_the_one_run_results(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(sweep["cache"]))  # the merge reads the data the runs built
    status, out, err = merge(capsys, sweep["shard0"], sweep["shard1"], "--output_path", tmp_path / "merged")
    assert status == 0, err
    expected, got = read_results(sweep["one"]), read_results(tmp_path / "merged")
    assert set(got["results"]) == set(expected["results"]) == {*TASKS, "booksort"}
    for task, metrics in expected["results"].items():
        assert set(got["results"][task]) == set(metrics), task
        differ = {k: (v, got["results"][task][k]) for k, v in metrics.items() if not same(v, got["results"][task][k])}
        assert not differ, (task, differ)
    fractions = [v for task in TASKS for v in expected["results"][task].values() if isinstance(v, float) and 0 < v < 1]
    assert len(fractions) >= 10  # real fractions, so the sums' order could matter
    for key in ("groups", "group_subtasks", "versions", "n-shot", "higher_is_better", "n-samples"):
        assert got[key] == expected[key], key
    for task in TASKS:
        facts = dict(got["configs"][task]["longmem"])
        merge_facts = facts.pop("merge")
        assert facts == expected["configs"][task]["longmem"], task  # skip reasons and docs per cell
        assert {k: v for k, v in got["configs"][task].items() if k != "longmem"} == {
            k: v for k, v in expected["configs"][task].items() if k != "longmem"
        }
        assert merge_facts["shards"] == 2
        by_doc = lambda records: {r["doc_id"]: r for r in records}  # noqa: E731
        one, merged = by_doc(read_samples(sweep["one"], task)), read_samples(tmp_path / "merged", task)
        assert [r["doc_id"] for r in merged] == sorted(one)  # every doc once, in doc order
        for record in merged:
            assert {k: record[k] for k in record["metrics"]} == {k: one[record["doc_id"]][k] for k in record["metrics"]}
        assert got["task_hashes"][task] == expected["task_hashes"][task]  # the one run's samples, record by record
    assert got["configs"]["forgetting_curve"]["longmem"]["merge"]["docs_missing"] == 0
    assert got["configs"]["booksort_in_context"]["longmem"]["merge"]["docs_missing"] == 400 - 7
    lines = out.splitlines()
    assert lines[0].endswith(".json") and len(lines) == 1 + len(TASKS)
    assert [line for line in lines if "PARTIAL" in line] == [
        "  booksort_in_context: 7 docs run + 0 skipped of 400, from 2 shards; PARTIAL: 393 docs are in no shard "
        "(configs.booksort_in_context.longmem.merge.docs_missing)"
    ]
    run = load_run(Path(lines[0]))  # what report, plot and babilong report read
    assert run.evaluation("forgetting_curve") == "forgetting_curve" and run.samples_file("babilong") is not None


@pytest.mark.slow
def test_one_shard_is_a_partial_merge_that_says_so(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(sweep["cache"]))  # the merge reads the data the runs built
    status, out, _ = merge(capsys, sweep["shard1"], "--output_path", tmp_path / "merged")
    assert status == 0
    assert "forgetting_curve: 4 docs run + 0 skipped of 9, from 1 shard; PARTIAL: 5 docs are in no shard" in out
    assert read_results(tmp_path / "merged")["configs"]["forgetting_curve"]["longmem"]["merge"]["docs_missing"] == 5
    # the report of the merged run says it is partial, first and in the headline table
    status, out, _ = command(capsys, "report", tmp_path / "merged", "--output_path", tmp_path / "report")
    report = (tmp_path / "report" / "report.md").read_text()
    assert status == 0 and "rests on: forgetting_curve PARTIAL: 5 of 9 docs in no shard" in out
    assert report.index("What these numbers rest on") < report.index("Headline numbers")
    assert "`forgetting_curve` is a PARTIAL merge: 5 of 9 docs of the sweep are in no shard" in report


@pytest.mark.slow
def test_a_record_changed_after_the_run_is_refused(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(sweep["cache"]))  # the merge reads the data the runs built
    """The merge first recomputes each shard's own results from its records: a changed score shows."""
    shard = tmp_path / "shard1"
    shutil.copytree(sweep["shard1"], shard)
    samples = next(shard.rglob("samples_forgetting_curve_*.jsonl"))
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    records[0]["copy_acc"] = 1.0 - records[0]["copy_acc"]
    samples.write_text("".join(json.dumps(r) + "\n" for r in records))
    status, _, err = merge(capsys, sweep["shard0"], shard, "--output_path", tmp_path / "merged")
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert "recomputing forgetting_curve from its samples gives copy_acc@" in err
    assert not (tmp_path / "merged").exists()


# --- refusals before any task is loaded (hand-made shard files) ------------------------------------


def fake_shard(
    folder: Path,
    doc_ids: list[int],
    *,
    metadata: dict | None = None,
    task: str = "forgetting_curve",
    samples: bool = True,
) -> Path:
    """A results file and samples file shaped as lm_eval writes them, for `task` on `doc_ids`."""
    stamp = "2026-01-01T00-00-00.000000"
    model = folder / "model"
    model.mkdir(parents=True)
    config = {"task": task, "metadata": {"version": 1.1, "pretrained": "m", **(metadata or {})}}
    if task == "forgetting_curve":
        config["longmem"] = {"skip_reasons": {}, "docs_per_cell": {}}
    data = {
        "results": {task: {"alias": task, "skipped,none": 0}},
        "configs": {task: config},
        "versions": {task: 1.1},
        "n-samples": {task: {"original": 9, "effective": len(doc_ids)}},
        "config": {"model": "hf", "model_args": {"pretrained": "m"}, "batch_size": "2"},
    }
    (model / f"results_{stamp}.json").write_text(json.dumps(data))
    if samples:
        records = [
            {
                "doc_id": i,
                "filter": "none",
                "metrics": ["copy_acc", "cells"],
                "copy_acc": 0.5,
                "cells": ["20"],
                "doc_hash": "x",
            }
            for i in doc_ids
        ]
        (model / f"samples_{task}_{stamp}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (dict(doc_ids=[1, 2]), "doc 2 of forgetting_curve is in both"),
        (dict(doc_ids=[1], metadata={"forgetting_curve_samples": 5}), "does not match"),
        (
            dict(doc_ids=[1], samples=False),
            "no samples_forgetting_curve_2026-01-01T00-00-00.000000.jsonl beside it; rerun lm_eval with --log_samples",
        ),
        (dict(doc_ids=[1], task="arc_easy"), "task arc_easy is not an lm-eval-longmem task"),
    ],
)
def test_shards_that_are_not_one_sweep_are_refused_in_one_line(second, message, tmp_path, capsys):
    a = fake_shard(tmp_path / "a", [0, 2])
    b = fake_shard(tmp_path / "b", **second)
    status, out, err = merge(capsys, a, b, "--output_path", tmp_path / "merged")
    assert status == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "merged").exists()


def test_a_shard_given_twice_is_refused(tmp_path, capsys):
    a = fake_shard(tmp_path / "a", [0, 2])
    status, _, err = merge(capsys, a, next(a.rglob("results_*.json")), "--output_path", tmp_path / "merged")
    assert status == 1 and "is given twice" in err and len(err.strip().splitlines()) == 1


def test_merge_needs_an_output_path(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["merge", str(fake_shard(tmp_path / "a", [0]))])
    assert exit_.value.code == 2 and "--output_path" in capsys.readouterr().err


def shard(capsys, *args) -> tuple[int, str, str]:
    return command(capsys, "shard", *args)


@pytest.mark.slow
def test_shard_gives_each_node_every_nth_doc_of_every_task(tiny_llama_dir, embedded_books_dir, tmp_path, capsys):
    metadata = {
        "forgetting_curve_corpus": str(embedded_books_dir / "macbeth.txt"),
        "forgetting_curve_lengths": [20, 36],
        "forgetting_curve_samples": 3,
    }
    common = [
        "--tasks",
        "forgetting_curve",
        "--model_args",
        f"pretrained={tiny_llama_dir}",
        "--metadata",
        json.dumps(metadata),
    ]
    status, out, err = shard(capsys, *common, "--nodes", 4, "--output_path", tmp_path / "shares")
    assert status == 0, err
    shares = [json.loads((tmp_path / "shares" / f"samples_node{i}.json").read_text()) for i in range(4)]
    assert shares == [{"forgetting_curve": ids} for ids in ([0, 4], [1, 5], [2], [3])]  # 2 lengths x 3 samples
    assert (
        "samples_node0.json: forgetting_curve 2 docs" in out
        and not (tmp_path / "shares" / "samples_node4.json").exists()
    )
    status, _, err = shard(capsys, *common, "--nodes", 7, "--output_path", tmp_path / "more")
    assert status == 1 and "forgetting_curve has only 6 docs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "more").exists()


def test_shard_refuses_a_task_that_cannot_be_merged(tmp_path, capsys, monkeypatch):
    from lm_eval_longmem.commands import merge

    monkeypatch.setattr(merge, "load_tasks", lambda names, metadata, **kwargs: ({"arc_easy": object()}, {}))
    status, out, err = shard(capsys, "--tasks", "arc_easy", "--nodes", 2, "--output_path", tmp_path / "shares")
    assert status == 1 and out == "" and "arc_easy cannot be merged from shards" in err
    assert not (tmp_path / "shares").exists()

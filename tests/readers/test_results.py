"""The one reader of lm_eval results and samples files: what it finds, and how it refuses bad files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kit import NeedleResults

from lm_eval_longmem.common import evaluations as registry
from lm_eval_longmem.common.conditions import MEMORYLESS
from lm_eval_longmem.common.evaluations import Evaluation
from lm_eval_longmem.readers import results as results_reader
from lm_eval_longmem.readers.results import (
    ResultsFileError,
    Run,
    condition_facts,
    condition_of,
    evaluation_of,
    find_results_file,
    find_results_files,
    load_run,
    load_runs,
    read_json,
    read_samples_file,
    readings,
    run_labels,
    task_metrics,
)
from lm_eval_longmem.report.blocks import is_ours


def write_run(folder, date, *, model="HuggingFaceTB/SmolLM2-135M-Instruct", results=None, mtime=None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{date}.json"
    data = {
        "results": results if results is not None else {"booksort": {"alias": "booksort", "acc,none": 0.5}},
        "config": {"model": "hf", "model_args": f"pretrained={model},dtype=float32"},
        "model_name": model,
        "n-samples": {"booksort": {"original": 10, "effective": 4}},
    }
    path.write_text(json.dumps(data))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_a_folder_gives_the_newest_run_of_each_model_folder(tmp_path):
    old = write_run(tmp_path / "out" / "model_a", "2026-01-01T10-00-00.000001", mtime=2_000_000_000)
    new = write_run(tmp_path / "out" / "model_a", "2026-01-02T10-00-00.000001", mtime=1_000_000_000)
    other = write_run(tmp_path / "out" / "model_b", "2026-01-01T09-00-00.000001")
    assert find_results_files(tmp_path / "out") == [new, other]  # by the date in the name, not the file time
    assert find_results_files(old) == [old]  # a file is taken as it is
    assert find_results_file(tmp_path / "out") == new


def test_several_paths_give_all_their_runs_in_order(tmp_path):
    a = write_run(tmp_path / "a", "2026-01-01T00-00-00.1", model="org/model-a")
    b = write_run(tmp_path / "b", "2026-01-01T00-00-00.2", model="/local/models/model-b/")
    runs = load_runs([b, tmp_path / "a"])
    assert [r.path for r in runs] == [b, a]
    assert [r.model for r in runs] == ["model-b", "model-a"]


def test_metrics_drop_the_filter_suffix_and_prefer_unfiltered_values(tmp_path):
    path = write_run(
        tmp_path,
        "2026-01-01T00-00-00.1",
        results={
            "booksort": {"alias": "booksort", "acc,none": 0.75, "acc_stderr,none": 0.1},
            "gsm8k": {"exact_match,strict-match": 0.2, "exact_match,flexible-extract": 0.3},
        },
    )
    run = load_run(path)
    assert run.metrics("booksort") == {"acc": 0.75, "acc_stderr": 0.1}
    assert run.metrics("gsm8k") == {"exact_match": 0.2}
    assert run.metrics("absent") == {}
    assert run.n_samples("booksort") == 4
    assert run.tasks == ["booksort", "gsm8k"]


def test_samples_of_a_task_come_from_the_same_run(tmp_path):
    path = write_run(tmp_path, "2026-01-01T00-00-00.1")
    (tmp_path / "samples_booksort_2026-01-01T00-00-00.1.jsonl").write_text('{"doc": {"i": 1}}\n\n{"doc": {"i": 2}}\n')
    (tmp_path / "samples_booksort_2025-12-31T00-00-00.1.jsonl").write_text('{"doc": {"i": 99}}\n')
    run = load_run(path)
    assert [r["doc"]["i"] for r in run.samples("booksort")] == [1, 2]
    assert run.samples_file("forgetting_curve") is None
    with pytest.raises(ResultsFileError, match="--log_samples"):
        run.samples("forgetting_curve")


def test_labels_tell_two_runs_of_one_model_apart(tmp_path):
    runs = [
        load_run(write_run(tmp_path / "x", "2026-01-01T00-00-00.1")),
        load_run(write_run(tmp_path / "y", "2026-01-02T00-00-00.1")),
        load_run(write_run(tmp_path / "z", "2026-01-01T00-00-00.1", model="other")),
    ]
    assert run_labels(runs) == [
        "SmolLM2-135M-Instruct [2026-01-01T00-00-00.1]",
        "SmolLM2-135M-Instruct [2026-01-02T00-00-00.1]",
        "other",
    ]


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", r"is empty \(0 bytes\).*rerun lm_eval"),
        (b"\n  \n", r"is empty"),
        (b'{"results": {', r"is not valid JSON \(line 1, column 14"),
        (b"\x89PNG\r\n\x1a\n\x00\xff", r"is not a text file"),
        (b"[1, 2]", r"not an lm_eval results file"),
        (b'{"results": 3}', r"not an lm_eval results file"),
    ],
)
def test_bad_files_give_one_line_naming_the_file_and_the_fix(tmp_path, content, message):
    path = tmp_path / "results_2026-01-01T00-00-00.1.json"
    path.write_bytes(content)
    with pytest.raises(ResultsFileError, match=message) as info:
        load_run(path)
    text = str(info.value)
    assert str(path) in text and "\n" not in text


def test_missing_paths_and_empty_folders_are_named(tmp_path):
    with pytest.raises(ResultsFileError, match=r"no such file or folder.*--output_path"):
        load_runs([tmp_path / "nowhere"])
    (tmp_path / "empty" / "model").mkdir(parents=True)
    (tmp_path / "empty" / "model" / "samples_x_1.jsonl").write_text("{}\n")
    with pytest.raises(ResultsFileError, match=r"empty: no results_\*\.json in this folder"):
        load_runs([tmp_path / "empty"])
    with pytest.raises(ResultsFileError, match="is a folder"):
        read_json(tmp_path / "empty")


def test_a_damaged_samples_line_is_named(tmp_path):
    path = tmp_path / "samples_booksort_1.jsonl"
    path.write_text('{"doc": {}}\n{"doc": \n')
    with pytest.raises(ResultsFileError, match=r"samples_booksort_1\.jsonl, line 2: not valid JSON"):
        read_samples_file(path)


def _with_facts(task, longmem=None, **config):
    metrics = {"acc@qa1_0,none": 0.5} if task == "babilong" else {"acc@LE250,none": 0.5}
    configs = {task: {**config, **({"longmem": longmem} if longmem is not None else {})}}
    return {"results": {task: {"alias": task, **metrics}}, "configs": configs}


def test_the_condition_a_task_recorded_is_read_and_older_files_get_it_derived():
    recorded = _with_facts(
        "babilong", {"evaluation": "babilong", "condition": "retrieval", "retrieval": "chunks-128 top-3 bm25"}
    )
    assert condition_of(recorded, "babilong") == "retrieval"
    assert condition_facts(recorded, "babilong") == {"condition": "retrieval", "retrieval": "chunks-128 top-3 bm25"}
    old_rag = _with_facts("babilong", {"condition": "sentences top-5 bm25"})  # BABILong before the vocabulary
    assert condition_facts(old_rag, "babilong") == {"condition": "retrieval", "retrieval": "sentences top-5 bm25"}
    assert condition_of(_with_facts("babilong", {"condition": "in-context"}), "babilong") == "in-context"
    assert condition_of(_with_facts("babilong", {}), "babilong") == "in-context"  # before BABILong stored any
    old_memoryless = _with_facts("booksort_memoryless", {}, dataset_kwargs={"condition": "memoryless"})
    assert condition_of(old_memoryless, "booksort_memoryless") == "memory-less"
    fine_tuned = _with_facts("booksort_memoryless", {"evaluation": "booksort", "condition": "fine-tuned"})
    assert condition_of(fine_tuned, "booksort_memoryless") == "fine-tuned"


def test_a_task_or_group_not_of_ours_has_no_condition():
    other = {"results": {"hellaswag": {"alias": "hellaswag", "acc,none": 0.4}}}
    assert condition_of(other, "hellaswag") is None
    group = {**_with_facts("booksort_in_context", {"evaluation": "booksort", "condition": "in-context"}),
             "group_subtasks": {"booksort": ["booksort_in_context"]}}  # fmt: skip
    group["results"]["booksort"] = {"alias": "booksort", "acc,none": 0.5}
    assert condition_of(group, "booksort_in_context") == "in-context" and condition_of(group, "booksort") is None


def test_a_folder_passes_over_a_json_that_is_not_a_run_and_names_it(tmp_path, capsys):
    """`report out5/` refused the whole folder for a stray `results_mine.json` of the user's beside a valid run (and
    in the run's own folder, 'mine' sorted as the newest run): the run is read, and each stray file named once."""
    run = write_run(tmp_path / "out5" / "model", "2026-01-01T00-00-00.1")
    stray = tmp_path / "out5" / "results_mine.json"
    stray.write_text('{"my": "notes"}')
    beside = run.parent / "results_mine.json"
    beside.write_text("")
    assert [r.path for r in load_runs([tmp_path / "out5"])] == [run]
    assert capsys.readouterr().err.splitlines() == [
        f'lm-eval-longmem: skipped {stray}: JSON but not an lm_eval results file (no "results" object)',
        f"lm-eval-longmem: skipped {beside}: empty (0 bytes), probably from an interrupted run",
    ]
    run.unlink()
    with pytest.raises(
        ResultsFileError, match=r"out5: no results_\*\.json that is an lm_eval run \(each named above\)"
    ):
        load_runs([tmp_path / "out5"])


def _results(facts: dict, metrics: dict) -> dict:
    return {"results": {"t": {"alias": "t", **metrics}}, "configs": {"t": {"longmem": facts}}}


def test_readers_take_the_evaluation_the_task_recorded_over_what_metric_names_suggest():
    forgetting_like = {"copy_acc@1024,none": 0.5}
    assert evaluation_of(_results({}, forgetting_like), "t") == "forgetting_curve"  # an old file: guessed
    assert evaluation_of(_results({"evaluation": "babilong"}, forgetting_like), "t") == "babilong"
    ruler = _results({"evaluation": "ruler"}, forgetting_like)  # an evaluation not installed here
    assert evaluation_of(ruler, "t") == "ruler"
    assert not is_ours(Run(Path("results.json"), ruler), "t")  # the registry says which are ours
    assert is_ours(Run(Path("results.json"), _results({"evaluation": "babilong"}, {})), "t")
    group = {**_results({"evaluation": "booksort"}, {}), "group_subtasks": {"g": ["t"]}}
    assert evaluation_of(group, "g") == "booksort"


@pytest.mark.parametrize(
    "metrics, expected",
    [
        ({"copy_acc@1024,none": 0.5}, "forgetting_curve"),
        ({"acc@LE2500,none": 0.6, "acc,none": 0.6}, "booksort"),
        ({"acc@qa1_4096,none": 0.6}, "babilong"),
        ({"acc,none": 0.6, "acc_stderr,none": 0.01}, None),  # any harness task
    ],
)
def test_the_one_guess_for_older_files(metrics, expected):
    assert list(readings()) == list(registry.BUILTIN)  # ours, in the registry's order
    assert evaluation_of(_results({}, metrics), "t") == expected


class _Needle(Evaluation):
    name = "needle"

    def results_reading(self):
        return NeedleResults()


def test_another_packages_reading_is_reached_through_the_registry(tmp_path, monkeypatch):
    """An evaluation of another package reads its older files as ours do (`Evaluation.results_reading`); one
    that says nothing of them (the default) is read with the grammar alone."""
    monkeypatch.setattr(results_reader, "evaluations", lambda: (*registry.evaluations(), _Needle()))
    results = {
        "results": {"t": {"hits@8,none": 0.5}, "u": {"acc,none": 0.1}},
        "configs": {"t": {"dataset_kwargs": {"blind": True}}, "u": {}},
    }
    assert list(readings())[-1] == "needle"
    assert evaluation_of(results, "t") == "needle" and task_metrics(results, "t") == {"acc@8": 0.5}
    assert condition_of(results, "t") == MEMORYLESS and condition_of(results, "u") is None
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    path.write_text(json.dumps(results))
    assert load_run(path).metrics("t") == {"acc@8": 0.5}
    assert Evaluation.results_reading(_Needle()) is None  # the default: the grammar alone

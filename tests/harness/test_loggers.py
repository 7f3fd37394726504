"""`lm_eval_longmem.harness.loggers`: its reliances on lm_eval (R10, R15 in the harness's R-list), and every
integration the harness offers for results and samples, with our tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit import hf_run_args, run_lm_eval

from lm_eval_longmem.harness import loggers

FIXTURES = Path(__file__).parents[1] / "fixtures"


# ---------------------------------------------------------------- R10: the notice logger


@pytest.mark.slow
def test_r10_notice_logger_is_under_lm_eval():
    code = (
        "from lm_eval_longmem.harness import loggers, tasks\n"
        "loggers.setup_logging()\ntasks.log.info('longmem-notice-check')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    (line,) = [line for line in proc.stderr.splitlines() if "longmem-notice-check" in line]
    assert " INFO     [lm_eval_longmem.harness.tasks:" in line  # lm_eval's format, its `lm_eval.` prefix stripped


@pytest.mark.slow
def test_r10_package_logs_follow_the_harness_level(tiny_llama_dir, embedded_books_dir, tmp_path):
    """A real `lm_eval` run at WARNING: the data builder's INFO line is gone, our warning shows in the
    harness's format (`LEVEL [module:line] message`, the `lm_eval.` prefix stripped). The same line at
    the default level (INFO): `tests/forgetting_curve/test_task.py::test_data_builder_logs_through_the_harness`.

    The level is set with `LMEVAL_LOG_LEVEL`: lm_eval 0.4.13 applies `--verbosity` (deprecated there)
    only after the evaluation, so during task loading it governs neither the harness's lines nor ours.
    """
    metadata = {
        "forgetting_curve_corpus": str(embedded_books_dir / "macbeth.txt"),
        "forgetting_curve_lengths": "16,64",  # 64 needs 129 positions > 100: skipped, with a WARNING
        "forgetting_curve_samples": 1,
        "forgetting_curve_max_tokens": 100,
    }
    args = hf_run_args(tiny_llama_dir, "forgetting_curve", "--batch_size", "1", "--metadata", json.dumps(metadata))
    stderr = run_lm_eval(args, tmp_path, env={"LMEVAL_LOG_LEVEL": "WARNING"}).stderr
    (warning,) = [line for line in stderr.splitlines() if "[lm_eval_longmem.common.task:" in line]
    assert " WARNING  [" in warning and "skipped, never truncated" in warning
    assert "lm_eval_longmem.forgetting_curve.data" not in stderr and " INFO " not in stderr


def test_r15_wandb_sample_table_reads_every_metric_list_name_from_every_sample():
    """The W&B logger builds a task's sample table from `configs[task]["metric_list"]`, one column per
    name read from every logged sample: a name the samples lack fails the whole upload."""
    from lm_eval.loggers.wandb_logger import WandbLogger

    samples = [
        {"doc_id": i, "target": "", "arguments": [([1, 2], [3])], "resps": [["1", -1.0]], "filtered_resps": [["1", -1.0]],
         "copy_acc": 0.5 * i, "lm_acc": 0.25, "cells": ["64"], "metrics": ["copy_acc", "lm_acc", "cells"]}
        for i in range(2)
    ]  # fmt: skip
    ours = {
        "output_type": "loglikelihood_accuracy",
        "metric_list": loggers.logged_metric_list([("copy_acc", True), ("lm_acc", True)]),
    }
    table = WandbLogger._generate_dataset(None, samples, ours)  # the method reads nothing of its instance
    assert list(table["copy_acc"]) == [0.0, 0.5] and list(table["lm_acc"]) == [0.25, 0.25] and len(table) == 2
    with pytest.raises(KeyError, match="token_acc"):  # what the run's config named before: no sample holds it
        WandbLogger._generate_dataset(None, samples, {**ours, "metric_list": [{"metric": "token_acc"}]})


# --- every integration the harness offers for results and samples works with our tasks -------


@pytest.mark.slow
def test_wandb_trackio_hub_files_write_out_and_show_config_with_our_tasks(
    tiny_llama_dir, embedded_books_dir, tmp_path, monkeypatch
):
    """One `lm_eval` run of our three tasks beside a task of the harness's own kind, with every logger on:
    W&B (offline mode, the real library), Trackio (stubbed at its import), `--write_out`, `--show_config`
    and `--output_path` with `--log_samples` (the files the hub tracker uploads and builds its dataset card from)."""
    pytest.importorskip("wandb")
    from kit import build_booksort

    book = embedded_books_dir / "macbeth.txt"
    booksort_data = build_booksort(book, tmp_path / "booksort_data")
    out, trackio_log, wandb_dir = tmp_path / "out", tmp_path / "trackio.jsonl", tmp_path / "wandb"
    out.mkdir()
    wandb_dir.mkdir()
    env = {
        "LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache"), "WANDB_DIR": str(wandb_dir), "WANDB_MODE": "offline",
        "WANDB_SILENT": "true", "LONGMEM_TEST_TRACKIO_LOG": str(trackio_log),
        "PYTHONPATH": os.pathsep.join([str(FIXTURES / "trackio_stub"), os.environ.get("PYTHONPATH", "")]),
    }  # fmt: skip
    proc = run_lm_eval(
        hf_run_args(tiny_llama_dir, "forgetting_curve,booksort,babilong,longmem_test_plain_choice", "--include_path",
            str(FIXTURES / "plain_task"), "--limit", "2", "--log_samples", "--write_out", "--show_config",
            "--wandb_args", "project=longmem,mode=offline", "--trackio_args", "project=longmem", "--metadata",
            f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[16,32]", "forgetting_curve_samples=1",
            f"booksort_data={booksort_data}", "babilong_source=generate", "babilong_facts=simulated",
            f"babilong_corpus={book}", "babilong_lengths=[0k]", "babilong_tasks=[qa1]", "babilong_samples=2"),
        out, env=env,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    assert "Logging to W&B failed" not in log and "Logging to Trackio failed" not in log, log[-3000:]
    tasks = ("forgetting_curve", "booksort_in_context", "babilong", "longmem_test_plain_choice")
    scores = {
        "forgetting_curve": "copy_acc",
        "booksort_in_context": "acc",
        "babilong": "acc_corrected",
        "longmem_test_plain_choice": "acc",
    }

    # W&B: one sample table per task (`<task>_eval_results`, beside the results tables under evaluation/), each with its scores
    found = [p for p in wandb_dir.rglob("*_eval_results_*.table.json") if p.parent.name == "table"]
    tables = {p.name.split("_eval_results")[0]: json.loads(p.read_text()) for p in found}
    assert set(tables) == set(tasks), sorted(tables)
    for task, table in tables.items():
        assert scores[task] in table["columns"] and len(table["data"]) == 2, (task, table["columns"])

    # Trackio: one trace per sample of every task, the scores in its metadata
    calls = [json.loads(line) for line in trackio_log.read_text().splitlines()]
    traces = [
        (key, v["trace"])
        for c in calls
        if c["call"] == "log"
        for key, v in c["values"].items()
        if isinstance(v, dict) and "trace" in v
    ]
    for task in tasks:
        mine = [trace for key, trace in traces if key == f"{task}/sample"]
        assert len(mine) == 2 and all(scores[task] in trace for trace in mine), (task, mine)

    # --write_out shows each task's first prompt; --show_config prints the results with our configs' metric_list
    for task in tasks:
        assert f"task_name={task}," in log
    shown = json.loads(proc.stdout[proc.stdout.index("{\n") : proc.stdout.rindex("\n}") + 2])
    assert [e["metric"] for e in shown["configs"]["forgetting_curve"]["metric_list"]] == [
        "copy_acc",
        "lm_acc",
        "copy_ppl",
        "lm_ppl",
    ]
    assert [e["metric"] for e in shown["configs"]["longmem_test_plain_choice"]["metric_list"]] == ["acc"]

    # the hub tracker's files: named as its helpers parse them, each loading as a dataset, and the dataset card
    _dataset_card_from_files(out, tasks, monkeypatch)


def _dataset_card_from_files(out: Path, tasks: tuple[str, ...], monkeypatch) -> None:
    """`EvaluationTracker.recreate_metadata_card` on this run's files, with the Hub's API replaced by the local
    folder (it lists, reads and pushes nothing else), as `--hf_hub_log_args push_samples_to_hub=True` builds it."""
    import datasets
    import huggingface_hub
    from lm_eval.loggers import evaluation_tracker
    from lm_eval.utils import get_file_task_name, get_results_filenames, get_sample_results_filenames

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json*"))
    assert [get_file_task_name(Path(f).name) for f in get_sample_results_filenames(files)] == sorted(tasks)
    assert len(get_results_filenames(files)) == 1
    for name in files:  # what the card's configurations point to must load with `datasets`
        assert (
            datasets.load_dataset(
                "json", data_files=str(out / name), split="train", cache_dir=str(out.parent / "hf")
            ).num_rows
            >= 1
        )

    class LocalApi:
        def list_repo_files(self, repo_id, repo_type):
            return files

    pushed = []
    monkeypatch.setattr(huggingface_hub, "hf_hub_url", lambda repo_id, filename, repo_type: str(out / filename))
    monkeypatch.setattr(
        huggingface_hub.DatasetCard, "push_to_hub", lambda card, repo_id, repo_type: pushed.append(card)
    )
    tracker = evaluation_tracker.EvaluationTracker.__new__(evaluation_tracker.EvaluationTracker)
    tracker.api, tracker.public_repo, tracker.details_repo = LocalApi(), True, "someone/details"
    tracker.leaderboard_url = tracker.point_of_contact = None
    tracker.general_config_tracker = evaluation_tracker.GeneralConfigTracker()
    tracker.general_config_tracker.model_name, tracker.general_config_tracker.model_source = "tiny", "hf"
    tracker.recreate_metadata_card()
    [card] = pushed
    model = Path(files[0]).parent.as_posix()
    for task in tasks:
        assert f"config_name: {model}__{task}" in str(card)
    assert '"forgetting_curve"' in str(card) and "copy_acc@16,none" in str(card)  # the latest results, ours included

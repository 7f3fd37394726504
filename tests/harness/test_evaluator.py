"""`lm_eval_longmem.harness.evaluator`: its reliances on lm_eval (R13, R17, R25 in the harness's R-list) and its
behaviour."""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

import lm_eval.tasks.manager as manager_module
import pytest
from kit import run_lm_eval

from lm_eval_longmem.harness import evaluator as harness_evaluator
from lm_eval_longmem.harness import models
from lm_eval_longmem.harness.evaluator import (
    doc_hash,
    evaluate_into,
    install_before_model,
    pending_run,
    results_from_payloads,
    results_tables,
    task_hash,
)
from lm_eval_longmem.harness.tasks import install_aggregation
from lm_eval_longmem.paths import task_configs_dir

FIXTURES = Path(__file__).parents[1] / "fixtures"

TaskManager = manager_module.TaskManager


def test_r13_results_from_logged_payloads_and_sample_hashes():
    """What `evaluate` does once the model answered, from payloads alone; the hashes `--log_samples` records carry."""
    from lm_eval import evaluator
    from lm_eval.loggers import evaluation_tracker

    class Stub:
        VERSION, eval_docs = 1.5, [{"x": 0}, {"x": 1}, {"x": 2}]

        def aggregate_payloads(self, raw_metrics, harness_default):
            return {"acc@1,none": sum(raw_metrics["acc", "none"])}, len(raw_metrics["acc", "none"])

        def dump_config(self):
            return {"task": "stub", "num_fewshot": 0}

        def higher_is_better(self):
            return {"acc@1": True}

    install_aggregation()
    results = results_from_payloads({"stub": Stub()}, {}, {"stub": {("acc", "none"): [1, 0]}}, 0)
    assert results["results"]["stub"]["acc@1,none"] == 1 and results["results"]["stub"]["sample_len"] == 2
    assert results["n-samples"]["stub"] == {"original": 3, "effective": 2}
    assert results["versions"]["stub"] == 1.5 and results["configs"]["stub"]["task"] == "stub"
    assert results["higher_is_better"]["stub"] == {"acc@1": True} and results["n-shot"]["stub"] == 0

    flat = lambda source: "".join(source.split())  # noqa: E731 (formatting aside)
    evaluate = flat(inspect.getsource(evaluator.evaluate))
    assert (
        '"doc_hash":hash_string(json.dumps(requests[0].doc,indent=2,default=handle_non_serializable,ensure_ascii=False'
        in evaluate
    )
    saved = flat(inspect.getsource(evaluation_tracker.EvaluationTracker.save_results_aggregated))
    assert 's["doc_hash"]+s["prompt_hash"]+s["target_hash"]forsintask_samples' in saved
    assert 'task_hashes[task_name]=hash_string("".join(sample_hashes))' in saved
    doc = {"length": 20, "text": "é"}
    assert doc_hash(doc) == hashlib.sha256(json.dumps(doc, indent=2, ensure_ascii=False).encode()).hexdigest()
    records = [
        {"doc_hash": "a", "prompt_hash": "b", "target_hash": "c"},
        {"doc_hash": "d", "prompt_hash": "e", "target_hash": "f"},
    ]
    assert task_hash(records) == hashlib.sha256(b"abcdef").hexdigest()


class _Stop(Exception):
    """Raised by a test's before-model check, so no model is built."""


@pytest.mark.parametrize("given_manager", [False, True])
@pytest.mark.slow
def test_r17_simple_evaluate_creates_its_model_from_its_own_frame(monkeypatch, tmp_path, given_manager):
    """`simple_evaluate` creates the model (R4's factories) before it loads any task, from its own
    frame, where `tasks`, `task_manager`, `model_args` and `metadata` hold what the caller passed. The check we
    install sees them there, for the lm_eval CLI (which always passes a TaskManager) and the Python API alike."""
    import lm_eval

    seen = []

    def check(run):
        seen.append(run)
        raise _Stop

    monkeypatch.setattr(harness_evaluator, "_before_model", None)
    install_before_model(check)
    manager = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata={"from": "manager"})
    with pytest.raises(_Stop):
        lm_eval.simple_evaluate(model="hf", model_args="pretrained=nowhere/model,dtype=float32", tasks=["booksort", "x"],
                                metadata={"booksort_data": "b"}, task_manager=manager if given_manager else None,
                                limit=0)  # fmt: skip
    (run,) = seen
    assert run.tasks == ["booksort", "x"] and run.limit == 0.0 and run.samples is None
    if given_manager:
        assert run.task_manager is manager and run.metadata == {"from": "manager"}
        assert (
            run.task_yaml("booksort") == task_configs_dir() / "booksort" / "booksort.yaml"
            and run.task_yaml("x") is None
        )
    else:
        assert run.task_manager is None and run.task_yaml("booksort") is None
        assert run.metadata == {"pretrained": "nowhere/model", "dtype": "float32", "booksort_data": "b"}
    assert pending_run() is None  # outside simple_evaluate: no run


@pytest.mark.slow
def test_r17_the_lm_eval_cli_checks_before_loading_the_model(tmp_path):
    """The real `lm_eval` command line: a missing model folder is reported by our check, before the harness tries it."""
    proc = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={tmp_path / 'no-model'}", "--tasks", "forgetting_curve",
                        "--metadata", f"forgetting_curve_corpus={tmp_path}"], tmp_path, check=False)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    message = proc.stderr[proc.stderr.index("lm-eval-longmem: error: ") :].splitlines()
    assert (
        message[0]
        == "lm-eval-longmem: error: 2 inputs of this run cannot be used (checked before loading the model; nothing ran):"
    )
    assert message[1].startswith(f"  - --model_args pretrained={tmp_path / 'no-model'}: no such folder")
    assert message[2].startswith(f"  - forgetting_curve_corpus={tmp_path}: no .txt files in the folder")
    assert len(message) == 3 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- R25: runs written as the CLI writes them


def test_r25_the_cli_saves_runs_as_evaluate_into_does():
    from lm_eval._cli import run

    flat = "".join(inspect.getsource(run.Run._execute).split())
    assert 'cfg.hf_hub_log_args["output_path"]=cfg.output_path' in flat
    assert "evaluation_tracker=EvaluationTracker(**cfg.hf_hub_log_args)" in flat
    assert "evaluation_tracker=evaluation_tracker," in flat  # handed to simple_evaluate
    assert 'samples=results.pop("samples")' in flat
    assert (
        "evaluation_tracker.save_results_aggregated(results=results,samples=samplesifcfg.log_sampleselseNone)" in flat
    )
    assert (
        'fortask_nameinresults["configs"]:evaluation_tracker.save_results_samples(task_name=task_name,samples=samples[task_name])'
        in flat
    )
    assert 'print(make_table(results))if"groups"inresults:print(make_table(results,"groups"))' in flat


def test_evaluate_into_writes_the_cli_files(tiny_llama_dir, tmp_path, monkeypatch):
    """A run of a harness-kind task through `evaluate_into`: results and samples files named as the harness's
    own readers parse them, the samples popped from the results, and the CLI's table."""
    from lm_eval.utils import get_file_task_name, get_results_filenames, get_sample_results_filenames

    monkeypatch.setattr(models, "_live", None)
    manager = TaskManager(include_path=str(FIXTURES / "plain_task"), include_defaults=False)
    results = evaluate_into(
        tmp_path, model="hf", model_args={"pretrained": str(tiny_llama_dir), "dtype": "float32"}, tasks=["longmem_test_plain_choice"],
        task_manager=manager, device="cpu", batch_size=1, limit=2,
    )  # fmt: skip
    assert "samples" not in results and results["results"]["longmem_test_plain_choice"]["acc,none"] is not None
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json*"))
    assert len(get_results_filenames(files)) == 1
    (samples_file,) = get_sample_results_filenames(files)
    assert get_file_task_name(Path(samples_file).name) == "longmem_test_plain_choice"
    assert len((tmp_path / samples_file).read_text().splitlines()) == 2
    saved = json.loads((tmp_path / get_results_filenames(files)[0]).read_text())
    assert saved["results"] == json.loads(json.dumps(results["results"]))
    table = results_tables(results)
    assert "longmem_test_plain_choice" in table and "acc" in table

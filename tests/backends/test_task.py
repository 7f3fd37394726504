"""The task base, `harness.install(backends.plugin())`, and a run through the real `lm_eval` command line."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from kit import hf_run_args, read_results, read_samples, run_lm_eval
from lm_eval.api.instance import Instance
from lm_eval.utils import hash_string
from tolerances import logprob_tol

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, TokenIds
from lm_eval_longmem.backends.task import LoglikelihoodAccuracyTask

FIXTURES = Path(__file__).parent / "fixtures"
TASKS = "longmem_backends_test,longmem_backends_test_ids"


@pytest.mark.slow
def test_install_only_adds_names():
    """In a fresh interpreter: install(plugin()) adds our names, wraps the harness's auto batch probe (R14), and
    replaces nothing else (twice = once)."""
    script = """
import lm_eval.api.model as model, lm_eval.api.registry as registry, lm_eval.api.task as task
from lm_eval.models.huggingface import HFLM
hf_before, caching_before = dict(vars(HFLM)), dict(vars(model.CachingLM))
types_before, metrics_before = list(task.ALL_OUTPUT_TYPES), dict(registry.DEFAULT_METRIC_REGISTRY)
from lm_eval_longmem.backends import plugin
from lm_eval_longmem.harness import install
install(plugin()); install(plugin())
assert HFLM._detect_batch_size.__wrapped__ is hf_before["_detect_batch_size"]
assert {k: v for k, v in vars(HFLM).items() if k not in ("loglikelihood_accuracy", "_detect_batch_size")} == {
    k: v for k, v in hf_before.items() if k != "_detect_batch_size"}
assert set(vars(HFLM)) - set(hf_before) == {"loglikelihood_accuracy"}
changed = {k for k in vars(model.CachingLM) if vars(model.CachingLM)[k] is not caching_before.get(k)}
assert changed == {"__getattr__"}, changed
assert model.CachingLM.__getattr__.__wrapped__ is caching_before["__getattr__"]
assert task.ALL_OUTPUT_TYPES == types_before + ["loglikelihood_accuracy"]
assert {k: v for k, v in registry.DEFAULT_METRIC_REGISTRY.items() if k != "loglikelihood_accuracy"} == metrics_before
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def make_task(**overrides) -> LoglikelihoodAccuracyTask:
    import datasets

    config = {
        "task": "unit",
        "custom_dataset": lambda **kw: {"test": datasets.Dataset.from_list([{"q": "Hello", "a": " world"}])},
        "test_split": "test",
        "doc_to_text": "{{q}}",
        "doc_to_target": "{{a}}",
        "metadata": {"version": 0},
        **overrides,
    }
    return LoglikelihoodAccuracyTask(config=config)


def test_default_request_is_prompt_and_target_after_the_delimiter():
    """As the harness's loglikelihood requests: the continuation is `target_delimiter + target`."""
    task = make_task(doc_to_target="{{a.strip()}}")
    doc = task.eval_docs[0]
    (inst,) = task.construct_requests(doc, "Hello", metadata=("unit", 0, 1), apply_chat_template=False)
    assert inst.request_type == OUTPUT_TYPE and inst.args == ("Hello", " world")
    joined = make_task(doc_to_target="{{a.strip()}}", target_delimiter="")
    assert joined.accuracy_requests(doc) == [(None, "world")]
    ids = make_task(doc_to_target=lambda doc: [7, 8])
    assert ids.accuracy_requests(doc) == [(None, [7, 8])]  # token ids go as they are
    scores = task.process_results(doc, [TokenAccuracy("0110", -3.5)])
    assert scores == {"token_acc": 0.5, "logprob": -3.5}  # `skipped` is added at aggregation (task base)
    assert set(task.aggregation()) == {"token_acc", "logprob"}
    better = task.higher_is_better()
    assert better["token_acc"] and better["logprob"] and better["skipped"] is False


def test_token_ids_and_the_beyond_option_reach_the_request():
    class Ids(LoglikelihoodAccuracyTask):
        beyond_max_length = True

        def accuracy_requests(self, doc):
            return [([1, 2, 3], (4, 5)), (None, [6])]

    task = Ids(config={**make_task().config.to_dict(keep_callable=True)})
    first, second = task.construct_requests(task.eval_docs[0], "ctx", metadata=("unit", 0, 1))
    assert first.args == ([1, 2, 3], [4, 5], {"beyond_max_length": True})
    assert isinstance(first.args[0], TokenIds) and first.idx == 0 and second.idx == 1
    assert second.args[0] == "ctx"
    hash_string(first.arguments[0])  # what --log_samples does with every request's first argument
    assert pickle.loads(pickle.dumps(first)).args == first.args  # what --cache_requests does


def test_yaml_metric_list_is_honoured_without_registry_lookups(caplog):
    task = make_task(metric_list=[{"metric": "token_acc", "aggregation": "median", "higher_is_better": True}])
    assert list(task.aggregation()) == ["token_acc"]
    assert "Could not find registered metric" not in caplog.text
    with pytest.raises(ValueError, match="emits loglikelihood_accuracy requests"):
        make_task(output_type="loglikelihood")


@pytest.mark.slow
def test_cli_end_to_end_with_samples_and_cache(tiny_llama_dir, tiny_lm, tmp_path):
    """Two tasks through `lm_eval --model hf`, then the same run again from `--use_cache`."""
    args = hf_run_args(
        tiny_llama_dir,
        TASKS,
        "--include_path",
        str(FIXTURES),
        "--batch_size",
        "2",
        "--log_samples",
        "--use_cache",
        str(tmp_path / "cache"),
    )
    runs = []
    for name in ("first", "second"):
        out = tmp_path / name
        out.mkdir()
        proc = run_lm_eval(args, out)
        runs.append((proc, read_results(out), {t: read_samples(out, t) for t in TASKS.split(",")}))
    (proc1, results1, samples1), (proc2, results2, samples2) = runs

    # what the same model computes in this process
    ids_samples = samples1["longmem_backends_test_ids"]
    assert len(ids_samples) == 4 and all(len(s["resps"]) == 2 for s in ids_samples)
    token_args = [sample["arguments"]["gen_args_0"] for sample in ids_samples]
    assert all(args["arg_2"] == {"beyond_max_length": True} for args in token_args)
    wanted = tiny_lm.loglikelihood_accuracy(
        [Instance(OUTPUT_TYPE, {}, (args["arg_0"], args["arg_1"]), 0) for args in token_args], disable_tqdm=True
    )
    for sample, want in zip(ids_samples, wanted, strict=True):
        bits, logprob = sample["resps"][0][0]  # logged compactly: the bit string and one number
        assert bits == want.bits and float(logprob) == pytest.approx(want.logprob, abs=logprob_tol(len(bits)))
    metrics = results1["results"]["longmem_backends_test"]
    assert {"token_acc,none", "logprob,none"} <= set(metrics)

    progress_bar = (
        "Running loglikelihood_accuracy requests, input tokens of "  # our tqdm bar, shown only when computing
    )
    assert progress_bar in proc1.stderr
    assert progress_bar not in proc2.stderr  # everything came from the cache
    for task in TASKS.split(","):
        assert results2["results"][task] == results1["results"][task]
        assert [s["resps"] for s in samples2[task]] == [s["resps"] for s in samples1[task]]


def test_the_progress_label_names_each_tasks_input_tokens():
    """One call of the request type holds every task's requests: its bar says whose tokens it counts."""
    from types import SimpleNamespace

    from lm_eval_longmem.backends.request_type import EncodedRequest, progress_label

    requests = [
        SimpleNamespace(task_name=name) for name in ("forgetting_curve", "booksort_in_context", "forgetting_curve")
    ]
    encoded = [
        EncodedRequest([1] * 5, [2] * 3, False),
        EncodedRequest([1] * 10, [2], False),
        EncodedRequest([1], [2], False),
    ]
    assert progress_label(requests, encoded) == (
        "Running loglikelihood_accuracy requests, input tokens of forgetting_curve 10 + booksort_in_context 11"
    )

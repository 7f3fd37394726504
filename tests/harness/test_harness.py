"""`lm_eval_longmem.harness`: one test per reliance on lm_eval (R1..R25 in its docstring), and its behaviour."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import lm_eval.tasks.manager as manager_module
import pytest
from kit import REPO_ROOT, run_lm_eval

from lm_eval_longmem import harness
from lm_eval_longmem.backends import install
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.paths import task_configs_dir

FIXTURES = Path(__file__).parent / "fixtures"

harness.patch_task_manager(manager_module)  # what the hook does; idempotent when the hook already did it
TaskManager = manager_module.TaskManager


def _task_dir(root: Path, name: str, text: str = "x") -> Path:
    """A folder holding one minimal YAML task `name` (never loaded, only indexed)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}.yaml").write_text(
        f"task: {name}\ndataset_path: none\noutput_type: loglikelihood\ndoc_to_text: '{text}'\ndoc_to_target: ' y'\n"
    )
    return root


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def full_index(tmp_path_factory):
    """One TaskManager over the built-ins, ours and a user path, built positionally (it takes a while).

    The user path defines `booksort` (one of our names) and a new task, to check the order
    built-ins < ours < user. Returns (manager, index-logger records, user dir).
    """
    user = _task_dir(tmp_path_factory.mktemp("user") / "tasks", "booksort")
    _task_dir(user, "longmem_test_user_task")
    records = _Records()
    index_logger = logging.getLogger(harness.INDEX_LOGGER)
    index_logger.addHandler(records)
    level = index_logger.level
    index_logger.setLevel(logging.DEBUG)
    try:
        manager = TaskManager(None, str(user))  # verbosity, include_path: positional on purpose
    finally:
        index_logger.removeHandler(records)
        index_logger.setLevel(level)
    return manager, records.records, user


# ---------------------------------------------------------------- R1: TaskManager parameters and order


def test_r1_task_manager_parameters_and_precedence(tmp_path):
    original = inspect.unwrap(TaskManager.__init__)
    params = list(inspect.signature(original).parameters)
    assert {"include_path", "include_defaults"} <= set(params)
    first = _task_dir(tmp_path / "a", "longmem_test_same", text="first")
    second = _task_dir(tmp_path / "b", "longmem_test_same", text="second")
    manager = TaskManager(include_path=[str(first), str(second)], include_defaults=False)
    assert manager.all_tasks == ["longmem_test_same"]
    assert Path(manager.task_index["longmem_test_same"].yaml_path).parent == second  # later path wins
    assert (Path(manager_module.__file__).parent / "babilong").is_dir()  # the built-ins sit beside manager.py


def test_include_defaults_false_leaves_our_tasks_out(tmp_path):
    """Defect 10: only the given path, whether the flag is passed by keyword or by position."""
    user = _task_dir(tmp_path / "user", "longmem_test_only")
    by_keyword = TaskManager(include_defaults=False, include_path=str(user))
    by_position = TaskManager(None, str(user), False)
    assert by_keyword.all_tasks == by_position.all_tasks == ["longmem_test_only"]


def test_explicit_task_manager_keeps_our_tasks_without_defaults(tmp_path):
    """`lm_eval_longmem.task_manager(include_defaults=False)` asks for ours explicitly, so they stay."""
    import lm_eval_longmem

    manager = lm_eval_longmem.task_manager(
        include_defaults=False, include_path=str(_task_dir(tmp_path, "longmem_test_x"))
    )
    assert {"forgetting_curve", "booksort", "babilong", "longmem_test_x"} <= set(manager.all_tasks)


@pytest.mark.slow
def test_order_is_builtins_then_ours_then_the_user(full_index):
    manager, _, user = full_index
    index = manager.task_index
    assert Path(index["babilong"].yaml_path).is_relative_to(task_configs_dir())  # ours replaces the built-in
    assert Path(index["booksort"].yaml_path).parent == user  # the user's path replaces ours
    assert "longmem_test_user_task" in index and "hellaswag" in index


# ---------------------------------------------------------------- R3: the override warning


def test_r3_override_warning_record_shape(tmp_path):
    """lm_eval still warns with (name, new path, old path) when a later path replaces a name."""
    from lm_eval.tasks._index import TaskIndex

    first = _task_dir(tmp_path / "a", "longmem_test_same")
    second = _task_dir(tmp_path / "b", "longmem_test_same")
    records = _Records()
    logger = logging.getLogger(harness.INDEX_LOGGER)
    logger.addHandler(records)
    try:
        TaskIndex.build([first, second])
    finally:
        logger.removeHandler(records)
    (warning,) = [r for r in records.records if r.levelno == logging.WARNING]
    name, new, old = warning.args
    assert name == "longmem_test_same" and Path(new).parent == second and Path(old).parent == first
    assert "overrides" in warning.getMessage()


@pytest.mark.slow
def test_our_replacement_of_the_builtin_babilong_is_silent(full_index):
    """Defect 11: no override warning for our babilong; the user's override of ours still warns."""
    manager, records, user = full_index
    warnings = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "'babilong'" in w], warnings
    assert [w for w in warnings if "'booksort'" in w and str(user) in w], warnings
    replaced = getattr(manager, harness.MARK)["replaced"]
    assert set(replaced) == {"babilong"} and Path(replaced["babilong"]).is_relative_to(
        Path(manager_module.__file__).parent
    )


# ---------------------------------------------------------------- R2: load() sees the requested names


@pytest.mark.slow
def test_r2_load_receives_the_requested_names(full_index, monkeypatch):
    """A run asking for babilong hears once, at INFO, that ours replaces the built-in; others hear nothing."""
    manager, _, _ = full_index
    getattr(manager, harness.MARK)["announced"].clear()
    asked = []

    def load_spec(spec):  # stands in for building the task, which is not what is tested here
        asked.append(spec)
        raise LookupError("not built in this test")

    monkeypatch.setattr(manager, "_load_spec", load_spec)
    records = _Records()  # on the logger itself: lm_eval's setup_logging may stop propagation to caplog
    level = harness.log.level
    harness.log.setLevel(logging.INFO)
    harness.log.addHandler(records)
    try:
        with pytest.raises(LookupError):
            manager.load(["booksort"])
        assert not records.records
        for _ in range(2):
            with pytest.raises(LookupError):
                manager.load(["babilong", "booksort"])
    finally:
        harness.log.removeHandler(records)
        harness.log.setLevel(level)
    assert asked == ["booksort", "babilong", "babilong"]
    (notice,) = records.records
    assert notice.levelno == logging.INFO and "'babilong'" in notice.getMessage()
    assert inspect.signature(inspect.unwrap(TaskManager.load)).parameters.keys() >= {"task_list"}


# ---------------------------------------------------------------- R4: the live backend


def test_r4_lm_factories_are_classmethods_and_hflm_has_max_length():
    from lm_eval.api.model import LM
    from lm_eval.models.huggingface import HFLM

    for name in ("create_from_arg_string", "create_from_arg_obj"):
        assert isinstance(inspect.getattr_static(LM, name), classmethod)
        assert name not in vars(HFLM)  # HFLM inherits them, so wrapping LM's covers it
    assert isinstance(inspect.getattr_static(HFLM, "max_length"), property)


def test_live_backend_records_the_model_the_harness_creates(tiny_llama_dir, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    monkeypatch.setattr(harness, "_live", None)  # and back afterwards: later tests must not see this model

    harness.patch_lm_factories()
    harness.patch_lm_factories()  # twice = once
    HFLM.create_from_arg_string(f"pretrained={tiny_llama_dir},dtype=float32", {"device": "cpu", "batch_size": 1})
    model = str(tiny_llama_dir)
    assert harness.live_backend() == harness.LiveBackend(
        kind="hf", max_length=2048, pretrained=model
    )  # config's window
    HFLM.create_from_arg_obj({"pretrained": model, "max_length": 300}, {"device": "cpu"})
    assert harness.live_backend() == harness.LiveBackend(kind="hf", max_length=300, pretrained=model)


def test_the_window_comes_from_the_live_model_only_for_the_model_named(tiny_llama_dir, monkeypatch):
    from lm_eval_longmem.common.model_info import model_window

    live = harness.LiveBackend(kind="vllm", max_length=1000, pretrained=str(tiny_llama_dir))
    monkeypatch.setattr(harness, "_live", live)
    window = model_window({"pretrained": str(tiny_llama_dir)})
    assert (window.tokens, window.positions, window.backend) == (1000, 998, "vllm")  # no max_model_len given
    other = model_window({"pretrained": str(tiny_llama_dir) + "-other", "max_length": 512})
    assert (other.tokens, other.backend) == (512, "hf")


def test_describe_lm_reads_the_window_safely():
    class VLLM:  # stands in for a vLLM backend whose engine cannot be asked
        @property
        def max_length(self):
            raise AttributeError("no engine")

    class Remote:
        max_length = "lots"

    assert harness.describe_lm(VLLM()) == harness.LiveBackend(kind="vllm", max_length=None)
    assert harness.describe_lm(Remote()) == harness.LiveBackend(kind="remote", max_length=None)


# ---------------------------------------------------------------- R14: the harness's --batch_size auto probe


def _forward_batches(lm) -> list[tuple[int, int]]:
    """(batch, positions) of every forward the model runs from now on."""
    shapes: list[tuple[int, int]] = []
    lm.model.register_forward_pre_hook(lambda module, args: shapes.append(tuple(args[0].shape)) if args else None)
    return shapes


@pytest.mark.slow
def test_r14_detect_batch_size_starts_at_max_batch_size(tiny_llama_dir):
    from lm_eval.models.huggingface import HFLM

    install()
    original = inspect.unwrap(HFLM._detect_batch_size)
    assert list(inspect.signature(original).parameters) == ["self", "requests", "pos"]
    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="float32", max_batch_size=3)
    shapes = _forward_batches(lm)
    requests = [("k0", [1] * 10, [5] * 4), ("k1", [1] * 30, [5] * 10)]
    assert original(lm, requests, 1) == 3  # fits: the first size tried is the answer
    assert set(shapes) == {(3, 39)}, "full forwards of max_batch_size copies of requests[pos], its last token dropped"
    shapes.clear()
    assert original(lm) == 3
    assert set(shapes) == {(3, lm.max_length)}, "without requests the probe runs the whole window"


def test_the_harness_probe_starts_from_the_cap_or_does_not_run(tiny_llama_dir, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="float32", max_batch_size=8)
    shapes = _forward_batches(lm)
    requests = [("k", [1] * 30, [5] * 10)]
    caps = []
    monkeypatch.setattr(HFLM, "_detect_batch_size", inspect.unwrap(HFLM._detect_batch_size))
    harness.install_batch_probe_cap(lambda model, positions: caps.append(positions) or (2, True))
    assert lm._detect_batch_size(requests) == 2 and shapes == [] and caps == [39]  # decided: no trial forward
    monkeypatch.setattr(HFLM, "_detect_batch_size", inspect.unwrap(HFLM._detect_batch_size))
    harness.install_batch_probe_cap(lambda model, positions: (2, False))
    assert lm._detect_batch_size(requests) == 2 and set(shapes) == {(2, 39)} and lm.max_batch_size == 8


# ---------------------------------------------------------------- R5, R6: request type and CachingLM


def test_r5_output_types_list_and_metric_registry():
    from lm_eval.api import registry, task

    install()
    assert isinstance(task.ALL_OUTPUT_TYPES, list) and "loglikelihood" in task.ALL_OUTPUT_TYPES
    assert "loglikelihood_accuracy" in task.ALL_OUTPUT_TYPES
    assert isinstance(registry.DEFAULT_METRIC_REGISTRY, dict) and "loglikelihood" in registry.DEFAULT_METRIC_REGISTRY
    # getattr(lm, output_type)(requests) in the evaluator: exercised end to end in tests/backends/test_task.py


def test_r6_caching_lm_getattr_dbdict_and_hash_args(tmp_path):
    from types import SimpleNamespace

    from lm_eval.api.model import LM, CachingLM, hash_args

    harness.teach_caching_lm("loglikelihood_accuracy")
    calls = []

    class Counting(LM):
        def loglikelihood(self, requests):
            return [(0.0, True) for _ in requests]

        def loglikelihood_rolling(self, requests):
            return [0.0 for _ in requests]

        def generate_until(self, requests):
            return ["" for _ in requests]

        def loglikelihood_accuracy(self, requests):
            calls.append(len(requests))
            return [f"answer-{req.args[0]}" for req in requests]

    requests = [SimpleNamespace(args=(f"ctx{i}", "cont")) for i in range(3)]
    cached = CachingLM(Counting(), str(tmp_path / "cache.db"))
    assert cached.loglikelihood_accuracy(requests[:2]) == ["answer-ctx0", "answer-ctx1"]
    assert cached.loglikelihood_accuracy(requests) == ["answer-ctx0", "answer-ctx1", "answer-ctx2"]
    assert calls == [2, 1]  # the second call computed only the new request
    assert cached.dbdict[hash_args("loglikelihood_accuracy", requests[2].args)] == "answer-ctx2"
    assert cached.loglikelihood([]) == []  # the built-in names still go through the original


# ---------------------------------------------------------------- R7: the request-cache key


def test_r7_request_cache_is_keyed_by_tokenizer_name(tmp_path, monkeypatch):
    import datasets
    import lm_eval.caching.cache as cache
    from lm_eval.api.task import ConfigurableTask

    monkeypatch.setattr(cache, "PATH", str(tmp_path))
    word = {"value": "apple"}
    task = ConfigurableTask(
        config={
            "task": "longmem_test_cache_key",
            "custom_dataset": lambda **_: {"test": datasets.Dataset.from_list([{"w": word["value"]}])},
            "test_split": "test",
            "output_type": "loglikelihood",
            "doc_to_text": "{{w}}",
            "doc_to_target": " y",
            "metadata": {"version": 0},
        }
    )

    def prompts(fingerprint: str) -> list[str]:
        task.dataset = task.config.custom_dataset()  # the docs as they are now
        name = harness.request_cache_tokenizer_name("tok", fingerprint)
        task.build_all_requests(cache_requests=True, tokenizer_name=name)
        return [instance.args[0] for instance in task.instances]

    assert prompts("aaa") == ["apple"]
    word["value"] = "pear"
    assert prompts("aaa") == ["apple"]  # same name: the stale requests come back; that is what R7 means
    assert prompts("bbb") == ["pear"]  # a new fingerprint builds them afresh
    assert len(list(tmp_path.iterdir())) == 2


# ---------------------------------------------------------------- R8: the harness's BABILong texts


def test_r8_builtin_babilong_yaml_shape():
    for qa in ("qa1", "QA5", "qa20"):
        path, config = harness.read_builtin_babilong_config(qa)
        assert path.name == f"babilong_{qa.lower()}.yaml" and path.is_file()
        lines = [line.strip() for line in str(config["description"]).splitlines() if line.strip()]
        assert any(line.startswith(("Always return", "Your answer")) for line in lines[1:])
        samples = config["fewshot_config"]["samples"]
        assert samples and all({"input", "question", "target"} <= set(s) for s in samples)
    with pytest.raises(FileNotFoundError, match="babilong_qa21.yaml"):
        harness.builtin_babilong_file("qa21")


# ---------------------------------------------------------------- R9: usage errors


@pytest.mark.slow
def test_r9_usage_error_reaches_the_top_of_lm_eval(tmp_path):
    """A real `lm_eval` run whose task raises UsageError (wrapped): one line, exit 1, no traceback.

    The same run checks defect 11 on a command that does not ask for babilong: the harness's
    override warning for it is gone and our notice does not appear.
    """
    args = [
        "run",
        "--model",
        "dummy",
        "--tasks",
        "longmem_test_usage_error",
        "--include_path",
        str(FIXTURES / "usage_error"),
    ]
    proc = run_lm_eval(args, tmp_path, check=False, env={"LM_EVAL_LONGMEM_DEBUG": "0"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert (
        last
        == "lm-eval-longmem: error: longmem_test_word: 'zzz' is not a word this task knows; use longmem_test_word=apple"
    )
    assert "Traceback" not in proc.stderr
    assert "overrides existing task" not in proc.stderr
    assert "lm-eval-longmem's task" not in proc.stderr


def _hook_output(monkeypatch, capsys, exc: BaseException, argv=("lm_eval",), env: str = "") -> tuple[list, str]:
    passed_on = []
    monkeypatch.setattr(sys, "excepthook", lambda *a: passed_on.append(a[1]))
    monkeypatch.setattr(sys, "argv", list(argv))
    monkeypatch.setenv(harness.DEBUG_ENV, env)
    harness.install_usage_error_hook(UsageError)
    harness.install_usage_error_hook(UsageError)  # twice = once
    sys.excepthook(type(exc), exc, exc.__traceback__)
    return passed_on, capsys.readouterr().err


def test_usage_error_hook_prints_one_line(monkeypatch, capsys):
    passed_on, err = _hook_output(monkeypatch, capsys, UsageError("k: bad; use k=1"))
    assert passed_on == [] and err == "lm-eval-longmem: error: k: bad; use k=1\n"


def test_usage_error_hook_finds_the_error_behind_another(monkeypatch, capsys):
    try:
        try:
            raise UsageError("file x.csv: empty; give a CSV with rows")
        except UsageError:
            raise KeyError("while loading")  # noqa: B904 (the test needs __context__, not __cause__)
    except KeyError as err:
        wrapped = err
    passed_on, err = _hook_output(monkeypatch, capsys, wrapped)
    assert passed_on == [] and err == "lm-eval-longmem: error: file x.csv: empty; give a CSV with rows\n"


@pytest.mark.parametrize("argv, env", [(("lm_eval", "--debug"), ""), (("lm_eval",), "1")])
def test_usage_error_hook_steps_aside_for_debug(monkeypatch, capsys, argv, env):
    error = UsageError("k: bad")
    passed_on, err = _hook_output(monkeypatch, capsys, error, argv=argv, env=env)
    assert passed_on == [error] and err == ""


def test_other_errors_go_to_the_previous_hook(monkeypatch, capsys):
    error = RuntimeError("boom")
    passed_on, err = _hook_output(monkeypatch, capsys, error)
    assert passed_on == [error] and err == ""


# ---------------------------------------------------------------- R10: the notice logger


@pytest.mark.slow
def test_r10_notice_logger_is_under_lm_eval():
    code = "from lm_eval_longmem import harness\nharness.setup_logging()\nharness.log.info('longmem-notice-check')\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    (line,) = [line for line in proc.stderr.splitlines() if "longmem-notice-check" in line]
    assert " INFO     [lm_eval_longmem.harness:" in line  # lm_eval's format, its `lm_eval.` prefix stripped


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
    args = ["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32", "--device", "cpu",
            "--tasks", "forgetting_curve", "--batch_size", "1", "--metadata", json.dumps(metadata)]  # fmt: skip
    stderr = run_lm_eval(args, tmp_path, env={"LMEVAL_LOG_LEVEL": "WARNING"}).stderr
    (warning,) = [line for line in stderr.splitlines() if "[lm_eval_longmem.common.task:" in line]
    assert " WARNING  [" in warning and "skipped, never truncated" in warning
    assert "lm_eval_longmem.forgetting_curve.data" not in stderr and " INFO " not in stderr


# ---------------------------------------------------------------- R12: --model_args / --metadata


@pytest.mark.parametrize(
    "words",
    [["pretrained=x,dtype=float32"], ["pretrained=x", "dtype=float32"], ['{"pretrained": "x", "lengths": [1, 2]}'],
     ["lengths=[250,1000]", "flag=true,n=3"]],
)  # fmt: skip
def test_r12_dict_flags_parse_as_the_harness_parses_them(words, monkeypatch):
    """Our subcommands' `--model_args`/`--metadata` give the dict that `lm_eval run` gives for the same words."""
    import argparse

    from lm_eval._cli import HarnessCLI

    monkeypatch.setattr(sys, "argv", ["lm-eval", "run", "--tasks", "x", "--model_args", *words, "--metadata", *words])
    theirs = HarnessCLI().parse_args()
    ours = argparse.ArgumentParser()
    for flag in ("--model_args", "--metadata"):
        ours.add_argument(flag, nargs="+", action=harness.dict_flag_action())
    parsed = ours.parse_args(["--model_args", *words, "--metadata", *words])
    assert parsed.model_args == theirs.model_args == parsed.metadata == theirs.metadata
    assert isinstance(parsed.model_args, dict) and parsed.model_args


# ---------------------------------------------------------------- the start-up hook


@pytest.mark.slow
def test_pth_hook_is_idempotent():
    """The `.pth` line run twice (e.g. the file processed twice) arms one finder, not two."""
    line = (REPO_ROOT / "lm_eval_longmem.pth").read_text()
    assert len(line.strip().splitlines()) == 1
    code = (
        f"import sys\nline = {line.strip()!r}\nexec(line); exec(line)\n"
        "print(sum(type(f).__name__ == 'LmEvalLongmemHook' for f in sys.meta_path))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LM_EVAL_LONGMEM_AUTOLOAD"}
    counts = [
        subprocess.run(
            [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env={**env, **extra}
        ).stdout.strip()
        for extra in ({}, {"LM_EVAL_LONGMEM_AUTOLOAD": "off"})
    ]
    assert counts == ["1", "0"]


@pytest.mark.slow
def test_hook_activates_the_harness_patches_on_first_import():
    code = (
        "import json, sys\n"
        "import lm_eval.tasks.manager as m, lm_eval.api.model as model\n"
        "print(json.dumps({'tm': getattr(m.TaskManager.__init__, '_lm_eval_longmem', False),"
        " 'lm': getattr(model.LM.create_from_arg_string.__func__, '_lm_eval_longmem', False),"
        " 'hook': getattr(sys.excepthook, '_lm_eval_longmem', False),"
        " 'armed': any(type(f).__name__ == 'LmEvalLongmemHook' for f in sys.meta_path)}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LM_EVAL_LONGMEM_AUTOLOAD"}
    on = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    )
    off = json.loads(
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**env, "LM_EVAL_LONGMEM_AUTOLOAD": "0"},
        ).stdout
    )
    assert on == {"tm": True, "lm": True, "hook": True, "armed": False}  # the finder retired itself
    assert off == {"tm": False, "lm": False, "hook": False, "armed": False}


def test_r11_task_aggregation_hook_and_payload_order():
    """`_collect_results` calls the module's `_compute_task_aggregations` at call time (so our hook is
    used), and `evaluate` appends each doc's payload key by key and chains ranks key by key."""
    from lm_eval import evaluator, evaluator_utils

    harness.install_aggregation()
    harness.install_aggregation()  # idempotent
    assert getattr(evaluator_utils._compute_task_aggregations, harness.MARK, False)

    class Stub:
        VERSION, eval_docs = 1, [0, 1]

        def aggregate_payloads(self, raw_metrics, harness_default):
            return {"acc@1,none": sum(raw_metrics["acc", "none"])} | harness_default({("n", "none"): [1, 2]})[0], 2

        def aggregation(self):  # what the harness's own aggregation (harness_default) uses
            return {"n": lambda values: sum(values) / len(values)}

        def dump_config(self):
            return {"task": "stub"}

        def higher_is_better(self):
            return {"acc@1": True}

    accumulated = {"stub": {"task": Stub(), "raw_metrics": {("acc", "none"): [1, 0]}, "logged_samples": []}}
    metrics = evaluator_utils._collect_results(accumulated, {}, 0).metrics["stub"]
    assert metrics["acc@1,none"] == 1 and metrics["n,none"] == 1.5 and metrics["sample_len"] == 2
    source = inspect.getsource(evaluator.evaluate)
    assert 'acc["raw_metrics"][(metric, filter_key)].append(value)' in source  # one value per doc and key, in doc order
    assert (
        "rank_data[task_name][metric_key]" in source and 'for metric_key in acc["raw_metrics"]' in source
    )  # keys of rank 0


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

    harness.install_aggregation()
    results = harness.results_from_payloads({"stub": Stub()}, {}, {"stub": {("acc", "none"): [1, 0]}}, 0)
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
    assert harness.doc_hash(doc) == hashlib.sha256(json.dumps(doc, indent=2, ensure_ascii=False).encode()).hexdigest()
    records = [
        {"doc_hash": "a", "prompt_hash": "b", "target_hash": "c"},
        {"doc_hash": "d", "prompt_hash": "e", "target_hash": "f"},
    ]
    assert harness.task_hash(records) == hashlib.sha256(b"abcdef").hexdigest()


def test_r15_wandb_sample_table_reads_every_metric_list_name_from_every_sample():
    """The W&B logger builds a task's sample table from `configs[task]["metric_list"]`, one column per
    name read from every logged sample: a name the samples lack fails the whole upload (issue 28, defect 12)."""
    from lm_eval.loggers.wandb_logger import WandbLogger

    samples = [
        {"doc_id": i, "target": "", "arguments": [([1, 2], [3])], "resps": [["1", -1.0]], "filtered_resps": [["1", -1.0]],
         "copy_acc": 0.5 * i, "lm_acc": 0.25, "cells": ["64"], "metrics": ["copy_acc", "lm_acc", "cells"]}
        for i in range(2)
    ]  # fmt: skip
    ours = {
        "output_type": "loglikelihood_accuracy",
        "metric_list": harness.logged_metric_list([("copy_acc", True), ("lm_acc", True)]),
    }
    table = WandbLogger._generate_dataset(None, samples, ours)  # the method reads nothing of its instance
    assert list(table["copy_acc"]) == [0.0, 0.5] and list(table["lm_acc"]) == [0.25, 0.25] and len(table) == 2
    with pytest.raises(KeyError, match="token_acc"):  # what the run's config named before: no sample holds it
        WandbLogger._generate_dataset(None, samples, {**ours, "metric_list": [{"metric": "token_acc"}]})


@pytest.mark.slow
def test_r16_task_names_yaml_paths_and_missing_include_paths(tmp_path):
    """What `TaskManager` does with a bad name, YAML or include path, and the one line `load_tasks` makes of it."""
    manager = harness.new_task_manager(include_defaults=False)
    assert {"forgetting_curve", "booksort", "babilong"} <= set(manager.all_tasks)
    with pytest.raises(KeyError, match="forgeting_curve"):
        manager.load(["forgeting_curve"])
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("task: [unclosed\n")
    with pytest.raises(Exception) as raised:
        manager.load([str(bad_yaml)])
    assert not isinstance(raised.value, UsageError)
    missing = tmp_path / "no_such_folder"
    assert (
        "forgetting_curve" in harness.new_task_manager(include_path=str(missing), include_defaults=False).all_tasks
    )  # skipped silently

    with pytest.raises(UsageError, match=r"^--tasks forgeting_curve: no such task; did you mean forgetting_curve\?"):
        harness.load_tasks(["forgeting_curve"], {}, usage_error=UsageError)
    with pytest.raises(UsageError, match=r"^--tasks .*bad\.yaml: the harness cannot load it as a task \(ParserError"):
        harness.load_tasks([str(bad_yaml)], {}, usage_error=UsageError)
    with pytest.raises(UsageError, match=r"^--include_path .*no_such_folder: no such file or folder"):
        harness.load_tasks(["forgetting_curve"], {}, include_path=[str(missing)], usage_error=UsageError)


# --- issue 28, defect 12: every integration the harness offers for results and samples works with our tasks -------


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
        ["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32", "--device", "cpu",
         "--tasks", "forgetting_curve,booksort,babilong,longmem_test_plain_choice", "--include_path", str(FIXTURES / "plain_task"),
         "--limit", "2", "--log_samples", "--write_out", "--show_config",
         "--wandb_args", "project=longmem,mode=offline", "--trackio_args", "project=longmem",
         "--metadata", f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[16,32]", "forgetting_curve_samples=1",
         f"booksort_data={booksort_data}", "babilong_source=generate", "babilong_facts=simulated", f"babilong_corpus={book}",
         "babilong_lengths=[0k]", "babilong_tasks=[qa1]", "babilong_samples=2"],
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


def _notice_records(task_name: str, quiet: str | None) -> list[str]:
    """The `lm_eval.api.task` messages logged while a task with a callable `custom_dataset` is built."""
    import datasets
    from lm_eval.api.task import ConfigurableTask

    records = _Records()
    logger = logging.getLogger(harness.TASK_LOGGER)
    logger.addHandler(records)
    config = {"task": task_name, "output_type": "loglikelihood", "test_split": "test", "doc_to_text": "x",
              "doc_to_target": " y", "custom_dataset": lambda **_: {"test": datasets.Dataset.from_list([{"a": 1}])}}  # fmt: skip
    try:
        with harness.quiet_custom_dataset_notice(quiet) if quiet else contextlib.nullcontext():
            ConfigurableTask(config=config)
    finally:
        logger.removeHandler(records)
    return [r.getMessage() for r in records.records if r.levelno == logging.WARNING]


def test_r18_custom_dataset_notice_shape():
    """Issue 26, item 6: the harness warns for every task with a callable `custom_dataset`, suggesting RULER's
    `max_seq_lengths` key, through `lm_eval.api.task`; the message begins with the task name and the notice."""
    (message,) = _notice_records("longmem_test_notice", None)
    assert message.startswith(f"longmem_test_notice: {harness.CUSTOM_DATASET_NOTICE}") and "max_seq_lengths" in message


def test_custom_dataset_notice_is_dropped_for_the_named_task_only():
    assert _notice_records("longmem_test_notice", quiet="longmem_test_notice") == []
    (kept,) = _notice_records("ruler_like", quiet="longmem_test_notice")  # another task's notice still shows
    assert kept.startswith("ruler_like: ")
    assert not logging.getLogger(harness.TASK_LOGGER).filters  # the filter is removed afterwards


def test_our_tasks_load_without_the_custom_dataset_notice(tiny_llama_dir, embedded_books_dir):
    records = _Records()
    logger = logging.getLogger(harness.TASK_LOGGER)
    logger.addHandler(records)
    try:
        metadata = {"pretrained": str(tiny_llama_dir), "forgetting_curve_corpus": str(embedded_books_dir / "macbeth.txt"),
                    "forgetting_curve_lengths": "16", "forgetting_curve_samples": 1}  # fmt: skip
        tm = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata)
        assert "forgetting_curve" in tm.load(["forgetting_curve"])["tasks"]
    finally:
        logger.removeHandler(records)
    assert not [r for r in records.records if harness.CUSTOM_DATASET_NOTICE in r.getMessage()]


class _Stop(Exception):
    """Raised by a test's before-model check, so no model is built."""


@pytest.mark.parametrize("given_manager", [False, True])
@pytest.mark.slow
def test_r17_simple_evaluate_creates_its_model_from_its_own_frame(monkeypatch, tmp_path, given_manager):
    """Issue 26, item 4: `simple_evaluate` creates the model (R4's factories) before it loads any task, from its own
    frame, where `tasks`, `task_manager`, `model_args` and `metadata` hold what the caller passed. The check we
    install sees them there, for the lm_eval CLI (which always passes a TaskManager) and the Python API alike."""
    import lm_eval

    seen = []

    def check(run):
        seen.append(run)
        raise _Stop

    monkeypatch.setattr(harness, "_before_model", None)
    harness.install_before_model(check)
    manager = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata={"from": "manager"})
    with pytest.raises(_Stop):
        lm_eval.simple_evaluate(model="hf", model_args="pretrained=nowhere/model,dtype=float32", tasks=["booksort", "x"],
                                metadata={"booksort_data": "b"}, task_manager=manager if given_manager else None)  # fmt: skip
    (run,) = seen
    assert run.tasks == ["booksort", "x"]
    if given_manager:
        assert run.task_manager is manager and run.metadata == {"from": "manager"}
        assert (
            run.task_yaml("booksort") == task_configs_dir() / "booksort" / "booksort.yaml"
            and run.task_yaml("x") is None
        )
    else:
        assert run.task_manager is None and run.task_yaml("booksort") is None
        assert run.metadata == {"pretrained": "nowhere/model", "dtype": "float32", "booksort_data": "b"}
    assert harness.pending_run() is None  # outside simple_evaluate: no run


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


# ---------------------------------------------------------------- R19: text pairs as loglikelihood encodes them


def test_r19_text_pairs_are_encoded_as_loglikelihood_encodes_them(tiny_llama_dir):
    """What `TemplateLM.loglikelihood` hands `_loglikelihood_tokens` for each pair of strings is what
    `encode_text_pair` gives: trailing spaces moved, an empty context replaced by the prefix token."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="float32")
    prefix_text = lm.tokenizer.decode([lm.prefix_token_id])
    pairs = [("The cat", " sat on the mat"), ("The cat ", "sat"), ("", " hello there"), ("", prefix_text + " hi")]
    assert lm.tok_encode(pairs[3][1], add_special_tokens=False)[0] == lm.prefix_token_id  # the prefix case is exercised
    seen = []
    lm._loglikelihood_tokens = lambda requests, disable_tqdm=False: (
        seen.extend(requests) or [(0.0, True)] * len(requests)
    )
    lm.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)], disable_tqdm=True)
    assert [key for key, _, _ in seen] == pairs
    for pair, context_enc, continuation_enc in seen:
        assert harness.encode_text_pair(lm, *pair) == (list(context_enc), list(continuation_enc)), pair
    assert harness.encode_text_pair(lm, "", "")[1] == []  # nothing to score: the caller says so


# ---------------------------------------------------------------- R20: docs dealt to ranks


def test_r20_doc_iterator_signature_and_dealing():
    import datasets
    from lm_eval.api.task import ConfigurableTask

    parameters = inspect.signature(ConfigurableTask.doc_iterator).parameters
    assert {"rank", "limit", "world_size", "samples"} <= {n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    calls = "".join(inspect.getsource(ConfigurableTask.build_all_requests).split())
    assert "self.doc_iterator(rank=rank,limit=limit,samples=samples,world_size=world_size)" in calls
    task = ConfigurableTask(
        config={"task": "longmem_test_deal", "output_type": "loglikelihood", "test_split": "test", "doc_to_text": "{{w}}",
                "doc_to_target": " y", "custom_dataset": lambda **_: {"test": datasets.Dataset.from_list([{"w": str(i)} for i in range(7)])}}
    )  # fmt: skip
    for world_size in (1, 2, 3):
        for rank in range(world_size):
            for limit in (None, 4, 5):
                theirs = list(task.doc_iterator(rank=rank, limit=limit, world_size=world_size))
                ours = list(harness.deal_docs(enumerate(task.eval_docs), rank=rank, limit=limit, world_size=world_size))
                assert ours == theirs, (rank, world_size, limit)
    assert [i for i, _ in harness.deal_docs(enumerate(task.eval_docs), rank=1, limit=5, world_size=2)] == [1, 3]


# ---------------------------------------------------------------- R21: the HF backend's window


def test_r21_hflm_window_rule():
    """`HFLM.max_length` (the real property, on stand-ins) against `default_window`, for each source of the rule."""
    from types import SimpleNamespace

    from lm_eval.models.huggingface import HFLM

    unset = 1000000000000000019884624838656  # transformers' model_max_length when a tokenizer states none
    cases = [
        (SimpleNamespace(n_positions=100, max_position_embeddings=300), SimpleNamespace(model_max_length=50), 100),
        (SimpleNamespace(n_positions=50, text_config=SimpleNamespace(max_position_embeddings=300)), None, 300),
        (SimpleNamespace(n_ctx=64), None, 64),
        (SimpleNamespace(), SimpleNamespace(model_max_length=777), 777),
        (SimpleNamespace(), SimpleNamespace(model_max_length=unset), 2048),
    ]
    for config, tokenizer, window in cases:
        lm = SimpleNamespace(_max_length=None, model=SimpleNamespace(config=config), tokenizer=tokenizer,
                             _DEFAULT_MAX_LENGTH=HFLM._DEFAULT_MAX_LENGTH)  # fmt: skip
        assert HFLM.max_length.fget(lm) == harness.default_window(config, tokenizer) == window, config
    assert harness.tokenizer_window(SimpleNamespace(model_max_length=777)) == 777
    assert harness.tokenizer_window(SimpleNamespace(model_max_length=unset)) is None
    assert harness.tokenizer_window(None) is None


# ---------------------------------------------------------------- R22: metrics a task scores itself


def test_r22_metric_list_dicts():
    """A task built with a `metric_list` and its own `process_results` gets the four dicts `declare_metrics` fills."""
    import datasets
    from lm_eval.api.metrics import mean
    from lm_eval.api.task import ConfigurableTask

    def last(items):
        return items[-1]

    metric_list = [
        {"metric": "hits", "aggregation": "mean", "higher_is_better": False},
        {"metric": "tail", "aggregation": last, "higher_is_better": True},
    ]
    config = {"task": "longmem_test_metrics", "output_type": "loglikelihood", "test_split": "test", "doc_to_text": "x",
              "doc_to_target": " y", "custom_dataset": lambda **_: {"test": datasets.Dataset.from_list([{"a": 1}])}}  # fmt: skip
    built = ConfigurableTask(config={**config, "metric_list": metric_list, "process_results": lambda doc, results: {}})
    declared = ConfigurableTask(config=config)
    harness.declare_metrics(declared, metric_list)
    for attribute in ("_metric_fn_list", "_metric_fn_kwargs", "_aggregation_list", "_higher_is_better"):
        theirs, ours = getattr(built, attribute), getattr(declared, attribute)
        assert {k: theirs[k] for k in ("hits", "tail")} == {k: ours[k] for k in ("hits", "tail")}, attribute
    assert declared.aggregation()["hits"] is mean and declared.aggregation()["tail"] is last
    assert declared.higher_is_better()["hits"] is False
    harness.declare_metrics(declared, [{"metric": "plain"}])  # defaults: mean, higher is better
    assert declared.aggregation()["plain"] is mean and declared.higher_is_better()["plain"] is True


# ---------------------------------------------------------------- R23: vLLM's engine


def test_r23_vllm_model_generate_signature():
    """Read from the installed harness's source (importing it needs vLLM); the real engine runs in `.ci/vllm`."""
    import ast
    import importlib.util

    source = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0]) / "models" / "vllm_causallms.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    (vllm,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "VLLM"]
    (method,) = [node for node in vllm.body if isinstance(node, ast.FunctionDef) and node.name == "_model_generate"]
    assert [a.arg for a in method.args.args] == ["self", "requests", "generate", "sampling_params"]
    assert "data_parallel_size" in ast.unparse(method)

    class Engine:
        def _model_generate(self, requests, generate=False, sampling_params=None):
            return [(prompt, generate, sampling_params) for prompt in requests]

    assert harness.vllm_generate(Engine(), [[1, 2], [3]], "params") == [([1, 2], True, "params"), ([3], True, "params")]


# ---------------------------------------------------------------- R24: a model as the harness builds it


def test_r24_get_model_names_the_lm_class(tiny_llama_dir, monkeypatch):
    from lm_eval.api.registry import get_model
    from lm_eval.models.huggingface import HFLM

    assert get_model("hf") is HFLM
    monkeypatch.setattr(harness, "_live", None)  # R4's wrapper records the model; later tests must not see it
    lm = harness.create_model("hf", {"pretrained": str(tiny_llama_dir), "dtype": "float32"}, batch_size=3, device="cpu")
    assert isinstance(lm, HFLM) and lm.batch_size == 3 and lm.device.type == "cpu"
    assert harness.live_backend() == harness.LiveBackend(kind="hf", max_length=2048, pretrained=str(tiny_llama_dir))


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

    monkeypatch.setattr(harness, "_live", None)
    manager = TaskManager(include_path=str(FIXTURES / "plain_task"), include_defaults=False)
    results = harness.evaluate_into(
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
    table = harness.results_tables(results)
    assert "longmem_test_plain_choice" in table and "acc" in table

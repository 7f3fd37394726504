"""`lm_eval_longmem.harness.tasks`: its reliances on lm_eval (R1, R3, R7, R8, R11, R16, R18, R20, R22 in the
harness's R-list) and its behaviour."""

from __future__ import annotations

import contextlib
import inspect
import logging
from pathlib import Path

import lm_eval.tasks.manager as manager_module
import pytest
import tomllib
from kit import REPO_ROOT

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.harness import tasks
from lm_eval_longmem.harness.marks import MARK
from lm_eval_longmem.paths import task_configs_dir

FIXTURES = Path(__file__).parents[1] / "fixtures"

tasks.patch_task_manager(manager_module)  # what the hook does; idempotent when the hook already did it
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
    index_logger = logging.getLogger(tasks.INDEX_LOGGER)
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
    logger = logging.getLogger(tasks.INDEX_LOGGER)
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
    """Defect 11: no override warning for our babilong; the user's override of ours still warns. The harness's own
    group stays reachable as `babilong_harness`."""
    manager, records, user = full_index
    warnings = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "'babilong'" in w], warnings
    assert [w for w in warnings if "'booksort'" in w and str(user) in w], warnings
    assert Path(manager.task_index["babilong"].yaml_path).is_relative_to(task_configs_dir())
    assert manager.task_index["babilong_harness"].kind.name == "GROUP"


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
        name = tasks.request_cache_tokenizer_name("tok", fingerprint)
        task.build_all_requests(cache_requests=True, tokenizer_name=name)
        return [instance.args[0] for instance in task.instances]

    assert prompts("aaa") == ["apple"]
    word["value"] = "pear"
    assert prompts("aaa") == ["apple"]  # same name: the stale requests come back; that is what R7 means
    assert prompts("bbb") == ["pear"]  # a new fingerprint builds them afresh
    assert len(list(tmp_path.iterdir())) == 2


# ---------------------------------------------------------------- R8: the harness's BABILong texts


def test_r8_builtin_babilong_yaml_shape():
    for qa in ("qa1", "qa5", "qa20"):
        path, config = tasks.read_builtin_task_config("babilong", f"babilong_{qa}")
        assert path.name == f"babilong_{qa}.yaml" and path.is_file() and config["task"] == f"babilong_{qa}"
        lines = [line.strip() for line in str(config["description"]).splitlines() if line.strip()]
        assert any(line.startswith(("Always return", "Your answer")) for line in lines[1:])
        samples = config["fewshot_config"]["samples"]
        assert samples and all({"input", "question", "target"} <= set(s) for s in samples)


def test_r8_the_harness_babilong_group_is_what_our_alias_group_repeats():
    """Our `babilong` takes the name of the harness's group; `task_configs/babilong_harness.yaml` is that group (its
    tasks babilong_qa1-qa20, its aggregation, its version) under the name the babilong card gives."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from lm_eval_longmem.common.evaluations import evaluation

    _, theirs = tasks.read_builtin_task_config("babilong", "babilong")
    ours = load_yaml(task_configs_dir() / "babilong_harness.yaml", resolve_func=False)
    assert theirs.pop("group") == "babilong" and ours == theirs | {"group": "babilong_harness"}
    assert evaluation("babilong").replaces_harness == {"babilong": "babilong_harness"}


@pytest.mark.parametrize(("folder", "task"), [("babilong", "babilong_qa21"), ("no_such_folder", "no_such_task")])
def test_a_harness_task_that_is_not_installed_is_one_line_naming_it_and_the_lm_eval_to_install(folder, task):
    with pytest.raises(FileNotFoundError) as caught:
        tasks.builtin_task_file(folder, task)
    [line] = str(caught.value).splitlines()
    assert line.startswith(f"the installed lm_eval has no {task}.yaml (looked in ")
    assert f"/lm_eval/tasks/{folder}); " in line and line.endswith(f"install {tasks.SUPPORTED}")


def test_the_lm_eval_we_ask_for_is_the_one_we_depend_on():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert f"lm-eval[hf]{tasks.SUPPORTED.removeprefix('lm-eval')}" in project["dependencies"]


def test_r11_task_aggregation_hook_and_payload_order():
    """`_collect_results` calls the module's `_compute_task_aggregations` at call time (so our hook is
    used), and `evaluate` appends each doc's payload key by key and chains ranks key by key."""
    from lm_eval import evaluator, evaluator_utils

    tasks.install_aggregation()
    tasks.install_aggregation()  # idempotent
    assert getattr(evaluator_utils._compute_task_aggregations, MARK, False)

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


@pytest.mark.slow
def test_r16_task_names_yaml_paths_and_missing_include_paths(tmp_path):
    """What `TaskManager` does with a bad name, YAML or include path, and the one line `load_tasks` makes of it."""
    manager = tasks.new_task_manager(include_defaults=False)
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
        "forgetting_curve" in tasks.new_task_manager(include_path=str(missing), include_defaults=False).all_tasks
    )  # skipped silently

    with pytest.raises(UsageError, match=r"^--tasks forgeting_curve: no such task; did you mean forgetting_curve\?"):
        tasks.load_tasks(["forgeting_curve"], {}, usage_error=UsageError)
    with pytest.raises(UsageError, match=r"^--tasks .*bad\.yaml: the harness cannot load it as a task \(ParserError"):
        tasks.load_tasks([str(bad_yaml)], {}, usage_error=UsageError)
    with pytest.raises(UsageError, match=r"^--include_path .*no_such_folder: no such file or folder"):
        tasks.load_tasks(["forgetting_curve"], {}, include_path=[str(missing)], usage_error=UsageError)


def _notice_records(task_name: str, quiet: str | None) -> list[str]:
    """The `lm_eval.api.task` messages logged while a task with a callable `custom_dataset` is built."""
    import datasets
    from lm_eval.api.task import ConfigurableTask

    records = _Records()
    logger = logging.getLogger(tasks.TASK_LOGGER)
    logger.addHandler(records)
    config = {"task": task_name, "output_type": "loglikelihood", "test_split": "test", "doc_to_text": "x",
              "doc_to_target": " y", "custom_dataset": lambda **_: {"test": datasets.Dataset.from_list([{"a": 1}])}}  # fmt: skip
    try:
        with tasks.quiet_custom_dataset_notice(quiet) if quiet else contextlib.nullcontext():
            ConfigurableTask(config=config)
    finally:
        logger.removeHandler(records)
    return [r.getMessage() for r in records.records if r.levelno == logging.WARNING]


def test_r18_custom_dataset_notice_shape():
    """The harness warns for every task with a callable `custom_dataset`, suggesting RULER's
    `max_seq_lengths` key, through `lm_eval.api.task`; the message begins with the task name and the notice."""
    (message,) = _notice_records("longmem_test_notice", None)
    assert message.startswith(f"longmem_test_notice: {tasks.CUSTOM_DATASET_NOTICE}") and "max_seq_lengths" in message


def test_custom_dataset_notice_is_dropped_for_the_named_task_only():
    assert _notice_records("longmem_test_notice", quiet="longmem_test_notice") == []
    (kept,) = _notice_records("ruler_like", quiet="longmem_test_notice")  # another task's notice still shows
    assert kept.startswith("ruler_like: ")
    assert not logging.getLogger(tasks.TASK_LOGGER).filters  # the filter is removed afterwards


def test_our_tasks_load_without_the_custom_dataset_notice(tiny_llama_dir, embedded_books_dir):
    records = _Records()
    logger = logging.getLogger(tasks.TASK_LOGGER)
    logger.addHandler(records)
    try:
        metadata = {"pretrained": str(tiny_llama_dir), "forgetting_curve_corpus": str(embedded_books_dir / "macbeth.txt"),
                    "forgetting_curve_lengths": "16", "forgetting_curve_samples": 1}  # fmt: skip
        tm = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata)
        assert "forgetting_curve" in tm.load(["forgetting_curve"])["tasks"]
    finally:
        logger.removeHandler(records)
    assert not [r for r in records.records if tasks.CUSTOM_DATASET_NOTICE in r.getMessage()]


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
                ours = list(tasks.deal_docs(enumerate(task.eval_docs), rank=rank, limit=limit, world_size=world_size))
                assert ours == theirs, (rank, world_size, limit)
    assert [i for i, _ in tasks.deal_docs(enumerate(task.eval_docs), rank=1, limit=5, world_size=2)] == [1, 3]


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
    tasks.declare_metrics(declared, metric_list)
    for attribute in ("_metric_fn_list", "_metric_fn_kwargs", "_aggregation_list", "_higher_is_better"):
        theirs, ours = getattr(built, attribute), getattr(declared, attribute)
        assert {k: theirs[k] for k in ("hits", "tail")} == {k: ours[k] for k in ("hits", "tail")}, attribute
    assert declared.aggregation()["hits"] is mean and declared.aggregation()["tail"] is last
    assert declared.higher_is_better()["hits"] is False
    tasks.declare_metrics(declared, [{"metric": "plain"}])  # defaults: mean, higher is better
    assert declared.aggregation()["plain"] is mean and declared.higher_is_better()["plain"] is True


@pytest.mark.slow  # indexes every task of the harness (seconds)
def test_r26_unknown_task_names_error_shape():
    """`lm_eval run`'s own error for unknown `--tasks` names, as `tasks_not_found` reads it; other errors read as none."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    config = EvaluatorConfig(model="hf", tasks="forgeting_curve,forgetting_curve,babilong_qa99")
    manager = tasks.new_task_manager(include_defaults=True)
    with pytest.raises(ValueError) as raised:
        config.process_tasks({})
    assert tasks.tasks_not_found(raised.value) == ["forgeting_curve", "babilong_qa99"]
    assert tasks.tasks_not_found(ValueError("something else")) == []
    assert tasks.tasks_not_found(KeyError("Tasks not found: x")) == []
    assert tasks.unknown_tasks(["forgeting_curve", "babilong_qa99"], manager.all_tasks) == (
        "--tasks forgeting_curve: no such task; did you mean forgetting_curve?; --tasks babilong_qa99: no such task; "
        "did you mean babilong_qa9? (use --include_path for the folder of your own tasks)"
    )

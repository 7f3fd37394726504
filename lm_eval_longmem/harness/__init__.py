"""Every place lm-eval-longmem touches lm_eval's internals, in one module.

Supported range: ``lm-eval>=0.4.13,<0.5`` (the pin in pyproject.toml). What we rely on, each
checked by a test in ``tests/test_harness.py`` (named after the arrow), so a harness upgrade that
breaks one shows at once:

R1 ``lm_eval.tasks.manager.TaskManager.__init__`` takes ``include_path`` (one path or a list) and
   ``include_defaults``; it indexes its own directory (the one holding ``manager.py``) first, then
   the include paths in order, a later path replacing an earlier entry of the same name.
   -> test_r1_task_manager_parameters_and_precedence
R2 ``TaskManager.load(task_list)`` (public) receives the names a run asks for.
   -> test_r2_load_receives_the_requested_names
R3 When an include path replaces a name, ``lm_eval.tasks._index`` logs a WARNING through the logger
   of that name with the arguments ``(name, new yaml path, old yaml path)``. We drop that one record
   when our task replaces a built-in; should the shape change, the warning merely comes back.
   -> test_r3_override_warning_record_shape
R4 ``lm_eval.api.model.LM.create_from_arg_string`` and ``create_from_arg_obj`` are classmethods
   that return the new LM (``simple_evaluate`` builds every registry model through them), and the
   harness's HFLM and VLLM expose their window as ``max_length``.
   -> test_r4_lm_factories_are_classmethods_and_hflm_has_max_length
R5 ``lm_eval.api.task.ALL_OUTPUT_TYPES`` is the list of accepted ``output_type`` values and
   ``lm_eval.api.registry.DEFAULT_METRIC_REGISTRY`` maps each to its default metrics; the
   evaluator calls ``getattr(lm, output_type)(requests)``.
   -> test_r5_output_types_list_and_metric_registry
R6 ``lm_eval.api.model.CachingLM`` (``--use_cache``) serves method names through ``__getattr__``,
   stores answers in ``self.dbdict`` (a SqliteDict) under ``hash_args(name, request.args)``.
   -> test_r6_caching_lm_getattr_dbdict_and_hash_args
R7 ``Task.build_all_requests(tokenizer_name=...)``: ``--cache_requests`` names its pickle after the
   task name, shots, rank, chat template and ``tokenizer_name``, and nothing from ``--metadata``.
   -> test_r7_request_cache_is_keyed_by_tokenizer_name
R8 The harness ships ``lm_eval/tasks/babilong/babilong_qaN.yaml`` (instruction and answer format in
   ``description``, examples in ``fewshot_config.samples``), read with
   ``lm_eval.tasks._yaml_loader.load_yaml(path, resolve_func=False)``.
   -> test_r8_builtin_babilong_yaml_shape
R9 lm_eval's command line lets an exception from task loading reach the top of the interpreter
   (it catches nothing), so ``sys.excepthook`` sees it.
   -> test_r9_usage_error_reaches_the_top_of_lm_eval (a real ``lm_eval`` subprocess)
R10 ``lm_eval.utils.setup_logging`` configures the ``lm_eval`` logger (level from ``LMEVAL_LOG_LEVEL``;
   0.4.13 applies the deprecated ``--verbosity`` only after the evaluation); every module of ours
   logs as a child of it (``lm_eval.<module>``) so its lines show with the harness's, at its level.
   -> test_r10_notice_logger_is_under_lm_eval, test_r10_package_logs_follow_the_harness_level
R11 ``lm_eval.evaluator_utils._collect_results`` calls the module-level
   ``_compute_task_aggregations(task, raw_metrics, bootstrap_iters)`` (looked up at call time) and
   takes its ``(row, sample count)``; ``raw_metrics[(key, filter)]`` holds each doc's value of
   ``key`` in the order ``evaluator.evaluate`` called ``process_results``, and with several ranks
   every key's list is the ranks' lists chained in rank order (for the keys rank 0 has). So when
   every doc returns the same keys, the values at one position of every list belong to one doc.
   -> test_r11_task_aggregation_hook_and_payload_order
R12 ``lm_eval._cli.utils.MergeDictAction`` is the argparse action (``nargs="+"``) behind ``lm_eval run``'s
   ``--model_args`` and ``--metadata``: ``k=v,k2=v2`` words or one JSON object, merged into a dict with
   the harness's value typing. Our subcommands take both flags through it, so they read alike.
   -> test_r12_dict_flags_parse_as_the_harness_parses_them
R13 What ``evaluator.evaluate`` does after the model answered is
   ``evaluator_utils._process_results(acc, groups, bootstrap_iters)._to_eval_results()``, with
   ``acc[task] = {"task", "raw_metrics", "logged_samples"}`` and the groups of ``TaskManager.load``;
   ``--log_samples`` records carry ``doc_hash`` (``hash_string`` of the doc as indented JSON) and the
   results' ``task_hashes[task]`` is ``hash_string`` of every record's doc, prompt and target hashes
   joined. ``lm-eval-longmem merge`` rebuilds one run's results from its shards' records this way.
   -> test_r13_results_from_logged_payloads_and_sample_hashes
R14 ``HFLM._detect_batch_size(requests=None, pos=0)`` is the harness's ``--batch_size auto`` for its own
   request types: it starts ``find_executable_batch_size`` at ``self.max_batch_size``, runs full-logits
   forwards of ``requests[pos]`` (a ``(key, context_enc, continuation_enc)`` triple, cut to
   ``max_length`` positions) or of ``max_length`` positions, and returns the size.
   -> test_r14_detect_batch_size_starts_at_max_batch_size
R15 The harness's W&B logger (``lm_eval.loggers.wandb_logger.WandbLogger._generate_dataset``) builds each
   task's sample table from the results' ``configs[task]["metric_list"]``, reading ``sample[metric]``
   from every logged sample (one missing key fails the upload of every task's samples, logged only
   at INFO); Trackio's logger reads the names in ``sample["metrics"]``. Our tasks' config dumps name
   the scores every sample holds (``logged_metric_list``).
   -> test_r15_wandb_sample_table_reads_every_metric_list_name_from_every_sample
R16 ``TaskManager.all_tasks`` lists every name (task, group, tag) the index holds; ``TaskManager.load``
   also takes a YAML file's path, and raises for anything else (an unknown name is a ``KeyError``,
   an unreadable YAML the parser's error); an ``include_path`` that does not exist is skipped
   silently. ``load_tasks`` checks all three first and names the flag at fault.
   -> test_r16_task_names_yaml_paths_and_missing_include_paths
R17 ``lm_eval.evaluator.simple_evaluate`` (under its ``positional_deprecated`` wrapper) creates the model
   through R4's factories, from its own frame and before it loads any task; there its parameters
   ``tasks``, ``task_manager``, ``model_args`` and ``metadata`` still hold what the caller passed, and a
   given TaskManager's ``metadata`` attribute and ``task_index`` (name -> entry with ``yaml_path``) are
   what its tasks will see. The lm_eval CLI passes the TaskManager it built from ``--model_args`` merged
   with ``--metadata``, and the task names it resolved. ``install_before_model`` reads that frame to
   check a run's inputs before the model loads.
   -> test_r17_simple_evaluate_creates_its_model_from_its_own_frame,
      test_r17_the_lm_eval_cli_checks_before_loading_the_model (a real ``lm_eval`` subprocess)
R18 ``ConfigurableTask.download`` warns, for every task whose ``custom_dataset`` is callable, through the
   logger ``lm_eval.api.task``, with a message that begins "<task>: Custom kwargs can be passed to
   `--metadata`" and suggests ``max_seq_lengths`` (RULER's key). ``quiet_custom_dataset_notice`` drops
   that record for our tasks while they build their data; should the message change, it comes back.
   -> test_r18_custom_dataset_notice_shape
R19 ``TemplateLM.loglikelihood`` encodes a ``(context, continuation)`` pair of strings with the model's
   ``_encode_pair(context, continuation)``, and an empty context as ``[prefix_token_id]`` before the
   continuation's tokens (``tok_encode(continuation, add_special_tokens=False)``), or as the
   continuation's first token when that token is the prefix. ``encode_text_pair`` does the same, so
   ``loglikelihood_accuracy`` scores exactly the tokens ``loglikelihood`` would.
   -> test_r19_text_pairs_are_encoded_as_loglikelihood_encodes_them
R20 ``ConfigurableTask.doc_iterator(*, rank, limit, world_size, samples)`` is how ``build_all_requests``
   takes a task's docs, as ``(doc_id, doc)`` pairs; the harness deals them to data-parallel ranks
   round-robin after the limit is counted over all ranks (``utils.create_iterator``: ``islice(docs,
   rank, limit, world_size)``). ``deal_docs`` does the same for our task base's own iterator.
   -> test_r20_doc_iterator_signature_and_dealing
R21 ``HFLM.max_length`` without a ``max_length`` argument is ``models.utils.resolve_max_length(config,
   tokenizer, default=DEFAULT_MAX_LENGTH)``: the text config's, then the config's ``n_positions``,
   ``max_position_embeddings`` or ``n_ctx``, else the tokenizer's ``model_max_length`` unless it is
   ``TOKENIZER_INFINITY``, else 2048. ``default_window`` and ``tokenizer_window`` give that rule.
   -> test_r21_hflm_window_rule
R22 ``ConfigurableTask.__init__`` turns each ``metric_list`` entry of a task with its own
   ``process_results`` into four private dicts (``_metric_fn_list`` None, ``_metric_fn_kwargs`` {},
   ``_aggregation_list`` through ``registry.get_aggregation``, ``_higher_is_better``), which
   ``aggregation()`` and ``higher_is_better()`` return. ``declare_metrics`` fills them after the
   task is built (so the harness neither warns about, nor looks up, names it does not know).
   -> test_r22_metric_list_dicts
R23 ``VLLM._model_generate(requests, generate, sampling_params)`` runs token-id prompts (spread over
   ``data_parallel_size`` replicas) and returns vLLM's ``RequestOutput`` per prompt, in order.
   ``vllm_generate`` calls it for ``loglikelihood_accuracy``.
   -> test_r23_vllm_model_generate_signature (read from the source: vLLM need not be installed)
R24 ``lm_eval.api.registry.get_model(name)`` is the LM class of a ``--model`` name (``hf`` -> ``HFLM``),
   built with R4's ``create_from_arg_obj(model_args, {"batch_size", "device"})``. ``create_model``
   builds a model as the harness does, to score several runs with one loaded model.
   -> test_r24_get_model_names_the_lm_class
R25 What ``lm_eval run --output_path DIR --log_samples`` writes after ``simple_evaluate``: an
   ``EvaluationTracker(output_path=DIR)`` handed to it, then ``save_results_aggregated(results=,
   samples=)`` with the samples popped from the results, and ``save_results_samples(task_name=,
   samples=samples[task])`` for every task of ``configs``; it prints ``utils.make_table(results)``
   (and the ``groups`` table). ``evaluate_into`` and ``results_tables`` do the same for callers of the
   Python API (the demo, the fine-tuning run), so their folders read as the CLI's.
   -> test_r25_the_cli_saves_runs_as_evaluate_into_does, test_evaluate_into_writes_the_cli_files

When the plugin is active (the `.pth` hook, see ``_autoload.py``, or ``lm-eval-longmem run``),
``activate`` applies R1-R4, R9 and R17; ``install_request_type`` runs when a task module of ours is
imported (through ``backends.install``); the rest are plain functions other modules call. This
module imports nothing of the package but ``paths``: what it installs is handed to it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARK = "_lm_eval_longmem"
"""Attribute set on every function we install, so patching twice is a no-op."""

INDEX_LOGGER = "lm_eval.tasks._index"
"""R3: the logger that warns when an include path replaces a task name."""

DEBUG_ENV = "LM_EVAL_LONGMEM_DEBUG"

log = logging.getLogger(f"lm_eval.{__name__}")
"""R10: a child of the harness's logger, shown with lm_eval's own lines at lm_eval's level (every
module of the package logs the same way, as `lm_eval.<module>`)."""


def activate(
    manager_module: Any, usage_error: type[BaseException], before_model: Callable[[RunRequest], None] | None = None
) -> None:
    """Everything the plugin changes in a running harness (idempotent).

    Called by the `.pth` hook right after `lm_eval.tasks.manager` is first imported, and by
    `lm-eval-longmem run`, with the package's `UsageError` and its checks of a run before the model
    loads (`lm_eval_longmem.preflight.check_run`; this module imports nothing of the package but
    `paths`: it is the bottom layer, see CONTRIBUTING.md).
    """
    patch_task_manager(manager_module)
    patch_lm_factories()
    install_usage_error_hook(usage_error)
    if before_model is not None:
        install_before_model(before_model)


def activate_here(usage_error: type[BaseException], before_model: Callable[[RunRequest], None] | None = None) -> None:
    """`activate` on this process's `lm_eval.tasks.manager` (imported now if need be): for `lm-eval-longmem run`,
    which runs lm_eval's command line whether or not the start-up hook is on."""
    import lm_eval.tasks.manager as manager_module

    activate(manager_module, usage_error, before_model)


# ---------------------------------------------------------------- task discovery (R1, R2, R3)


def with_our_tasks(include_path: str | os.PathLike[str] | list | tuple | None) -> list:
    """`include_path` (None, one path or a list) with our task directory first, without duplicates."""
    from lm_eval_longmem.paths import task_configs_dir

    ours = task_configs_dir()
    given = (
        []
        if include_path is None
        else list(include_path)
        if isinstance(include_path, (list, tuple))
        else [include_path]
    )
    rest = [p for p in given if Path(p).expanduser().resolve() != ours]
    return [ours, *rest]


def patch_task_manager(manager_module: Any) -> None:
    """Make `TaskManager` index our tasks beside the built-ins (idempotent).

    Order of task directories: lm_eval's built-ins, then ours (so our `babilong` replaces the
    built-in group, on purpose, without the harness's override warning), then the user's own
    `include_path` (so users can still override us). `include_defaults=False` asks for the
    user's paths only, so ours are left out too. Arguments are bound to the wrapped signature,
    so positional and keyword calls are treated alike.
    """
    cls = manager_module.TaskManager
    if getattr(cls.__init__, MARK, False):
        return
    original_init = cls.__init__
    signature = inspect.signature(original_init)
    if not {"include_path", "include_defaults"} <= set(signature.parameters):
        log.warning(
            "lm-eval-longmem: this lm_eval's TaskManager takes no include_path/include_defaults, so our "
            'tasks are not added; pass --include_path "$(python -m lm_eval_longmem.paths)" or install '
            "lm-eval>=0.4.13,<0.5"
        )
        return
    builtin_dir = Path(manager_module.__file__).resolve().parent

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        include_defaults = bound.arguments.get("include_defaults", signature.parameters["include_defaults"].default)
        if not include_defaults:
            original_init(*bound.args, **bound.kwargs)
            return
        bound.arguments["include_path"] = with_our_tasks(bound.arguments.get("include_path"))
        with quiet_builtin_replacements(builtin_dir) as replaced:
            original_init(*bound.args, **bound.kwargs)
        setattr(self, MARK, {"replaced": replaced, "announced": set()})

    original_load = cls.load

    @functools.wraps(original_load)
    def load(self: Any, task_list: Any, *args: Any, **kwargs: Any) -> Any:
        announce_replacements(self, task_list)
        return original_load(self, task_list, *args, **kwargs)

    for function in (__init__, load):
        setattr(function, MARK, True)
    cls.__init__ = __init__
    cls.load = load


class _BuiltinReplacements(logging.Filter):
    """Drops the index's override warning for our names that replace a built-in, and notes them."""

    def __init__(self, ours: Path, builtin: Path) -> None:
        super().__init__()
        self.ours, self.builtin = ours, builtin
        self.replaced: dict[str, Path] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not (isinstance(args, tuple) and len(args) == 3 and isinstance(args[0], str)):
            return True
        new, old = _resolved(args[1]), _resolved(args[2])
        if new is None or old is None or not new.is_relative_to(self.ours) or not old.is_relative_to(self.builtin):
            return True
        self.replaced[args[0]] = old
        return False


def _resolved(path: Any) -> Path | None:
    try:
        return Path(path).resolve() if path is not None else None
    except (TypeError, OSError):
        return None


@contextlib.contextmanager
def quiet_builtin_replacements(builtin_dir: Path) -> Iterator[dict[str, Path]]:
    """While indexing, silence "Task X ... overrides existing task" where our task replaces a built-in.

    Yields {name: built-in yaml path} of the names replaced. Other override warnings (a user's
    include path replacing a built-in or one of ours) still reach the log.
    """
    from lm_eval_longmem.paths import task_configs_dir

    gate = _BuiltinReplacements(task_configs_dir().resolve(), builtin_dir.resolve())
    logger = logging.getLogger(INDEX_LOGGER)
    logger.addFilter(gate)
    try:
        yield gate.replaced
    finally:
        logger.removeFilter(gate)


def announce_replacements(task_manager: Any, task_list: Any) -> None:
    """One INFO line, once per TaskManager, when a run asks for a name our task took from the harness."""
    state = getattr(task_manager, MARK, None)
    if not state:
        return
    specs = task_list if isinstance(task_list, (list, tuple)) else [task_list]
    for name in [s for s in specs if isinstance(s, str)]:
        if name in state["replaced"] and name not in state["announced"]:
            state["announced"].add(name)
            log.info(
                "'%s' is lm-eval-longmem's task; it replaces the harness's built-in %s while the plugin is "
                "active (LM_EVAL_LONGMEM_AUTOLOAD=0 brings the built-in back)",
                name,
                state["replaced"][name],
            )


def new_task_manager(**kwargs: Any) -> Any:
    """A TaskManager with our tasks added explicitly (the hook may be off), built quietly."""
    import lm_eval.tasks.manager as manager_module

    kwargs["include_path"] = with_our_tasks(kwargs.get("include_path"))
    patch_lm_factories()
    with quiet_builtin_replacements(Path(manager_module.__file__).resolve().parent):
        return manager_module.TaskManager(**kwargs)


# ---------------------------------------------------------------- the live backend (R4)


@dataclass(frozen=True)
class LiveBackend:
    """The LM the harness created most recently in this process, as data builders need it."""

    kind: str
    """"hf" (HFLM and its subclasses), "vllm" (VLLM), otherwise the LM class name lowercased."""
    max_length: int | None
    """The backend's own window in tokens (HFLM: its resolved `max_length`; VLLM: the engine's
    `max_model_len`), or None when the backend does not say."""
    pretrained: str | None = None
    """The `pretrained` model argument it was created with, so a data builder uses it only for the
    model its metadata names (a process may create several models)."""


_live: LiveBackend | None = None


def live_backend() -> LiveBackend | None:
    """The most recently created harness LM, or None before any (or when the plugin is not active).

    `simple_evaluate` creates the LM before it loads tasks, so a data builder called while the
    harness loads our tasks sees the model of this run.
    """
    return _live


def describe_lm(lm: Any, pretrained: str | None = None) -> LiveBackend:
    """Kind and window of an LM instance; reading the window never raises."""
    names = {klass.__name__ for klass in type(lm).__mro__}
    kind = "hf" if "HFLM" in names else "vllm" if "VLLM" in names else type(lm).__name__.lower()
    try:
        value = lm.max_length
    except Exception:  # noqa: BLE001 - a backend without a resolvable window is still a backend
        value = None
    max_length = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    return LiveBackend(kind=kind, max_length=max_length, pretrained=pretrained)


def patch_lm_factories() -> None:
    """Record every LM built through `LM.create_from_arg_string`/`create_from_arg_obj` (idempotent).

    A model class that overrides these factories itself (lm_eval's `dummy`, `nemo_lm`, `watsonx`)
    is not recorded: `live_backend()` then stays None, which callers treat as "unknown".
    """
    from lm_eval.api.model import LM

    for name in ("create_from_arg_string", "create_from_arg_obj"):
        factory = inspect.getattr_static(LM, name)
        if not isinstance(factory, classmethod) or getattr(factory.__func__, MARK, False):
            continue
        setattr(LM, name, classmethod(_recording(factory.__func__)))


def _pretrained(model_args: Any) -> str | None:
    """`pretrained` from the first argument of an LM factory (an args string or a dict)."""
    if isinstance(model_args, str):
        from lm_eval.utils import simple_parse_args_string

        model_args = simple_parse_args_string(model_args)
    value = model_args.get("pretrained") if isinstance(model_args, dict) else None
    return str(value) if value else None


def _recording(factory: Any) -> Any:
    @functools.wraps(factory)
    def create(cls: type, *args: Any, **kwargs: Any) -> Any:
        global _live
        if _before_model is not None and (run := pending_run()) is not None:
            _before_model(run)
        lm = factory(cls, *args, **kwargs)
        _live = describe_lm(lm, _pretrained(args[0] if args else kwargs.get("arg_string", kwargs.get("arg_dict"))))
        return lm

    setattr(create, MARK, True)
    return create


# ---------------------------------------------------------------- checks before the model loads (R17)


@dataclass(frozen=True)
class RunRequest:
    """What a `simple_evaluate` call asks for, read when it is about to create its model (R17)."""

    tasks: list[Any]
    """The `tasks` argument: names (the CLI resolves its `--tasks` to names), or configs and Task objects."""
    metadata: dict[str, Any]
    """The metadata its tasks will get: the given TaskManager's, else `model_args` merged with `metadata`
    (what `simple_evaluate` hands the TaskManager it builds)."""
    task_manager: Any | None
    """The TaskManager it was given (the CLI always gives one), or None."""

    def task_yaml(self, name: str) -> Path | None:
        """The YAML the run's task index holds for `name` (None without a TaskManager, or for an unknown name)."""
        index = getattr(self.task_manager, "task_index", None) or {}
        entry = index.get(name) if isinstance(name, str) else None
        path = getattr(entry, "yaml_path", None)
        return Path(path) if path else None


_before_model: Callable[[RunRequest], None] | None = None


def install_before_model(check: Callable[[RunRequest], None]) -> None:
    """Call `check(run)` whenever `simple_evaluate` is about to create its model (R17; idempotent).

    The harness creates the model before it loads any task, so a task's data problems (an offline hub
    dataset, a missing folder) would otherwise show only after the model loaded, one per run; `check`
    sees every task of the run first and may raise. The CLI and the Python API both pass through here.
    """
    global _before_model
    _before_model = check
    patch_lm_factories()


def pending_run() -> RunRequest | None:
    """The `simple_evaluate` call this LM is being created for, or None (the LM is created some other way).

    `simple_evaluate` creates its model from its own frame (R17): its parameters `tasks`, `task_manager`,
    `model_args` and `metadata` still hold what the caller passed (or, for `model_args`, "" for None). The
    lm_eval CLI imports `simple_evaluate` before our start-up hook runs, so wrapping that function
    would miss it; reading the frame of the running call serves the CLI and the Python API alike.
    """
    evaluator = sys.modules.get("lm_eval.evaluator")
    if evaluator is None:
        return None
    code = inspect.unwrap(evaluator.simple_evaluate).__code__
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    if frame is None:
        return None
    values = frame.f_locals
    task_manager = values.get("task_manager")
    if task_manager is not None and isinstance(getattr(task_manager, "metadata", None), dict):
        metadata = dict(task_manager.metadata)
    else:
        model_args = values.get("model_args") or {}
        if isinstance(model_args, str):
            from lm_eval.utils import simple_parse_args_string

            model_args = simple_parse_args_string(model_args)
        metadata = dict(model_args) | dict(values.get("metadata") or {})
    tasks = values.get("tasks") or []
    return RunRequest(
        tasks=list(tasks) if isinstance(tasks, (list, tuple)) else [tasks], metadata=metadata, task_manager=task_manager
    )


# ---------------------------------------------------------------- usage errors (R9)


def install_usage_error_hook(usage_error: type[BaseException]) -> None:
    """Make an uncaught `usage_error` (the package's `UsageError`) print one line and exit 1 instead of
    a traceback (idempotent).

    The error may also be the `__cause__`/`__context__` of what reached the top (the harness may
    wrap it). With `--debug` in the command line or `LM_EVAL_LONGMEM_DEBUG=1` the previous hook
    shows the full traceback; every other exception goes to the previous hook unchanged.
    """
    if getattr(sys.excepthook, MARK, False):
        return
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        usage = find_usage_error(exc, usage_error)
        if usage is None or debug_requested():
            previous(exc_type, exc, tb)
            return
        # Python exits with status 1 after an uncaught exception; only the printing changes.
        print(f"lm-eval-longmem: error: {usage}", file=sys.stderr)

    setattr(excepthook, MARK, True)
    excepthook.__wrapped__ = previous  # type: ignore[attr-defined]
    sys.excepthook = excepthook


def find_usage_error(exc: BaseException | None, usage_error: type[BaseException]) -> BaseException | None:
    """`exc` or the first exception in its cause/context chain that is a `usage_error`."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, usage_error):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def debug_requested() -> bool:
    return "--debug" in sys.argv or os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


# ---------------------------------------------------------------- request type (R5, R6)


def install_request_type(name: str, *, hf: Callable, vllm: Callable) -> None:
    """Register request type `name` with lm-eval (safe to call any number of times).

    * `HFLM.<name> = hf` and, when `lm_eval.models.vllm_causallms` imports (vLLM installed),
      `VLLM.<name> = vllm`;
    * `ALL_OUTPUT_TYPES` accepts `output_type: <name>`, with no default metrics (our task base
      declares its own);
    * `--use_cache` (`CachingLM`) caches and reuses its responses like the built-in request types.

    Each step only *adds* a name the harness did not have, so nothing that does not use this
    request type behaves differently. `backends.install()` calls this with the
    `loglikelihood_accuracy` implementations (`backends/hf.py`, `backends/vllm.py`); the request
    type itself is specified in `backends/request_type.py`.
    """
    from lm_eval.api import registry, task
    from lm_eval.models.huggingface import HFLM

    if name not in task.ALL_OUTPUT_TYPES:
        task.ALL_OUTPUT_TYPES.append(name)
    registry.DEFAULT_METRIC_REGISTRY.setdefault(name, [])
    setattr(HFLM, name, hf)
    try:
        from lm_eval.models.vllm_causallms import VLLM
    except ImportError:  # vLLM not installed: the hf backend still works
        pass
    else:
        setattr(VLLM, name, vllm)
    teach_caching_lm(name)


def teach_caching_lm(name: str) -> None:
    """Let `CachingLM` (--use_cache) serve request type `name` from and into its SQLite cache.

    `CachingLM.__getattr__` caches a fixed list of method names; we wrap it so our name gets the
    same treatment (same key: `hash_args(name, req.args)`) and every other name is passed on to
    the original untouched.
    """
    from lm_eval.api.model import CachingLM

    original = CachingLM.__getattr__
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def __getattr__(self: CachingLM, attr: str) -> Any:
        if attr != name:
            return original(self, attr)
        compute = getattr(self.lm, attr)
        return functools.partial(cached_call, self, name, compute)

    setattr(__getattr__, MARK, True)
    CachingLM.__getattr__ = __getattr__


def cached_call(caching_lm: Any, name: str, compute: Any, requests: list) -> list:
    """Answers to `name` requests from the cache where present; the rest computed in one call and stored."""
    from lm_eval.api.model import hash_args

    keys = [hash_args(name, req.args) for req in requests]
    answers = [caching_lm.dbdict.get(key) for key in keys]
    missing = [i for i, answer in enumerate(answers) if answer is None]
    log.info("%s: %d cached responses, %d to compute", name, len(requests) - len(missing), len(missing))
    if missing:
        for i, answer in zip(missing, compute([requests[i] for i in missing]), strict=True):
            answers[i] = answer
            caching_lm.dbdict[keys[i]] = answer
        caching_lm.dbdict.commit()
    return answers


# ---------------------------------------------------------------- the harness's --batch_size auto probe (R14)


def install_batch_probe_cap(cap: Callable[[Any, int], tuple[int, bool]]) -> None:
    """Bound the harness's own `--batch_size auto` probe (`HFLM._detect_batch_size`) by `cap` (idempotent).

    The harness probes its request types (`loglikelihood`, hence `multiple_choice`, and
    `generate_until`) by running full-logits forwards of `max_batch_size` (64) copies of the longest
    request, or of `max_length` positions, halving on out-of-memory. `cap(lm, positions)` gets the
    positions that probe runs (cut to the window as the harness cuts them) and returns (largest size
    to try, whether that size is the answer without a trial): the probe then starts from that size,
    or does not run at all (every data-parallel rank still takes the smallest size any rank chose).
    """
    from lm_eval.models.huggingface import HFLM

    original = inspect.getattr_static(HFLM, "_detect_batch_size")
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def _detect_batch_size(self: Any, requests: Any = None, pos: int = 0) -> int:
        if requests:
            _, context_enc, continuation_enc = requests[pos]
            positions = len((context_enc + continuation_enc)[-(self.max_length + 1) :][:-1])
        else:
            positions = self.max_length
        size, decided = cap(self, positions)
        if decided:
            if self.world_size > 1:
                import torch

                size = int(min(self.all_gather(torch.tensor([size], device=self.device)).cpu().tolist()))
            return size
        start = self.max_batch_size
        self.max_batch_size = min(start, size)
        try:
            return original(self, requests, pos)
        finally:
            self.max_batch_size = start

    setattr(_detect_batch_size, MARK, True)
    HFLM._detect_batch_size = _detect_batch_size


# ---------------------------------------------------------------- request cache key (R7)


def request_cache_tokenizer_name(tokenizer_name: str, fingerprint: str) -> str:
    """The `tokenizer_name` to hand `Task.build_all_requests` so `--cache_requests` sees our inputs.

    lm_eval names its request cache after the task, shots, rank, chat template and
    `tokenizer_name` only (R7); `tokenizer_name` is used for nothing else there. Our requests
    also depend on `--metadata` and on local input files, so a task passes their `fingerprint`
    through here: any change of options or data gives a new cache entry instead of stale requests.
    """
    return f"{tokenizer_name}-longmem-{fingerprint}"


# ---------------------------------------------------------------- aggregation of our tasks (R11)


def install_aggregation() -> None:
    """Let a task build its own results row from the per-doc payloads of every rank (idempotent).

    lm_eval aggregates each raw metric key on its own (R11), which cannot turn one payload per doc
    (scores, cells, summary item) into one metric per cell. A task with a method
    ``aggregate_payloads(raw_metrics, harness_default)`` returns its ``(row, sample count)`` itself;
    ``harness_default(raw_metrics)`` is the harness's own aggregation, for keys it should keep. Any
    other task is aggregated by the harness, unchanged. Installed when our task base is imported.
    """
    from lm_eval import evaluator_utils

    original = evaluator_utils._compute_task_aggregations
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def compute(task: Any, raw_metrics: dict, bootstrap_iters: int | None = 100000) -> tuple[dict, int]:
        ours = getattr(task, "aggregate_payloads", None)
        if ours is None:
            return original(task, raw_metrics, bootstrap_iters)
        return ours(raw_metrics, lambda raw: original(task, raw, bootstrap_iters))

    setattr(compute, MARK, True)
    evaluator_utils._compute_task_aggregations = compute


# ---------------------------------------------------------------- the harness's BABILong texts (R8)


def builtin_babilong_file(qa: str) -> Path:
    """The installed harness's YAML for BABILong task `qa` (`lm_eval/tasks/babilong/babilong_qaN.yaml`)."""
    import lm_eval.tasks

    path = Path(lm_eval.tasks.__file__).parent / "babilong" / f"babilong_{qa.lower()}.yaml"
    if not path.is_file():
        raise FileNotFoundError(
            f"the installed lm_eval has no {path.name} (looked in {path.parent}); BABILong prompts are "
            "read from the harness's own babilong task: install lm-eval>=0.4.13,<0.5"
        )
    return path


def read_builtin_babilong_config(qa: str) -> tuple[Path, dict[str, Any]]:
    """The path and raw config (`!function` tags left unresolved) of the harness's task `qa`."""
    from lm_eval.tasks._yaml_loader import load_yaml

    path = builtin_babilong_file(qa)
    return path, load_yaml(path, resolve_func=False)


# ---------------------------------------------------------------- logging (R10)


def setup_logging() -> None:
    """What `lm_eval`'s command line does first: its handler and format on the `lm_eval` logger, at
    `LMEVAL_LOG_LEVEL` (default INFO). For callers of its Python API that print like the CLI (the demo)."""
    from lm_eval.utils import setup_logging as lm_eval_setup_logging

    lm_eval_setup_logging()


# ---------------------------------------------------------------- --model_args / --metadata (R12)


def dict_flag_action() -> type:
    """The argparse action of lm_eval's `--model_args`/`--metadata` (`k=v,k2=v2` words or a JSON object -> dict)."""
    from lm_eval._cli.utils import MergeDictAction

    return MergeDictAction


# ---------------------------------------------------------------- sample loggers (R15)


def logged_metric_list(scores: list[tuple[str, bool | None]]) -> list[dict[str, Any]]:
    """The `metric_list` a task's config dump gives when each of its logged samples holds `scores`
    ((name, higher_is_better) pairs): what the W&B logger reads from every sample (R15)."""
    return [{"metric": name, "aggregation": "mean", "higher_is_better": better} for name, better in scores]


# ---------------------------------------------------------------- the custom_dataset notice (R18)

TASK_LOGGER = "lm_eval.api.task"
"""R18: the logger of `lm_eval.api.task`, which `ConfigurableTask.download` warns through."""

CUSTOM_DATASET_NOTICE = "Custom kwargs can be passed to `--metadata`"
"""R18: how the notice `ConfigurableTask.download` logs for every task with a callable `custom_dataset` begins,
after "<task>: "; its example key, `max_seq_lengths`, is RULER's and no option of ours."""


class _DropNotice(logging.Filter):
    def __init__(self, task: str) -> None:
        super().__init__()
        self.prefix = f"{task}: {CUSTOM_DATASET_NOTICE}"

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


@contextlib.contextmanager
def quiet_custom_dataset_notice(task: str) -> Iterator[None]:
    """While `task` downloads (builds) its data, drop the harness's notice that custom kwargs go to
    `--metadata`, "for example max_seq_lengths": our tasks take the `<prefix>*` keys their cards list, and
    an unknown one is an error, so the notice only names an option that does not exist. Other tasks'
    notices (RULER's, which has that key) still reach the log; should the message change, it comes back."""
    gate = _DropNotice(task)
    logger = logging.getLogger(TASK_LOGGER)
    logger.addFilter(gate)
    try:
        yield
    finally:
        logger.removeFilter(gate)


# ---------------------------------------------------------------- results from logged payloads (R13)


def load_tasks(
    names: list[str],
    metadata: dict[str, Any],
    *,
    include_path: list[str] | None = None,
    usage_error: type[Exception] = ValueError,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(leaf tasks, groups) as a run with this metadata (`--model_args` merged with `--metadata`) and
    `--include_path` folders loads them.

    What the harness would skip silently or raise deep inside (R16) is a `usage_error` (the
    package's `UsageError`, handed in: this module imports nothing of ours) naming the flag: an
    include path that does not exist, a name the index does not hold (with the closest one), a
    YAML path the harness cannot read as a task.
    """
    import difflib

    for folder in include_path or []:
        if not Path(folder).expanduser().exists():
            raise usage_error(f"--include_path {folder}: no such file or folder; give the folder of your task YAMLs")
    manager = new_task_manager(metadata=metadata, include_path=list(include_path or []) or None)
    for name in names:
        if name in manager.all_tasks or Path(name).is_file():
            continue
        close = difflib.get_close_matches(name, manager.all_tasks, n=1, cutoff=0.6)
        hint = (
            f"did you mean {close[0]}?"
            if close
            else "give a task, group or tag name (lm_eval ls tasks lists them) or a task YAML's path"
        )
        raise usage_error(f"--tasks {name}: no such task; {hint} (use --include_path for the folder of your own tasks)")
    try:
        loaded = manager.load(names)
    except usage_error:
        raise
    except Exception as err:  # the YAML parser's or the config factory's error about a YAML the user named
        paths = [n for n in names if Path(n).is_file()]
        if not paths:
            raise
        first = (str(err).splitlines() or [""])[0]
        raise usage_error(
            f"--tasks {','.join(paths)}: the harness cannot load it as a task ({type(err).__name__}: {first}); fix the YAML or choose another task"
        ) from err
    return dict(loaded["tasks"]), dict(loaded.get("groups") or {})


def results_from_payloads(
    tasks: dict[str, Any],
    groups: dict[str, Any],
    raw_metrics: dict[str, dict[tuple[str, str], list]],
    bootstrap_iters: int | None,
) -> dict[str, Any]:
    """The harness's results dict (results, groups, configs, versions, n-shot, higher_is_better,
    n-samples) from every task's per-doc payloads, exactly as `evaluate` builds it once the model
    has answered: our tasks' rows come from their aggregation hook (R11), groups from the harness."""
    from collections import defaultdict

    from lm_eval.evaluator_utils import _process_results

    acc = {
        name: {"task": task, "raw_metrics": defaultdict(list, raw_metrics[name]), "logged_samples": []}
        for name, task in tasks.items()
    }
    return dict(_process_results(acc, groups, bootstrap_iters)._to_eval_results(samples=None))


def doc_hash(doc: Any) -> str:
    """The `doc_hash` a `--log_samples` record gives `doc`."""
    import json

    from lm_eval.utils import handle_non_serializable, hash_string

    return hash_string(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False))


def task_hash(records: list[dict[str, Any]]) -> str:
    """The results' `task_hashes` entry of a task whose `--log_samples` records are `records`, in file order."""
    from lm_eval.utils import hash_string

    return hash_string("".join(r["doc_hash"] + r["prompt_hash"] + r["target_hash"] for r in records))


# ---------------------------------------------------------------- text pairs as loglikelihood encodes them (R19)


def encode_text_pair(lm: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context tokens, continuation tokens) of two strings, as `TemplateLM.loglikelihood` encodes them (R19).

    An empty context becomes the model's prefix token (BOS/EOS), or the continuation's first token when
    that is the prefix; a continuation that encodes to nothing comes back empty (the caller says so).
    """
    if context == "":
        cont = lm.tok_encode(continuation, add_special_tokens=False)
        if not cont:
            return [lm.prefix_token_id], []
        return ([lm.prefix_token_id], cont) if lm.prefix_token_id != cont[0] else (cont[:1], cont[1:])
    return lm._encode_pair(context, continuation)


# ---------------------------------------------------------------- docs dealt to ranks (R20)


def deal_docs(
    docs: Iterable[tuple[int, Any]], *, rank: int, limit: int | None, world_size: int
) -> Iterator[tuple[int, Any]]:
    """`(doc_id, doc)` pairs of `docs` for data-parallel rank `rank`, as `ConfigurableTask.doc_iterator` deals
    them (R20): the first `limit` of all ranks' docs, every `world_size`-th from the `rank`-th."""
    from lm_eval import utils

    return utils.create_iterator(docs, rank=int(rank), limit=int(limit) if limit else None, world_size=int(world_size))


# ---------------------------------------------------------------- the HF backend's window (R21)


def default_window(config: Any, tokenizer: Any) -> int:
    """The window `HFLM` runs a model with when no `max_length` is given (R21)."""
    from lm_eval.models.utils import DEFAULT_MAX_LENGTH, resolve_max_length

    return resolve_max_length(config, tokenizer, default=DEFAULT_MAX_LENGTH)


def tokenizer_window(tokenizer: Any) -> int | None:
    """The tokenizer's `model_max_length` when it states one (not transformers' "unset" value), else None (R21)."""
    from lm_eval.models.utils import TOKENIZER_INFINITY

    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < TOKENIZER_INFINITY else None


# ---------------------------------------------------------------- metrics a task scores itself (R22)


def declare_metrics(task: Any, metric_list: list[dict[str, Any]]) -> None:
    """Declare `metric_list` on a built task whose own `process_results` returns those names, as
    `ConfigurableTask.__init__` declares them for such a task (R22): aggregation by name (default "mean")
    or a function, `higher_is_better` default True."""
    from lm_eval.api.registry import get_aggregation

    for entry in metric_list:
        name = entry["metric"]
        aggregation = entry.get("aggregation", "mean")
        task._metric_fn_list[name] = None
        task._metric_fn_kwargs[name] = {}
        task._aggregation_list[name] = get_aggregation(aggregation) if isinstance(aggregation, str) else aggregation
        task._higher_is_better[name] = entry.get("higher_is_better", True)


# ---------------------------------------------------------------- vLLM's engine (R23)


def vllm_generate(lm: Any, prompts: list[list[int]], sampling_params: Any) -> list[Any]:
    """vLLM's `RequestOutput` of every token-id prompt, in order, through the harness's VLLM (R23)."""
    return lm._model_generate(requests=prompts, generate=True, sampling_params=sampling_params)


# ---------------------------------------------------------------- a model as the harness builds it (R24)


def create_model(model: str, model_args: dict[str, Any], *, batch_size: Any, device: str | None) -> Any:
    """The LM `--model model --model_args ...` gives, built as `simple_evaluate` builds it (R24, R4)."""
    from lm_eval.api.registry import get_model

    return get_model(model).create_from_arg_obj(model_args, {"batch_size": batch_size, "device": device})


# ---------------------------------------------------------------- runs written as the CLI writes them (R25)


def evaluate_into(output_path: Path | str, **simple_evaluate_kwargs: Any) -> dict[str, Any]:
    """`lm_eval.simple_evaluate(**kwargs)` with `--log_samples`, its results and samples files written under
    `output_path` as `lm_eval run --output_path ... --log_samples` writes them (R25); returns the results
    (without the samples)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(output_path))
    results = lm_eval.simple_evaluate(**simple_evaluate_kwargs, log_samples=True, evaluation_tracker=tracker)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    return results


def results_tables(results: dict[str, Any]) -> str:
    """The tables `lm_eval run` prints after a run: the tasks', then the groups' when there are any (R25)."""
    from lm_eval.utils import make_table

    return make_table(results) + ("\n" + make_table(results, "groups") if "groups" in results else "")

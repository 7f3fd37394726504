"""Every place lm-eval-longmem touches lm_eval's internals, in one package, by concern.

Modules: ``tasks`` (the task index and what our task base asks of ``ConfigurableTask``), ``models`` (how the
harness creates an LM; our request type on HFLM, VLLM and CachingLM), ``evaluator`` (a run checked before its
model loads, results rebuilt from payloads, runs written as the CLI writes them), ``cli`` (usage errors,
``--debug``, the dict flags), ``loggers`` (log set-up, the sample loggers' ``metric_list``), ``marks`` (the mark
that makes installing twice a no-op). This package imports nothing of ours but ``paths``: what it installs is
handed to it (``Plugin``).

Supported range: ``lm-eval>=0.4.13,<0.5`` (the pin in pyproject.toml). What we rely on, each held by one
module and checked by a test in ``tests/harness/test_<module>.py`` (named after the arrow:
``-> tasks: test_r1_...`` is ``tests/harness/test_tasks.py::test_r1_...``), so a harness upgrade that breaks
one shows at once:

R1 ``lm_eval.tasks.manager.TaskManager.__init__`` takes ``include_path`` (one path or a list) and
   ``include_defaults``; it indexes its own directory (the one holding ``manager.py``) first, then
   the include paths in order, a later path replacing an earlier entry of the same name.
   -> tasks: test_r1_task_manager_parameters_and_precedence
R2 (retired: no wrapper reads the names a run passes to ``TaskManager.load`` any more; the other numbers stay.)
R3 When an include path replaces a name, ``lm_eval.tasks._index`` logs a WARNING through the logger
   of that name with the arguments ``(name, new yaml path, old yaml path)``. We drop that record when a
   task of our folders takes the name, and hand it to the package, which leaves out another package's
   evaluation that takes a name it did not declare (``tasks.index_our_tasks``); should the shape change,
   the warning merely comes back and nothing is left out.
   -> tasks: test_r3_override_warning_record_shape
R4 ``lm_eval.api.model.LM.create_from_arg_string`` and ``create_from_arg_obj`` are classmethods
   that return the new LM (``simple_evaluate`` builds every registry model through them), and the
   harness's HFLM and VLLM expose their window as ``max_length``.
   -> models: test_r4_lm_factories_are_classmethods_and_hflm_has_max_length
R5 ``lm_eval.api.task.ALL_OUTPUT_TYPES`` is the list of accepted ``output_type`` values and
   ``lm_eval.api.registry.DEFAULT_METRIC_REGISTRY`` maps each to its default metrics; the
   evaluator calls ``getattr(lm, output_type)(requests)``.
   -> models: test_r5_output_types_list_and_metric_registry
R6 ``lm_eval.api.model.CachingLM`` (``--use_cache``) serves method names through ``__getattr__``,
   stores answers in ``self.dbdict`` (a SqliteDict) under ``hash_args(name, request.args)``.
   -> models: test_r6_caching_lm_getattr_dbdict_and_hash_args
R7 ``Task.build_all_requests(tokenizer_name=...)``: ``--cache_requests`` names its pickle after the
   task name, shots, rank, chat template and ``tokenizer_name``, and nothing from ``--metadata``.
   -> tasks: test_r7_request_cache_is_keyed_by_tokenizer_name
R8 The harness ships ``lm_eval/tasks/babilong/babilong_qaN.yaml`` (instruction and answer format in
   ``description``, examples in ``fewshot_config.samples``), read with
   ``lm_eval.tasks._yaml_loader.load_yaml(path, resolve_func=False)``, and the group ``babilong.yaml`` of
   those tasks, which ``task_configs/babilong_harness.yaml`` repeats under that name.
   -> tasks: test_r8_builtin_babilong_yaml_shape, test_r8_the_harness_babilong_group_is_what_our_alias_group_repeats
R9 lm_eval's command line lets an exception from task loading reach the top of the interpreter
   (it catches nothing), so ``sys.excepthook`` sees it.
   -> cli: test_r9_usage_error_reaches_the_top_of_lm_eval (a real ``lm_eval`` subprocess)
R10 ``lm_eval.utils.setup_logging`` configures the ``lm_eval`` logger (level from ``LMEVAL_LOG_LEVEL``;
   0.4.13 applies the deprecated ``--verbosity`` only after the evaluation); every module of ours
   logs as a child of it (``lm_eval.<module>``) so its lines show with the harness's, at its level.
   -> loggers: test_r10_notice_logger_is_under_lm_eval, test_r10_package_logs_follow_the_harness_level
R11 ``lm_eval.evaluator_utils._collect_results`` calls the module-level
   ``_compute_task_aggregations(task, raw_metrics, bootstrap_iters)`` (looked up at call time) and
   takes its ``(row, sample count)``; ``raw_metrics[(key, filter)]`` holds each doc's value of
   ``key`` in the order ``evaluator.evaluate`` called ``process_results``, and with several ranks
   every key's list is the ranks' lists chained in rank order (for the keys rank 0 has). So when
   every doc returns the same keys, the values at one position of every list belong to one doc.
   -> tasks: test_r11_task_aggregation_hook_and_payload_order
R12 ``lm_eval._cli.utils.MergeDictAction`` is the argparse action (``nargs="+"``) behind ``lm_eval run``'s
   ``--model_args`` and ``--metadata``: ``k=v,k2=v2`` words or one JSON object, merged into a dict with
   the harness's value typing. Our subcommands take both flags through it, so they read alike.
   -> cli: test_r12_dict_flags_parse_as_the_harness_parses_them
R13 What ``evaluator.evaluate`` does after the model answered is
   ``evaluator_utils._process_results(acc, groups, bootstrap_iters)._to_eval_results()``, with
   ``acc[task] = {"task", "raw_metrics", "logged_samples"}`` and the groups of ``TaskManager.load``;
   ``--log_samples`` records carry ``doc_hash`` (``hash_string`` of the doc as indented JSON) and the
   results' ``task_hashes[task]`` is ``hash_string`` of every record's doc, prompt and target hashes
   joined. ``lm-eval-longmem merge`` rebuilds one run's results from its shards' records this way.
   -> evaluator: test_r13_results_from_logged_payloads_and_sample_hashes
R14 ``HFLM._detect_batch_size(requests=None, pos=0)`` is the harness's ``--batch_size auto`` for its own
   request types: it starts ``find_executable_batch_size`` at ``self.max_batch_size``, runs full-logits
   forwards of ``requests[pos]`` (a ``(key, context_enc, continuation_enc)`` triple, cut to
   ``max_length`` positions) or of ``max_length`` positions, and returns the size.
   -> models: test_r14_detect_batch_size_starts_at_max_batch_size
R15 The harness's W&B logger (``lm_eval.loggers.wandb_logger.WandbLogger._generate_dataset``) builds each
   task's sample table from the results' ``configs[task]["metric_list"]``, reading ``sample[metric]``
   from every logged sample (one missing key fails the upload of every task's samples, logged only
   at INFO); Trackio's logger reads the names in ``sample["metrics"]``. Our tasks' config dumps name
   the scores every sample holds (``logged_metric_list``).
   -> loggers: test_r15_wandb_sample_table_reads_every_metric_list_name_from_every_sample
R16 ``TaskManager.all_tasks`` lists every name (task, group, tag) the index holds; ``TaskManager.load``
   also takes a YAML file's path, and raises for anything else (an unknown name is a ``KeyError``,
   an unreadable YAML the parser's error); an ``include_path`` that does not exist is skipped
   silently. ``load_tasks`` checks all three first and names the flag at fault.
   -> tasks: test_r16_task_names_yaml_paths_and_missing_include_paths
R17 ``lm_eval.evaluator.simple_evaluate`` (under its ``positional_deprecated`` wrapper) creates the model
   through R4's factories, from its own frame and before it loads any task; there its parameters
   ``tasks``, ``task_manager``, ``model_args``, ``metadata``, ``limit`` and ``samples`` still hold what the caller passed, and a
   given TaskManager's ``metadata`` attribute and ``task_index`` (name -> entry with ``yaml_path``) are
   what its tasks will see. The lm_eval CLI passes the TaskManager it built from ``--model_args`` merged
   with ``--metadata``, and the task names it resolved. ``install_before_model`` reads that frame to
   check a run's inputs before the model loads.
   -> evaluator: test_r17_simple_evaluate_creates_its_model_from_its_own_frame,
                 test_r17_the_lm_eval_cli_checks_before_loading_the_model (a real ``lm_eval`` subprocess)
R18 ``ConfigurableTask.download`` warns, for every task whose ``custom_dataset`` is callable, through the
   logger ``lm_eval.api.task``, with a message that begins "<task>: Custom kwargs can be passed to
   `--metadata`" and suggests ``max_seq_lengths`` (RULER's key). ``quiet_custom_dataset_notice`` drops
   that record for our tasks while they build their data; should the message change, it comes back.
   -> tasks: test_r18_custom_dataset_notice_shape
R19 ``TemplateLM.loglikelihood`` encodes a ``(context, continuation)`` pair of strings with the model's
   ``_encode_pair(context, continuation)``, and an empty context as ``[prefix_token_id]`` before the
   continuation's tokens (``tok_encode(continuation, add_special_tokens=False)``), or as the
   continuation's first token when that token is the prefix. ``encode_text_pair`` does the same, so
   ``loglikelihood_accuracy`` scores exactly the tokens ``loglikelihood`` would.
   -> models: test_r19_text_pairs_are_encoded_as_loglikelihood_encodes_them
R20 ``ConfigurableTask.doc_iterator(*, rank, limit, world_size, samples)`` is how ``build_all_requests``
   takes a task's docs, as ``(doc_id, doc)`` pairs; the harness deals them to data-parallel ranks
   round-robin after the limit is counted over all ranks (``utils.create_iterator``: ``islice(docs,
   rank, limit, world_size)``). ``deal_docs`` does the same for our task base's own iterator.
   -> tasks: test_r20_doc_iterator_signature_and_dealing
R21 ``HFLM.max_length`` without a ``max_length`` argument is ``models.utils.resolve_max_length(config,
   tokenizer, default=DEFAULT_MAX_LENGTH)``: the text config's, then the config's ``n_positions``,
   ``max_position_embeddings`` or ``n_ctx``, else the tokenizer's ``model_max_length`` unless it is
   ``TOKENIZER_INFINITY``, else 2048. ``default_window`` and ``tokenizer_window`` give that rule, ``stated_window``
   the same without the 2048 (None: the model states no window).
   -> models: test_r21_hflm_window_rule
R22 ``ConfigurableTask.__init__`` turns each ``metric_list`` entry of a task with its own
   ``process_results`` into four private dicts (``_metric_fn_list`` None, ``_metric_fn_kwargs`` {},
   ``_aggregation_list`` through ``registry.get_aggregation``, ``_higher_is_better``), which
   ``aggregation()`` and ``higher_is_better()`` return. ``declare_metrics`` fills them after the
   task is built (so the harness neither warns about, nor looks up, names it does not know).
   -> tasks: test_r22_metric_list_dicts
R23 ``VLLM._model_generate(requests, generate, sampling_params)`` runs token-id prompts (spread over
   ``data_parallel_size`` replicas) and returns vLLM's ``RequestOutput`` per prompt, in order.
   ``vllm_generate`` calls it for ``loglikelihood_accuracy``.
   -> models: test_r23_vllm_model_generate_signature (read from the source: vLLM need not be installed)
R24 ``lm_eval.api.registry.get_model(name)`` is the LM class of a ``--model`` name (``hf`` -> ``HFLM``),
   built with R4's ``create_from_arg_obj(model_args, {"batch_size", "device"})``. ``create_model``
   builds a model as the harness does, to score several runs with one loaded model. An unknown name raises
   ``ValueError("Attempted to load model 'NAME', but no model for this name found! ...")``, which
   ``unknown_model`` says in one line with the closest name.
   -> models: test_r24_get_model_names_the_lm_class, test_r24_an_unknown_model_name_error_shape
R25 What ``lm_eval run --output_path DIR --log_samples`` writes after ``simple_evaluate``: an
   ``EvaluationTracker(output_path=DIR)`` handed to it, then ``save_results_aggregated(results=,
   samples=)`` with the samples popped from the results, and ``save_results_samples(task_name=,
   samples=samples[task])`` for every task of ``configs``; it prints ``utils.make_table(results)``
   (and the ``groups`` table). ``evaluate_into`` and ``results_tables`` do the same for callers of the
   Python API (the demo, the fine-tuning run), so their folders read as the CLI's.
   -> evaluator: test_r25_the_cli_saves_runs_as_evaluate_into_does, test_evaluate_into_writes_the_cli_files
R26 ``lm_eval run`` checks its ``--tasks`` names in ``EvaluatorConfig.process_tasks`` (through the TaskManager's
   ``match_tasks``) before it creates the model, and raises ``ValueError("Tasks not found: a, b")`` for the names
   its index does not hold. ``tasks_not_found`` reads those names back, so ``lm_eval`` with our hook (R9) and every
   subcommand of ours say them in one line with the closest names (``cli.harness_error_line``; ``unknown_tasks``,
   the line ``load_tasks`` gives too).
   -> tasks: test_r26_unknown_task_names_error_shape; cli: test_hook_says_lm_evals_unknown_task_error_in_one_line_with_the_closest_name
R27 ``lm_eval._cli.run.Run.create(subparsers)`` adds the ``run`` subcommand's parser (every flag of
   ``lm_eval run``, with ``-h``) to ``subparsers`` and returns the command, whose ``_parser`` is that parser.
   ``run_parser`` returns it, so ``lm-eval-longmem plan`` takes every flag of the command it plans.
   -> cli: test_r27_run_parser_holds_every_run_flag
R28 ``ConfigurableTask.fewshot_context`` builds a zero-shot prompt from ``lm_eval.api.utils`` pieces: the system
   message ``maybe_delimit(system_instruction, description, fewshot_delimiter)``, then
   ``ConfigurableTask.build_qa_turn(q=text, gen_prefix=..., tgt_delim=target_delimiter, few_delim="")`` (which
   reads nothing of ``self``), joined as text or, with a chat template, ``multiturn_to_singleturn`` (or each
   message's ``to_dict`` with ``--fewshot_as_multiturn``) rendered by ``HFLM.apply_chat_template``
   (``tokenizer.apply_chat_template(..., add_generation_prompt=not gen_prefix, continue_final_message=...)``).
   ``harness_prompt`` builds it so, for ``plan`` to count what a run sends.
   -> models: test_r28_harness_prompt_is_the_tasks_rendered_prompt
R29 The harness's VLLM (one replica) holds vLLM's ``LLM`` as ``model``; in vLLM's V1 multiprocess mode its
   ``llm_engine.engine_core`` is a client with an idempotent ``shutdown()`` and a daemon ``output_queue_thread``,
   which vLLM's exit hook (a ``weakref.finalize``) stops with a message but never joins. ``shut_down_vllm_at_exit``
   (registered as the factories create a VLLM) shuts the client down and joins that thread before the interpreter
   finalizes, which otherwise now and then aborts the process after its results are written.
   -> models: test_r29_vllm_engine_shut_down_and_output_thread_joined (the real engine, in ``.ci/vllm``)

lm_eval is changed at one point, ``install(plugin)`` below (idempotent), and nowhere at import: R1 and R3 (our
tasks indexed, when asked, from the folders handed), R4, R17 and R29 (the LM factories, the check before the
model, a vLLM engine shut down at exit), R5, R6 and R14 (a
request type and the batch-probe cap, when handed), R9 (when a usage error is handed) and R11 (the
aggregation hook). It is called when the plugin activates (``lm_eval_longmem._autoload.activate``: the ``.pth``
hook, ``lm-eval-longmem run``), by ``lm_eval_longmem.task_manager()``, and whenever a task of ours is built
(``LongmemTask.__init__``), so our tasks run however lm_eval found them (the hook off and our folder given with
``--include_path`` included). Everything else here is a plain function the package calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_longmem.harness import cli, evaluator, models, tasks


@dataclass(frozen=True)
class Plugin:
    """What the package hands `install`; a field left None installs nothing of its own."""

    usage_error: type[BaseException] | None = None
    """R9: the package's `UsageError`, printed as one line when it reaches the top of the interpreter."""
    before_model: Callable[[evaluator.RunRequest], None] | None = None
    """R17: the check of a run's inputs before `simple_evaluate` creates its model (`preflight.check_run`)."""
    request_type: models.RequestType | None = None
    """R5, R6: a request type of ours and its `hf` and `vllm` methods (`backends.plugin`)."""
    batch_probe_cap: Callable[[Any, int], tuple[int, bool]] | None = None
    """R14: the bound on the harness's own `--batch_size auto` probe (`backends.hf.stock_batch_size`)."""
    task_folders: Callable[[], Sequence[Path]] | None = None
    """R1: the folders of our task YAMLs every `TaskManager` indexes, read when one is built (the registry's,
    `common.evaluations.task_folders`: ours and other packages' evaluations); None: the package's own folder."""
    refused_folders: Callable[[Sequence[tasks.Override]], Sequence[Path]] | None = None
    """R3: given the names those folders' tasks took from earlier ones in the index, the folders to index again
    without (`common.evaluations.refused_folders`, which says why); None: none."""


def install(plugin: Plugin, *, index_our_tasks: bool = False, manager_module: Any | None = None) -> None:
    """Everything lm-eval-longmem changes in lm_eval (idempotent; each part is installed once, however often
    this is called): the aggregation hook (R11) and the LM factories (R4) always, the parts `plugin` hands, and
    with `index_our_tasks` our task folder in every `TaskManager` (R1, R3), on `manager_module` (the start-up
    hook hands the `lm_eval.tasks.manager` it is executing) or on the one imported now."""
    tasks.install_aggregation()
    models.patch_lm_factories()
    if plugin.usage_error is not None:
        cli.install_usage_error_hook(plugin.usage_error)
    if plugin.before_model is not None:
        evaluator.install_before_model(plugin.before_model)
    if plugin.request_type is not None:
        kind = plugin.request_type
        models.install_request_type(kind.name, hf=kind.hf, vllm=kind.vllm)
    if plugin.batch_probe_cap is not None:
        models.install_batch_probe_cap(plugin.batch_probe_cap)
    if plugin.task_folders is not None:
        tasks.install_task_folders(plugin.task_folders, plugin.refused_folders)
    if index_our_tasks:
        if manager_module is None:
            import lm_eval.tasks.manager

            manager_module = lm_eval.tasks.manager
        tasks.patch_task_manager(manager_module)

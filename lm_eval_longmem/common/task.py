"""The task base all three evaluations use the same way: options, window fit and skips, request-cache key, metrics.

Every lm-eval-longmem YAML names a subclass of `LongmemTask` (`class: !function ...`). The base does:

* **Options.** `OPTIONS` (a dataclass declared with `common.options.option`) and `PREFIX` name the
  evaluation's `--metadata` keys; `self.options` is the parsed object, the same one the data
  builder got (`parse_options` is memoised per metadata).
* **Window fit and skips, one mechanism.** Before any request is built, each doc the run
  considers is checked by `fit_reason` against the model's window (`model_info.model_window`,
  which prefers the backend the harness created): by default the exact prompt the harness will
  send (system instruction and chat template included) plus the answer (the longest choice, or
  `max_gen_toks`), counted exactly without tokenizing it again on every run (`count_tokens`: the
  count the doc's builder stored for that very prompt, else one tokenization per content, kept on
  disk by `common.token_counts`). A doc that does not fit is skipped and counted, never truncated, and the
  dataset is never changed: `doc_iterator` passes over skipped docs, so `--limit N` means "the
  first N docs that run", `--samples` indices are the dataset's own, and `--cache_requests` /
  `--use_cache` see the same docs in every run. The skips are computed the same way whether the
  requests come from the harness's cache or not, and reported for every evaluation: `skipped` (count, a
  metric) and `skip_reasons` ({cell: {reason: count}}, in `configs.<task>.longmem`).
* **Request cache key.** lm_eval keys `--cache_requests` by task name, shots, rank, chat template
  and tokenizer, not by `--metadata`, the content of local inputs, `--samples` or the task config.
  The key gets a fingerprint of the metadata, the window, the *content* of every local file or
  folder an option names (`OptionSpec.local_input`, `local_inputs`) and of the model's tokenizer,
  config and chat-template files, the `--samples` selection and the task's config (`--gen_kwargs`),
  so replacing a corpus, a retriever or a tokenizer in place, or choosing other docs, builds new requests.
* **Metrics per cell, computed at aggregation.** `score(doc, results)` gives a doc's scores (the
  names in `SCORES`, each a `metric_names.ScoreSpec`, and a share's scored units); `doc_cells` the
  cells it counts in (a length, a condition, a (task, length)); `summary_item` its `ITEM` (a
  NamedTuple per evaluation: what one doc gives the whole-run summaries), which `summarize(items)`
  turns into the summary metrics. `process_results` returns just those (a fixed handful of keys per
  doc, whatever the sweep; the item as a record of its named fields, `item_record`, which
  `--log_samples` logs and `read_item` reads back, old positional lists included), and
  `aggregate_payloads`, called through the harness hook
  (`harness.tasks.install_aggregation`, installed when a task is built), adds the scores that need the whole run (`run_scores`) and turns
  every doc's payload into `score@cell` (mean) and `score@cell_ci_low/_ci_high` (95% interval by
  the score's family, `cell_interval`) for every score and cell of the run, the summaries and
  `skipped`; names come from `common/metric_names.py`. Every value under `results` is a number or
  None (an interval the data cannot give, as for one sample, is None); the skip reasons (and other
  non-metric facts) go to the results' `configs.<task>.longmem` (`result_facts`).
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from lm_eval.api.task import ConfigurableTask

from lm_eval_longmem.common import cost, metric_names, stats
from lm_eval_longmem.common.cache import cache_key, input_digest, sha256_hex
from lm_eval_longmem.common.conditions import IN_CONTEXT
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.metric_names import CELLS_KEY, CONFIG_KEY, SUMMARY_KEY, ScoreSpec
from lm_eval_longmem.common.model_info import Window, load_config, load_tokenizer, model_digest, model_window
from lm_eval_longmem.common.options import declared, parse_options
from lm_eval_longmem.common.text import READER_VERSION
from lm_eval_longmem.common.token_counts import TokenCounts
from lm_eval_longmem.harness import Plugin, install
from lm_eval_longmem.harness.loggers import logged_metric_list
from lm_eval_longmem.harness.tasks import deal_docs, quiet_custom_dataset_notice, request_cache_tokenizer_name

log = logging.getLogger(f"lm_eval.{__name__}")

_said: set[str] = set()


def say_taken_name(evaluation_name: str, task: str) -> None:
    """One INFO line, once per process, when a task of ours is built under a name it takes from the harness on
    purpose (`Evaluation.replaces_harness`): a pipeline that ran the harness's task of that name learns what it
    runs now, and where the harness's own went."""
    from lm_eval_longmem.common.evaluations import evaluation

    try:
        alias = evaluation(evaluation_name).replaces_harness.get(task)
    except KeyError:  # a class of ours used by a task of no registered evaluation
        return
    if alias is None or task in _said:
        return
    _said.add(task)
    where = f"runs as '{alias}'" if alias else "cannot run"
    log.info(
        "'%s' is lm-eval-longmem's %s evaluation while the plugin is active; the harness's own '%s' %s meanwhile "
        "(LM_EVAL_LONGMEM_AUTOLOAD=0 gives it its name back)",
        task, evaluation_name, task, where,
    )  # fmt: skip


def item_record(item: tuple) -> dict[str, Any]:
    """A summary item (a NamedTuple) as the payload holds it and `--log_samples` logs it: its named fields."""
    return dict(item._asdict())  # type: ignore[attr-defined]


def read_item(kind: Any, record: Any, former_names: dict[str, str] | None = None) -> Any:
    """The `kind` item (a NamedTuple class) of a payload's record: the named fields `item_record` wrote (a field
    under a name it had before, a key of `former_names`, under today's), or the positional list that files
    logged before the items were named hold (missing trailing fields take their defaults)."""
    try:
        if isinstance(record, dict):
            record = {(former_names or {}).get(key, key): value for key, value in record.items()}
            unknown = set(record) - set(kind._fields)
            if unknown:
                raise TypeError(f"unknown field(s) {sorted(unknown)}")
            return kind(**record)
        if isinstance(record, (list, tuple)):
            return kind(*record)
    except TypeError as err:
        raise ValueError(f"a logged summary item {record!r} is not a {kind.__name__} {kind._fields}: {err}") from None
    raise ValueError(f"a logged summary item {record!r} is not a {kind.__name__} {kind._fields}")


_RENDER_KEYS = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn", "chat_template")


def cell_interval(values: Sequence[float], spec: ScoreSpec, units: Sequence[int] | None = None) -> stats.Interval:
    """A cell's mean with its 95% interval, by the score's family (`metric_names.Family`): Wilson for
    0/1 scores, `stats.share_interval` for shares (`units`: each value's scored items),
    `stats.log_mean_interval` for perplexities. NaN bounds where the family has none (one sample)."""
    if spec.family == "binary":
        return stats.proportion_interval(round(math.fsum(values)), len(values))
    if spec.family == "share":
        if units is None:
            raise ValueError(f"{spec.name}: a share's interval needs the scored units of every value")
        return stats.share_interval(values, units)
    return stats.log_mean_interval(values)


CellStat = tuple[Callable[[Sequence[float], Sequence[int] | None], float], bool | None]
"""(statistic of a cell's values and their units (None unless the score is a share), higher_is_better)."""


def _number_or_none(value: Any) -> Any:
    """NaN (an interval the data cannot give) becomes None, which results files write as null."""
    return None if isinstance(value, float) and math.isnan(value) else value


class LongmemTask(ConfigurableTask):
    """ConfigurableTask with our options, window fit and skips, request-cache key and per-cell metrics."""

    OPTIONS: ClassVar[type | None] = None
    """The evaluation's option dataclass (None: the task takes no options of ours)."""
    PREFIX: ClassVar[str] = ""
    """Prefix of its `--metadata` keys."""
    SCORES: ClassVar[tuple[ScoreSpec, ...]] = ()
    """Per-doc scores that get `score@cell` metrics (`ScoreSpec("acc")`: a binary accuracy)."""
    ITEM: ClassVar[Any] = None
    """The NamedTuple of what one doc gives the whole-run summaries (`summary_item`, `summarize`); None: no summaries."""
    EVALUATION: ClassVar[str | None] = None
    """The name of the evaluation it belongs to (`common.evaluations`), recorded with its results (None: the
    task records none, and readers do not take it for one of ours). A user's subclass of ours inherits it."""
    ITEM_FORMER_NAMES: ClassVar[dict[str, str]] = {}
    """Former name -> today's, of `ITEM` fields renamed since samples files logged them (`read_item`)."""
    RECORDED_METADATA: ClassVar[tuple[str, ...]] = ()
    """Keys `dump_config` adds to the results' config metadata: facts of the run, not options (so
    `lm-eval-longmem merge` leaves them out when it loads the task again from that metadata)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # lm_eval hands a `class:` task its whole YAML, `class` key included, which TaskConfig rejects.
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        self._render_kwargs: dict[str, Any] = {}
        self._fit: dict[int, str] = {}
        self._counted: dict[str, int] = {}
        self._stored_counts = 0
        self.skips: dict[str, dict[str, int]] = {}
        self.cells: list[str] = []
        self.docs_per_cell: dict[str, int] = {}
        self.null_reasons: dict[str, str] = {}
        install(self.harness_plugin())
        super().__init__(config=config, **kwargs)
        if self.EVALUATION:
            say_taken_name(self.EVALUATION, str(self.config.task))

    @classmethod
    def harness_plugin(cls) -> Plugin:
        """What a task of this class needs lm_eval to have, installed (`harness.install`) each time one is built, before
        the harness checks its config: so it runs however lm_eval found it, the start-up hook off and our folder given
        with `--include_path` included. Every task gets the aggregation hook (`aggregate_payloads`); a task that sends
        `loglikelihood_accuracy` requests returns `backends.plugin()`, its request type."""
        return Plugin()

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """The harness's own download (it calls our `custom_dataset` builder), without its notice that
        suggests a `max_seq_lengths` key we do not have (harness R18)."""
        with quiet_custom_dataset_notice(self.config.task):
            super().download(dataset_kwargs, **kwargs)

    # --- options and model facts ---------------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        return self.config.metadata if isinstance(self.config.metadata, dict) else {}

    @property
    def options(self) -> Any:
        """The parsed `PREFIX*` options (the same object the data builder got)."""
        return parse_options(self.OPTIONS, self.PREFIX, self.metadata) if self.OPTIONS else None

    @cached_property
    def window(self) -> Window:
        return model_window(self.metadata)

    @cached_property
    def tokenizer(self) -> Any:
        return load_tokenizer(self.metadata)

    def local_inputs(self) -> list[Path]:
        """The local files and folders this run's docs are built from: every option declared
        `local_input` that names an existing path (evaluations add what an option resolves to)."""
        found = []
        if self.OPTIONS:
            for d in declared(self.OPTIONS, self.PREFIX):
                value = getattr(self.options, d.name)
                if d.spec.local_input and isinstance(value, str) and Path(value).expanduser().exists():
                    found.append(Path(value).expanduser())
        return found

    def inputs_fingerprint(self) -> str:
        """Hash of the metadata, the window and the content of every input the requests are built from:
        the local files the options name (`local_inputs`) and the model's tokenizer, config and chat
        template files (`model_info.model_digest`), each read once per content (`cache.input_digest`), and how
        text files are read (`common.text.READER_VERSION`: the same bytes read another way are other requests)."""
        local = [input_digest([path]) for path in self.local_inputs()]
        model = model_digest(self.metadata, weights=False)
        blob = json.dumps(
            [self.metadata, self.window.tokens, self.window.positions, local, model, READER_VERSION],
            sort_keys=True,
            default=str,
        )
        return sha256_hex(blob)[:16]

    # --- window fit and skips ------------------------------------------------------------------

    def skip_cell(self, doc: dict[str, Any]) -> str:
        """The cell a skip is counted in (a length, a condition); default: the doc's first cell."""
        cells = self.doc_cells(doc)
        return cells[0] if cells else "all"

    @cached_property
    def token_counts(self) -> TokenCounts:
        """Exact counts of the prompts this run checks, kept on disk by content (saved after the fit checks)."""
        return TokenCounts(self.tokenizer)

    def count_tokens(self, doc: dict[str, Any], text: str) -> int:
        """Exact tokens of `text` in the model's tokenizer, special tokens included, as `tokenizer(text)` gives them.

        A doc may carry the count its builder made of its prompt (`prompt_tokens`, with `prompt_sha256`,
        the sha256 of that prompt): when `text` is that prompt, the count is read, not made again
        (a generator that counts each prompt as it builds it). Any other text (a chat template,
        a system instruction, an answer choice added) is counted once per content (`token_counts`).
        """
        digest = sha256_hex(text)
        if doc.get("prompt_sha256") == digest:
            self._stored_counts += 1
            return int(doc["prompt_tokens"])
        return self.token_counts.count(text, digest)

    def answer_tokens(self, doc: dict[str, Any], prompt: str) -> int:
        """Tokens of prompt + answer as the backend will run them (the longest choice, or max_gen_toks)."""
        count = lambda text: self.count_tokens(doc, text)  # noqa: E731
        if self.OUTPUT_TYPE == "generate_until":
            return count(prompt) + int((self.config.generation_kwargs or {}).get("max_gen_toks", 256))
        if self.OUTPUT_TYPE == "multiple_choice":
            delimiter = self.config.target_delimiter
            return max(count(prompt + delimiter + str(choice)) for choice in self.doc_to_choice(doc))
        return count(prompt + self.config.target_delimiter + str(self.doc_to_target(doc)))

    def counted_tokens(self, doc: dict[str, Any], prompt: str) -> int:
        """`answer_tokens`, counted once per prompt and answer in a run: the fit check counts, the cost line reads.

        Keyed by a digest of the prompt and the doc's answer (choices or target), so the cost line
        finds the count for the prompt the harness built without tokenizing it again.
        """
        answer = self.doc_to_choice(doc) if self.OUTPUT_TYPE == "multiple_choice" else self.doc_to_target(doc)
        key = sha256_hex(f"{len(prompt)}\0{answer!r}\0{prompt}")
        if key not in self._counted:
            self._counted[key] = self.answer_tokens(doc, prompt)
        return self._counted[key]

    def fit_reason(self, doc: dict[str, Any]) -> str:
        """Why `doc` cannot run ("" when it fits): its exact prompt plus answer against the window."""
        window = self.window
        if window.tokens is None:
            raise UsageError(
                f"{self.config.task}: the model's window is unknown, so prompts cannot be checked against it "
                "(we never truncate): pass max_length=N in --model_args (max_model_len=N for vllm)"
            )
        prompt = self.rendered_prompt(doc, **self._render_kwargs)
        if self.counted_tokens(doc, prompt) > window.tokens:
            return f"prompt + answer exceed the window ({window.tokens} tokens, {window.source})"
        return ""

    def _reason(self, index: int, doc: dict[str, Any]) -> str:
        if index not in self._fit:
            self._fit[index] = self.fit_reason(doc)
        return self._fit[index]

    def _decide_skips(self, limit: int | None, samples: list[int] | None) -> int:
        """Skip record and cells of the docs this run considers, the same on every rank and cache state."""
        docs = self.eval_docs
        considered = samples if samples else self.doc_order
        limit = None if samples else (int(limit) if limit else None)
        skips: dict[str, Counter[str]] = {}
        cells: dict[str, None] = {}
        kept, cut = 0, False
        for position, index in enumerate(considered):
            doc = docs[index]
            reason = self._reason(index, doc)
            if reason:
                skips.setdefault(self.skip_cell(doc), Counter())[reason] += 1
                continue
            cells.update(dict.fromkeys(self.doc_cells(doc)))
            kept += 1
            if limit is not None and kept >= limit:
                cut = position < len(considered) - 1
                break
        self.skips = {cell: dict(reasons) for cell, reasons in skips.items()}
        self.cells = list(cells)
        if cut:
            self._warn_limit(kept)
        if self.skips:
            total = sum(sum(r.values()) for r in self.skips.values())
            details = "; ".join(f"{cell}: {n} x {why}" for cell, r in self.skips.items() for why, n in r.items())
            log.warning("%s: %d doc(s) skipped, never truncated (%s)", self.config.task, total, details)
        if not kept:
            raise UsageError(
                f"{self.config.task}: no doc fits the model ({'; '.join(sorted({w for r in self.skips.values() for w in r}))}): "
                "choose shorter lengths or conditions, or raise the window (max_length / max_model_len)"
            )
        return kept

    def _warn_limit(self, kept: int) -> None:
        """Say what a run cut by `--limit` rests on, and how to take the cheapest docs instead of the balanced rounds."""
        order = getattr(self.options, "limit_order", None)
        key = f"{self.PREFIX}limit_order"
        how = (
            f"the cheapest first ({key}=cheapest)"
            if order == "cheapest"
            else f"in balanced rounds, the most expensive first; --metadata {key}=cheapest takes the cheapest first"
        )
        log.warning(
            "%s: --limit runs %d of its %d docs, %s. Cells with fewer docs than the sweep holds rest on fewer samples, "
            "and whole-run summaries that need every doc of a cell are null (the reason is in the results' "
            "configs.%s.%s.null_reasons)",
            self.config.task, kept, len(self.eval_docs), how, self.config.task, CONFIG_KEY,
        )  # fmt: skip

    @cached_property
    def dataset_docs_per_cell(self) -> dict[str, int]:
        """Docs of the whole dataset per cell (`doc_cells`): what a run of every doc scores in each."""
        counts: Counter[str] = Counter()
        for doc in self.eval_docs:
            counts.update(self.doc_cells(doc))
        return dict(counts)

    def short_cells(self) -> dict[str, tuple[int, int]]:
        """Cells this run scored fewer docs in than the dataset holds for them, less the docs skipped for the
        window: {cell: (scored, expected)}. A `--limit`, `--samples` or a partial merge leaves cells short;
        a summary that reads every doc of a cell (a memory length, an effective context) is then null, with
        its reason in `null_reasons`. Valid once the payloads are aggregated (`docs_per_cell`)."""
        out = {}
        for cell, held in self.dataset_docs_per_cell.items():
            expected = held - sum(self.skips.get(cell, {}).values())
            scored = self.docs_per_cell.get(cell, 0)
            if expected > 0 and scored < expected:
                out[cell] = (scored, expected)
        return out

    def doc_work(self, doc: dict[str, Any]) -> int:
        """Estimated work of a doc's requests, as the data builder's balanced order estimates it; for
        the `cheapest` limit order."""
        raise NotImplementedError(
            f"{type(self).__name__} has no work estimate, so it cannot take its docs cheapest first"
        )

    @cached_property
    def doc_order(self) -> list[int]:
        """Dataset indices in the order the run takes them (`--limit N`: the first N that fit).

        The `<prefix>limit_order` option (`common.options.limit_order_option`): `balanced` is the
        dataset's own order; `cheapest` sorts by `doc_work`, ties in dataset order. Only the order
        of taking changes: the docs, their indices and their scores do not.
        """
        count = len(self.eval_docs)
        if getattr(self.options, "limit_order", "balanced") != "cheapest":
            return list(range(count))
        docs = self.eval_docs
        return sorted(range(count), key=lambda i: (self.doc_work(docs[i]), i))

    def doc_iterator(
        self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]:
        """The harness's iterator over the docs that fit; `--samples` indices are the dataset's own.

        With `--samples`, doc ids are positions in that list (the harness maps them back with
        `samples[id]`); otherwise they are dataset indices, taken in `doc_order`, and `--limit N` takes
        the first N docs that fit. Either way they are dealt to ranks as the harness deals its own (R20).
        """
        docs = self.eval_docs
        if samples:
            chosen = ((pos, docs[i]) for pos, i in enumerate(samples) if not self._reason(i, docs[i]))
            return deal_docs(chosen, rank=rank, limit=None, world_size=world_size)
        running = ((i, docs[i]) for i in self.doc_order if not self._reason(i, docs[i]))
        return deal_docs(running, rank=rank, limit=limit, world_size=world_size)

    def build_all_requests(self, *, limit: int | None = None, samples: list[int] | None = None, **kwargs: Any) -> None:
        self._render_kwargs = {key: kwargs.get(key) for key in _RENDER_KEYS if key in kwargs}
        self._render_kwargs["apply_chat_template"] = bool(self._render_kwargs.get("apply_chat_template"))
        self._render_kwargs["fewshot_as_multiturn"] = bool(self._render_kwargs.get("fewshot_as_multiturn"))
        self._fit, self._counted, self._stored_counts = {}, {}, 0
        self.before_requests()
        try:
            kept, ranks = self._decide_skips(limit, samples), int(kwargs.get("world_size") or 1)
        finally:
            self._save_counts()
        if kept < ranks:  # else the harness fails on the rank left without docs ("did not find any docs!")
            raise UsageError(
                f"{self.config.task}: {kept} doc(s) to run for {ranks} data-parallel processes, and every process "
                f"needs at least one: run more docs (a larger --limit, or more samples per cell) or at most {kept} processes"
            )
        # `--samples` and the task's config (`--gen_kwargs`, prompts) decide which requests exist too.
        fingerprint = cache_key(inputs=self.inputs_fingerprint(), samples=samples, config=self.dump_config())[:16]
        kwargs["tokenizer_name"] = request_cache_tokenizer_name(kwargs.get("tokenizer_name", ""), fingerprint)
        super().build_all_requests(limit=limit, samples=samples, **kwargs)
        if not int(kwargs.get("rank") or 0) and self.instances:
            log.info("%s", self.cost_line(ranks))

    # --- what the run will cost -----------------------------------------------------------------

    def request_tokens(self, instance: Any) -> int:
        """Tokens of the sequence one request makes the model run: token ids counted, text as the fit check counted it.

        For text, the count is the fit check's for the doc (prompt plus its longest answer, or plus
        `max_gen_toks` when generating), so every request of a doc counts as the longest.
        """
        context, continuation = instance.arguments[0], instance.arguments[1]
        if not isinstance(context, str) and not isinstance(continuation, (str, dict)):
            return len(context) + len(continuation)
        return self.counted_tokens(instance.doc, context)

    def cost_line(self, ranks: int = 1) -> str:
        """One line before the first request: docs, requests, input tokens, the longest sequence and its estimated peak memory."""
        tokens = [self.request_tokens(instance) for instance in self.instances]
        docs = len({instance.doc_id for instance in self.instances})
        share = f" (rank 0's share; {ranks} ranks)" if ranks > 1 else ""
        return (
            f"{self.config.task}: {docs} docs, {len(tokens)} {self.OUTPUT_TYPE} requests, {sum(tokens):,} input tokens{share}; "
            f"longest sequence {max(tokens):,} tokens, {self.sequence_memory(max(tokens))}"
        )

    def sequence_memory(self, tokens: int) -> str:
        """The estimated memory of one sequence of `tokens` tokens on this run's backend (`common.cost`), in words."""
        config = load_config(self.metadata)
        if config is None:
            return "memory not estimated (no model config)"
        try:
            shape = cost.ModelShape.from_config(
                config, dtype=self.metadata.get("dtype"), attention=self.metadata.get("attn_implementation")
            )
            if self.window.backend == "vllm":
                return f"KV cache {cost.gib(cost.kv_cache_bytes(shape, tokens))} per sequence (vLLM; weights {cost.gib(shape.weights_bytes)})"
            peak = cost.hf_peak(shape, self.OUTPUT_TYPE, tokens)
        except ValueError as err:  # a config the cost model cannot size, or a request type it does not know
            return f"memory not estimated ({err})"
        parts = f"weights {cost.gib(peak.weights)}, activations {cost.gib(peak.activations)}"
        parts += f", KV cache {cost.gib(peak.kv_cache)}" if peak.kv_cache else ""
        parts += f", then logits {cost.gib(peak.logits)} in their place" if peak.logits else ""
        return f"estimated peak {cost.gib(peak.total)} per sequence on the HF backend ({parts})"

    def _save_counts(self) -> None:
        """Say where the fit's counts came from, and keep the new ones for later runs (even when no doc fits)."""
        counts = self.__dict__.get("token_counts")
        if counts is not None or self._stored_counts:
            log.info(
                "%s: window fit: %d prompt count(s) stored with the docs, %d read from the count cache, %d tokenized",
                self.config.task, self._stored_counts, counts.read if counts else 0, counts.counted if counts else 0,
            )  # fmt: skip
        if counts is not None:
            counts.save()

    def adopt_run(self, skips: dict[str, dict[str, int]], cells_column: Sequence[Sequence[str]]) -> None:
        """Take the state aggregation reads (skips, cells in order) from a run's records instead of deciding it.

        For `lm-eval-longmem merge`, which aggregates payloads that other processes logged: `skips` is
        {cell: {reason: count}} of every shard, `cells_column` each doc's `cells`, in doc order (the
        order `_decide_skips` meets them in).
        """
        self.skips = {cell: dict(reasons) for cell, reasons in skips.items()}
        self.cells = list(dict.fromkeys(c for cells in cells_column for c in cells))

    def before_requests(self) -> None:
        """Called once before the fit checks (e.g. to log what the longest input needs)."""

    def rendered_prompt(
        self,
        doc: dict[str, Any],
        *,
        system_instruction: str | None = None,
        apply_chat_template: bool = False,
        fewshot_as_multiturn: bool = False,
        chat_template: Any = None,
    ) -> str:
        """The prompt the harness will send for `doc`, with `--system_instruction` and the chat template applied."""
        return self.fewshot_context(
            doc,
            num_fewshot=0,
            system_instruction=system_instruction,
            apply_chat_template=bool(apply_chat_template),
            fewshot_as_multiturn=bool(fewshot_as_multiturn),
            chat_template=chat_template,
            gen_prefix=self.doc_to_prefix(doc),
        )

    # --- metrics -------------------------------------------------------------------------------

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        """The cells a doc counts in (the CELL of its `score@cell` metrics, `metric_names.cell`); default none."""
        return ()

    def score(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """The doc's scores, one per name in `SCORES` (a number, or None); other keys reach `summary_item` only."""
        raise NotImplementedError

    def summary_item(self, doc: dict[str, Any], scores: dict[str, Any]) -> Any:
        """What this doc gives the whole-run summaries: an `ITEM` of short, JSON-able fields."""
        raise NotImplementedError

    def summarize(self, items: Sequence[Any]) -> dict[str, float | None]:
        """Whole-run metrics (name as written -> number or None) from every doc's `ITEM`.

        The items arrive in the order the harness gathered them (rank by rank), so a summary must not
        depend on their order (group, sort or count them), for one process and N ranks to agree.
        Its names are those of `summary_directions`.
        """
        return {}

    def summary_directions(self) -> dict[str, bool | None]:
        """higher_is_better of every metric `summarize` gives (known before any item is: the run's cells)."""
        return {}

    @classmethod
    def score_specs(cls) -> tuple[ScoreSpec, ...]:
        """The per-doc scores: `SCORES`."""
        return cls.SCORES

    def run_score_specs(self) -> tuple[ScoreSpec, ...]:
        """Per-doc scores that need the whole run (a threshold fitted on every doc, say), computed at
        aggregation by `run_scores` and then treated like `SCORES` (per-cell means and intervals); default none."""
        return ()

    def run_scores(self, columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """One value per doc, in payload order, for every name of `run_score_specs`, from the payload columns.

        The docs arrive in the order the harness gathered them (rank by rank), so a run score must not
        depend on that order (fit on sorted or grouped values), for one process and N ranks to agree.
        """
        return {}

    def metric_specs(self) -> tuple[ScoreSpec, ...]:
        """Every score with per-cell metrics: the payload's (`score_specs`), then the run's (`run_score_specs`)."""
        return (*self.score_specs(), *self.run_score_specs())

    def cell_stats(self, spec: ScoreSpec) -> dict[str, CellStat]:
        """Statistic suffix -> (statistic of a cell's values and units, higher_is_better) of `spec`'s `score@cell` metrics.

        The mean (geometric for a perplexity) and its 95% interval (`cell_interval`); a cell's values
        arrive sorted, and sums are `math.fsum`, so the numbers do not depend on the order in which
        docs or ranks came.
        """
        better = spec.higher_is_better
        mean, low, high = metric_names.MEAN_AND_INTERVAL
        return {
            mean: (lambda values, units: cell_interval(values, spec, units).estimate, better),
            low: (lambda values, units: cell_interval(values, spec, units).low, better),
            high: (lambda values, units: cell_interval(values, spec, units).high, better),
        }

    @property
    def scored_by_cells(self) -> bool:
        """True for our evaluations (they define `score`); a plain YAML task keeps the harness's metrics."""
        return type(self).score is not LongmemTask.score

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """The doc's payload: its scores, its cells and its summary item; the same few keys for every doc.

        Nothing here depends on the run's other cells, so a `--log_samples` line stays small however
        large the sweep, and every rank returns the same keys (the harness gathers ranks by the keys
        rank 0 has). The per-cell metrics are computed from these at aggregation (`aggregate_payloads`).
        """
        if not self.scored_by_cells:
            return super().process_results(doc, results)
        scores = self.score(doc, results)
        specs = self.score_specs()
        out: dict[str, Any] = {spec.name: scores[spec.name] for spec in specs}
        out.update({spec.units: scores[spec.units] for spec in specs if spec.units})
        out[CELLS_KEY] = list(self.doc_cells(doc))
        if self.ITEM is not None:
            out[SUMMARY_KEY] = item_record(self.summary_item(doc, scores))
        return out

    def aggregate_payloads(
        self,
        raw_metrics: dict[tuple[str, str], list[Any]],
        harness_default: Callable[[dict], tuple[dict[str, Any], int]],
    ) -> tuple[dict[str, Any], int]:
        """This task's results row (`name,filter` -> number or None) and its doc count, from every doc's payload.

        Called by the harness hook (`harness.tasks.install_aggregation`, R11) with the per-doc payloads of
        every rank: `raw_metrics[(key, filter)]` lists each doc's value of `key`, and since every doc
        returns the same keys, the values at one position belong to one doc. A plain task (no
        `score`) gets the harness's own aggregation (`harness_default`) plus `skipped`.
        """
        skipped = sum(sum(reasons.values()) for reasons in self.skips.values())
        filters = list(dict.fromkeys(f for _, f in raw_metrics))
        if not self.scored_by_cells:
            row, count = harness_default(raw_metrics)
            return row | {f"{metric_names.SKIPPED},{f}": skipped for f in filters}, count
        row, count = {}, 0
        for f in filters:
            columns = {key: values for (key, g), values in raw_metrics.items() if g == f}
            metrics, count = self.aggregate_columns(columns)
            row.update({f"{key},{f}": value for key, value in metrics.items()})
            row[f"{metric_names.SKIPPED},{f}"] = skipped
        return row, count

    def aggregate_columns(self, columns: dict[str, list[Any]]) -> tuple[dict[str, Any], int]:
        """Metrics of one filter from the payload columns: per score, cell and statistic, then the summaries."""
        cells_column = columns.get(CELLS_KEY, [])
        count = len(cells_column)
        uneven = {key: len(values) for key, values in columns.items() if len(values) != count}
        if uneven:
            raise RuntimeError(
                f"{self.config.task}: per-doc payloads of unequal length ({CELLS_KEY}: {count}, {uneven}); "
                "every doc must return the same keys from process_results"
            )
        if self.ITEM is not None:
            columns = columns | {
                SUMMARY_KEY: [
                    read_item(self.ITEM, record, self.ITEM_FORMER_NAMES) for record in columns.get(SUMMARY_KEY, [])
                ]
            }
        columns = columns | self.run_scores(columns)
        specs = self.metric_specs()
        by_cell: dict[str, dict[str, list[tuple[Any, Any]]]] = {}
        for i, doc_cells in enumerate(cells_column):
            for c in doc_cells:
                bucket = by_cell.setdefault(c, {spec.name: [] for spec in specs})
                for spec in specs:
                    bucket[spec.name].append((columns[spec.name][i], columns[spec.units][i] if spec.units else None))
        order = [c for c in self.cells if c in by_cell] + [c for c in by_cell if c not in self.cells]
        self.docs_per_cell = {c: len(next(iter(by_cell[c].values()), [])) for c in order}
        out: dict[str, Any] = {}
        for spec in specs:
            statistics = self.cell_stats(spec)
            for c in order:
                pairs = sorted(
                    ((v, u) for v, u in by_cell[c][spec.name] if v is not None), key=lambda p: (p[0], p[1] or 0)
                )
                values = [v for v, _ in pairs]
                units = [u for _, u in pairs] if spec.units else None
                for suffix, (statistic, _) in statistics.items():
                    name = metric_names.name(spec.name, c, stat=suffix)
                    out[name] = _number_or_none(statistic(values, units)) if values else None
        self.null_reasons = {}
        if self.ITEM is not None:
            out.update({name: _number_or_none(value) for name, value in self.summarize(columns[SUMMARY_KEY]).items()})
        return out, count

    def aggregation(self) -> dict[str, Callable[[Sequence[Any]], Any]]:
        """The harness's per-key view, used only when our aggregation hook is absent: score means, nothing per cell."""
        if not self.scored_by_cells:
            return dict(super().aggregation())
        out: dict[str, Callable[[Sequence[Any]], Any]] = {
            spec.name: (lambda values: math.fsum(sorted(values)) / len(values) if values else None)
            for spec in self.score_specs()
        }
        return out | {CELLS_KEY: lambda items: None, SUMMARY_KEY: lambda items: None}

    def higher_is_better(self) -> dict[str, bool | None]:
        """Direction of every metric this run reports (per score, cell and statistic; summaries; `skipped`)."""
        if not self.scored_by_cells:
            return dict(super().higher_is_better()) | {metric_names.SKIPPED: False}
        out: dict[str, bool | None] = {}
        for spec in self.metric_specs():
            for suffix, (_, better) in self.cell_stats(spec).items():
                out.update({metric_names.name(spec.name, c, stat=suffix): better for c in self.cells})
        out.update(self.summary_directions())
        return out | {metric_names.SKIPPED: False}

    def sweep_cells(self) -> list[str]:
        """The cells the whole dataset covers, in order (an evaluation whose docs name them in columns lists
        them; default none), so a reader can name the cells a run has no doc of (a `--limit`, a partial merge)."""
        return []

    def result_facts(self) -> dict[str, Any]:
        """Non-metric facts of the run, stored in the results' `configs.<task>.longmem` (not under `results`).

        `skip_reasons`: {cell: {reason: count}} of the docs skipped (never truncated);
        `docs_per_cell`: {cell: docs scored}; `sweep_cells`: the cells of the whole dataset
        (`sweep_cells`); `evaluation`: the evaluation the task belongs to (`EVALUATION`; absent when it
        has none), so readers never guess it from metric names; with it, `condition`: which of
        `common.conditions.CONDITIONS` the run is (`condition`); `null_reasons` (only when there is one):
        {summary metric: why it is null} (`summarize` fills it, e.g. for short cells); evaluations add their
        own (a retrieval setting, say).
        """
        facts = {"skip_reasons": self.skips, "docs_per_cell": self.docs_per_cell, "sweep_cells": self.sweep_cells()}
        if self.null_reasons:
            facts["null_reasons"] = dict(self.null_reasons)
        return facts | ({"evaluation": self.EVALUATION, "condition": self.condition} if self.EVALUATION else {})

    @property
    def condition(self) -> str:
        """The condition of `common.conditions.CONDITIONS` the run evaluates under (default: in-context)."""
        return IN_CONTEXT

    def dump_config(self) -> dict[str, Any]:
        """The harness's config dump (the results file's `configs.<task>`) plus our `longmem` facts.

        For our evaluations `metric_list` names the scores every logged sample holds (`SCORES`), as
        the harness's sample loggers read it (`harness.loggers.logged_metric_list`, R15), not per-cell names.
        """
        config = dict(super().dump_config())
        if self.scored_by_cells:
            config["metric_list"] = logged_metric_list(
                [(spec.name, spec.higher_is_better) for spec in self.score_specs()]
            )
        return config | {CONFIG_KEY: self.result_facts()}

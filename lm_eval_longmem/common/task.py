"""The task base all three evaluations use the same way: options, window fit and skips, request-cache key, metrics.

Every lm-eval-longmem YAML names a subclass of `LongmemTask` (`class: !function ...`). The base does:

* **Options.** `OPTIONS` (a dataclass declared with `common.options.option`) and `PREFIX` name the
  evaluation's `--metadata` keys; `self.options` is the parsed object, the same one the data
  builder got (`parse_options` is memoised per metadata).
* **Window fit and skips, one mechanism.** Before any request is built, each doc the run
  considers is checked by `fit_reason` against the model's window (`model_info.model_window`,
  which prefers the backend the harness created): by default the exact prompt the harness will
  send (system instruction and chat template included) plus the answer (the longest choice, or
  `max_gen_toks`). A doc that does not fit is skipped and counted, never truncated, and the
  dataset is never changed: `doc_iterator` passes over skipped docs, so `--limit N` means "the
  first N docs that run", `--samples` indices are the dataset's own, and `--cache_requests` /
  `--use_cache` see the same docs in every run. The skips are computed the same way whether the
  requests come from the harness's cache or not, and reported in two results fields that every
  evaluation has: `skipped` (count) and `skip_reasons` ({cell: {reason: count}}).
* **Request cache key.** lm_eval keys `--cache_requests` by task name, shots, rank, chat template
  and tokenizer, not by `--metadata`, the content of local inputs, `--samples` or the task config.
  The key gets a fingerprint of the metadata, the window, the *content* of every local file or
  folder an option names (`OptionSpec.local_input`), the `--samples` selection and the task's
  config (`--gen_kwargs`), so replacing a corpus in place or choosing other docs builds new requests.
* **Metrics per cell, on every doc.** `score(doc, results)` gives a doc's scores (e.g. `acc`);
  for every score and every cell of the run (`doc_cells`: a length, a condition, a (task, length))
  the results get `score@cell` (mean) and `score@cell_ci_low/_ci_high` (Wilson interval for 0/1
  scores, Student t otherwise, `common/stats.py`). Every doc reports every metric name (None
  outside its cells), so the harness sees equally many values per metric and each value is one
  number in `--log_samples`. Whole-run summaries (memory lengths, the paper's averages) come from
  `summaries()`.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from lm_eval import utils
from lm_eval.api.task import ConfigurableTask

from lm_eval_longmem import harness
from lm_eval_longmem.common import stats
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.cache import cache_key, content_digest, sha256_hex
from lm_eval_longmem.common.model_info import Window, load_tokenizer, model_window
from lm_eval_longmem.common.options import declared, parse_options

log = logging.getLogger(__name__)

Summary = tuple[Callable[[Sequence[Any]], Any], bool | None]
"""A whole-run metric: (function of every doc's item, higher_is_better)."""

_RENDER_KEYS = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn", "chat_template")


def cell_interval(values: Sequence[float], bound: int, *, binary: bool) -> float:
    """One bound of a cell's 95% interval: Wilson for 0/1 scores, Student t (clipped to [0, 1]) for fractions."""
    if binary:
        return stats.proportion_interval(int(sum(values)), len(values))[1 + bound]
    return min(1.0, max(0.0, stats.mean_interval(values)[1 + bound]))


CellStat = tuple[Callable[[Sequence[float]], float], bool | None]
"""(statistic of a cell's values, higher_is_better)."""


class LongmemTask(ConfigurableTask):
    """ConfigurableTask with our options, window fit and skips, request-cache key and per-cell metrics."""

    OPTIONS: ClassVar[type | None] = None
    """The evaluation's option dataclass (None: the task takes no options of ours)."""
    PREFIX: ClassVar[str] = ""
    """Prefix of its `--metadata` keys."""
    SCORES: ClassVar[tuple[str, ...]] = ()
    """Per-doc scores that get `score@cell` metrics; every score is an accuracy in [0, 1]."""
    BINARY_SCORES: ClassVar[bool] = True
    """Scores are 0/1 per doc (Wilson intervals); False for fractions (Student t intervals)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # lm_eval hands a `class:` task its whole YAML, `class` key included, which TaskConfig rejects.
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        self._render_kwargs: dict[str, Any] = {}
        self._fit: dict[int, str] = {}
        self.skips: dict[str, dict[str, int]] = {}
        self.cells: list[str] = []
        super().__init__(config=config, **kwargs)

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

    def inputs_fingerprint(self) -> str:
        """Hash of the metadata, the window and the content of every local input the options name."""
        local = []
        if self.OPTIONS:
            for d in declared(self.OPTIONS, self.PREFIX):
                value = getattr(self.options, d.name)
                if d.spec.local_input and isinstance(value, str) and Path(value).expanduser().exists():
                    local.append(content_digest([Path(value).expanduser()]))
        blob = json.dumps([self.metadata, self.window.tokens, self.window.positions, local], sort_keys=True, default=str)
        return sha256_hex(blob)[:16]

    # --- window fit and skips ------------------------------------------------------------------

    def skip_cell(self, doc: dict[str, Any]) -> str:
        """The cell a skip is counted in (a length, a condition); default: the doc's first cell."""
        cells = self.doc_cells(doc)
        return cells[0] if cells else "all"

    def answer_tokens(self, doc: dict[str, Any], prompt: str) -> int:
        """Tokens of prompt + answer as the backend will run them (the longest choice, or max_gen_toks)."""
        count = lambda text: len(self.tokenizer(text)["input_ids"])  # noqa: E731 (special tokens included)
        if self.OUTPUT_TYPE == "generate_until":
            return count(prompt) + int((self.config.generation_kwargs or {}).get("max_gen_toks", 256))
        if self.OUTPUT_TYPE == "multiple_choice":
            delimiter = self.config.target_delimiter
            return max(count(prompt + delimiter + str(choice)) for choice in self.doc_to_choice(doc))
        return count(prompt + self.config.target_delimiter + str(self.doc_to_target(doc)))

    def fit_reason(self, doc: dict[str, Any]) -> str:
        """Why `doc` cannot run ("" when it fits): its exact prompt plus answer against the window."""
        window = self.window
        if window.tokens is None:
            raise UsageError(
                f"{self.config.task}: the model's window is unknown, so prompts cannot be checked against it "
                "(we never truncate): pass max_length=N in --model_args (max_model_len=N for vllm)"
            )
        prompt = self.rendered_prompt(doc, **self._render_kwargs)
        if self.answer_tokens(doc, prompt) > window.tokens:
            return f"prompt + answer exceed the window ({window.tokens} tokens, {window.source})"
        return ""

    def _reason(self, index: int, doc: dict[str, Any]) -> str:
        if index not in self._fit:
            self._fit[index] = self.fit_reason(doc)
        return self._fit[index]

    def _decide_skips(self, limit: int | None, samples: list[int] | None) -> None:
        """Skip record and cells of the docs this run considers, the same on every rank and cache state."""
        docs = self.eval_docs
        considered = samples if samples else range(len(docs))
        limit = None if samples else (int(limit) if limit else None)
        skips: dict[str, Counter[str]] = {}
        cells: dict[str, None] = {}
        kept = 0
        for index in considered:
            doc = docs[index]
            reason = self._reason(index, doc)
            if reason:
                skips.setdefault(self.skip_cell(doc), Counter())[reason] += 1
                continue
            cells.update(dict.fromkeys(self.doc_cells(doc)))
            kept += 1
            if limit is not None and kept >= limit:
                break
        self.skips = {cell: dict(reasons) for cell, reasons in skips.items()}
        self.cells = list(cells)
        if self.skips:
            total = sum(sum(r.values()) for r in self.skips.values())
            details = "; ".join(f"{cell}: {n} x {why}" for cell, r in self.skips.items() for why, n in r.items())
            log.warning("%s: %d doc(s) skipped, never truncated (%s)", self.config.task, total, details)
        if not kept:
            raise UsageError(
                f"{self.config.task}: no doc fits the model ({'; '.join(sorted({w for r in self.skips.values() for w in r}))}): "
                "choose shorter lengths or conditions, or raise the window (max_length / max_model_len)"
            )

    def doc_iterator(
        self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]:
        """The harness's iterator over the docs that fit; `--samples` indices are the dataset's own.

        With `--samples`, doc ids are positions in that list (the harness maps them back with
        `samples[id]`); otherwise they are dataset indices. `--limit N` takes the first N docs that fit.
        """
        docs = self.eval_docs
        if samples:
            chosen = ((pos, docs[i]) for pos, i in enumerate(samples) if not self._reason(i, docs[i]))
            return utils.create_iterator(chosen, rank=int(rank), limit=None, world_size=int(world_size))
        running = ((i, doc) for i, doc in enumerate(docs) if not self._reason(i, doc))
        return utils.create_iterator(
            running, rank=int(rank), limit=int(limit) if limit else None, world_size=int(world_size)
        )

    def build_all_requests(self, *, limit: int | None = None, samples: list[int] | None = None, **kwargs: Any) -> None:
        self._render_kwargs = {key: kwargs.get(key) for key in _RENDER_KEYS if key in kwargs}
        self._render_kwargs["apply_chat_template"] = bool(self._render_kwargs.get("apply_chat_template"))
        self._render_kwargs["fewshot_as_multiturn"] = bool(self._render_kwargs.get("fewshot_as_multiturn"))
        self._fit = {}
        self.before_requests()
        self._decide_skips(limit, samples)
        # `--samples` and the task's config (`--gen_kwargs`, prompts) decide which requests exist too.
        fingerprint = cache_key(inputs=self.inputs_fingerprint(), samples=samples, config=self.dump_config())[:16]
        kwargs["tokenizer_name"] = harness.request_cache_tokenizer_name(kwargs.get("tokenizer_name", ""), fingerprint)
        super().build_all_requests(limit=limit, samples=samples, **kwargs)

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
        """The cells a doc counts in (suffixes of its `score@cell` metrics); default none."""
        return ()

    def score(self, doc: dict[str, Any], results: list[Any]) -> dict[str, float]:
        """The doc's scores, one per name in `SCORES`."""
        raise NotImplementedError

    def summary_item(self, doc: dict[str, Any], scores: dict[str, float]) -> Any:
        """What every whole-run summary gets from this doc (a short, JSON-able value)."""
        return None

    def summaries(self) -> dict[str, Summary]:
        """Whole-run metrics: name -> (function of every doc's `summary_item`, higher_is_better)."""
        return {}

    def cell_stats(self) -> dict[str, CellStat]:
        """Suffix -> statistic of every `score@cell<suffix>` metric: the mean and its 95% interval."""
        binary = self.BINARY_SCORES
        return {
            "": (lambda values: sum(values) / len(values), True),
            "_ci_low": (lambda values: cell_interval(values, 0, binary=binary), True),
            "_ci_high": (lambda values: cell_interval(values, 1, binary=binary), True),
        }

    def cell_metrics(self) -> dict[str, tuple[str, str, str]]:
        """`score@cell<suffix>` -> (score, cell, suffix) for every score, cell and statistic of this run."""
        return {
            f"{score}@{cell}{suffix}": (score, cell, suffix)
            for score in self.SCORES
            for cell in self.cells
            for suffix in self.cell_stats()
        }

    @property
    def scored_by_cells(self) -> bool:
        """True for our evaluations (they define `score`); a plain YAML task keeps the harness's metrics."""
        return type(self).score is not LongmemTask.score

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        if not self.scored_by_cells:
            return super().process_results(doc, results) | {"skipped": None, "skip_reasons": None}
        scores = self.score(doc, results)
        mine = set(self.doc_cells(doc))
        out: dict[str, Any] = {
            name: (scores[score] if cell in mine else None) for name, (score, cell, _) in self.cell_metrics().items()
        }
        item = self.summary_item(doc, scores)
        out.update({name: item for name in self.summaries()})
        return out | {"skipped": None, "skip_reasons": None}

    def aggregation(self) -> dict[str, Callable[[Sequence[Any]], Any]]:
        def cell_stat(suffix: str) -> Callable[[Sequence[Any]], Any]:
            statistic = self.cell_stats()[suffix][0]
            return lambda items: statistic([v for v in items if v is not None])

        if self.scored_by_cells:
            out = {name: cell_stat(suffix) for name, (_, _, suffix) in self.cell_metrics().items()}
            out.update({name: fn for name, (fn, _) in self.summaries().items()})
        else:
            out = dict(super().aggregation())
        out["skipped"] = lambda items: sum(sum(r.values()) for r in self.skips.values())
        out["skip_reasons"] = lambda items: self.skips
        return out

    def higher_is_better(self) -> dict[str, bool | None]:
        if self.scored_by_cells:
            better = {suffix: hib for suffix, (_, hib) in self.cell_stats().items()}
            out = {name: better[suffix] for name, (_, _, suffix) in self.cell_metrics().items()}
            out.update({name: better for name, (_, better) in self.summaries().items()})
        else:
            out = dict(super().higher_is_better())
        return out | {"skipped": False, "skip_reasons": None}

"""The lm-eval task class of every `babilong_qaN_LEN` task, and its per-doc scoring.

Two things lm-eval 0.4.13 does not do for us:

* **A task without docs.** Each (task, length) of the grid is a task, and the `babilong_*` metadata
  decide which of them run (`data.select`); the others must load, run nothing and report no
  metrics, so that `--tasks babilong` works for any model. The harness assumes at least one doc:
  `ConfigurableTask.__init__` renders `eval_docs[0]`, `build_all_requests` raises "did not find any
  docs", the filters unpack the request list, and `evaluator.evaluate` reads
  `task.instances[0].filtered_resps`. `BabilongTask` answers those four for an empty task (a
  one-doc probe during construction, no requests, no filtering, an empty response record) and
  records why it has no docs (`configs.<task>.metadata.babilong_not_run` in the results file).
  Groups then average over the tasks that have metrics. tests/babilong/test_task.py and test_e2e.py
  run lm_eval on such a mix.
* **Never truncate.** The harness's HF backend left-truncates a prompt longer than the window
  minus `max_gen_toks` (with a warning). Before building requests, each doc's final prompt (after
  `--system_instruction` and `--apply_chat_template`) is measured in the model's tokenizer; a doc
  that does not fit is skipped and counted. The counts appear in the log and in the results file
  under `configs.<task>.metadata.babilong_skipped`; `n-samples.<task>.effective` counts the docs
  that ran.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from functools import cached_property
from types import SimpleNamespace
from typing import Any

import datasets
from lm_eval import utils

from lm_eval_longmem.babilong.data import parse_options
from lm_eval_longmem.babilong.metrics import check
from lm_eval_longmem.babilong.prompts import PromptSwitches, build_prompt
from lm_eval_longmem.common.task import LongmemTask

log = logging.getLogger(__name__)


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """`acc` (the authors' check) and `acc_corrected` (ours) of one answer; the output is stripped first."""
    verdict = check(doc["qa"], doc["target"], results[0].strip(), doc["question"])
    return {"acc": float(verdict.acc), "acc_corrected": float(verdict.acc_corrected)}


class _NoRequests(list):
    """The (empty) request list of a task without docs.

    `lm_eval.evaluator.evaluate` reads `task.instances[0].filtered_resps` for every task; for an
    empty task this answers with no responses, so the task yields no metrics instead of an IndexError.
    """

    def __getitem__(self, index: Any) -> Any:
        if index == 0 and not len(self):
            return SimpleNamespace(filtered_resps={})
        return super().__getitem__(index)


class BabilongTask(LongmemTask):
    """A BABILong (task, length): prompt from `prompts.py`, fit check, and tolerance of zero docs."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._constructing = True
        super().__init__(config=config, **kwargs)
        self._constructing = False
        self.task_docs = self.eval_docs
        self._context_kwargs: dict[str, Any] = {}
        self._fits: dict[int, bool] = {}
        self._skipped: Counter[str] = Counter()

    # ------------------------------------------------------------------ prompt

    @cached_property
    def _switches(self) -> PromptSwitches:
        return parse_options(self.config.metadata or {}).switches

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The paper's prompt for `doc` (instruction, examples, answer format, context, question)."""
        return build_prompt(doc["qa"], doc["input"], doc["question"], self._switches)

    # ------------------------------------------------------------------ docs

    @property
    def eval_docs(self) -> datasets.Dataset:
        docs = super().eval_docs
        if len(docs) == 0 and getattr(self, "_constructing", False):
            # ConfigurableTask.__init__ renders the first doc to check the prompt functions.
            kwargs = self.config.dataset_kwargs or {}
            probe = {name: [] for name in docs.features} | {
                "input": [""], "question": [""], "target": [""], "qa": [kwargs.get("qa", "qa1")],
                "length": [0], "length_name": [str(kwargs.get("length", "0k"))], "sample_id": [0],
                "fact_depths": [[]], "supporting": [[]], "prompt_tokens": [0], "skip_reason": ["probe"],
            }  # fmt: skip
            return datasets.Dataset.from_dict(probe, features=docs.features)
        return docs

    @property
    def not_run_reason(self) -> str:
        """Why this task has no docs ("" when it has some)."""
        docs = self.eval_docs
        return "" if len(docs) else (docs.info.description or "no docs")

    @cached_property
    def _window(self) -> int | None:
        from lm_eval_longmem.common.model_info import claimed_window

        return claimed_window(self.config.metadata or {})

    @cached_property
    def _tokenizer(self) -> Any:
        from lm_eval_longmem.common.model_info import load_tokenizer

        return load_tokenizer(self.config.metadata or {})

    def _fits_window(self, index: int, doc: dict[str, Any]) -> bool:
        """Whether doc `index` runs: built without a skip, and its final prompt + answer fit the window."""
        if index in self._fits:
            return self._fits[index]
        reason = doc.get("skip_reason") or ""
        if not reason and self._window is not None:
            context = self.rendered_prompt(doc, **self._context_kwargs)
            tokens = len(self._tokenizer(context)["input_ids"])
            answer = int((self.config.generation_kwargs or {}).get("max_gen_toks", 20))
            if tokens + answer > self._window:
                reason = f"prompt + {answer} answer tokens exceed the window ({self._window})"
        if reason:
            self._skipped[reason] += 1
        self._fits[index] = not reason
        return not reason

    def doc_iterator(
        self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]:
        """Like the harness's, over the docs that run; doc ids stay the dataset's indices.

        `--limit N` takes the first N docs that run.
        """
        docs = self.eval_docs
        if samples:
            # The harness numbers docs by their position in `samples` and maps back with samples[id].
            chosen = ((pos, docs[i]) for pos, i in enumerate(samples) if self._fits_window(i, docs[i]))
            return utils.create_iterator(chosen, rank=int(rank), limit=None, world_size=int(world_size))
        running = ((i, doc) for i, doc in enumerate(docs) if self._fits_window(i, doc))
        return utils.create_iterator(running, rank=int(rank), limit=int(limit) if limit else None, world_size=int(world_size))

    # ------------------------------------------------------------------ requests

    def build_all_requests(self, **kwargs: Any) -> None:
        self._context_kwargs = kwargs
        self._fits, self._skipped = {}, Counter()
        metadata = self.config.metadata if isinstance(self.config.metadata, dict) else {}
        if reason := self.not_run_reason:
            log.info("%s: not run (%s)", self.config.task, reason)
            metadata["babilong_not_run"] = reason
            self._instances = []
            return
        if self._window is None:
            raise ValueError(
                f"{self.config.task}: the model's window is unknown, so prompts cannot be checked against it "
                "(never truncate): pass max_length=N in --model_args (max_model_len=N for vllm)"
            )
        mine = self.doc_iterator(
            rank=kwargs.get("rank", 0), world_size=kwargs.get("world_size", 1), limit=kwargs.get("limit"),
            samples=kwargs.get("samples"),
        )  # fmt: skip
        if next(iter(mine), None) is None:  # nothing fits (on this rank): the harness would raise
            self._instances = []
        else:
            super().build_all_requests(**kwargs)
        if self._skipped:
            total = sum(self._skipped.values())
            details = "; ".join(f"{n}: {why}" for why, n in self._skipped.items())
            log.warning("%s: %d of the docs considered skipped (%s)", self.config.task, total, details)
            metadata["babilong_skipped"] = dict(self._skipped)
            if not self._instances:
                metadata["babilong_not_run"] = "no doc fits"

    def apply_filters(self) -> None:
        if getattr(self, "_instances", None):  # the harness's filters cannot take an empty list
            super().apply_filters()

    @property
    def instances(self) -> list:
        instances = getattr(self, "_instances", None)
        return instances if instances else _NoRequests()

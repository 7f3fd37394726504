"""The `babilong` task: one task over every selected (bAbI task, length) cell.

Each doc carries its bAbI task (`qa`) and length; its prompt is the paper's layout (`prompts.py`)
and its answer is checked twice (`corrected.check`): `acc` (the authors' check, reproduced exactly)
and `acc_corrected`. Results (the task base adds `skipped`/`skip_reasons`, never truncating):

* `acc@qaN_LEN`, `acc_corrected@qaN_LEN` with `_ci_low`/`_ci_high` (Wilson): one cell;
* `acc@LEN`, `acc_corrected@LEN` with intervals: the unweighted mean over the tasks run at that
  length (with the default tasks, the paper's qa1-qa5 headline, Table 2);
* `acc`, `acc_corrected` with intervals: the unweighted mean over every cell (the headline number);
* `corrected_abstained` (per cell, per length, overall, with intervals): the share of answers on
  which the corrected reader abstained, so `acc_corrected` kept `acc`'s verdict (`corrected.ABSTENTIONS`);
* `effective_context@qaN` (and `effective_context_corrected@qaN`): the longest length (tokens) up
  to which the task's accuracy stays at or above 85% (the paper's "satisfactory"), null if not
  even the shortest; see `summary.effective_context`.

LEN is the length in tokens (`acc@qa1_4096`; "0k" is 0), as for every metric name of ours
(`common/metric_names.py`); readers show the authors' names of the lengths ("4k",
`common.lengths.format_length`) at display.

Under the retrieval condition (`babilong_retrieval=sentences|chunks`, `retrieval.py`) the prompt's
context is the doc's retrieved pieces, and each cell also gets `retrieval_recall@qaN_LEN` (1 when
every supporting fact was retrieved, the paper's binary retrieval accuracy) with its interval, and
each length `retrieval_recall@LEN` (the unweighted mean over tasks, as `acc@LEN`). The condition
is stored with the run's facts (`configs.babilong.longmem.condition`: "retrieval", and
`configs.babilong.longmem.retrieval`: its setting, e.g. "sentences top-5 bm25"), where `report` reads it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.babilong import data, retrieval, summary
from lm_eval_longmem.babilong.corrected import check
from lm_eval_longmem.babilong.data import Haystacks
from lm_eval_longmem.babilong.options import NAME, PREFIX, BabilongOptions
from lm_eval_longmem.babilong.prompts import build_prompt
from lm_eval_longmem.babilong.scores import ABSTAINED, ACC, ACC_CORRECTED, CHECKS, RECALL, effective_context
from lm_eval_longmem.babilong.simulate_world import labels_for_simulated
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.conditions import IN_CONTEXT, RETRIEVAL
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.metric_names import MEAN_AND_INTERVAL, ScoreSpec, cell, cell_parts
from lm_eval_longmem.common.stats import Interval, mean_of_proportions_interval, proportion_interval
from lm_eval_longmem.common.task import LongmemTask

REASON = "corrected_reason"
"""The key under which `score` hands `summary_item` the corrected check's reason (`Answer.corrected_reason`)."""


def short_tasks(short: dict[str, tuple[int, int]]) -> dict[str, str]:
    """{bAbI task: why its effective context is null} for the tasks with short cells (`LongmemTask.short_cells`)."""
    by_task: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for name, (scored, expected) in short.items():
        qa, length = cell_parts(name)
        by_task[qa].append((int(length), f"{format_length(int(length))}: {scored} of {expected}"))
    return {
        qa: f"lengths ran fewer docs than the sweep holds ({'; '.join(text for _, text in sorted(listed))}), and an "
        "effective context reads every doc of every length of its task: run without --limit (or with every cell's docs)"
        for qa, listed in by_task.items()
    }


class Answer(NamedTuple):
    """What one doc gives the summaries: its cell and its scores (the fields in the order of the
    positional lists that files logged before the items were named)."""

    qa: str
    length: int
    acc: float
    acc_corrected: float
    retrieval_recall: float | None = None
    """None outside the retrieval condition, and for a doc whose supporting facts are unknown."""
    corrected_abstained: float | None = None
    """None in items logged before the abstention was recorded."""
    corrected_reason: str | None = None
    """The shape the corrected check read, or "abstained: <why>" (`corrected.Reading.reason`): why `acc_corrected`
    moved, for `babilong audit` of the samples file. None in items logged before it was recorded."""


def recall_mean(items: Sequence[Answer], length: int) -> Interval | None:
    """Mean retrieval recall over the tasks at `length` (unweighted over cells, like `acc@LEN`) with its interval.

    Docs whose supporting facts are unknown (hub sets without the bAbI files) do not count; None
    when no doc at that length has them.
    """
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for item in items:
        if int(item.length) == length and item.retrieval_recall is not None:
            counts[item.qa][0] += round(item.retrieval_recall)
            counts[item.qa][1] += 1
    if not counts:
        return None
    return mean_of_proportions_interval([(hits, n) for hits, n in (counts[qa] for qa in sorted(counts))])


def cells_from_items(items: Sequence[Answer]) -> list[summary.Cell]:
    """`summary.Cell`s (Wilson intervals) from the docs' `Answer`s; a cell whose items lack the
    abstention (items of older files) has no abstention share."""
    grouped: dict[tuple[str, int], list[Answer]] = defaultdict(list)
    for item in items:
        grouped[item.qa, int(item.length)].append(item)
    cells = []
    for (qa, length), rows in grouped.items():
        n = len(rows)
        acc, corrected = (proportion_interval(round(math.fsum(getattr(r, k.name) for r in rows)), n) for k in CHECKS)
        abstained = (
            proportion_interval(round(math.fsum(r.corrected_abstained or 0.0 for r in rows)), n)
            if all(r.corrected_abstained is not None for r in rows) else None
        )  # fmt: skip
        cells.append(summary.Cell(qa, length, n, acc, corrected, abstained))
    return summary.ordered(cells)


class BabilongTask(LongmemTask):
    """BABILong as one lm-eval task (see the module docstring)."""

    OPTIONS = BabilongOptions
    EVALUATION = NAME
    PREFIX = PREFIX
    SCORES = (*CHECKS, ABSTAINED)
    ITEM = Answer

    def score_specs(self) -> tuple[ScoreSpec, ...]:  # type: ignore[override]  # its retrieval score depends on the options; every caller has an instance
        """The two checks and the corrected reader's abstention, and retrieval recall under the retrieval condition."""
        specs = super().score_specs()
        return (*specs, RECALL) if self.options.uses_retrieval else specs

    @cached_property
    def haystacks(self) -> Haystacks:
        """Each doc's haystack, rebuilt from what the doc records (docs do not hold it: see `data.DOC_FEATURES`)."""
        return Haystacks(self.options)

    def haystack(self, doc: dict[str, Any]) -> str:
        """The doc's background text with its facts inside (what the prompt's `<context>` holds in-context)."""
        return self.haystacks(doc)

    def local_inputs(self) -> list[Path]:
        """The base's local inputs plus, under retrieval, the dense retriever's folder (`minilm` resolves to
        the embedded model's), so a retriever changed in place gives new requests as it gives new pieces."""
        found = super().local_inputs()
        options = self.options
        if options.uses_retrieval and options.retriever.strip().lower() != "bm25":
            folder = Path(retrieval.dense_model_path(options.retriever))
            if folder.exists() and folder not in found:
                found.append(folder)
        return found

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The paper's prompt for `doc` (instruction, examples, answer format, context, question).

        Under the retrieval condition the context is the retrieved pieces instead of the haystack.
        """
        options = self.options
        context = retrieval.context(doc, options.retrieval) if options.uses_retrieval else self.haystack(doc)
        return build_prompt(doc["qa"], context, doc["question"], options.switches)

    def fit_reason(self, doc: dict[str, Any]) -> str:
        """A sample the generator could not build (facts longer than the length) is skipped too."""
        return doc.get("skip_reason") or super().fit_reason(doc)

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        return (cell(doc["qa"], int(doc["length"])),)

    def sweep_cells(self) -> list[str]:
        """Every (task, length) cell of the dataset, in dataset order (read from its `qa` and `length` columns)."""
        docs = self.eval_docs
        return list(dict.fromkeys(cell(qa, int(length)) for qa, length in zip(docs["qa"], docs["length"])))

    def doc_work(self, doc: dict[str, Any]) -> int:
        return data.doc_work(doc)

    def score(self, doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
        """Both checks on the answer (stripped first), whether the corrected reader abstained, and why it read or
        abstained (`REASON`, for the doc's summary item; not a score)."""
        options = self.options
        wide = options.source == "generate" and options.facts == "simulated" and options.wide_vocabulary
        labels = labels_for_simulated(doc["qa"], True) if wide else None
        verdict = check(doc["qa"], doc["target"], results[0].strip(), doc["question"], labels)
        scores = {
            ACC.name: float(verdict.acc),
            ACC_CORRECTED.name: float(verdict.acc_corrected),
            ABSTAINED.name: float(verdict.abstained),
            REASON: verdict.reason,
        }
        if options.uses_retrieval:
            scores[RECALL.name] = doc["retrieval_recall"]  # None when the doc's facts are unknown
        return scores

    def summary_item(self, doc: dict[str, Any], scores: dict[str, Any]) -> Answer:
        return Answer(
            doc["qa"],
            int(doc["length"]),
            scores[ACC.name],
            scores[ACC_CORRECTED.name],
            scores.get(RECALL.name),
            scores[ABSTAINED.name],
            scores.get(REASON),
        )

    def summary_cells(self) -> tuple[list[int], list[str]]:
        """The lengths and the bAbI tasks of the run's cells, in their order."""
        parts = [cell_parts(c) for c in self.cells]
        return list(dict.fromkeys(int(length) for _, length in parts)), list(dict.fromkeys(qa for qa, _ in parts))

    def summarize(self, items: Sequence[Answer]) -> dict[str, float | None]:
        """Means over cells (all, and per length) with intervals, effective context per task, and under
        retrieval the recall per length. An effective context reads every length of its task, so it is null
        when one of them ran fewer docs than the sweep holds (`short_cells`), with the reason in `null_reasons`."""
        lengths, tasks = self.summary_cells()
        cells = cells_from_items(items)
        short = short_tasks(self.short_cells())
        out: dict[str, float | None] = {}
        for score in (*CHECKS, ABSTAINED):
            for length in (None, *lengths):
                on = () if length is None else (length,)
                mean = summary.mean_interval([c for c in cells if length is None or c.length == length], score)
                out.update(zip(metric_names.with_interval(score.name, *on), mean))
            if score in CHECKS:
                effective = summary.effective_context(cells, check=score)
                for qa in tasks:
                    name = effective_context(score, qa)
                    out[name] = None if qa in short else effective.get(qa)
                    if qa in short:
                        self.null_reasons[name] = short[qa]
        if self.options.uses_retrieval:
            for length in lengths:
                recall = recall_mean(items, length)
                out.update(
                    zip(metric_names.with_interval(RECALL.name, length), recall or (None,) * len(MEAN_AND_INTERVAL))
                )
        return out

    def summary_directions(self) -> dict[str, bool | None]:
        lengths, tasks = self.summary_cells()
        out: dict[str, bool | None] = {}
        for score in (*CHECKS, ABSTAINED):
            for length in (None, *lengths):
                out.update(
                    dict.fromkeys(
                        metric_names.with_interval(score.name, *(() if length is None else (length,))),
                        score.higher_is_better,
                    )
                )
            if score in CHECKS:
                out.update(dict.fromkeys((effective_context(score, qa) for qa in tasks), True))
        if self.options.uses_retrieval:
            out.update(
                dict.fromkeys(
                    (name for length in lengths for name in metric_names.with_interval(RECALL.name, length)), True
                )
            )
        return out

    @property
    def condition(self) -> str:
        """Retrieval when `babilong_retrieval` picks pieces of the haystack, else in-context."""
        return RETRIEVAL if self.options.uses_retrieval else IN_CONTEXT

    def result_facts(self) -> dict[str, Any]:
        """The task base's facts and, for the retrieval condition, its setting (`retrieval`: "sentences top-5
        bm25", `retrieval.setting_label`)."""
        setting = {"retrieval": retrieval.setting_label(self.options)} if self.options.uses_retrieval else {}
        return super().result_facts() | setting

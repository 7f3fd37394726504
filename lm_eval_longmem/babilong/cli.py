"""`lm-eval-longmem babilong ...`: rescore the authors' prediction files, report on an lm_eval run."""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from pathlib import Path

from lm_eval_longmem.babilong.metrics import audit_file, score_file, task_name
from lm_eval_longmem.babilong.simulate import SIMULATOR_VERSION, simulate, write_babi_file
from lm_eval_longmem.common.errors import UsageError, report_error
from lm_eval_longmem.common.flags import add_flag
from lm_eval_longmem.common.results import find_results_file, load_run

EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem babilong score qa1_16k_instruction_yes_examples_yes_post_prompt_yes_chat_template_no.csv --task qa1
      lm-eval-longmem babilong audit qa7_0k_instruction_yes_examples_yes_post_prompt_yes_chat_template_no.csv --task qa7
      lm-eval-longmem babilong simulate --task qa3 --samples 1000 --seed 0 --output_path qa3_sim_test.txt
      lm-eval-longmem babilong report out/            # newest results_*.json under out/
      lm-eval-longmem babilong report results.json --threshold 0.9 --metric acc_corrected
    """
)


_FILE_TASK = re.compile(r"^(qa\d+)_", re.IGNORECASE)


def _checked_task(args: argparse.Namespace, path: Path) -> str:
    """`--task` as qaN, refused when the file's name says it answers another task (unless --any_file_name)."""
    qa = task_name(args.task)
    named = _FILE_TASK.match(path.name)
    if named and named[1].lower() != qa and not args.any_file_name:
        raise UsageError(
            f"{path.name} is named for {named[1].lower()} but --task is {qa}: pass --task {named[1].lower()}, "
            "or --any_file_name if the file really answers that task"
        )
    return qa


def _score(args: argparse.Namespace) -> int:
    """Score each file; a file that fails is reported on stderr and the others are still scored."""
    task_name(args.task)  # a wrong --task fails before any file is read
    failed = 0
    for path in args.files:
        try:
            qa = _checked_task(args, path)
            score = score_file(path, qa)
        except (UsageError, OSError) as err:  # e.g. an unreadable file: named, and the others still scored
            report_error(err)
            failed += 1
            continue
        if args.json:
            print(json.dumps({"file": str(path), "task": qa, **score._asdict()}))
        else:
            print(f"{path}: n={score.n}  acc={score.acc:.2f}  acc_corrected={score.acc_corrected:.2f}")
    return 1 if failed else 0


def _simulate(args: argparse.Namespace) -> int:
    """Write fresh simulated bAbI samples in the bAbI text format."""
    qa = task_name(args.task)
    samples = simulate(qa, args.samples, args.seed, wide_vocabulary=args.wide_vocabulary, check=True)
    path = write_babi_file(samples, args.output_path)
    print(f"wrote {len(samples)} {qa} samples (seed {args.seed}, simulator v{SIMULATOR_VERSION}) to {path}")
    return 0


def _audit(args: argparse.Namespace) -> None:
    """Every answer on which `acc` and `acc_corrected` disagree, with the rule that decided, then counts per rule."""
    audit = audit_file(args.file, _checked_task(args, args.file))
    if args.json:
        rows = [d._asdict() for d in audit.disagreements]
        summary = {"file": str(args.file), "task": args.task, **audit.score._asdict()}
        print(json.dumps({**summary, "disagreements": rows, "by_rule": audit.by_rule}))
        return
    for d in audit.disagreements:
        print(f"row {d.row}: target={d.target!r} answer={d.answer!r} "
              f"acc={int(d.acc)} acc_corrected={int(d.acc_corrected)} rule={d.rule}")
    score = audit.score
    counts = ", ".join(f"{rule} {count}" for rule, count in audit.by_rule.items()) or "none"
    print(f"{args.file}: n={score.n}  acc={score.acc:.2f}  acc_corrected={score.acc_corrected:.2f}  "
          f"disagreeing rows={len(audit.disagreements)} (by rule: {counts})")


def _report(args: argparse.Namespace) -> None:
    from lm_eval_longmem.babilong.report import format_report

    results = load_run(find_results_file(args.results)).data
    print(format_report(results, threshold=args.threshold, metric=args.metric))


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `babilong score`, `babilong audit` and `babilong report` to the `lm-eval-longmem` command line."""
    parser = subparsers.add_parser(
        "babilong",
        help="BABILong: rescore prediction files, report on results",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="babilong_command", metavar="COMMAND", required=True)

    score = sub.add_parser(
        "score",
        help="score a predictions CSV (columns target, output, question) with the authors' check and ours",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    score.add_argument("files", nargs="+", type=Path, help="predictions CSV file(s) of one task")
    score.add_argument("--task", required=True, help="the bAbI task the file answers: qa1 .. qa20")
    score.add_argument("--json", action="store_true", help="one JSON object per file instead of text")
    add_flag(score, "--any_file_name", "--any-file-name", action="store_true", help="score even when the file name names another task")
    score.set_defaults(func=_score)

    audit = sub.add_parser(
        "audit",
        help="list the answers on which acc and acc_corrected disagree, with the rule that decided each",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("file", type=Path, help="predictions CSV (columns target, output, question) of one task")
    audit.add_argument("--task", required=True, help="the bAbI task the file answers: qa1 .. qa20")
    audit.add_argument("--json", action="store_true", help="one JSON object (scores, rows, counts) instead of text")
    add_flag(audit, "--any_file_name", "--any-file-name", action="store_true", help="audit even when the file name names another task")
    audit.set_defaults(func=_audit)

    sim = sub.add_parser(
        "simulate",
        help="write fresh bAbI samples from the built-in world simulator (bAbI text format)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument("--task", required=True, help="the bAbI task: qa1 .. qa20")
    sim.add_argument("--samples", type=int, default=1000, help="questions to write (default 1000)")
    sim.add_argument("--seed", type=int, default=0, help="seed (default 0); the same seed gives the same file anywhere")
    add_flag(sim, "--wide_vocabulary", "--wide-vocabulary", action="store_true", help="more names, places and objects than bAbI's")
    add_flag(sim, "--output_path", "--out", type=Path, required=True, help="the file to write, e.g. qa3_sim_test.txt")
    sim.set_defaults(func=_simulate)

    report = sub.add_parser(
        "report",
        help="task x length table, qa1-qa5 mean per length and effective context from an lm_eval results file",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("results", type=Path, help="a results_*.json file or a folder holding one (newest is used)")
    report.add_argument("--threshold", type=float, default=0.85, help="accuracy for effective context (default 0.85)")
    report.add_argument("--metric", choices=("acc", "acc_corrected"), default="acc", help="which check (default acc)")
    report.set_defaults(func=_report)

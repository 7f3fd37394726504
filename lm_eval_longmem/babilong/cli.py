"""`lm-eval-longmem babilong ...`: rescore the authors' prediction files, report on an lm_eval run."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem babilong score qa1_16k_instruction_yes_examples_yes_post_prompt_yes_chat_template_no.csv --task qa1
      lm-eval-longmem babilong audit qa7_0k_instruction_yes_examples_yes_post_prompt_yes_chat_template_no.csv --task qa7
      lm-eval-longmem babilong report out/            # newest results_*.json under out/
      lm-eval-longmem babilong report results.json --threshold 0.9 --metric acc_corrected
    """
)


def _score(args: argparse.Namespace) -> None:
    from lm_eval_longmem.babilong.metrics import score_file

    for path in args.files:
        score = score_file(path, args.task)
        if args.json:
            print(json.dumps({"file": str(path), "task": args.task, **score._asdict()}))
        else:
            print(f"{path}: n={score.n}  acc={score.acc:.2f}  acc_corrected={score.acc_corrected:.2f}")


def _audit(args: argparse.Namespace) -> None:
    """Every answer on which `acc` and `acc_corrected` disagree, with the rule that decided, then counts per rule."""
    from lm_eval_longmem.babilong.metrics import audit_file

    audit = audit_file(args.file, args.task)
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
    from lm_eval_longmem.plots import find_results_file

    results = json.loads(find_results_file(args.results).read_text())
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
    audit.set_defaults(func=_audit)

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

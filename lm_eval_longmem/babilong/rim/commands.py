"""`lm-eval-longmem babilong ...`: rescore the authors' prediction files, report on an lm_eval run."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import textwrap
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from lm_eval_longmem.babilong.official_check import task_name
from lm_eval_longmem.babilong.predictions import (
    Audit,
    audit_logged,
    audit_rows,
    read_samples,
    read_task_predictions,
    score_file,
)
from lm_eval_longmem.babilong.scores import ACC, CHECKS
from lm_eval_longmem.babilong.simulate import simulate, write_babi_file
from lm_eval_longmem.babilong.simulate_world import SIMULATOR_VERSION
from lm_eval_longmem.common.cache import check_target
from lm_eval_longmem.common.errors import UsageError, report_error
from lm_eval_longmem.common.flags import add_flag, add_output_flags, command_group, number
from lm_eval_longmem.common.options import distinct
from lm_eval_longmem.readers.results import find_results_file, load_run

EPILOG = textwrap.dedent(
    """\
    examples:
      lm-eval-longmem babilong score qa1_16k_instruction_yes_examples_yes_post_prompt_yes_chat_template_no.csv --task qa1
      lm-eval-longmem babilong audit qa7_0k_instruction_yes_examples_yes_post_prompt_yes_chat_template_no.csv --rows
      lm-eval-longmem babilong audit predictions/*/*.csv --sample 200 --seed 0   # task from each file's name
      lm-eval-longmem babilong audit out/*/samples_babilong_*.jsonl --rows      # a run's answers, the logged reasons
      lm-eval-longmem babilong simulate --task qa3 --samples 1000 --seed 0 --output_path qa3_sim_test.txt
      lm-eval-longmem babilong report out/            # newest results_*.json under out/
      lm-eval-longmem babilong report results.json --threshold 0.9 --metric acc_corrected
    """
)


_FILE_TASK = re.compile(r"^(qa\d+)_", re.IGNORECASE)


def _checked_task(args: argparse.Namespace, path: Path) -> str:
    """The task `path` answers: `--task` (refused when the file's name says another, unless
    --any_file_name), else the task its name starts with ("qa7_0k_....csv")."""
    named = _FILE_TASK.match(path.name)
    if args.task is None:
        if named is None:
            raise UsageError(f"{path.name} does not start with its task (qa1_ .. qa20_): pass --task qaN")
        return task_name(named[1])
    qa = task_name(args.task)
    if named and named[1].lower() != qa and not args.any_file_name:
        raise UsageError(
            f"{path.name} is named for {named[1].lower()} but --task is {qa}: pass --task {named[1].lower()}, "
            "or --any_file_name if the file really answers that task"
        )
    return qa


def _score(args: argparse.Namespace) -> int:
    """Score each file; a file that fails is reported on stderr and the others are still scored."""
    task_name(args.task)  # a wrong --task fails before any file is read
    distinct(args.files, "file", key=Path.resolve)
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
            print(
                f"{path}: n={score.n}  acc={score.acc:.2f}  acc_corrected={score.acc_corrected:.2f}  "
                f"abstained={score.abstained:.2f}"
            )
    return 1 if failed else 0


def _audit_one(job: tuple[Path, str]) -> list[tuple[Path, str, Audit, list[dict[str, str]]]]:
    """Audit one file (a worker's job: picklable in, picklable out): a predictions CSV of one task, or a run's
    samples file (`SAMPLES`), one audit per task, of the verdicts and reasons it logged."""
    path, qa = job
    if path.suffix == SAMPLES:
        return [(path, task, audit_logged(rows), rows) for task, rows in sorted(read_samples(path).items())]
    rows = read_task_predictions(path, qa)
    return [(path, qa, audit_rows(rows, qa), rows)]


SAMPLES = ".jsonl"
"""The suffix of a run's samples file (`lm_eval --log_samples`), which `audit` reads besides prediction CSVs."""


def _counts(audit: Audit) -> str:
    """ "credited: rule n, ...; failed: rule n, ..." """
    parts = []
    for direction, counts in audit.by_direction.items():
        if counts:
            parts.append(f"{direction}: " + ", ".join(f"{rule} {count}" for rule, count in counts.items()))
    return "; ".join(parts) or "none"


def _audit(args: argparse.Namespace) -> int:
    """Per file: both scores and the disagreements counted by direction and rule; with --rows each
    disagreement, with --sample N a seeded stratified sample of disagreements and of answers both
    checks fail, for a reader to judge."""
    if args.task is not None:
        task_name(args.task)
    distinct(args.files, "file", key=Path.resolve)  # a file given twice would weigh twice in --sample
    jobs, failed = [], 0
    for path in args.files:
        try:
            jobs.append((path, "" if path.suffix == SAMPLES else _checked_task(args, path)))
        except UsageError as err:
            report_error(err)
            failed += 1
    results = []
    workers = max(1, min(args.jobs, len(jobs)))
    with ProcessPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        futures = [pool.submit(_audit_one, job) if pool else None for job in jobs]
        for job, future in zip(jobs, futures):
            try:
                results += future.result() if future else _audit_one(job)
            except (UsageError, OSError) as err:
                report_error(err)
                failed += 1
    for path, qa, audit, _ in results:
        if args.json:
            print(
                json.dumps(
                    {
                        "file": str(path),
                        "task": qa,
                        **audit.score._asdict(),
                        "disagreements": [{**d._asdict(), "direction": d.direction} for d in audit.disagreements],
                        "by_rule": audit.by_rule,
                        "by_direction": audit.by_direction,
                        "both_fail": len(audit.both_fail),
                        "abstentions": audit.abstentions,
                    }
                )
            )
            continue
        if args.rows:
            for d in audit.disagreements:
                print(
                    f"row {d.row}: target={d.target!r} answer={d.answer!r} "
                    f"acc={int(d.acc)} acc_corrected={int(d.acc_corrected)} rule={d.rule}"
                )
        score = audit.score
        abstentions = ", ".join(f"{kind} {count}" for kind, count in audit.abstentions.items()) or "none"
        print(
            f"{path}: {qa} n={score.n}  acc={score.acc:.2f}  acc_corrected={score.acc_corrected:.2f}  "
            f"disagreeing={len(audit.disagreements)} ({_counts(audit)})  both fail={len(audit.both_fail)}  "
            f"abstained={score.abstained:.2f} ({abstentions})"
        )
    if args.sample:
        _print_sample(results, args.sample, args.seed)
    return 1 if failed else 0


def _print_sample(results, n: int, seed: int) -> None:
    """`n` answers drawn evenly from each stratum (task x (direction and rule, or "both fail")), seeded."""
    strata: dict[tuple[str, str], list[tuple[Path, int, str]]] = {}
    for path, qa, audit, _rows in results:
        for d in audit.disagreements:
            strata.setdefault((qa, f"{d.direction} by {d.rule}"), []).append((path, d.row, d.rule))
        for index in audit.both_fail:
            strata.setdefault((qa, "both fail"), []).append((path, index, "-"))
    rng = random.Random(seed)
    pools = {key: rng.sample(members, len(members)) for key, members in sorted(strata.items())}
    picked: list[tuple[tuple[str, str], tuple[Path, int, str]]] = []
    while len(picked) < n and any(pools.values()):
        for key, members in pools.items():
            if members and len(picked) < n:
                picked.append((key, members.pop()))
    rows_of = {(path, qa): rows for path, qa, _, rows in results}
    print(
        f"# sample of {len(picked)} answers from {len(strata)} strata (seed {seed}); judge each: "
        "is acc_corrected right?"
    )
    for (qa, stratum), (path, index, _) in picked:
        row = rows_of[path, qa][index]
        print(
            json.dumps(
                {
                    "task": qa,
                    "stratum": stratum,
                    "file": str(path),
                    "row": index,
                    "question": row["question"],
                    "target": row["target"],
                    "output": row["output"],
                }
            )
        )


def _simulate(args: argparse.Namespace) -> int:
    """Write fresh simulated bAbI samples in the bAbI text format."""
    qa = task_name(args.task)
    check_target(args.output_path, overwrite=args.overwrite)  # a folder there is never replaced, --overwrite or not
    samples = simulate(qa, args.samples, args.seed, wide_vocabulary=args.wide_vocabulary, check=True)
    path = write_babi_file(samples, args.output_path)
    print(f"wrote {len(samples)} {qa} samples (seed {args.seed}, simulator v{SIMULATOR_VERSION}) to {path}")
    return 0


def _report(args: argparse.Namespace) -> None:
    from lm_eval_longmem.babilong.rim.reader import format_report

    results = load_run(find_results_file(args.results)).data
    print(format_report(results, threshold=args.threshold, check=next(c for c in CHECKS if c.name == args.metric)))


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `babilong score`, `babilong audit` and `babilong report` to the `lm-eval-longmem` command line."""
    group = command_group(
        subparsers, "babilong", help="BABILong: rescore prediction files, report on results", epilog=EPILOG
    )
    score = group.add(
        "score",
        _score,
        help="score a predictions CSV (columns target, output, question) with the authors' check and ours",
    )
    score.add_argument("files", nargs="+", type=Path, help="predictions CSV file(s) of one task")
    score.add_argument("--task", required=True, help="the bAbI task the files answer: qa1 .. qa20")
    score.add_argument("--json", action="store_true", help="one JSON object per file instead of text")
    add_flag(
        score,
        "--any_file_name",
        "--any-file-name",
        action="store_true",
        help="score even when the file name names another task",
    )

    audit = group.add(
        "audit",
        _audit,
        help="count, per file, the answers on which acc and acc_corrected disagree, by direction and rule",
    )
    audit.add_argument(
        "files",
        nargs="+",
        type=Path,
        help="predictions CSV file(s) (columns target, output, question), or a run's samples_babilong_*.jsonl",
    )
    audit.add_argument("--task", help="the bAbI task the files answer: qa1 .. qa20 (default: from each file's name)")
    audit.add_argument("--rows", action="store_true", help="also list every disagreeing answer with its rule")
    audit.add_argument(
        "--sample",
        type=number(int, low=0),
        default=0,
        metavar="N",
        help="print N answers drawn evenly from each task's disagreements (by direction and rule) "
        "and answers both checks fail, for a reader to judge",
    )
    audit.add_argument("--seed", type=number(int, low=0), default=0, help="seed of --sample (default 0)")
    audit.add_argument(
        "--jobs",
        type=number(int, low=1),
        default=min(2, os.cpu_count() or 1),
        help="files audited in parallel (default: 2, or 1 on one core)",
    )
    audit.add_argument("--json", action="store_true", help="one JSON object per file (scores, rows, counts)")
    add_flag(
        audit,
        "--any_file_name",
        "--any-file-name",
        action="store_true",
        help="audit even when the file name names another task",
    )

    sim = group.add(
        "simulate", _simulate, help="write fresh bAbI samples from the built-in world simulator (bAbI text format)"
    )
    sim.add_argument("--task", required=True, help="the bAbI task: qa1 .. qa20")
    sim.add_argument("--samples", type=number(int, low=1), default=1000, help="questions to write (default 1000)")
    sim.add_argument(
        "--seed",
        type=number(int, low=0),
        default=0,
        help="seed (default 0); the same seed gives the same file anywhere",
    )
    add_flag(
        sim,
        "--wide_vocabulary",
        "--wide-vocabulary",
        action="store_true",
        help="more names, places and objects than bAbI's",
    )
    add_output_flags(sim, "--out", type=Path, required=True, what="the file to write, e.g. qa3_sim_test.txt")

    report = group.add(
        "report",
        _report,
        help="task x length table, qa1-qa5 mean per length and effective context from an lm_eval results file",
    )
    report.add_argument("results", type=Path, help="a results_*.json file or a folder holding one (newest is used)")
    report.add_argument(
        "--threshold", type=number(float, low=0, high=1, open_low=True), default=0.85,
        help="accuracy (a fraction, 0 < t <= 1) for effective context (default 0.85)",
    )  # fmt: skip
    report.add_argument(
        "--metric", choices=[c.name for c in CHECKS], default=ACC.name, help=f"which check (default {ACC.name})"
    )

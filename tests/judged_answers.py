"""BABILong answers judged blind against the rubric: draw rows for judging, keep the verdicts, compute the figures.

The corrected check (`lm_eval_longmem.babilong.corrected`) is measured on real model outputs that no rule was
written from, judged by someone who did not write the rules and saw only the rubric (the first section of
docs/babilong-corrected-check.md), the question, the target and the output: never the story, never a check's
verdict. Tables live in `tests/babilong/fixtures/judged/<set>.csv` (admission, final, generated: what each is,
tests/babilong/test_judged.py), one row per judged answer:

    set, model, source, row, sha, stratum, stratum_size, verdict, why

`source` names the predictions file, `row` the answer's position in it (from 0), `sha` the first 16 hex digits of
the SHA-256 of the output (the table holds no output: it is read back from the file, and a changed file is an
error). Sources:

* `shared:PATH`: a file under `../shared/data` (the authors' files the project's tests read);
* `authors:COMMIT:PATH`: a file of the BABILong authors' repository (github.com/booydar/babilong) at that commit,
  read with `git show` from a clone named by `$BABILONG_REPO` (rows are skipped, each named, without it);
* `fixture:PATH`: a file under `tests/babilong/fixtures` (outputs this project generated,
  `benchmarks/babilong_smollm2_predictions.py`).

Rows are drawn by stratum (`strata`): where the corrected check changes `acc`'s verdict, one stratum per shape
and direction; where it does not, by `acc`'s verdict, whether it read the answer and whether the output names
the target. Each stratum is drawn uniformly with a seeded `random.Random`; `stratum_size` is its size when drawn,
so every figure is estimated for the whole set of rows by weighting each judged row by size / drawn
(`figures`), besides the plain counts. A rule changed after a draw is measured with the same weights: the
strata still partition the rows as they did when drawn.

    python tests/judged_answers.py draw --set final --seed 41 --model Yi-34B=authors:94a73a3:babilong_evals/01-ai/Yi-34B \\
        --changed 50 --same 40 --judge-file rows.csv --key-file key.csv
    python tests/judged_answers.py merge key.csv verdicts.csv tests/babilong/fixtures/judged/final.csv
    python tests/judged_answers.py figures final
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import math
import os
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lm_eval_longmem.babilong.corrected import check
from lm_eval_longmem.babilong.corrected.labels import mentions, normalize, vocabulary
from lm_eval_longmem.babilong.official_check import labels_for
from lm_eval_longmem.common.stats import proportion_interval

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
FIXTURES = REPO / "tests" / "babilong" / "fixtures"
JUDGED = FIXTURES / "judged"
COLUMNS = ("set", "model", "source", "row", "sha", "stratum", "stratum_size", "verdict", "why")
YES_NO = {"qa6", "qa9", "qa10", "qa17", "qa18"}
_TASK = re.compile(r"(?:^|/)(qa\d+)_[^/]*\.csv$")


@dataclass(frozen=True)
class Answer:
    """One row of a predictions file."""

    model: str
    source: str
    row: int
    task: str
    question: str
    target: str
    output: str

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.output.encode("utf-8")).hexdigest()[:16]


def _authors_repo() -> Path | None:
    path = os.environ.get("BABILONG_REPO", "")
    return Path(path) if path else None


def read_source(source: str) -> list[dict[str, str]] | None:
    """The rows of the predictions file `source` names; None when it cannot be read here (an authors' file
    without `$BABILONG_REPO`, or a shared one without `../shared`)."""
    kind, _, rest = source.partition(":")
    if kind == "shared":
        path = SHARED / rest
        text = path.read_text(encoding="utf-8") if path.is_file() else None
    elif kind == "fixture":
        text = (FIXTURES / rest).read_text(encoding="utf-8")
    elif kind == "authors":
        repo = _authors_repo()
        if repo is None:
            return None
        commit, _, path_in_repo = rest.partition(":")
        shown = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path_in_repo}"], capture_output=True)
        if shown.returncode:
            raise SystemExit(f"{source}: not in the clone at {repo} ({shown.stderr.decode().strip()})")
        text = shown.stdout.decode("utf-8")
    else:
        raise SystemExit(f"unknown source kind in {source!r}: use shared:, authors: or fixture:")
    if text is None:
        return None
    limit = csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # no cell is longer than the file
    try:
        return list(csv.DictReader(io.StringIO(text)))
    finally:
        csv.field_size_limit(limit)


def list_sources(spec: str) -> list[str]:
    """The predictions files (as sources) of a folder spec: `shared:DIR`, `fixture:DIR` or
    `authors:COMMIT:DIR`, sorted by name."""
    kind, _, rest = spec.partition(":")
    if kind in ("shared", "fixture"):
        base = SHARED if kind == "shared" else FIXTURES
        return [f"{kind}:{p.relative_to(base)}" for p in sorted((base / rest).glob("*.csv"))]
    commit, _, folder = rest.partition(":")
    repo = _authors_repo()
    if repo is None:
        raise SystemExit("set BABILONG_REPO to a clone of github.com/booydar/babilong to read authors: sources")
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", f"{commit}:{folder}"], capture_output=True, text=True
    ).stdout.split()
    return [f"authors:{commit}:{folder}/{name}" for name in sorted(listed) if name.endswith(".csv")]


def answers_of(model: str, sources: list[str]) -> Iterator[Answer]:
    """Every answer of the files `sources` that has a question (files without that column are left out)."""
    for source in sources:
        task = _TASK.search(source)
        rows = read_source(source)
        if task is None or rows is None or not rows or "question" not in rows[0]:
            continue
        for i, row in enumerate(rows):
            yield Answer(model, source, i, task[1], row["question"], row["target"], row["output"] or "")


def names_target(answer: Answer) -> bool:
    """Whether the output names the target at all (the label or a form of it, each item of a list; for qa19 a
    compass step; any answer to a yes/no question): a reader credits no answer that names none."""
    if answer.task in YES_NO:
        return True
    question = normalize(answer.question)
    vocab = vocabulary(labels_for(answer.task), question)
    named = {label for _, _, label in mentions(normalize(answer.output), vocab)}
    if vocab.path:
        return bool(named)
    return all(item.strip().lower() in named for item in answer.target.split(","))


def stratum(answer: Answer) -> str:
    """The answer's stratum under the corrected check of today (see the module docstring)."""
    verdict = check(answer.task, answer.target, answer.output, answer.question)
    if verdict.acc != verdict.acc_corrected:
        return f"changed {verdict.reason} {'credited' if verdict.acc_corrected else 'failed'}"
    read = "abstained" if verdict.abstained else "read"
    if verdict.acc:
        return f"same acc=1 {read}"
    return f"same acc=0 {read} {'names' if names_target(answer) else 'nonames'}"


def draw(args: argparse.Namespace) -> None:
    """Draw rows per stratum for judging: a file for the judges (id, task, question, target, output; shuffled,
    nothing else) and a key (id -> set, model, source, row, sha, stratum, stratum_size)."""
    by_stratum: dict[str, list[Answer]] = defaultdict(list)
    for spec in args.model:
        model, _, folder = spec.partition("=")
        for answer in answers_of(model, list_sources(folder)):
            by_stratum[f"{args.group}: {stratum(answer)}" if args.group else stratum(answer)].append(answer)
    drawn: list[tuple[str, int, Answer]] = []
    for name in sorted(by_stratum):
        pool = by_stratum[name]
        base = name.split(": ", 1)[-1]
        k = min(len(pool), args.size.get(base, args.changed if base.startswith("changed ") else args.same))
        drawn += [(name, len(pool), a) for a in random.Random(f"{args.seed}-{name}").sample(pool, k)]
        print(f"{name}: {len(pool)} rows, {k} drawn", file=sys.stderr)
    random.Random(args.seed).shuffle(drawn)
    with (
        open(args.judge_file, "w", newline="", encoding="utf-8") as judge,
        open(args.key_file, "w", newline="", encoding="utf-8") as key,
    ):
        judges = csv.writer(judge)
        keys = csv.writer(key)
        judges.writerow(("id", "task", "question", "target", "output"))
        keys.writerow(("id", *COLUMNS[:7]))
        for i, (name, size, a) in enumerate(drawn):
            ident = f"{args.set}-{args.group + '-' if args.group else ''}{i:04d}"
            judges.writerow((ident, a.task, a.question.strip(), a.target, a.output))
            keys.writerow((ident, args.set, a.model, a.source, a.row, a.sha, name, size))


def merge(args: argparse.Namespace) -> None:
    """Join a key and the judges' verdicts (id, verdict, why) into a judged table (appended)."""
    with open(args.verdicts, newline="", encoding="utf-8") as fh:
        verdicts = {row["id"]: row for row in csv.DictReader(fh)}
    with open(args.key, newline="", encoding="utf-8") as fh:
        keys = list(csv.DictReader(fh))
    missing = [k["id"] for k in keys if k["id"] not in verdicts]
    if missing:
        raise SystemExit(f"{len(missing)} rows have no verdict, e.g. {missing[:3]}")
    new = not args.table.exists()
    with open(args.table, "a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(COLUMNS)
        for k in keys:
            v = verdicts[k["id"]]
            if v["verdict"] not in ("correct", "wrong"):
                raise SystemExit(f"{k['id']}: verdict {v['verdict']!r} is neither correct nor wrong")
            writer.writerow([k[c] for c in COLUMNS[:7]] + [v["verdict"], v["why"]])


@dataclass(frozen=True)
class Judged:
    """A judged answer with both checks' verdicts of today."""

    answer: Answer
    stratum: str
    weight: float
    """Its stratum's size over the rows judged in it: how many rows of the set it stands for."""
    credited: bool
    """The judge's verdict."""
    acc: bool
    acc_corrected: bool
    reason: str

    @property
    def change(self) -> str:
        """ "credited" / "failed" when `acc_corrected` changes `acc`'s verdict, else ""."""
        if self.acc == self.acc_corrected:
            return ""
        return "credited" if self.acc_corrected else "failed"


def judged(table: str) -> tuple[list[Judged], list[str]]:
    """The rows of judged table `table` whose outputs can be read here, and the sources that cannot."""
    with open(JUDGED / f"{table}.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    drawn = Counter(r["stratum"] for r in rows)
    cache: dict[str, list[dict[str, str]] | None] = {}
    out, unread = [], []
    for r in rows:
        if r["source"] not in cache:
            cache[r["source"]] = read_source(r["source"])
        file_rows = cache[r["source"]]
        if file_rows is None:
            unread.append(r["source"])
            continue
        row = file_rows[int(r["row"])]
        task = _TASK.search(r["source"])
        assert task is not None
        answer = Answer(
            r["model"], r["source"], int(r["row"]), task[1], row["question"], row["target"], row["output"] or ""
        )
        if answer.sha != r["sha"]:
            raise SystemExit(f"{r['source']} row {r['row']}: the output is not the one judged (sha {answer.sha})")
        verdict = check(answer.task, answer.target, answer.output, answer.question)
        weight = int(r["stratum_size"]) / drawn[r["stratum"]]
        out.append(
            Judged(
                answer,
                r["stratum"],
                weight,
                r["verdict"] == "correct",
                verdict.acc,
                verdict.acc_corrected,
                verdict.reason,
            )
        )
    return out, sorted(set(unread))


def share(count: int, n: int) -> str:
    if not n:
        return "-"
    interval = proportion_interval(count, n)
    return f"{count}/{n} = {count / n:.1%} [{interval.low:.1%}, {interval.high:.1%}]"


def weighted_ratio(rows: list[Judged], numerator, denominator, seed: int = 0, reps: int = 2000) -> str:
    """Σ weight·numerator / Σ weight·denominator over `rows`, with a 95% stratified bootstrap interval."""

    def ratio(sample: list[Judged]) -> float:
        den = math.fsum(r.weight for r in sample if denominator(r))
        return math.fsum(r.weight for r in sample if numerator(r)) / den if den else float("nan")

    by_stratum: dict[str, list[Judged]] = defaultdict(list)
    for r in rows:
        by_stratum[r.stratum].append(r)
    rng = random.Random(seed)
    boots = sorted(
        x
        for x in (ratio([rng.choice(g) for g in by_stratum.values() for _ in g]) for _ in range(reps))
        if not math.isnan(x)
    )
    point = ratio(rows)
    if not boots or math.isnan(point):
        return "-"
    return f"{point:.1%} [{boots[int(0.025 * len(boots))]:.1%}, {boots[int(0.975 * len(boots)) - 1]:.1%}]"


def figures(rows: list[Judged]) -> str:
    """The figures the docs quote: wrong changes per shape, per direction and in all (judged counts with Wilson
    intervals, and the weighted estimate for the whole set), and the share of `acc`'s errors fixed."""
    lines = [f"{len(rows)} judged rows of {len({r.answer.model for r in rows})} models"]
    changes = [r for r in rows if r.change]
    lines.append(
        f"{'changes of acc by':<34} {'wrong / judged changes [Wilson 95%]':<40} weighted estimate [bootstrap 95%]"
    )
    groups = [("all", changes)] + [(d, [r for r in changes if r.change == d]) for d in ("credited", "failed")]
    groups += [(f"shape {s}", [r for r in changes if r.reason == s]) for s in sorted({r.reason for r in changes})]
    for name, part in groups:
        wrong = sum(r.acc_corrected != r.credited for r in part)
        estimate = weighted_ratio(part, lambda r: r.acc_corrected != r.credited, lambda r: True)
        lines.append(f"{name:<34} {share(wrong, len(part)):<40} {estimate}")
    errors = [r for r in rows if r.acc != r.credited]
    fixed = sum(r.acc_corrected == r.credited for r in errors)
    estimate = weighted_ratio(
        rows, lambda r: r.acc != r.credited and r.acc_corrected == r.credited, lambda r: r.acc != r.credited
    )
    lines.append(f"{'acc errors fixed':<34} {share(fixed, len(errors)):<40} {estimate}")
    abstained = weighted_ratio(rows, lambda r: r.reason.startswith("abstained"), lambda r: True)
    lines.append(f"{'abstained':<34} {'':<40} {abstained}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("draw")
    p.add_argument("--set", required=True)
    p.add_argument("--seed", required=True)
    p.add_argument("--group", default="", help="a name the strata of this draw carry (a set drawn in parts)")
    p.add_argument("--model", action="append", required=True, help="NAME=shared:DIR | fixture:DIR | authors:COMMIT:DIR")
    p.add_argument("--changed", type=int, default=50, help="rows drawn per stratum of changes")
    p.add_argument("--same", type=int, default=40, help="rows drawn per stratum of unchanged verdicts")
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="STRATUM=N",
        help='rows drawn from one stratum, overriding --changed/--same ("same acc=1 read=40")',
    )
    p.add_argument("--judge-file", type=Path, required=True)
    p.add_argument("--key-file", type=Path, required=True)
    p.set_defaults(run=draw)
    p = sub.add_parser("merge")
    p.add_argument("key", type=Path)
    p.add_argument("verdicts", type=Path)
    p.add_argument("table", type=Path)
    p.set_defaults(run=merge)
    p = sub.add_parser("figures")
    p.add_argument("table")
    p.set_defaults(run=lambda a: _print_figures(a.table))
    args = parser.parse_args()
    if args.command == "draw":
        args.size = {name: int(k) for name, _, k in (item.rpartition("=") for item in args.size)}
    args.run(args)


def _print_figures(table: str) -> None:
    rows, unread = judged(table)
    if unread:
        print(f"left out: {len(unread)} files not readable here (set BABILONG_REPO for authors: sources)")
    print(figures(rows))


if __name__ == "__main__":
    main()

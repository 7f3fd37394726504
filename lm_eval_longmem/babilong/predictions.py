"""BABILong prediction files: read the authors' CSVs, score them with both checks, audit where the checks differ.

A predictions CSV (columns `target`, `output`, `question`, as the authors' scripts write it) is
read by `read_predictions`, refused when its content answers another task than the one it is
scored as (`check_task_content`), scored by both checks (`score_file`) and audited
(`audit_rows`: every answer on which `acc` and `acc_corrected` disagree, and the shape the corrected check read).
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.babilong.corrected import Check, check, read
from lm_eval_longmem.babilong.corrected.decision import ABSTAINED_PREFIX
from lm_eval_longmem.babilong.corrected.labels import normalize
from lm_eval_longmem.babilong.corrected.statements import CONTAINER, POSITION, SHAPE
from lm_eval_longmem.babilong.official_check import TASK_LABELS, labels_for, task_name
from lm_eval_longmem.common.errors import UsageError


class Score(NamedTuple):
    """Both accuracies over a set of answers, in percent as the authors report them."""

    n: int
    acc: float
    acc_corrected: float
    abstained: float
    """Share of answers on which the corrected reader abstained (`corrected_abstained`), in percent."""


def score_rows(rows: Iterable[Mapping[str, str]], qa: str) -> Score:
    """Both accuracies (percent) over rows with `target`, `output` and `question` fields."""
    return _score([check(qa, row["target"], row["output"], row["question"]) for row in rows])


def _score(checks: list[Check]) -> Score:
    """Both accuracies (percent) of a list of verdicts."""
    if not checks:
        raise ValueError("no answers to score")
    n = len(checks)
    return Score(
        n=n,
        acc=100.0 * sum(c.acc for c in checks) / n,
        acc_corrected=100.0 * sum(c.acc_corrected for c in checks) / n,
        abstained=100.0 * sum(c.abstained for c in checks) / n,
    )


def read_predictions(path: str | Path) -> list[dict[str, str]]:
    """Rows of a predictions CSV in the BABILong authors' format (columns `target`, `output`, `question`).

    An empty cell reads as the empty string (an empty answer is wrong under both checks); a byte-order mark
    (as spreadsheet programs write UTF-8) is not part of the first column's name. A file that is missing, a
    folder, not UTF-8 text, not such a CSV, without rows, or ragged (a row with fewer or more fields than the
    header: what an unquoted comma in an output does, which would shift or drop its cells) is a `UsageError`
    naming the file (and the first bad row).
    """
    path = Path(path)
    expected = "pass a BABILong predictions CSV with the columns target, output and question (as the authors' scripts write it)"
    if path.is_dir():
        raise UsageError(f"{path} is a folder: {expected}")
    if not path.is_file():
        raise UsageError(f"{path}: no such file; {expected}")
    if path.stat().st_size == 0:
        raise UsageError(f"{path} is empty (0 bytes): {expected}")
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, path.stat().st_size))  # no cell is longer than the file (outputs can be long)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            missing = {"target", "output", "question"} - set(header)
            if missing:
                raise UsageError(f"{path} lacks the column(s) {', '.join(sorted(missing))}: {expected}")
            columns = {key: header.index(key) for key in ("target", "output", "question")}
            rows: list[dict[str, str]] = []
            for fields in reader:
                if not fields:  # a blank line (as csv.DictReader, skipped)
                    continue
                if len(fields) != len(header):
                    raise UsageError(
                        f"{path}: row {len(rows) + 1} (line {reader.line_num}) has {len(fields)} fields, the header "
                        f"{len(header)}: quote every cell that holds a comma (rows are counted from 1, after the header)"
                    )
                rows.append({key: fields[index] for key, index in columns.items()})
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not UTF-8 text (byte {err.start}): {expected}") from None
    except csv.Error as err:
        raise UsageError(f"{path} is not a valid CSV file (line {reader.line_num}: {err}): {expected}") from None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        raise UsageError(f"{path} holds no rows: {expected}")
    return rows


def read_task_predictions(path: str | Path, qa: str) -> list[dict[str, str]]:
    """`read_predictions` of a predictions CSV of task `qa`, refused when its content answers another task."""
    rows = read_predictions(path)
    check_task_content(rows, qa, path)
    return rows


def score_file(path: str | Path, qa: str) -> Score:
    """Both accuracies (percent) of a predictions CSV of task `qa` (refused when it answers another task)."""
    return score_rows(read_task_predictions(path, qa), qa)


# ---------------------------------------------------------------- which task a file answers

QUESTION_FORMS: dict[str, re.Pattern[str]] = {
    qa: re.compile(form)
    for qa, form in {
        "qa1": r"where is \w+",
        "qa2": r"where is \w+",
        "qa3": r"where was \w+ before \w+",
        "qa4": r"what is (?:north|south|east|west) of \w+|what is \w+ (?:north|south|east|west) of",
        "qa5": r"who gave \w+(?: to \w+)?|who received \w+(?: from \w+)?|who did \w+ give \w+ to|what did \w+ give to \w+",
        "qa6": r"is \w+ in \w+",
        "qa7": r"how many objects is \w+ carrying",
        "qa8": r"what is \w+ carrying",
        "qa9": r"is \w+ in \w+",
        "qa10": r"is \w+ in \w+",
        "qa11": r"where is \w+",
        "qa12": r"where is \w+",
        "qa13": r"where is \w+",
        "qa14": r"where was \w+ before \w+",
        "qa15": r"what is \w+ afraid of",
        "qa16": r"what colou?r is \w+",
        "qa17": rf"is (?:{SHAPE}) (?:{POSITION}) (?:{SHAPE})",
        "qa18": rf"is (?:{CONTAINER}) bigger than (?:{CONTAINER})|does (?:{CONTAINER}) fit in (?:{CONTAINER})",
        "qa19": r"how do you go from \w+ to \w+",
        "qa20": r"where will \w+ go|why did \w+ (?:go to|get) \w+",
    }.items()
}
"""The form of each task's questions, as `corrected.labels.normalize` writes them (bAbI asks nothing else)."""


def _fit(rows: Sequence[Mapping[str, str]], qa: str) -> tuple[float, float]:
    """(share of targets in `qa`'s label set, share of questions in `qa`'s form) of `rows`."""
    labels = {label.lower() for label in TASK_LABELS[qa]}
    lists = qa == "qa8"  # qa8 targets may list several objects
    in_labels = sum(
        all(item in labels for item in re.split(r"\s*,\s*", row["target"].strip().lower()))
        if lists
        else row["target"].strip().lower() in labels
        for row in rows
    )
    in_form = sum(bool(QUESTION_FORMS[qa].fullmatch(normalize(row["question"]))) for row in rows)
    return in_labels / len(rows), in_form / len(rows)


def check_task_content(rows: Sequence[Mapping[str, str]], qa: str, path: str | Path) -> None:
    """Refuse `rows` (of the file `path`) as answers of task `qa` when their content says another task.

    A file's name can lie (a qa5 file renamed `preds5.csv` and scored as qa1 gets 0%). Every
    target must be a label of `qa` (qa8: every item of its list), and at least half the questions
    must have `qa`'s form (`QUESTION_FORMS`); otherwise a `UsageError` names the file and the
    task(s) whose labels and questions fit best.
    """
    qa = task_name(qa)
    empty = [i for i, row in enumerate(rows) if not row["target"].strip()]
    if empty:
        raise UsageError(
            f"{path}: the target of row {empty[0] + 1} is empty ({len(empty)} of {len(rows)} rows have no target): "
            "give every row its gold answer in the target column (rows are counted from 1, after the header)"
        )
    targets, questions = _fit(rows, qa)
    if targets == 1.0 and questions >= 0.5:
        return
    fits = {other: _fit(rows, other) for other in TASK_LABELS}
    best = max(t * q for t, q in fits.values())
    likely = [other for other, (t, q) in fits.items() if t * q == best and best > 0]
    if targets < 1.0:
        labels = {label.lower() for label in TASK_LABELS[qa]}
        outside = sorted(
            {row["target"] for row in rows if not set(re.split(r"\s*,\s*", row["target"].strip().lower())) <= labels}
        )
        what = f"targets such as {', '.join(repr(t) for t in outside[:3])} are not {qa} answers"
    else:
        what = f"only {questions:.0%} of its questions have the form of {qa}'s"
    others = [other for other in likely if other != qa]  # never suggest the task that was just refused
    if others:
        hint = f"it looks like {' or '.join(others)}: pass --task {others[0]}"
    elif likely:
        hint = f"no other task fits it better than {qa}: check the file's targets and questions"
    else:
        hint = "it answers none of qa1..qa20"
    raise UsageError(f"{path}: {what}; {hint}")


CREDITED, FAILED = "credited", "failed"
"""The two directions of a disagreement: `acc_corrected` credits an answer `acc` fails, or fails one it credits."""


class Disagreement(NamedTuple):
    """One answer on which `acc` and `acc_corrected` differ."""

    row: int
    """Position of the answer among the file's rows, from 0."""
    target: str
    output: str
    """The model's whole output."""
    answer: str
    """The part of the output `acc_corrected` read as the answer (`corrected.Reading.answer`)."""
    acc: bool
    acc_corrected: bool
    rule: str
    """The shape the corrected check read (`corrected.SHAPES`): why the verdict moved (a run's samples: the reason
    it logged)."""
    question: str = ""

    @property
    def direction(self) -> str:
        """`CREDITED` or `FAILED`."""
        return CREDITED if self.acc_corrected else FAILED


class Audit(NamedTuple):
    """Both scores of a set of answers, every answer on which the two checks disagree, and those both fail."""

    score: Score
    disagreements: list[Disagreement]
    by_rule: dict[str, int]
    """Number of disagreements per shape read, most frequent first."""
    by_direction: dict[str, dict[str, int]]
    """Number of disagreements per direction (`CREDITED`, `FAILED`) and shape read."""
    both_fail: list[int]
    """Positions of the answers both checks fail (for a reader to judge a sample of them)."""
    abstentions: dict[str, int]
    """Number of answers on which the corrected reader abstained, per kind (`ABSTENTIONS`), most frequent first."""


def audit_rows(rows: Sequence[Mapping[str, str]], qa: str) -> Audit:
    """Both accuracies over `rows` (fields `target`, `output`, `question`), and where they disagree, why."""
    labels = labels_for(qa)
    checks = [check(qa, row["target"], row["output"], row["question"]) for row in rows]
    answers = [read(row["output"], row["question"], labels).answer for row in rows]
    return _audit(rows, checks, answers)


def _audit(rows: Sequence[Mapping[str, str]], checks: Sequence[Check], answers: Sequence[str]) -> Audit:
    """The `Audit` of `rows` given each one's verdicts (`checks`) and the part read as its answer (`answers`)."""
    disagreements, both_fail = [], []
    for index, (row, verdict, answer) in enumerate(zip(rows, checks, answers)):
        if verdict.acc != verdict.acc_corrected:
            disagreements.append(
                Disagreement(
                    index,
                    row["target"],
                    row["output"],
                    answer,
                    verdict.acc,
                    verdict.acc_corrected,
                    verdict.reason,
                    row["question"],
                )
            )
        elif not verdict.acc:
            both_fail.append(index)
    abstentions = Counter(c.reason.removeprefix(ABSTAINED_PREFIX) for c in checks if c.abstained)
    by_rule = Counter(d.rule for d in disagreements)
    by_direction = {
        direction: dict(Counter(d.rule for d in disagreements if d.direction == direction).most_common())
        for direction in (CREDITED, FAILED)
    }
    return Audit(
        _score(list(checks)),
        disagreements,
        dict(by_rule.most_common()),
        by_direction,
        both_fail,
        dict(abstentions.most_common()),
    )


# ---------------------------------------------------------------- a run's logged samples

NOT_LOGGED = "not logged"
"""The reason a samples file written before answers logged theirs gives (`task.Answer.corrected_reason`)."""


def read_samples(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The answers of a `babilong` samples file (`lm_eval --log_samples`), by bAbI task: each one's `target`,
    `question`, `output` and the verdicts and reason the run logged (`check`, a `Check`). A file that is not such
    a samples file is a `UsageError` naming it and the line."""
    path = Path(path)
    expected = "pass a samples_babilong_*.jsonl file that lm_eval --log_samples wrote for the babilong task"
    by_task: dict[str, list[dict[str, Any]]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot be read ({err}): {expected}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
            doc, item = sample["doc"], sample["summary"]
            responses = sample["filtered_resps"]
            row = {
                "target": str(doc["target"]),
                "question": str(doc["question"]),
                "output": str(responses[0] if isinstance(responses, list) else responses).strip(),
            }
            logged = Check(
                bool(item["acc"]),
                bool(item["acc_corrected"]),
                bool(item.get("corrected_abstained") or 0.0),
                item.get("corrected_reason") or NOT_LOGGED,
            )
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise UsageError(f"{path}, line {number}: not a babilong sample ({err!r}): {expected}") from None
        by_task.setdefault(str(doc["qa"]), []).append(row | {"check": logged})
    if not by_task:
        raise UsageError(f"{path} holds no samples: {expected}")
    return by_task


def audit_logged(rows: Sequence[Mapping[str, Any]]) -> Audit:
    """The `Audit` of a run's logged answers (`read_samples`): the verdicts and reasons the run logged, so a row
    that moved is shown with the reason it moved for."""
    return _audit(rows, [row["check"] for row in rows], [""] * len(rows))

"""BABILong's answer check: the authors' rule reproduced exactly (`acc`) and a corrected one (`acc_corrected`).

Both checks read only the first sentence of the model's output and look for the task's answer
labels in it (e.g. the six rooms of qa1). Labels that also occur in the question are ignored
("Where was the apple before the kitchen?" names the kitchen, so "kitchen" in the answer does not
count). A single-item target is correct when it is the only label left; a comma list ("apple,milk",
qa8) is correct when exactly its items are left.

`acc` (official) finds labels by plain substring, as the authors do. That has known defects:

* "none" also contains "one", so the correct qa7 answer "none" finds two labels and scores 0;
* "not" contains "no", so "It is not known." counts as the answer "no" (qa6, qa9, qa10, ...);
* a target list written with spaces ("football, apple") never matches, and the qa19 answer
  written "n, w" is not found at all.

`acc_corrected` (ours) is the same rule with whole-word matching, and with comma lists accepted
with or without spaces, in targets and in outputs. Nothing else differs.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import NamedTuple

_ROOMS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
_YES_NO = ("no", "yes")
_DIRECTIONS = ("e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w")

TASK_LABELS: dict[str, tuple[str, ...]] = {
    "qa1": _ROOMS,
    "qa2": _ROOMS,
    "qa3": _ROOMS,
    "qa4": _ROOMS,
    "qa5": ("Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"),
    "qa6": _YES_NO,
    "qa7": ("none", "one", "three", "two"),
    "qa8": ("apple", "football", "milk", "nothing"),
    "qa9": _YES_NO,
    "qa10": ("maybe", "no", "yes"),
    "qa11": _ROOMS,
    "qa12": _ROOMS,
    "qa13": _ROOMS,
    "qa14": ("bedroom", "cinema", "kitchen", "office", "park", "school"),
    "qa15": ("cat", "mouse", "sheep", "wolf"),
    "qa16": ("gray", "green", "white", "yellow"),
    "qa17": _YES_NO,
    "qa18": _YES_NO,
    "qa19": _DIRECTIONS,
    "qa20": ("bedroom", "bored", "garden", "hungry", "kitchen", "thirsty", "tired"),
}
"""The answer labels of each bAbI task, as in the authors' `TASK_LABELS`."""


class Check(NamedTuple):
    """Both verdicts on one answer."""

    acc: bool
    """The authors' check (substring matching)."""
    acc_corrected: bool
    """The corrected check (whole words, comma lists with or without spaces)."""


class Score(NamedTuple):
    """Both accuracies over a set of answers, in percent as the authors report them."""

    n: int
    acc: float
    acc_corrected: float


def labels_for(qa: str) -> tuple[str, ...]:
    """The label set of task `qa` ("qa1".."qa20"); a clear error for anything else."""
    try:
        return TASK_LABELS[qa.lower()]
    except KeyError:
        raise ValueError(f"unknown BABILong task {qa!r}: use one of qa1..qa20") from None


def first_sentence(output: str) -> str:
    """The part of `output` both checks read: lower-cased, up to the first ".", cut at `<context>`/`<example>`.

    The cut at the tags drops what a model writes when it starts to imitate the prompt.
    """
    text = output.lower().split(".")[0]
    text = text.split("<context>")[0]
    return text.split("<example>")[0]


def official_correct(target: str, output: str, question: str, labels: Iterable[str]) -> bool:
    """The BABILong authors' answer check, reproduced exactly.

    Port of `compare_answers` in booydar/babilong `babilong/metrics.py`
    (https://github.com/booydar/babilong/blob/58e5d20b775bd111c52c4a227b8e8883ecd0d683/babilong/metrics.py),
    extended as the authors later did to all twenty label sets and to list answers: a target that
    contains a comma and is longer than three characters ("apple,milk") is split at the commas and
    is correct when exactly its items are found; a shorter one ("n,w", qa19) is one label.
    Labels are found by substring, both in the output and in the question.
    """
    text = first_sentence(output)
    target = target.lower()
    label_set = {label.lower() for label in labels}
    in_question = {label for label in label_set if label in question.lower()}
    found = {label for label in label_set if label in text} - in_question
    if "," in target and len(target) > 3:
        items = target.split(",")
        return all(item in found for item in items) and len(found) == len(items)
    return target in found and len(found) == 1


@cache
def _word_pattern(label: str) -> re.Pattern[str]:
    """`label` as a whole word; the comma of a qa19 pair may have spaces around it."""
    body = r"\s*,\s*".join(re.escape(part.strip()) for part in label.split(","))
    return re.compile(rf"(?<!\w){body}(?!\w)")


def _normalize_list(text: str) -> str:
    """`text` lower-cased with the spaces around commas removed: "Football, Apple" -> "football,apple"."""
    return re.sub(r"\s*,\s*", ",", text.strip().lower())


def corrected_correct(target: str, output: str, question: str, labels: Iterable[str]) -> bool:
    """The authors' check without its matching defects (see the module docstring).

    Labels are found as whole words (so "none" is not also "one", and "not" is not "no"); a
    target list may be written with or without spaces after its commas, and so may the output.
    A target is a list when, with those spaces removed, it contains a comma and is not itself a
    label (the qa19 answers "n,w" are labels).
    """
    text = first_sentence(output)
    label_set = {_normalize_list(label) for label in labels}
    question = question.lower()
    in_question = {label for label in label_set if _word_pattern(label).search(question)}
    found = {label for label in label_set if _word_pattern(label).search(text)} - in_question
    target = _normalize_list(target)
    if "," in target and target not in label_set:
        items = set(target.split(","))
        return found == items
    return found == {target}


def check(qa: str, target: str, output: str, question: str) -> Check:
    """Both verdicts on one answer of task `qa`."""
    labels = labels_for(qa)
    return Check(
        acc=official_correct(target, output, question, labels),
        acc_corrected=corrected_correct(target, output, question, labels),
    )


def score_rows(rows: Iterable[Mapping[str, str]], qa: str) -> Score:
    """Both accuracies (percent) over rows with `target`, `output` and `question` fields."""
    checks = [check(qa, row["target"], row["output"], row["question"]) for row in rows]
    if not checks:
        raise ValueError("no answers to score")
    n = len(checks)
    return Score(
        n=n,
        acc=100.0 * sum(c.acc for c in checks) / n,
        acc_corrected=100.0 * sum(c.acc_corrected for c in checks) / n,
    )


def read_predictions(path: str | Path) -> list[dict[str, str]]:
    """Rows of a predictions CSV in the BABILong authors' format (columns `target`, `output`, `question`).

    An empty cell reads as the empty string (an empty answer is wrong under both checks).
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"target", "output", "question"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(
                f"{path} lacks the column(s) {sorted(missing)}: a BABILong predictions file has the "
                "columns target, output and question (as written by the authors' evaluation scripts)"
            )
        return [{key: row[key] or "" for key in ("target", "output", "question")} for row in reader]


def score_file(path: str | Path, qa: str) -> Score:
    """Both accuracies (percent) of a predictions CSV of task `qa`."""
    return score_rows(read_predictions(path), qa)

"""BABILong's answer check as its authors wrote it (`acc`), and the bAbI tasks' answer labels.

The authors' check reads the first sentence of the model's output and looks for the task's answer
labels in it (e.g. the six rooms of qa1). Labels that also occur in the question are ignored
("Where was the apple before the kitchen?" names the kitchen, so "kitchen" in the answer does not
count). A single-item target is correct when it is the only label left; a comma list ("apple,milk",
qa8) is correct when exactly its items are left. It finds labels by substring, which has known
defects: "none" also contains "one" (qa7's correct "none" scores 0), "not" contains "no" ("It is
not known." is "no"), a target list written with spaces never matches. These defects are kept:
`acc` must give the authors' published figures (`tests/babilong/test_official_check.py`); the
corrected reading is `corrected/`.
"""

from __future__ import annotations

from collections.abc import Iterable

from lm_eval_longmem.babilong import words
from lm_eval_longmem.common.errors import UsageError

_ROOMS = words.ROOMS
_YES_NO = ("no", "yes")
_DIRECTIONS = ("e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w")

TASK_LABELS: dict[str, tuple[str, ...]] = {
    "qa1": _ROOMS,
    "qa2": _ROOMS,
    "qa3": _ROOMS,
    "qa4": _ROOMS,
    "qa5": tuple(sorted(words.GIVERS + words.OBJECTS)),
    "qa6": _YES_NO,
    "qa7": tuple(sorted(words.COUNTS)),
    "qa8": (*words.OBJECTS, "nothing"),
    "qa9": _YES_NO,
    "qa10": ("maybe", "no", "yes"),
    "qa11": _ROOMS,
    "qa12": _ROOMS,
    "qa13": _ROOMS,
    "qa14": words.PLACES,
    "qa15": tuple(words.ANIMALS),
    "qa16": words.COLOURS,
    "qa17": _YES_NO,
    "qa18": _YES_NO,
    "qa19": _DIRECTIONS,
    "qa20": tuple(sorted({*words.MOTIVES, *(place for place, _ in words.MOTIVES.values())})),
}
"""The answer labels of each bAbI task, as in the authors' `TASK_LABELS`."""


def task_name(qa: str) -> str:
    """`qa` as the package names tasks ("QA6" -> "qa6"); anything but qa1..qa20 is a `UsageError`."""
    name = str(qa).strip().lower()
    if name not in TASK_LABELS:
        raise UsageError(f"unknown BABILong task {qa!r}: use one of qa1..qa20")
    return name


def labels_for(qa: str) -> tuple[str, ...]:
    """The label set of task `qa` ("qa1".."qa20"); a clear error for anything else."""
    return TASK_LABELS[task_name(qa)]


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

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

`acc_corrected` (ours) keeps the authors' rule (labels in the first sentence, minus labels in the
question; the target must be exactly what remains) but reads the answer soundly against the closed
answer sets of the bAbI tasks: whole words only, the other written forms of each label from one
explicit table (`WORD_FORMS`: "mice" for "mouse", "0" for "none", "it is not known" for "maybe"),
negated mentions dropped ("not the apple", "no one", "No idea" is not "no"), list targets with or
without spaces, and qa19 paths read as compass steps in order ("north, west" is "n,w"). `RULES`
names each departure; `audit_rows` lists every answer on which the two checks disagree and which
rule decided it. It is not a fuzzy matcher nor a model judge: a form not in the table is wrong.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import NamedTuple

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


class Check(NamedTuple):
    """Both verdicts on one answer."""

    acc: bool
    """The authors' check (substring matching)."""
    acc_corrected: bool
    """The corrected check (`corrected_correct`: whole words, word forms, negation, lists, paths)."""


class Score(NamedTuple):
    """Both accuracies over a set of answers, in percent as the authors report them."""

    n: int
    acc: float
    acc_corrected: float


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


WORD_FORMS: dict[str, tuple[str, ...]] = {
    # qa5, qa8: the objects, in the plural
    "apple": ("apples",),
    "football": ("footballs",),
    # qa15: the animals, in the plural ("sheep" is its own plural)
    "cat": ("cats",),
    "mouse": ("mice",),
    "wolf": ("wolves",),
    # qa16: the other spelling of a colour
    "gray": ("grey",),
    # qa20: the motive as a noun ("because of boredom")
    "bored": ("boredom",),
    "hungry": ("hunger",),
    "thirsty": ("thirst",),
    "tired": ("tiredness",),
    # qa7: counts as digits, and the ways to say zero
    "none": ("zero", "0", "nothing", "no objects", "no items", "not carrying anything", "not holding anything"),
    "one": ("1",),
    "two": ("2",),
    "three": ("3",),
    # qa8: the ways to say that nothing is carried
    "nothing": ("none", "no objects", "no items", "not carrying anything", "not holding anything"),
    # qa10: the story does not settle the question (statements about the facts, not about the
    # speaker: "no idea", "I do not know" and "not sure" are not here)
    "maybe": (
        "perhaps",
        "possibly",
        "may be",
        "might be",
        "could be",
        "unknown",
        "not known",
        "unclear",
        "not clear",
        "uncertain",
        "not certain",
        "undetermined",
        "indeterminate",
        "cannot be determined",
        "cannot determine",
        "cannot be known",
        "cannot know",
        "cannot tell",
        "cannot say",
        "impossible to tell",
        "impossible to say",
        "impossible to know",
        "impossible to determine",
        "not possible to tell",
        "not possible to say",
        "not possible to know",
        "not possible to determine",
        "no way to tell",
        "no way to know",
        "no way of knowing",
        "no way to determine",
        "not enough information",
    ),
}
"""Other written forms of the answer labels, for the corrected check (rule `word-form`).

Keyed by label: a task uses the entries of its own labels only, so "none" means the label "none"
in qa7 and the label "nothing" in qa8. Forms are written as `normalize_answer` leaves text (lower
case, no articles, "can't" as "cannot"). Synonyms are deliberately absent ("movie theater" is not
"cinema", "fatigue" is not "tired"): only forms of the label word itself, digits, and for qa7, qa8
and qa10 the fixed phrasings of their answers. A form not listed here is not recognised.
"""

COMPASS: dict[str, str] = {
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
    "n": "n",
    "s": "s",
    "e": "e",
    "w": "w",
}
"""Compass words and letters as the qa19 steps they name (rule `path`)."""

NEGATORS = frozenset({"not", "no", "never", "neither", "nor", "without"})
"""Words that negate the label after them (rule `negation`): "not apple", "no one", "nor office"."""

NEGATION_BRIDGE = frozenset(
    {"in", "at", "on", "to", "into", "inside", "from", "of", "by", "with"}
    | {"carrying", "holding", "afraid", "go", "going", "gone", "went"}
)
"""Words that may stand between a negator and the label it negates: "not in kitchen", "not afraid of cat".

"only" and "just" are not here: "not only apple but also milk" negates nothing.
"""

CLAUSE_STARTERS = frozenset(
    {"i", "you", "he", "she", "it", "we", "they", "this", "that", "there"}
    | {"because", "since", "as", "but", "and", "so", "not", "yes", "no"}
)
"""Words that may follow the answer "no" without a comma: "no it is not", "no because ...".

Any other word right after "no" makes it the determiner "no" ("no idea", "no way to tell", "no
one"), unless the word is in the question ("No Mary is not in the office" for "Is Mary in the
office?").
"""

RULES: tuple[str, ...] = ("whole-word", "word-form", "negation", "list", "path")
"""The corrected check's departures from the authors' check, by the names the audit reports.

* `whole-word`: a label is found only as a whole word, never inside a longer one ("none" is not
  also "one", "not" is not "no", "parking" is not "park").
* `word-form`: the forms in `WORD_FORMS` count as their label ("mice" is "mouse", "0" is "none",
  "it is not known" is "maybe").
* `negation`: a negated mention is not an answer ("not apple", "no one", "neither kitchen nor
  office"), and "no" followed by a word is the determiner, not the answer "no" ("no idea").
* `list`: a list target may have spaces after its commas ("football, apple").
* `path`: a qa19 answer is the sequence of compass steps it names, letters or words, in order,
  whatever stands between them ("north, west", "n, w", "go north then west" are all "n,w").

Before any rule, both the answer and the question are normalised (`normalize_answer`); the audit
calls a verdict that none of the five rules changes `normalize`.
"""
_ALL_RULES = frozenset(RULES)


def normalize_answer(text: str) -> str:
    """`text` as the corrected check reads it: lower case, contractions spelled out, articles dropped.

    "can't" and "can not" become "cannot", other "n't" becomes " not" ("isn't" -> "is not"), a
    final "'s" is dropped ("Mary's" -> "mary"), punctuation other than commas becomes a comma
    (a boundary: "No!" ends the answer "no" as "No," does), and runs of spaces become one space.
    """
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"\bcan'?t\b|\bcan not\b", "cannot", text)
    text = re.sub(r"n't\b", " not", text)
    text = re.sub(r"'s\b", "", text)
    text = re.sub(r"[^\w\s,]", ",", text)
    text = re.sub(r"\b(?:the|a|an)\b", " ", text)
    return re.sub(r"\s+", " ", text).strip()


@cache
def _forms_pattern(labels: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, str]] | None:
    """One regex for all forms of `labels` (longest first, whole words), and the label of each form."""
    forms = {form: label for label in labels for form in WORD_FORMS.get(label, ())}
    if not forms:
        return None
    alternatives = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"), forms


def _apply_forms(text: str, labels: tuple[str, ...]) -> str:
    """`text` with every form in `WORD_FORMS` of one of `labels` replaced by that label."""
    compiled = _forms_pattern(labels)
    if compiled is None:
        return text
    pattern, forms = compiled
    return pattern.sub(lambda match: forms[match.group(0)], text)


def _negated(text: str, start: int) -> bool:
    """Whether the mention at `start` follows a negator, possibly across `NEGATION_BRIDGE` words."""
    before = re.findall(r"\w+|,", text[:start])
    while before and before[-1] in NEGATION_BRIDGE:
        before.pop()
    return bool(before) and before[-1] in NEGATORS


def _determiner_no(text: str, end: int, question_words: frozenset[str]) -> bool:
    """Whether the "no" ending at `end` is the determiner ("no idea", "no one"), not the answer."""
    following = re.match(r" (\w+)", text[end:])
    return following is not None and following[1] not in CLAUSE_STARTERS | question_words


def _labels_found(text: str, labels: tuple[str, ...], rules: frozenset[str], question_words: frozenset[str]) -> set[str]:
    """The labels that `text` (normalised) gives as its answer, under `rules`."""
    if "word-form" in rules:
        text = _apply_forms(text, labels)
    if "path" in rules and all("," in label for label in labels):
        path = ",".join(COMPASS[word] for word in re.findall(r"\w+", text) if word in COMPASS)
        return {path} if path else set()
    found = set()
    for label in labels:
        pattern = rf"(?<!\w){re.escape(label)}(?!\w)" if "whole-word" in rules else re.escape(label)
        for match in re.finditer(pattern, text):
            inside_word = bool(re.match(r"\w", text[match.end() :]))
            if "negation" in rules and (
                _negated(text, match.start())
                or (label == "no" and not inside_word and _determiner_no(text, match.end(), question_words))
            ):
                continue
            found.add(label)
            break
    return found


def _corrected(target: str, output: str, question: str, labels: Iterable[str], rules: frozenset[str]) -> bool:
    """The corrected check with only `rules` (a subset of `RULES`) on; all of them is `acc_corrected`."""
    label_tuple = tuple(sorted({label.lower() for label in labels}))
    text = normalize_answer(first_sentence(output))
    question = normalize_answer(question)
    question_words = frozenset(re.findall(r"\w+", question))
    found = _labels_found(text, label_tuple, rules, question_words)
    found -= _labels_found(question, label_tuple, rules - {"negation"}, question_words)
    target = target.lower()
    if "list" in rules:
        target = re.sub(r"\s*,\s*", ",", target.strip())
    if "," in target and target not in label_tuple:
        return found == set(target.split(","))
    return found == {target}


def corrected_correct(target: str, output: str, question: str, labels: Iterable[str]) -> bool:
    """The authors' check made sound on the closed answer sets of the bAbI tasks (see `RULES`).

    The first sentence of the answer and the question are normalised (`normalize_answer`); forms
    in `WORD_FORMS` become their labels; labels are found as whole words, a negated mention does
    not count, and a qa19 answer is read as its sequence of compass steps. Then the authors' rule:
    labels also in the question are dropped, and the target must be exactly what remains (a
    list target as a set, a path in order).
    """
    return _corrected(target, output, question, labels, _ALL_RULES)


def deciding_rule(target: str, output: str, question: str, labels: Iterable[str]) -> str:
    """Which of `RULES` decides the corrected verdict on one answer, found by switching rules off.

    "a": switching off `a` alone changes the verdict (several such: "a+b", each is needed).
    "a|b": no single rule is needed, but `a` (or `b`) alone on top of the bare normalised check
    gives the verdict. "normalize": the bare normalised check already gives it. "combined": only
    several rules together give it.
    Meant for answers where `acc` and `acc_corrected` disagree (`audit_rows`).
    """
    labels = tuple(labels)
    verdict = _corrected(target, output, question, labels, _ALL_RULES)
    needed = [rule for rule in RULES if _corrected(target, output, question, labels, _ALL_RULES - {rule}) != verdict]
    if needed:
        return "+".join(needed)
    if _corrected(target, output, question, labels, frozenset()) == verdict:
        return "normalize"
    alone = [rule for rule in RULES if _corrected(target, output, question, labels, frozenset({rule})) == verdict]
    return "|".join(alone) or "combined"


def check(qa: str, target: str, output: str, question: str, labels: tuple[str, ...] | None = None) -> Check:
    """Both verdicts on one answer of task `qa` (`labels`: the task's label set, widened for simulated facts)."""
    labels = labels or labels_for(qa)
    return Check(
        acc=official_correct(target, output, question, labels),
        acc_corrected=corrected_correct(target, output, question, labels),
    )


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
    )


def read_predictions(path: str | Path) -> list[dict[str, str]]:
    """Rows of a predictions CSV in the BABILong authors' format (columns `target`, `output`, `question`).

    An empty cell reads as the empty string (an empty answer is wrong under both checks). A file
    that is missing, a folder, not UTF-8 text, not such a CSV or without rows is a `UsageError`
    naming the file.
    """
    path = Path(path)
    expected = "pass a BABILong predictions CSV with the columns target, output and question (as the authors' scripts write it)"
    if path.is_dir():
        raise UsageError(f"{path} is a folder: {expected}")
    if not path.is_file():
        raise UsageError(f"{path}: no such file; {expected}")
    if path.stat().st_size == 0:
        raise UsageError(f"{path} is empty (0 bytes): {expected}")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = {"target", "output", "question"} - set(reader.fieldnames or ())
            if missing:
                raise UsageError(f"{path} lacks the column(s) {', '.join(sorted(missing))}: {expected}")
            rows = [{key: row[key] or "" for key in ("target", "output", "question")} for row in reader]
    except (UnicodeDecodeError, csv.Error) as err:
        raise UsageError(f"{path} is not a UTF-8 CSV file ({type(err).__name__}): {expected}") from None
    if not rows:
        raise UsageError(f"{path} holds no rows: {expected}")
    return rows


def score_file(path: str | Path, qa: str) -> Score:
    """Both accuracies (percent) of a predictions CSV of task `qa`."""
    return score_rows(read_predictions(path), qa)


def read_answer(output: str) -> str:
    """The part of `output` that both checks read, in its own case (see `first_sentence`)."""
    return re.split(r"<context>|<example>", output.split(".")[0], flags=re.IGNORECASE)[0]


class Disagreement(NamedTuple):
    """One answer on which `acc` and `acc_corrected` differ."""

    row: int
    """Position of the answer among the file's rows, from 0."""
    target: str
    output: str
    """The model's whole output."""
    answer: str
    """The part of the output both checks read (`read_answer`)."""
    acc: bool
    acc_corrected: bool
    rule: str
    """What decided the corrected verdict (`deciding_rule`)."""


class Audit(NamedTuple):
    """Both scores of a set of answers, and every answer on which the two checks disagree."""

    score: Score
    disagreements: list[Disagreement]
    by_rule: dict[str, int]
    """Number of disagreements per deciding rule, most frequent first."""


def audit_rows(rows: Iterable[Mapping[str, str]], qa: str) -> Audit:
    """Both accuracies over `rows` (fields `target`, `output`, `question`), and where they disagree, why."""
    labels = labels_for(qa)
    verdicts, disagreements = [], []
    for index, row in enumerate(rows):
        verdict = check(qa, row["target"], row["output"], row["question"])
        verdicts.append(verdict)
        if verdict.acc != verdict.acc_corrected:
            rule = deciding_rule(row["target"], row["output"], row["question"], labels)
            disagreements.append(
                Disagreement(index, row["target"], row["output"], read_answer(row["output"]), *verdict, rule)
            )
    by_rule = Counter(d.rule for d in disagreements)
    return Audit(_score(verdicts), disagreements, dict(by_rule.most_common()))


def audit_file(path: str | Path, qa: str) -> Audit:
    """`audit_rows` of a predictions CSV of task `qa`."""
    return audit_rows(read_predictions(path), qa)

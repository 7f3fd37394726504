"""The corrected check's decision: read an answer only when it has one of the listed shapes, else abstain.

`read` finds the answer (`answer.locate`) and gives it a shape from `SHAPES` or abstains with a reason from
`ABSTENTIONS`; `check` gives both verdicts on one answer. Where the reader abstains, `acc_corrected` is `acc`.
The rubric the shapes follow, and every shape's measured precision: docs/babilong-corrected-check.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from lm_eval_longmem.babilong.corrected import answer as answers
from lm_eval_longmem.babilong.corrected.forms import NO_ANSWER, read_statement
from lm_eval_longmem.babilong.corrected.labels import (
    Vocabulary,
    answer_set,
    bare_labels,
    mentions,
    normalize,
    vocabulary,
)
from lm_eval_longmem.babilong.official_check import labels_for, official_correct


@dataclass(frozen=True)
class Shape:
    """A form of answer the corrected check reads."""

    kind: str
    """"mechanical": right by construction (only labels are said); "reading": read by rules, admitted with its
    precision measured on rows of models no rule was written from."""
    what: str
    example: str
    """(question / output) -> what it reads."""


SHAPES: dict[str, Shape] = {
    "empty": Shape("mechanical", "the output holds no word", "Where is Mary? / `` -> no answer"),
    "label": Shape(
        "mechanical",
        "the answer is only labels or their forms (an answer mark, articles, case and punctuation aside)",
        "How many objects is Mary carrying? / `None.` -> none",
    ),
    "label+text": Shape(
        "reading",
        "a label alone, then an explanation or an invented prompt that names no other answer to the question",
        "What is Emily afraid of? / `Cat, since Emily is a mouse and mice are afraid of cats.` -> cat",
    ),
    "statement": Shape(
        "reading",
        "a listed statement of the asked fact about the question's own person or thing (`forms.FORMS`)",
        "Who gave the apple? / `Mary gave the apple to Fred.` -> Mary",
    ),
    "no-answer": Shape(
        "reading",
        'a statement that the story does not settle the question ("cannot be determined", "not stated"): '
        "no answer, and in qa10 the answer maybe",
        "Is Mary in the kitchen? / `It cannot be determined whether Mary is in the kitchen.` -> no answer",
    ),
}
"""Every shape `acc_corrected` reads; any other answer abstains ("unlisted shape")."""

ABSTENTIONS: dict[str, str] = {
    "unlisted shape": "the answer has none of the listed shapes",
    "hedge": 'an uncertainty marker anywhere in the answer ("possibly", "likely", "I think")',
    "correction": 'a word that may take the answer back ("however", "but", "actually", "instead")',
    "alternative": 'a second candidate after "or", "nor" or "/" anywhere in the answer',
    "options": "a list of options (two list items, inline A./B., Options:)",
    "several": "several labels for a question with one answer",
    "conflict": "the text after the answer, or the same question asked again, gives another answer",
    "continued": 'the answer\'s first line goes on in the next one ("Jeff\\ngave the football to Fred")',
}
"""Why the corrected check did not read an answer; `acc_corrected` keeps `acc`'s verdict there."""


ABSTAINED_PREFIX = "abstained: "


class Reading(NamedTuple):
    """What the corrected reader made of one output."""

    labels: frozenset[str] | None
    """What the answer gives under the authors' rule (the question's labels dropped); None when it abstained."""
    shape: str = ""
    """The shape read (a key of `SHAPES`), or "" when it abstained."""
    abstained: str = ""
    """Why it abstained (a key of `ABSTENTIONS`), or ""."""
    answer: str = ""
    """The part of the output read as the answer, as written."""

    @property
    def reason(self) -> str:
        """The shape read, or "abstained: <why>": what the logged sample and the audit show for the row."""
        return self.shape or f"{ABSTAINED_PREFIX}{self.abstained}"


class Check(NamedTuple):
    """Both verdicts on one answer."""

    acc: bool
    """The authors' check (substring matching)."""
    acc_corrected: bool
    """The corrected check: the reader's verdict, or `acc` where it abstained."""
    abstained: bool = False
    reason: str = ""
    """`Reading.reason`."""


_CONCLUSION = re.compile(r"\b(?:therefore|thus|hence|so|in conclusion|answer is|which means|this means)\b,? ?")
_ONE_ANSWER_PER_QUESTION = re.compile(r"what is \w+ carrying|how do you go")


def _abstain(why: str, answer: str = "") -> Reading:
    return Reading(None, abstained=why, answer=answer)


def _claim(sentence: str, question: str, vocab: Vocabulary) -> tuple[str, frozenset[str]] | None:
    """(shape, answer) of one sentence read alone: bare labels, a listed statement, or "no answer"."""
    text = normalize(answers.unmarked(sentence))
    if (bare := bare_labels(text, vocab)) is not None:
        distinct = tuple(dict.fromkeys(bare))
        if len(distinct) > 1 and not (vocab.path or _ONE_ANSWER_PER_QUESTION.fullmatch(question)):
            return "several", frozenset()
        return "label", answer_set(bare if vocab.path else distinct, vocab)
    if (statement := read_statement(text, question, vocab)) is not None:
        return "statement", answer_set(statement.labels, vocab) if statement.labels else frozenset()
    names = {label for _, _, label in mentions(text, vocab)} - vocab.in_question - {"no", "none", "nothing", "maybe"}
    if NO_ANSWER.search(text) and not names and not re.search(r"\b(?:so|therefore|yes)\b", text):
        return "no-answer", frozenset({"maybe"}) if "maybe" in vocab.labels else frozenset()
    return None


def _later_answers(texts: Iterable[str], question: str, vocab: Vocabulary) -> list[frozenset[str]]:
    """What each sentence of `texts` answers to this question, where one does: bare labels or a conclusion
    ("Therefore, office") alone on it, a listed statement of the asked fact (about the question's subject)."""
    found = []
    for text in texts:
        for sentence in answers.sentences(text):
            concluded = _CONCLUSION.split(normalize(answers.unmarked(sentence)))[-1]
            first_clause = answers.split_explanation(answers.unmarked(sentence))[0]
            for part in (concluded, first_clause, first_clause.split(",")[0]):
                claim = _claim(part, question, vocab)
                if claim and claim[0] != "no-answer":
                    found.append(claim[1])
    return found


def _asked_again(tail: str, question: str) -> str:
    """The answer the invented tail gives to this very question, when it asks it again ("" otherwise)."""
    lines = [line for line in tail.splitlines() if line.strip()]
    for i, line in enumerate(lines[:-1]):
        if normalize(line).endswith(question):
            return answers.unmarked(lines[i + 1])
    return ""


@lru_cache(maxsize=1 << 16)
def read(output: str, question: str, labels: tuple[str, ...]) -> Reading:
    """The corrected reader: the answer's shape and what it gives, or an abstention (see the module docstring)."""
    question = normalize(question)
    vocab = vocabulary(labels, question)
    if not re.search(r"\w", output):
        return Reading(frozenset(), "empty")
    located = answers.locate(output)
    opening, head = answers.lead_in(located.head)
    if opening and not mentions(normalize(opening), vocab):  # a lead-in that names no label says nothing
        located = answers.Located(head, located.rest, located.tail, located.opening, located.continued)
    if not located.head:
        return _abstain("unlisted shape")
    claim_text, explanation = answers.split_explanation(located.head)
    whole = _claim(located.head, question, vocab)
    if whole and whole[0] == "label" and not (located.rest or located.tail):
        return Reading(whole[1], "label", answer=located.head)
    if hazard := answers.hazard(located):
        return _abstain(hazard, located.head)
    if located.continued:
        return _abstain("continued", located.head)
    if (claimed := _claim(claim_text, question, vocab)) and claimed[0] == "label":
        shape, found, answer_text = "label+text", claimed[1], claim_text
    elif whole and whole[0] in ("statement", "no-answer"):
        shape, found, answer_text = whole[0], whole[1], located.head
    elif claimed and claimed[0] in ("statement", "no-answer"):
        shape, found, answer_text = claimed[0], claimed[1], claim_text
    elif (whole or claimed or ("", frozenset()))[0] == "several":
        return _abstain("several", located.head)
    else:
        return _abstain("unlisted shape", located.head)
    later = _later_answers([explanation, located.rest, _asked_again(located.tail, question)], question, vocab)
    if any(other != found for other in later):
        return _abstain("conflict", answer_text)
    return Reading(found, shape, answer=answer_text)


def _verdict(target: str, found: frozenset[str], labels: tuple[str, ...]) -> bool:
    """Whether the labels read are exactly the target (a list target as a set, whatever its spacing)."""
    target = re.sub(r"\s*,\s*", ",", target.strip().lower())
    if "," in target and target not in {label.lower() for label in labels}:
        return found == frozenset(target.split(","))
    return found == {target}


def check(qa: str, target: str, output: str, question: str, labels: tuple[str, ...] | None = None) -> Check:
    """Both verdicts on one answer of task `qa` (`labels`: the task's label set, widened for simulated facts)."""
    labels = labels or labels_for(qa)
    acc = official_correct(target, output, question, labels)
    reading = read(output, question, labels)
    if reading.labels is None:
        return Check(acc, acc, True, reading.reason)
    return Check(acc, _verdict(target, reading.labels, labels), False, reading.reason)

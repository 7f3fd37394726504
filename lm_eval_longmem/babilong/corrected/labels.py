"""The answer labels of a question, their written forms, and reading a bare answer.

A bAbI question is answered from a closed set of labels (`official_check.TASK_LABELS`). The corrected
check reads text as the sequence of words `normalize` leaves, and finds a label only as a whole word or
as one of its listed forms (`WORD_FORMS`): "none" is not also "one", "not" is not "no", "parking" is not
"park". A *bare* answer is one that says nothing but labels (`bare_labels`): its reading is exact by
construction, whatever the official check's substring matching made of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lm_eval_longmem.babilong import words

WORD_FORMS: dict[str, tuple[str, ...]] = {
    # qa5, qa8: the objects in the plural
    "apple": ("apples",),
    "football": ("footballs",),
    # qa15: the animals in the plural ("sheep" is its own plural)
    **{kind: (plural,) for kind, plural in words.ANIMALS.items() if plural != kind},
    # rooms and places in the plural
    **{place: (place + "s",) for place in sorted({*words.ROOMS, *words.PLACES})},
    # qa16: the other spelling
    "gray": ("grey",),
    # qa20: the motive as a noun
    "bored": ("boredom",),
    "hungry": ("hunger",),
    "thirsty": ("thirst",),
    "tired": ("tiredness",),
    # qa7: digits and the ways to say zero
    "none": ("zero", "0", "nothing", "no objects", "no object", "no items", "no item"),
    "one": ("1",),
    "two": ("2",),
    "three": ("3",),
    # qa8: the ways to say that nothing is carried
    "nothing": ("none", "no objects", "no items"),
    # qa10: a one-word answer that the story does not settle the question
    "maybe": ("perhaps", "possibly", "unknown", "unclear", "uncertain", "undetermined"),
    # qa19: the compass words for the letters of a step
    **{letter: (word,) for word, letter in words.DIRECTIONS.items()},
}
"""Other written forms of the labels, as `normalize` writes them, keyed by label (a task uses the entries
of its own labels only: "none" is the label "none" in qa7 and a form of "nothing" in qa8). Only forms of
the label word itself (plural, spelling, digits, the motive as a noun, compass words) and the fixed ways to
say zero, nothing and maybe; no synonyms ("movie theater" is not "cinema")."""

ANSWER_FILLER = frozenset({"in", "at", "to", "on", "inside", "object", "objects", "item", "items", "and", "then"})
"""Words a bare answer may hold besides its labels: a preposition before a place ("in kitchen"), a count's
noun ("two objects"), the joins of a list or a path ("apple and milk", "north then west")."""

_NORMALIZE = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\bcan'?t\b|\bcan not\b", "cannot"),
        (r"n't\b", " not"),
        (r"'s\b", ""),
        (r"[^\w\s,]", ","),
        (r"\b(?:the|a|an)\b", " "),
        (r"\s*,[\s,]*", ", "),
        (r"\s+", " "),
    )
)


@lru_cache(maxsize=1 << 16)
def normalize(text: str) -> str:
    """`text` as the corrected check reads it: lower case, contractions spelt out ("isn't" -> "is not", "can't"
    -> "cannot"), a final "'s" dropped, articles dropped, every other mark a comma, one space between words.
    The comma keeps where a sentence or clause ended ("No, she is not" is "no, she is not")."""
    text = text.lower().replace("\u2019", "'")
    for pattern, replacement in _NORMALIZE:
        text = pattern.sub(replacement, text)
    return text.strip(" ,")


def tokens(text: str) -> list[str]:
    """The words and commas of a normalised `text`."""
    return re.findall(r"\w+|,", text)


@dataclass(frozen=True)
class Vocabulary:
    """The labels of one question: all of its task's, and those of the kind it asks for."""

    labels: tuple[str, ...]
    """Every label of the task, lower case (qa5: the people and the objects)."""
    asked: frozenset[str]
    """The labels of the kind the question asks for ("who" a person, "what" an object; qa20 "why" a motive,
    "where" a place); every label where the task has one kind."""
    in_question: frozenset[str]
    """Labels the question names ("kitchen" in "Where was the apple before the kitchen?"): the authors' rule
    drops them from an answer."""
    path: bool
    """qa19: the answer is a sequence of compass steps, any one of which may be named."""
    forms: tuple[tuple[str, str], ...]
    """(form, label) for every word form of a label of the task, longest form first."""


@lru_cache(maxsize=4096)
def vocabulary(labels: tuple[str, ...], question: str) -> Vocabulary:
    """The `Vocabulary` of a (normalised) `question` whose task has `labels`."""
    names = {label.lower() for label in labels if label[:1].isupper()}
    lowered = tuple(sorted({label.lower() for label in labels}))
    path = all("," in label for label in lowered)
    if path:
        lowered = tuple(sorted(set(words.DIRECTIONS.values())))
    asked = set(lowered)
    if names and len(names) < len(lowered):
        asked = names if question.startswith("who ") else asked - names
    motives = asked & words.MOTIVES.keys()
    if motives and len(motives) < len(asked):
        asked = motives if question.startswith("why ") else asked - motives
    forms = tuple(
        sorted(
            ((form, label) for label in lowered for form in WORD_FORMS.get(label, ())),
            key=lambda pair: -len(pair[0]),
        )
    )
    vocab = Vocabulary(lowered, frozenset(asked), frozenset(), path, forms)
    in_question = frozenset() if path else frozenset(label for _, _, label in mentions(question, vocab))
    return Vocabulary(lowered, frozenset(asked), in_question, path, forms)


@lru_cache(maxsize=4096)
def _pattern(vocab: Vocabulary) -> tuple[re.Pattern[str], dict[str, str]]:
    """One regex finding every label and form of `vocab` as a whole phrase (longest first), and each one's label."""
    by_phrase = {label: label for label in vocab.labels} | {form: label for form, label in vocab.forms}
    alternatives = "|".join(re.escape(phrase) for phrase in sorted(by_phrase, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"), by_phrase


def mentions(text: str, vocab: Vocabulary) -> list[tuple[int, int, str]]:
    """(start, end, label) of every whole-word mention of a label or one of its forms in normalised `text`."""
    pattern, by_phrase = _pattern(vocab)
    return [(m.start(), m.end(), by_phrase[m.group(0)]) for m in pattern.finditer(text)]


def bare_labels(text: str, vocab: Vocabulary) -> tuple[str, ...] | None:
    """The labels of normalised `text` in order when it says nothing but labels (and `ANSWER_FILLER`, commas);
    None when it says anything else. "in kitchen" -> ("kitchen",); "north, then west" -> ("n", "w");
    "not kitchen" -> None."""
    found = mentions(text, vocab)
    rest = text
    for start, end, _ in reversed(found):
        rest = rest[:start] + " " + rest[end:]
    if not found or any(word != "," and word not in ANSWER_FILLER for word in tokens(rest)):
        return None
    return tuple(label for _, _, label in found)


def answer_set(labels: tuple[str, ...], vocab: Vocabulary) -> frozenset[str]:
    """What an answer naming `labels` gives under the authors' rule: labels the question names dropped (a
    path joined into one label: ("n", "w") -> "n,w")."""
    if vocab.path:
        return frozenset({",".join(labels)})
    return frozenset(labels) - vocab.in_question

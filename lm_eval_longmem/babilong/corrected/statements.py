"""Statements that answer a bAbI question: what a matched statement form says (its forms are `forms.FORMS`).

Each bAbI question has a fixed form ("where is X", "who gave Y to Z", "is X in P", ...). A statement
answers it when it is, word for word after `labels.normalize`, one of the forms listed for that question:
nothing else in the sentence, the slots filled with the question's own person, thing or reference and a
label. The readers here turn a match into what it answers (`Statement`). A statement of a listed form about another person or thing, or
with roles the question contradicts ("Jeff gave the football to Fred" for "What did Fred give to Jeff?"),
answers another question: no answer to this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lm_eval_longmem.babilong import words
from lm_eval_longmem.babilong.corrected.labels import Vocabulary, bare_labels, normalize

PRONOUNS = frozenset({"he", "she", "it", "they"})
PERSONS = frozenset(
    name.lower()
    for name in (
        *words.PEOPLE,
        *words.GIVERS,
        *words.VISITORS,
        *words.ANIMAL_NAMES,
        *words.PET_NAMES,
        *words.AGENTS,
        *words.WIDE_NAMES,
    )
)
THINGS = frozenset(thing.lower() for thing in (*words.OBJECTS, *words.WIDE_OBJECTS))
ENTITIES = PERSONS | THINGS
"""Every person, animal and thing a bAbI question asks about, lower case."""


def _alternation(phrases: tuple[str, ...] | list[str]) -> str:
    return "|".join(re.escape(normalize(p)) for p in sorted(set(phrases), key=len, reverse=True))


SHAPE = _alternation(words.SHAPES)
POSITION = _alternation(words.POSITIONS)
CONTAINER = _alternation(words.CONTAINERS)
DIRECTION = _alternation(list(words.DIRECTIONS))
_WORD = r"\w+"
_SLOTS = {
    "x": rf"(?P<x>{_WORD})",  # the person or thing the statement is about
    "a": rf"(?P<a>{_WORD})",  # the answer's label
    "r": rf"(?P<r>{_WORD})",  # the question's reference (a place, a direction's other end)
    "d": rf"(?P<d>{DIRECTION})",
    "neg": r"(?P<neg>not |no longer |never )?",
}


@dataclass(frozen=True)
class Statement:
    """What a statement answers."""

    labels: tuple[str, ...]
    """The labels it gives for the question ("yes", "kitchen", ("n", "w")); () for no answer."""
    other_question: bool = False
    """It answers another question (another person, roles swapped, another reference): no answer to this one."""


@dataclass(frozen=True)
class Form:
    """A question form, the statement forms that answer it, and how a match becomes an answer."""

    question: re.Pattern[str]
    statements: tuple[re.Pattern[str], ...]
    answer: Callable[[dict[str, str], dict[str, str], Vocabulary], Statement | None]
    """(the question's groups, the statement's groups, the vocabulary) -> what the statement answers."""


def templates(*templates: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(template.format(**_SLOTS)) for template in templates)


def _same(said: str, asked: str) -> bool | None:
    """True when a statement's subject is the question's (or a pronoun), False when it is another of the same
    kind (another person for a person), None otherwise: "Mary moved to the office" for "Where is the milk?" may
    say where the milk went with her, so it is not read either way."""
    if said == asked or said in PRONOUNS:
        return True
    same_kind = PERSONS if asked in PERSONS else THINGS if asked in THINGS else frozenset()
    return False if said in same_kind else None


def _label(word: str, vocab: Vocabulary) -> str | None:
    found = bare_labels(word, vocab)
    return found[0] if found and len(found) == 1 else None


def read_slot(q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """The label in slot `a`, for the question's subject `x` (and reference `r`, where the question has one)."""
    label = _label(s["a"], vocab)
    same = _same(s["x"], q["x"])
    reference = _label(s["r"], vocab) if "r" in s else None
    if label is None or same is None or ("r" in s and reference is None):
        return None  # "... before it was discarded": no place to hold against the question's
    if not same or ("r" in q and "r" in s and reference != _label(q["r"], vocab)):
        return Statement((), other_question=True)
    return Statement((label,))


def read_relation(kind: str, q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa4: "A is north of B" answers "what is north of B" (`kind` "of": A) and "what is B north of" ("is": B),
    and says the same as "B is south of A"."""
    first, second = _label(s["x"], vocab), _label(s["a"], vocab)
    if first is None or second is None:
        return None
    said = {(first, s["d"], second), (second, words.OPPOSITE[s["d"]], first)}
    ref = _label(q["r"], vocab)
    for a, d, b in said:
        if d == q["d"] and (b == ref if kind == "of" else a == ref):
            return Statement((a if kind == "of" else b,))
    return Statement((), other_question=True) if ref not in (first, second) else None


_GIVE_PARTS = ("g", "t", "v")
"""The parts of a give statement: giver, thing, receiver (the names of the regex groups)."""


def read_give(asked: str, q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa5: the part `asked` ("g", "t" or "v") of "G gave T to V", when the statement agrees with what the
    question tells."""
    if not (all(s[part] in ENTITIES for part in ("g", "v") if part in s) and _label(s["t"], vocab)):
        return None
    if asked not in s:
        return None  # "Jeff gave the football" does not say who received it
    for group in _GIVE_PARTS:
        told = q.get(group)
        if told and group in s and (_label(told, vocab) or told) != (_label(s[group], vocab) or s[group]):
            return Statement((), other_question=True)
    label = _label(s[asked], vocab)
    return Statement((label,)) if label else None


def read_polarity(q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa6, qa9, qa10: "X is (not) in P" answers "is X in P": yes or no; "X is in Q" (another place) is no."""
    same = _same(s["x"], q["x"])
    if same is None or s["a"] not in _PLACES:
        return None
    if not same:
        return Statement((), other_question=True)
    if s["a"] == q["a"]:
        return Statement(("no",) if s.get("neg") else ("yes",))
    return None if s.get("neg") else Statement(("no",))


def read_paired(q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa17, qa18: a statement relating the question's two things: yes when it says what the question asks,
    no when it says the opposite or denies it."""
    if {s["x"], s["a"]} != {q["x"], q["a"]}:
        return Statement((), other_question=True)
    relation = _RELATIONS[s["rel"]]
    asked = _RELATIONS[q["rel"]]
    if s["x"] != q["x"]:
        relation = _OPPOSITE_RELATION[relation]
    if relation not in (asked, _OPPOSITE_RELATION[asked]):
        return None
    agrees = relation == asked
    return Statement(("yes",) if agrees != bool(s.get("neg")) else ("no",))


def read_count(q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa7, qa8: what "X is carrying ..." says X carries."""
    same = _same(s["x"], q["x"])
    if same is None:
        return None
    if not same:
        return Statement((), other_question=True)
    if s.get("neg"):
        return Statement(("none",) if "none" in vocab.labels else ("nothing",))
    found = bare_labels(s["a"], vocab)
    return Statement(tuple(dict.fromkeys(found))) if found else None


def read_motive(q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa20 "why": the motive a statement gives, whatever place it names ("... went to the kitchen because he was
    thirsty")."""
    return read_slot({"x": q["x"]}, s, vocab)


def read_path(q: dict[str, str], s: dict[str, str], vocab: Vocabulary) -> Statement | None:
    """qa19: the two steps "go north, then west" names."""
    return Statement((words.DIRECTIONS[s["d"]], words.DIRECTIONS[s["d2"]]))


_PLACES = frozenset(normalize(p) for p in (*words.ROOMS, *words.PLACES, *words.WIDE_ROOMS, *words.WIDE_PLACES))
_RELATIONS = {
    **{normalize(p): normalize(p) for p in words.POSITIONS},
    "bigger than": "bigger",
    "larger than": "bigger",
    "smaller than": "smaller",
    "fit in": "smaller",
    "fits in": "smaller",
    "fit inside": "smaller",
    "fits inside": "smaller",
    "fit into": "smaller",
    "fits into": "smaller",
}
_OPPOSITE_RELATION = {
    **{normalize(a): normalize(b) for a, b in words.OPPOSITE_POSITION.items()},
    "bigger": "smaller",
    "smaller": "bigger",
}
SIZE = r"(?P<rel>bigger than|larger than|smaller than)"
FIT = r"(?P<rel>fits? (?:in|inside|into))"

"""An independent check of the bAbI simulator: every answer re-derived from the story text alone.

The simulator (`simulate.py`, `simulate_world.py`) computes answers from its world's state. This
module shares none of that logic: it reads the sentences back with regular expressions, keeps what
a careful reader would know after each one, and answers the question from that. Where the text
does not settle the answer (an unknown place, two possible answers) it raises `Unanswerable`
instead of guessing, so a simulator that asked such a question fails the check. The answer checks' label sets are not needed here.

It also summarises a list of samples (facts per question, questions per story, answer shares,
supporting-fact distance) so simulated and published files can be compared side by side.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lm_eval_longmem.babilong.babi import BabiSample
from lm_eval_longmem.babilong.words import (
    ANIMALS,
    COUNTS,
    DROPS,
    GIVES,
    MOTIVES,
    MOVES,
    OPPOSITE,
    POSITIONS,
    SHE,
    TAKES,
    TIMES,
)


class Unanswerable(ValueError):
    """The story's text does not determine one answer to the question."""


def _any(words) -> str:
    """A regex alternation of `words`, longest first ("went back" before "went")."""
    return "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))


_WORD = r"([A-Za-z]+)"
_TIME = _any(TIMES)
_MOVE = re.compile(rf"^(.+?) (?:{_any(move.removesuffix(' to') for move in MOVES)}) to the ([a-z]+)(?: ({_TIME}))?\.$")
_TAKE = re.compile(rf"^{_WORD} (?:{_any(TAKES)}) the {_WORD}(?: there)?\.$")
_DROP = re.compile(rf"^{_WORD} (?:{_any(DROPS)}) the {_WORD}(?: there)?\.$")
_GIVE = re.compile(rf"^{_WORD} (?:{_any(GIVES)}) the {_WORD} to {_WORD}\.$")
_IS_IN = re.compile(rf"^{_WORD} is in the {_WORD}\.$")
_NOT_IN = re.compile(rf"^{_WORD} is (?:not|no longer) in the {_WORD}\.$")
_EITHER = re.compile(rf"^{_WORD} is either in the {_WORD} or the {_WORD}\.$")
_RELATION = re.compile(rf"^The {_WORD} is (north|south|east|west) of the {_WORD}\.$")
_LINKER = re.compile(r"^(?:Then|After that|Afterwards|Following that) (he|she|they)$")
_TIME_FIRST = re.compile(rf"^({_any(time.capitalize() for time in TIMES)}) (.+)$")


def _parse_move(fact: str) -> tuple[str, str, str | None] | None:
    """(who, place, time of day or None) of a move sentence, in any of bAbI's word orders."""
    time = None
    front = _TIME_FIRST.match(fact)
    if front:
        time, fact = front[1].lower(), front[2]
    m = _MOVE.match(fact)
    if not m:
        return None
    return m[1], m[2], time or m[3]


def _need(value, what: str):
    if value is None:
        raise Unanswerable(what)
    return value


def _unknown(fact: str):
    raise Unanswerable(f"sentence not understood: {fact!r}")


# --- qa1, qa6, qa9, qa10, qa11, qa12, qa13: where people are -----------------------------------


def _places(facts: Sequence[str]) -> dict[str, frozenset[str] | tuple[str, str]]:
    """For each person, what the text says of their place now.

    A frozenset of possible places ({"kitchen"} known, {"kitchen", "park"} either-or), or
    ("not", place) after a negative statement.
    """
    known: dict = {}
    subjects: list[str] = []  # the people named by the previous sentence (for he/she/they)
    for fact in facts:
        if m := _IS_IN.match(fact):
            known[m[1]] = frozenset([m[2]])
            subjects = [m[1]]
        elif m := _NOT_IN.match(fact):
            known[m[1]] = ("not", m[2])
            subjects = [m[1]]
        elif m := _EITHER.match(fact):
            known[m[1]] = frozenset([m[2], m[3]])
            subjects = [m[1]]
        elif move := _parse_move(fact):
            who, place, _ = move
            if link := _LINKER.match(who):
                if (
                    not subjects
                    or (link[1] == "they") != (len(subjects) == 2)
                    or (link[1] != "they" and (subjects[0] in SHE) != (link[1] == "she"))
                ):
                    raise Unanswerable(f"{link[1]!r} refers to no one in {fact!r}")
                people = subjects
            else:
                people = who.split(" and ")
            for person in people:
                known[person] = frozenset([place])
            subjects = people
        else:
            _unknown(fact)
    return known


def _where_is(facts, question):
    m = re.fullmatch(r"Where is ([A-Za-z]+)\?", question)
    said = _need(_places(facts).get(m[1]), f"{m[1]} never placed")
    if isinstance(said, tuple) or len(said) != 1:
        raise Unanswerable(f"{m[1]}'s place is not certain")
    return next(iter(said))


def _is_in(facts, question):
    m = re.fullmatch(r"Is ([A-Za-z]+) in the ([a-z]+)\?", question)
    said = _need(_places(facts).get(m[1]), f"{m[1]} never placed")
    if isinstance(said, tuple):
        if said[1] == m[2]:
            return "no"
        raise Unanswerable(f"only known where {m[1]} is not")
    if m[2] not in said:
        return "no"
    return "yes" if len(said) == 1 else "maybe"


def _movement_only(facts):
    """qa6 stories also hold object sentences, which say nothing about places; leave them out."""
    return [f for f in facts if not (_TAKE.match(f) or _DROP.match(f) or _GIVE.match(f))]


# --- qa2, qa3, qa5, qa7, qa8: objects ----------------------------------------------------------


@dataclass
class _Objects:
    """What the text says about objects after a story: holders, carried lists, trails of places."""

    person_place: dict
    holder: dict
    lying: dict
    carried: dict
    trail: dict
    gives: list


def _read_objects(facts: Sequence[str]) -> _Objects:
    st = _Objects({}, {}, {}, {}, {}, [])
    for fact in facts:
        if move := _parse_move(fact):
            who, place, _ = move
            st.person_place[who] = place
            for thing in st.carried.get(who, []):
                trail = st.trail.setdefault(thing, [])
                if not trail or trail[-1] != place:
                    trail.append(place)
        elif m := _TAKE.match(fact):
            who, thing = m[1], m[2]
            if st.holder.get(thing) is not None:
                raise Unanswerable(f"{thing} taken while held: {fact!r}")
            st.holder[thing] = who
            st.carried.setdefault(who, []).append(thing)
            if who in st.person_place and not st.trail.get(thing):
                st.trail[thing] = [st.person_place[who]]
            st.lying.pop(thing, None)
        elif m := _DROP.match(fact):
            who, thing = m[1], m[2]
            if st.holder.get(thing) != who:
                raise Unanswerable(f"{who} drops {thing} not held: {fact!r}")
            st.holder[thing] = None
            st.carried[who].remove(thing)
            st.lying[thing] = st.person_place.get(who)
        elif m := _GIVE.match(fact):
            giver, thing, taker = m[1], m[2], m[3]
            if st.holder.get(thing) != giver:
                raise Unanswerable(f"{giver} gives {thing} not held: {fact!r}")
            st.holder[thing] = taker
            st.carried[giver].remove(thing)
            st.carried.setdefault(taker, []).append(thing)
            st.gives.append((giver, thing, taker))
        else:
            _unknown(fact)
    return st


def _where_is_object(facts, question):
    thing = re.fullmatch(r"Where is the ([a-z]+)\?", question)[1]
    st = _read_objects(facts)
    if st.holder.get(thing):
        return _need(st.person_place.get(st.holder[thing]), f"place of {st.holder[thing]} unknown")
    return _need(st.lying.get(thing), f"place of {thing} unknown")


def _where_was_object(facts, question):
    m = re.fullmatch(r"Where was the ([a-z]+) before the ([a-z]+)\?", question)
    trail = _read_objects(facts).trail.get(m[1], [])
    at = [k for k, place in enumerate(trail) if place == m[2]]
    if len(at) != 1 or at[0] == 0:
        raise Unanswerable(f"{m[1]} was in the {m[2]} {len(at)} times, or first")
    return trail[at[0] - 1]


def _give_question(facts, question):
    gives = _read_objects(facts).gives
    patterns = (
        (r"What did ([A-Za-z]+) give to ([A-Za-z]+)\?", lambda g, m: (g[0], g[2]) == (m[1], m[2]), 1),
        (r"Who gave the ([a-z]+) to ([A-Za-z]+)\?", lambda g, m: (g[1], g[2]) == (m[1], m[2]), 0),
        (r"Who did ([A-Za-z]+) give the ([a-z]+) to\?", lambda g, m: (g[0], g[1]) == (m[1], m[2]), 2),
        (r"Who gave the ([a-z]+)\?", lambda g, m: g[1] == m[1], 0),
        (r"Who received the ([a-z]+)\?", lambda g, m: g[1] == m[1], 2),
    )
    for pattern, fits, part in patterns:
        if m := re.fullmatch(pattern, question):
            answers = {g[part] for g in gives if fits(g, m)}
            if len(answers) != 1:
                raise Unanswerable(f"{len(answers)} answers to {question!r}")
            return answers.pop()
    raise Unanswerable(f"question not understood: {question!r}")


def _how_many(facts, question):
    who = re.fullmatch(r"How many objects is ([A-Za-z]+) carrying\?", question)[1]
    count = len(_read_objects(facts).carried.get(who, []))
    if count >= len(COUNTS):
        raise Unanswerable(f"{count} objects has no label")
    return COUNTS[count]


def _carrying(facts, question):
    who = re.fullmatch(r"What is ([A-Za-z]+) carrying\?", question)[1]
    return ",".join(_read_objects(facts).carried.get(who, [])) or "nothing"


# --- qa4, qa19: maps ---------------------------------------------------------------------------


def _neighbours(facts) -> dict[tuple[str, str], set[str]]:
    """(place, direction) -> the places the text puts in that direction, next to it."""
    near: dict[tuple[str, str], set[str]] = {}
    for fact in facts:
        m = _RELATION.match(fact) or _unknown(fact)
        near.setdefault((m[3], m[2]), set()).add(m[1])
        near.setdefault((m[1], OPPOSITE[m[2]]), set()).add(m[3])
    return near


def _one(found: set[str], what: str) -> str:
    if len(found) != 1:
        raise Unanswerable(f"{len(found)} answers for {what}")
    return next(iter(found))


def _relation(facts, question):
    near = _neighbours(facts)
    if m := re.fullmatch(r"What is (north|south|east|west) of the ([a-z]+)\?", question):
        return _one(near.get((m[2], m[1]), set()), question)
    m = re.fullmatch(r"What is the ([a-z]+) (north|south|east|west) of\?", question)
    return _one(near.get((m[1], OPPOSITE[m[2]]), set()), question)


def _path(facts, question):
    m = re.fullmatch(r"How do you go from the ([a-z]+) to the ([a-z]+)\?", question)
    near = _neighbours(facts)
    ways = {
        f"{first[0]},{second[0]}"
        for first in OPPOSITE
        for mid in near.get((m[1], first), ())
        for second in OPPOSITE
        for end in near.get((mid, second), ())
        if end == m[2]
    }
    return _one(ways, question)


# --- qa14: time -------------------------------------------------------------------------------


def _before(facts, question):
    m = re.fullmatch(r"Where was ([A-Za-z]+) before the ([a-z]+)\?", question)
    day: dict[str, str] = {}
    for fact in facts:
        move = _parse_move(fact) or _unknown(fact)
        if move[0] == m[1]:
            day[_need(move[2], f"no time in {fact!r}")] = move[1]
    slots = [k for k, time in enumerate(TIMES) if day.get(time) == m[2]]
    if len(slots) != 1 or slots[0] == 0:
        raise Unanswerable(f"{m[1]} in the {m[2]} {len(slots)} times, or first thing")
    return _need(day.get(TIMES[slots[0] - 1]), "the time before is not told")


# --- qa15, qa16: deduction and induction ------------------------------------------------------

_SINGULAR = {plural: kind for kind, plural in ANIMALS.items()}


def _afraid(facts, question):
    who = re.fullmatch(r"What is ([a-z]+) afraid of\?", question)[1]
    fears, kind = {}, {}
    for fact in facts:
        if m := re.fullmatch(r"([A-Z][a-z]+) are afraid of ([a-z]+)\.", fact):
            fears[_SINGULAR[m[1].lower()]] = _SINGULAR[m[2]]
        elif m := re.fullmatch(r"([A-Z][a-z]+) is an? ([a-z]+)\.", fact):
            kind[m[1].lower()] = m[2]
        else:
            _unknown(fact)
    return _need(fears.get(_need(kind.get(who), f"{who}'s kind")), "fear unknown")


def _colour(facts, question):
    who = re.fullmatch(r"What color is ([A-Za-z]+)\?", question)[1]
    kind, colour = {}, {}
    for fact in facts:
        if m := re.fullmatch(r"([A-Za-z]+) is an? ([a-z]+)\.", fact):
            kind[m[1]] = m[2]
        elif m := re.fullmatch(r"([A-Za-z]+) is ([a-z]+)\.", fact):
            colour[m[1]] = m[2]
        else:
            _unknown(fact)
    if who in colour:
        return colour[who]
    species = _need(kind.get(who), f"{who}'s kind")
    return _one({colour[n] for n, k in kind.items() if k == species and n in colour}, question)


# --- qa17, qa18: positions and sizes ----------------------------------------------------------

_SIDES = {"to the left of": ("x", -1), "to the right of": ("x", 1), "below": ("y", -1), "above": ("y", 1)}


def _sum(a: int | None, b: int | None) -> int | None:
    """Order along one axis of two steps: 0 same line, +1/-1 one side, None unknown."""
    if a is None or b is None:
        return None
    if a == 0 or b == 0 or a == b:
        return a or b
    return None  # one step each way: unordered


def _position(facts, question):
    """ "A is left of B" puts A in B's row, somewhere left; chain the statements from one shape."""
    sides = _any(POSITIONS)
    told = []
    for fact in facts:
        m = re.fullmatch(rf"The ([a-z ]+?) is ({sides}) the ([a-z ]+)\.", fact) or _unknown(fact)
        told.append((m[1], _SIDES[m[2]], m[3]))
    where = {told[0][2]: {"x": 0, "y": 0}}  # each shape's side of the first one, per axis
    for _ in told:
        for a, (axis, sign), b in told:
            for known, other, step in ((b, a, sign), (a, b, -sign)):
                if known in where and other not in where:
                    spot = dict(where[known])
                    spot[axis] = _sum(spot[axis], step)
                    where[other] = spot
    m = re.fullmatch(rf"Is the ([a-z ]+?) ({sides}) the ([a-z ]+)\?", question)
    first, second = _need(where.get(m[1]), m[1]), _need(where.get(m[3]), m[3])
    axis, sign = _SIDES[m[2]]
    second_negated = None if second[axis] is None else -second[axis]
    order = _need(_sum(first[axis], second_negated), f"{m[1]} and {m[3]} unordered along {axis}")
    return "yes" if order == sign else "no"


def _size(facts, question):
    """ "A fits inside B" and "B is bigger than A" both say A < B; answer by following the chain."""
    smaller: dict[str, set[str]] = {}  # thing -> things told or shown bigger than it
    for fact in facts:
        if m := re.fullmatch(r"The ([a-z ]+?) fits inside the ([a-z ]+)\.", fact):
            smaller.setdefault(m[1], set()).add(m[2])
        elif m := re.fullmatch(r"The ([a-z ]+?) is bigger than the ([a-z ]+)\.", fact):
            smaller.setdefault(m[2], set()).add(m[1])
        else:
            _unknown(fact)

    def below(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            for up in smaller.get(todo.pop(), ()):
                if up == b:
                    return True
                if up not in seen:
                    seen.add(up)
                    todo.append(up)
        return False

    if m := re.fullmatch(r"Is the ([a-z ]+?) bigger than the ([a-z ]+)\?", question):
        big, small = m[1], m[2]
    elif m := re.fullmatch(r"Does the ([a-z ]+?) fit in the ([a-z ]+)\?", question):
        small, big = m[1], m[2]
    else:
        raise Unanswerable(f"question not understood: {question!r}")
    if below(small, big):
        return "yes"
    if below(big, small):
        return "no"
    raise Unanswerable(f"sizes of {small} and {big} not ordered by the text")


# --- qa20: motivations ------------------------------------------------------------------------


def _motive(facts, question):
    feeling = {}
    for fact in facts:
        if m := re.fullmatch(r"([A-Za-z]+) is ([a-z]+)\.", fact):
            feeling[m[1].lower()] = m[2]
        elif not (_parse_move(fact) or _TAKE.match(fact)):
            _unknown(fact)
    if m := re.fullmatch(r"Where will ([a-z]+) go\?", question):
        return MOTIVES[_need(feeling.get(m[1]), f"{m[1]}'s need")][0]
    if m := re.fullmatch(r"Why did ([a-z]+) (?:go to the|get the) ([a-z]+)\?", question):
        need = _need(feeling.get(m[1]), f"{m[1]}'s need")
        if m[2] not in MOTIVES[need]:
            raise Unanswerable(f"{m[1]} is {need}, which {m[2]} does not meet")
        return need
    raise Unanswerable(f"question not understood: {question!r}")


_ANSWER = {
    "qa1": _where_is,
    "qa2": _where_is_object,
    "qa3": _where_was_object,
    "qa4": _relation,
    "qa5": _give_question,
    "qa6": lambda f, q: _is_in(_movement_only(f), q),
    "qa7": _how_many,
    "qa8": _carrying,
    "qa9": _is_in,
    "qa10": _is_in,
    "qa11": _where_is,
    "qa12": _where_is,
    "qa13": _where_is,
    "qa14": _before,
    "qa15": _afraid,
    "qa16": _colour,
    "qa17": _position,
    "qa18": _size,
    "qa19": _path,
    "qa20": _motive,
}


def answer_from_story(qa: str, facts: Sequence[str], question: str) -> str:
    """The answer to `question` that the statements `facts` of task `qa` settle.

    Raises `Unanswerable` when they settle none (or more than one), and for a sentence or
    question form the task does not use.
    """
    try:
        answer = _ANSWER[qa.lower()]
    except KeyError:
        raise ValueError(f"no validator for bAbI task {qa!r}; validated: {', '.join(_ANSWER)}") from None
    try:
        return answer(facts, question)
    except TypeError as error:  # a question pattern that did not match gives None[...]
        raise Unanswerable(f"question not understood: {question!r}") from error


# --- distributions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """The shape of a set of bAbI samples, for side-by-side comparison."""

    samples: int
    facts_mean: float
    """Statements before a question (its position in the story), averaged over questions."""
    story_facts_mean: float
    """Statements per story (up to its last question), averaged over stories."""
    questions_per_story: float
    question_gap_mean: float
    """Statements between one question and the previous one (or the story start)."""
    distance_mean: float
    """How many statements back the oldest supporting fact lies, averaged."""
    answers: dict[str, float]
    """Share of each answer."""


def summarize(samples: Sequence[BabiSample]) -> Summary:
    stories = Counter(s.story for s in samples)
    gaps: list[int] = []
    previous: dict[int, int] = {}  # story -> statements before its latest question so far
    for s in samples:
        gaps.append(len(s.facts) - previous.get(s.story, 0))
        previous[s.story] = len(s.facts)
    answers = Counter(s.answer for s in samples)
    return Summary(
        samples=len(samples),
        facts_mean=statistics.fmean(len(s.facts) for s in samples),
        story_facts_mean=statistics.fmean(previous.values()),
        questions_per_story=len(samples) / len(stories),
        question_gap_mean=statistics.fmean(gaps),
        distance_mean=statistics.fmean(len(s.facts) - min(s.supporting) for s in samples if s.supporting),
        answers={a: c / len(samples) for a, c in sorted(answers.items())},
    )


def answer_distance(a: Summary, b: Summary) -> float:
    """Total variation distance between two answer distributions (0 same, 1 disjoint)."""
    keys = set(a.answers) | set(b.answers)
    return sum(abs(a.answers.get(k, 0.0) - b.answers.get(k, 0.0)) for k in keys) / 2

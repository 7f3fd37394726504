"""The world of the bAbI simulator: who and what is where, the dice, the stories being told.

A task's world (`World` for the movement tasks qa1-qa3 and qa5-qa8: people in rooms, objects lying
or held, gives) acts at random and states each action as a bAbI sentence in a `Story`; the tasks
(`simulate.py`) ask their questions about its state. A world has hidden state the text does not
show (where someone stands before they are first seen to move, where an object lies before it is
first picked up); the tasks ask only what follows from the text.

Here too: the words each task draws from (`vocabulary`, `labels_for_simulated`), the seeded draws
(`Dice`, whose stream `SIMULATOR_VERSION` pins) and the recency of the asked-about facts
(`pick_recent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lm_eval_longmem.babilong.official_check import TASK_LABELS
from lm_eval_longmem.babilong.words import (
    DROPS,
    GIVERS,
    GIVES,
    MOVES,
    OBJECTS,
    PEOPLE,
    PLACES,
    ROOMS,
    TAKES,
    VISITORS,
    WIDE_NAMES,
    WIDE_OBJECTS,
    WIDE_PLACES,
    WIDE_ROOMS,
)

SIMULATOR_VERSION = 1
"""Bump when any task's output for a given seed changes (it is part of cache keys)."""

# --- vocabulary (the word lists live in words.py, shared with the verifier and the answer checks)

# How far back (in statements) the newest supporting fact of a question lies, as a distribution
# over 1..5: read off the published qa1 test file (bAbI never asks about older facts).
RECENCY = (0.43, 0.28, 0.16, 0.09, 0.04)
# Where every person's last move is a candidate, older ones are rarer than that (people move again);
# these weights give the files' ages back for qa1, qa6, qa9 and qa10.
MOVE_RECENCY = (0.3, 0.3, 0.25, 0.25, 0.25)


@dataclass(frozen=True)
class Vocabulary:
    """The words one task draws from."""

    people: tuple[str, ...]
    places: tuple[str, ...]
    objects: tuple[str, ...] = OBJECTS


def vocabulary(qa: str, wide_vocabulary: bool = False) -> Vocabulary:
    """The people, places and objects task `qa` uses (the published ones, or the widened lists)."""
    number = task_number(qa)
    people = {5: GIVERS, 10: VISITORS, 14: VISITORS}.get(number, PEOPLE)
    places = PLACES if number in (10, 14) else ROOMS
    if not wide_vocabulary:
        return Vocabulary(people, places)
    wide_places = WIDE_PLACES if number in (10, 14) else WIDE_ROOMS
    return Vocabulary(people + tuple(WIDE_NAMES), places + wide_places, OBJECTS + WIDE_OBJECTS)


def labels_for_simulated(qa: str, wide_vocabulary: bool = False) -> tuple[str, ...]:
    """The answer labels of simulated task `qa`: the published set, widened by the extra words.

    With `wide_vocabulary` the answers of tasks whose labels are names, places or objects (qa1-qa5,
    qa8, qa11-qa14) may be words outside the published set; both answer checks must then be given
    this set instead of `TASK_LABELS[qa]`, or a correct answer would not count as a label.
    """
    number = task_number(qa)
    labels = TASK_LABELS[f"qa{number}"]
    if not wide_vocabulary:
        return labels
    vocab = vocabulary(qa, True)
    extra: tuple[str, ...] = ()
    if number in (1, 2, 3, 4, 11, 12, 13, 14):
        extra = vocab.places
    elif number == 5:
        extra = vocab.people + vocab.objects
    elif number == 8:
        extra = vocab.objects
    return tuple(sorted(set(labels) | set(extra)))


def task_number(qa: str) -> int:
    text = qa.lower().removeprefix("qa")
    if not text.isdigit() or not 1 <= int(text) <= 20:
        raise ValueError(f"unknown bAbI task {qa!r}: use one of qa1..qa20")
    return int(text)


# --- randomness -------------------------------------------------------------------------------


class Dice:
    """Uniform draws from a local numpy generator, taken in blocks (one numpy call per 4096 draws).

    numpy's PCG64 stream is fixed for a given seed on every platform, so the stories are too.
    """

    def __init__(self, seed: int, task: int):
        self._rng = np.random.default_rng([seed, task, SIMULATOR_VERSION])
        self._block: list[float] = []

    def random(self) -> float:
        return (self._block or self._refill()).pop()

    # pick, chance and weighted read the block themselves: they run millions of times
    def below(self, n: int) -> int:
        return int((self._block or self._refill()).pop() * n)

    def pick(self, items: Sequence):
        return items[int((self._block or self._refill()).pop() * len(items))]

    def weighted(self, weights: Sequence[float]) -> int:
        """An index drawn with probability proportional to `weights`."""
        x = (self._block or self._refill()).pop() * sum(weights)
        for i, w in enumerate(weights):
            x -= w
            if x < 0:
                return i
        return len(weights) - 1

    def chance(self, p: float) -> bool:
        return (self._block or self._refill()).pop() < p

    def _refill(self) -> list[float]:
        self._block = self._rng.random(4096).tolist()
        return self._block

    def shuffled(self, items: Sequence) -> list:
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = int(self.random() * (i + 1))
            out[i], out[j] = out[j], out[i]
        return out

    def sample(self, items: Sequence, k: int) -> list:
        return self.shuffled(items)[:k]


# --- stories ----------------------------------------------------------------------------------


@dataclass
class Story:
    """Statements and the questions asked between them."""

    facts: list[str] = field(default_factory=list)
    questions: list[tuple[int, str, str, tuple[int, ...]]] = field(default_factory=list)
    """(number of statements before the question, question, answer, supporting indices)."""

    def say(self, text: str) -> int:
        self.facts.append(text)
        return len(self.facts) - 1

    def ask(self, question: str, answer: str, supporting: Sequence[int]) -> None:
        self.questions.append((len(self.facts), question, answer, tuple(supporting)))


def pick_recent(dice: Dice, n_facts: int, candidates: Sequence[tuple[int, object]], recency: Sequence[float] = RECENCY):
    """One of the `(key fact, payload)` candidates, the key fact's age drawn from `recency`.

    The key fact is the one that must be recent (usually the newest supporting fact). None when no
    candidate's key fact is at most `len(recency)` statements back.
    """
    by_age: dict[int, list] = {}
    for newest, payload in candidates:
        age = n_facts - newest
        if 1 <= age <= len(recency):
            by_age.setdefault(age, []).append(payload)
    if not by_age:
        return None
    ages = sorted(by_age)
    age = ages[dice.weighted([recency[a - 1] for a in ages])]
    return dice.pick(by_age[age])


# --- the movement world (qa1-qa3, qa5-qa8) ----------------------------------------------------


@dataclass(frozen=True)
class MoveSpec:
    """How often each action happens in one task's world."""

    questions: int = 5
    move: float = 1.0
    take: float = 0.0
    drop: float = 0.0
    give: float = 0.0
    take_there: float = 1.0
    """Share of "X got the milk there." among pick-ups (the rest drop "there")."""
    drop_there: float = 0.2
    start_together: bool = False
    """Everyone starts in one (unnamed) room, so gives can happen early, as in bAbI's qa5."""
    meet: float = 0.0
    """Chance that a move goes to a room where someone else is (so gives can follow)."""
    stay: float = 0.0
    """Chance that the previous actor acts again (bAbI's stories follow one person for a while)."""
    recency: tuple[float, ...] = RECENCY
    """Weights of asking about facts 1..5 statements back (tuned so the asked ages match the files)."""
    max_facts: int = 400
    """A story longer than this is thrown away and redrawn (a safety net, rarely reached)."""


class World:
    """People in rooms, objects lying in rooms or held, and what the text has revealed so far."""

    def __init__(self, dice: Dice, vocab: Vocabulary, story: Story, spec: MoveSpec):
        self.dice, self.vocab, self.story, self.spec = dice, vocab, story, spec
        start = dice.pick(vocab.places)  # true places, hidden until a move
        self.where = {p: start if spec.start_together else dice.pick(vocab.places) for p in vocab.people}
        self.last_move: dict[str, int] = {}  # person -> fact that last stated where they went
        self.lies = {o: dice.pick(vocab.places) for o in vocab.objects}  # true place of a free object
        self.holder: dict[str, str | None] = {o: None for o in vocab.objects}
        self.holding: dict[str, list[str]] = {p: [] for p in vocab.people}  # in order of getting
        self.handled: dict[str, list[int]] = {p: [] for p in vocab.people}  # facts of p's handling
        self.last_touch: dict[str, int] = {}  # object -> latest fact that picked it up/dropped/gave it
        self.dropped_at: dict[str, tuple[int, int | None]] = {}  # object -> (drop fact, dropper's move)
        # every place an object has been, in order, with the fact that showed it there (None: hidden)
        self.history: dict[str, list[tuple[str, int | None]]] = {o: [(self.lies[o], None)] for o in vocab.objects}
        self.gives: list[tuple[int, str, str, str]] = []  # (fact, giver, object, receiver)
        self.actor: str | None = None  # who acted last
        self._weights = (spec.move, spec.take, spec.drop, spec.give)
        self._actions = (self._move, self._take, self._drop, self._give)

    def recent(self, candidates):
        """One `(key fact, payload)` candidate picked by the task's recency weights (see `pick_recent`)."""
        return pick_recent(self.dice, len(self.story.facts), candidates, self.spec.recency)

    def act(self, spec: MoveSpec) -> None:
        """One action; with chance `spec.stay` by the previous actor when they can do it."""
        actor = self.actor if spec.stay and self.actor is not None and self.dice.chance(spec.stay) else None
        while True:
            action = self._actions[self.dice.weighted(self._weights)]
            if action(spec, actor):
                return
            actor = None  # the previous actor cannot do that: anyone may act

    def _move(self, spec: MoveSpec, actor: str | None) -> bool:
        p = actor or self.dice.pick(self.vocab.people)
        here = self.where[p]
        others = [self.where[q] for q in self.vocab.people if self.where[q] != here] if spec.meet else None
        if others and self.dice.chance(spec.meet):
            to = self.dice.pick(others)
        else:
            to = here
            while to == here:  # uniform over the other rooms
                to = self.dice.pick(self.vocab.places)
        i = self.story.say(f"{p} {self.dice.pick(MOVES)} the {to}.")
        self.where[p], self.last_move[p], self.actor = to, i, p
        for o in self.holding[p]:
            self.history[o].append((to, i))
        return True

    def _take(self, spec: MoveSpec, actor: str | None) -> bool:
        options = [
            (p, o)
            for p in ((actor,) if actor else self.vocab.people)
            for o in self.vocab.objects
            if self.holder[o] is None and self.lies[o] == self.where[p]
        ]
        if not options:
            return False
        p, o = self.dice.pick(options)
        there = " there" if self.dice.chance(spec.take_there) else ""
        i = self.story.say(f"{p} {self.dice.pick(TAKES)} the {o}{there}.")
        self.holder[o], self.actor = p, p
        self.holding[p].append(o)
        self.handled[p].append(i)
        self.last_touch[o] = i
        place, shown = self.history[o][-1]
        if shown is None and p in self.last_move:  # the taker's known place reveals the object's
            self.history[o][-1] = (place, self.last_move[p])
        return True

    def _drop(self, spec: MoveSpec, actor: str | None) -> bool:
        options = [(p, o) for o, p in self.holder.items() if p is not None and actor in (None, p)]
        if not options:
            return False
        p, o = self.dice.pick(options)
        there = " there" if self.dice.chance(spec.drop_there) else ""
        i = self.story.say(f"{p} {self.dice.pick(DROPS)} the {o}{there}.")
        self.holder[o], self.actor = None, p
        self.holding[p].remove(o)
        self.lies[o] = self.where[p]
        self.handled[p].append(i)
        self.last_touch[o] = i
        self.dropped_at[o] = (i, self.last_move.get(p))
        return True

    def _give(self, spec: MoveSpec, actor: str | None) -> bool:
        options = [
            (p, o, q)
            for o, p in self.holder.items()
            if p is not None and actor in (None, p)
            for q in self.vocab.people
            if q != p and self.where[q] == self.where[p]
        ]
        if not options:
            return False
        p, o, q = self.dice.pick(options)
        i = self.story.say(f"{p} {self.dice.pick(GIVES)} the {o} to {q}.")
        self.holder[o], self.actor = q, p
        self.holding[p].remove(o)
        self.holding[q].append(o)
        self.handled[p].append(i)
        self.handled[q].append(i)
        self.last_touch[o] = i
        self.gives.append((i, p, o, q))
        return True

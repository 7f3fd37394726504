"""A seeded bAbI world simulator: new stories and questions for qa1..qa20 in bAbI's own form.

BABILong hides bAbI facts in long text. The published bAbI files are public (a model may have seen
them) and cannot ship with this package, so this module writes fresh stories instead. Each task
keeps a small world (`simulate_world.py`: where people are, who holds what, who gave what to whom,
...), acts in it at random, states each action as a bAbI sentence and asks the task's question
about the world's state. Answers and supporting facts come from that state, never from the
sentences; the independent re-derivation from the text alone is `verify.answer_from_story`.

By default a task uses the published files' people, places, objects, verbs and sentence forms,
their number of questions per story, and their recency of the asked-about facts (bAbI asks about
facts at most five statements back), so stories look and weigh like the published test sets.
`wide_vocabulary=True` draws names, places and objects from larger lists; answers may then lie
outside the published label set, so both answer checks need
`simulate_world.labels_for_simulated(qa, True)`.

A world has hidden state the text does not show (where someone stands before they are first seen
to move, where an object lies before it is first picked up). A question is asked only when its
answer follows from the text; that rule is what lets the validator agree on every sample. This
module holds the tasks (their questions, and the small worlds of qa4 and qa9-qa20) and the public
entry points `simulate` and `write_babi_file`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from lm_eval_longmem.babilong.babi import BabiSample
from lm_eval_longmem.babilong.simulate_world import (
    MOVE_RECENCY,
    Dice,
    MoveSpec,
    Story,
    Vocabulary,
    World,
    pick_recent,
    task_number,
    vocabulary,
)
from lm_eval_longmem.babilong.verify import answer_from_story
from lm_eval_longmem.babilong.words import (
    AGENTS,
    ANIMAL_NAMES,
    ANIMALS,
    COLOURS,
    CONTAINERS,
    COUNTS,
    DIRECTIONS,
    LINKERS,
    MOTIVES,
    MOVES,
    OPPOSITE,
    PET_NAMES,
    PRONOUN,
    SHAPES,
    SPECIES,
    TAKES,
    TIMES,
)
from lm_eval_longmem.common.cache import atomic_write

DONE_TASKS = tuple(f"qa{i}" for i in range(1, 21))
"""Tasks the simulator implements: all twenty."""


# --- the movement tasks (qa1-qa3, qa5-qa8) ----------------------------------------------------


def _movement_story(
    dice: Dice, vocab: Vocabulary, spec: MoveSpec, ask: Callable[[World, Dice], tuple[str, str, tuple[int, ...]] | None]
) -> Story:
    """Two actions, then a question if one can be asked; until the task's number of questions."""
    while True:
        story = Story()
        world = World(dice, vocab, story, spec)
        while len(story.questions) < spec.questions and len(story.facts) < spec.max_facts:
            world.act(spec)
            world.act(spec)
            question = ask(world, dice)
            if question is not None:
                story.ask(*question)
        if len(story.questions) == spec.questions:
            return story


def _ask_qa1(world: World, dice: Dice):
    p = world.recent([(i, p) for p, i in world.last_move.items()])
    if p is None:
        return None
    return f"Where is {p}?", world.where[p], (world.last_move[p],)


def _ask_qa2(world: World, dice: Dice):
    candidates = []
    for o in world.vocab.objects:
        p = world.holder[o]
        if p is not None and p in world.last_move:  # held by someone whose place the text states
            support = (world.last_touch[o], world.last_move[p])
            candidates.append((max(support), (o, world.where[p], support)))
        elif p is None and o in world.dropped_at and (move := world.dropped_at[o][1]) is not None:
            drop = world.dropped_at[o][0]
            candidates.append((max(drop, move), (o, world.lies[o], (drop, move))))
    chosen = world.recent(candidates)
    if chosen is None:
        return None
    o, place, support = chosen
    return f"Where is the {o}?", place, support


def _ask_qa3(world: World, dice: Dice):
    """Where an object was before a room it was carried to once.

    Asked only when both the object's latest handling and its move into that room are recent,
    and mostly about objects put down; that makes questions rare and stories long, as in bAbI's qa3.
    """
    candidates = []
    oldest = len(world.story.facts) - len(world.spec.recency)  # earliest fact that counts as recent
    for o, touched in world.last_touch.items():
        if touched < oldest:
            continue  # too old to ask about
        if world.holder[o] is not None and not dice.chance(0.2):
            continue  # mostly about objects put down, as bAbI (79 % of its qa3 questions)
        history = world.history[o]
        places = None
        for k in range(len(history) - 1, 0, -1):  # newest first; moves before `oldest` cannot count
            here, shown_here = history[k]
            if shown_here is None or shown_here < oldest:
                break
            before, shown_before = history[k - 1]
            places = places or [place for place, _ in history]
            if shown_before is not None and places.count(here) == 1:
                support = (touched, shown_here, shown_before)
                candidates.append((min(touched, shown_here), (o, here, before, support)))
    chosen = world.recent(candidates)
    if chosen is None:
        return None
    o, here, before, support = chosen
    return f"Where was the {o} before the {here}?", before, support


# qa5 question forms and how often each is tried. An ambiguous question is passed over (more often
# "Who gave the milk?" than "What did Fred give to Jeff?"), and these weights bring the forms
# asked close to their shares in the published file.
_QA5_FORMS = (
    (0.2, lambda g, o, r: f"What did {g} give to {r}?", lambda e: (e[1], e[3]), 2),
    (0.32, lambda g, o, r: f"Who gave the {o}?", lambda e: (e[2],), 1),
    (0.15, lambda g, o, r: f"Who did {g} give the {o} to?", lambda e: (e[1], e[2]), 3),
    (0.15, lambda g, o, r: f"Who gave the {o} to {r}?", lambda e: (e[2], e[3]), 1),
    (0.3, lambda g, o, r: f"Who received the {o}?", lambda e: (e[2],), 3),
)


def _ask_qa5(world: World, dice: Dice):
    """A question about one recent give; asked only if every matching give has the same answer."""
    event = world.recent([(e[0], e) for e in world.gives])
    if event is None:
        return None
    forms = list(_QA5_FORMS)
    while forms:
        form = forms.pop(dice.weighted([f[0] for f in forms]))
        _, text, key, answer_at = form
        matching = [e for e in world.gives if key(e) == key(event)]
        if len({e[answer_at] for e in matching}) == 1:
            return text(event[1], event[2], event[3]), event[answer_at], (matching[-1][0],)
    return None


def _ask_qa6(world: World, dice: Dice):
    p = world.recent([(i, p) for p, i in world.last_move.items()])
    if p is None:
        return None
    if dice.chance(0.5):
        return f"Is {p} in the {world.where[p]}?", "yes", (world.last_move[p],)
    other = dice.pick([r for r in world.vocab.places if r != world.where[p]])
    return f"Is {p} in the {other}?", "no", (world.last_move[p],)


def _holding_candidates(world: World):
    return [(world.handled[p][-1], p) for p in world.vocab.people if world.handled[p]]


def _ask_qa7(world: World, dice: Dice):
    p = world.recent(_holding_candidates(world))
    if p is None or len(world.holding[p]) >= len(COUNTS):
        return None
    return f"How many objects is {p} carrying?", COUNTS[len(world.holding[p])], tuple(world.handled[p])


def _ask_qa8(world: World, dice: Dice):
    p = world.recent(_holding_candidates(world))
    if p is None:
        return None
    answer = ",".join(world.holding[p]) or "nothing"
    return f"What is {p} carrying?", answer, tuple(world.handled[p])


# Action mixes tuned so that facts per question, ages of the asked facts and answer shares come
# close to the published test files (benchmarks/babi_simulator.py prints them side by side).
_MOVEMENT_TASKS = {
    1: (MoveSpec(recency=MOVE_RECENCY), _ask_qa1),
    2: (MoveSpec(move=0.78, take=0.12, drop=0.1, drop_there=0.18), _ask_qa2),
    3: (MoveSpec(move=0.6, take=0.2, drop=0.2, take_there=0.2, drop_there=0.2, stay=0.85), _ask_qa3),
    5: (
        MoveSpec(
            move=0.4,
            take=0.18,
            drop=0.12,
            give=0.3,
            start_together=True,
            meet=0.5,
            recency=(0.6, 0.2, 0.12, 0.05, 0.03),
        ),
        _ask_qa5,
    ),
    6: (MoveSpec(move=0.66, take=0.22, drop=0.12, recency=MOVE_RECENCY), _ask_qa6),
    7: (MoveSpec(move=0.4, take=0.2, drop=0.2, give=0.2, meet=0.5), _ask_qa7),
    8: (MoveSpec(move=0.6, take=0.25, drop=0.15), _ask_qa8),
}


# --- the other worlds -------------------------------------------------------------------------


def _story_qa4(dice: Dice, vocab: Vocabulary) -> Story:
    """Three places in a row along one axis; two statements, one question about a neighbour."""
    story = Story()
    forward, backward = dice.pick((("east", "west"), ("north", "south")))
    row = dice.sample(vocab.places, 3)  # row[i+1] is `forward` of row[i]
    pairs = dice.shuffled([(row[1], row[0]), (row[2], row[1])])  # (a, b): a is `forward` of b
    for a, b in pairs:
        if dice.chance(0.5):
            story.say(f"The {a} is {forward} of the {b}.")
        else:
            story.say(f"The {b} is {backward} of the {a}.")
    i = dice.below(2)
    a, b = pairs[i]
    # the fact says a is `forward` of b, and so b is `backward` of a; ask for either end
    direction, here, there = dice.pick(((forward, b, a), (backward, a, b)))
    if dice.chance(0.5):
        story.ask(f"What is {direction} of the {here}?", there, (i,))
    else:  # `here` is the opposite way of `there`
        opposite = backward if direction == forward else forward
        story.ask(f"What is the {here} {opposite} of?", there, (i,))
    return story


def _story_qa9(dice: Dice, vocab: Vocabulary) -> Story:
    """Plain moves and "is (not / no longer) in" statements; yes/no about someone's last statement."""
    story = Story()
    where = {p: dice.pick(vocab.places) for p in vocab.people}
    said: dict[str, tuple[int, str, bool]] = {}  # person -> (fact, place, is there)
    while len(story.questions) < 5:
        for _ in range(2):
            p = dice.pick(vocab.people)
            kind = dice.weighted((0.5, 0.25, 0.25))
            if kind == 0:
                where[p] = dice.pick([r for r in vocab.places if r != where[p]])
                said[p] = (story.say(f"{p} {dice.pick(MOVES)} the {where[p]}."), where[p], True)
            elif kind == 1:
                where[p] = dice.pick(vocab.places)
                said[p] = (story.say(f"{p} is in the {where[p]}."), where[p], True)
            else:
                where[p] = dice.pick(vocab.places)
                away = dice.pick([r for r in vocab.places if r != where[p]])
                form = dice.pick(("is not in", "is no longer in"))
                said[p] = (story.say(f"{p} {form} the {away}."), away, False)
        p = pick_recent(dice, len(story.facts), [(s[0], p) for p, s in said.items()], MOVE_RECENCY)
        fact, place, there = said[p]
        if there and dice.chance(0.55):
            place = dice.pick([r for r in vocab.places if r != place])
            there = False
        story.ask(f"Is {p} in the {place}?", "yes" if there else "no", (fact,))
    return story


def _story_qa10(dice: Dice, vocab: Vocabulary) -> Story:
    """Moves, "is in", "is either in X or Y"; yes/no/maybe about someone's last statement."""
    story = Story()
    where = {p: dice.pick(vocab.places) for p in vocab.people}
    said: dict[str, tuple[int, tuple[str, ...]]] = {}  # person -> (fact, places it allows)
    while len(story.questions) < 5:
        for _ in range(2):
            p = dice.pick(vocab.people)
            kind = dice.weighted((0.5, 0.25, 0.25))
            if kind == 0:
                where[p] = dice.pick([r for r in vocab.places if r != where[p]])
                said[p] = (story.say(f"{p} {dice.pick(MOVES)} the {where[p]}."), (where[p],))
            elif kind == 1:
                where[p] = dice.pick(vocab.places)
                said[p] = (story.say(f"{p} is in the {where[p]}."), (where[p],))
            else:
                where[p] = dice.pick(vocab.places)
                pair = dice.shuffled([where[p], dice.pick([r for r in vocab.places if r != where[p]])])
                said[p] = (story.say(f"{p} is either in the {pair[0]} or the {pair[1]}."), tuple(pair))
        p = pick_recent(dice, len(story.facts), [(s[0], p) for p, s in said.items()], MOVE_RECENCY)
        fact, allowed = said[p]
        if dice.chance(0.56):
            place, answer = dice.pick(allowed), ("yes" if len(allowed) == 1 else "maybe")
        else:
            place, answer = dice.pick([r for r in vocab.places if r not in allowed]), "no"
        story.ask(f"Is {p} in the {place}?", answer, (fact,))
    return story


def _story_pairs(dice: Dice, vocab: Vocabulary, together: bool) -> Story:
    """qa11 (one person, then "he"/"she") and qa13 (two people, then "they"): two moves per pair."""
    story = Story()
    where = {p: dice.pick(vocab.places) for p in vocab.people}
    said: dict[str, tuple[int, int]] = {}  # person -> (naming fact, pronoun fact) of their last pair
    while len(story.questions) < 5:
        group = dice.sample(vocab.people, 2 if together else 1)
        for step in range(2):
            to = dice.pick([r for r in vocab.places if r != where[group[0]]])
            verb = dice.pick(MOVES)
            if step == 0:
                first = story.say(f"{' and '.join(group)} {verb} the {to}.")
            else:
                pronoun = "they" if together else PRONOUN[group[0]]
                second = story.say(f"{dice.pick(LINKERS)} {pronoun} {verb} the {to}.")
            for p in group:
                where[p] = to
        for p in group:
            said[p] = (first, second)
        recency = (0.93, 0.0, 0.07) if together else (0.68, 0.0, 0.25, 0.0, 0.07)
        p = pick_recent(dice, len(story.facts), [(s[1], p) for p, s in said.items()], recency)
        story.ask(f"Where is {p}?", where[p], said[p])
    return story


def _story_qa12(dice: Dice, vocab: Vocabulary) -> Story:
    """Two people move together; where is one of them."""
    story = Story()
    where: dict[str, str] = {}
    said: dict[str, int] = {}
    while len(story.questions) < 5:
        for _ in range(2):
            group = dice.sample(vocab.people, 2)
            to = dice.pick([r for r in vocab.places if r not in (where.get(group[0]), where.get(group[1]))])
            i = story.say(f"{group[0]} and {group[1]} {dice.pick(MOVES)} the {to}.")
            for p in group:
                where[p], said[p] = to, i
        p = pick_recent(dice, len(story.facts), [(i, p) for p, i in said.items()], (0.76, 0.2, 0.04))
        story.ask(f"Where is {p}?", where[p], (said[p],))
    return story


def _story_qa14(dice: Dice, vocab: Vocabulary) -> Story:
    """Each person's day (yesterday, morning, afternoon, evening) told in a random order; where before X."""
    while True:
        story = Story()
        days = {p: [dice.pick(vocab.places)] for p in vocab.people}
        for route in days.values():
            while len(route) < len(TIMES):
                route.append(dice.pick([r for r in vocab.places if r != route[-1]]))
        untold = [(p, t) for p in vocab.people for t in range(len(TIMES))]
        shown: dict[tuple[str, int], int] = {}  # (person, time) -> fact
        while len(story.questions) < 5 and len(untold) >= 2:
            for _ in range(2):
                # bAbI tells a day's times next to each other more often than chance would
                near = [k for k, (p, t) in enumerate(untold) if (p, t - 1) in shown or (p, t + 1) in shown]
                p, t = untold.pop(dice.pick(near) if near and dice.chance(0.5) else dice.below(len(untold)))
                when, place, verb = TIMES[t], days[p][t], dice.pick(MOVES)
                if dice.chance(0.5):
                    text = f"{when[0].upper()}{when[1:]} {p} {verb} the {place}."
                else:
                    text = f"{p} {verb} the {place} {when}."
                shown[(p, t)] = story.say(text)
            # "before the X" needs X once in the whole day, and the time before it told
            candidates = [
                (max(i, shown[(p, t - 1)]), (p, t))
                for (p, t), i in shown.items()
                if (p, t - 1) in shown and days[p].count(days[p][t]) == 1
            ]
            chosen = pick_recent(dice, len(story.facts), candidates, (0.4, 0.25, 0.2, 0.1, 0.05))
            if chosen is not None:
                p, t = chosen
                story.ask(f"Where was {p} before the {days[p][t]}?", days[p][t - 1], (shown[(p, t)], shown[(p, t - 1)]))
        if len(story.questions) == 5:
            return story


def _story_qa15(dice: Dice, vocab: Vocabulary) -> Story:
    """Each kind of animal fears one other kind; four named animals; what does one of them fear."""
    story = Story()
    names = ANIMAL_NAMES
    fears = {kind: dice.pick([k for k in ANIMALS if k != kind]) for kind in ANIMALS}
    kind_of = {name: dice.pick(list(ANIMALS)) for name in names}
    lines = [("fear", kind, ANIMALS[kind].capitalize()) for kind in ANIMALS] + [("is", name, None) for name in names]
    fact_of: dict[str, int] = {}
    for what, who, plural in dice.shuffled(lines):
        if what == "fear":
            fact_of[who] = story.say(f"{plural} are afraid of {ANIMALS[fears[who]]}.")
        else:
            fact_of[who] = story.say(f"{who} is a {kind_of[who]}.")
    for name in dice.shuffled(names):
        kind = kind_of[name]
        story.ask(f"What is {name.lower()} afraid of?", fears[kind], (fact_of[name], fact_of[kind]))
    return story


def _interleave(dice: Dice, sequences: Sequence[Sequence]) -> list:
    """The items of all `sequences` in one random order that keeps each sequence's own order."""
    left = [list(seq) for seq in sequences if seq]
    out = []
    while left:
        seq = left[dice.weighted([len(s) for s in left])]
        out.append(seq.pop(0))
        if not seq:
            left.remove(seq)
    return out


def _story_qa16(dice: Dice, vocab: Vocabulary) -> Story:
    """Five animals: a species and (but for one) a colour each; the unknown colour is the species' colour."""
    story = Story()
    names = dice.shuffled(PET_NAMES)
    asked, twin = names[0], names[1]
    species = dice.pick(SPECIES)
    kind = {asked: species, twin: species}
    colour = {twin: dice.pick(COLOURS)}
    for name in names[2:]:  # whoever shares the asked one's species shares its colour too
        kind[name] = dice.pick(SPECIES)
        colour[name] = colour[twin] if kind[name] == species else dice.pick(COLOURS)
    told = _interleave(dice, [[(n, "kind"), (n, "colour")] if n != asked else [(n, "kind")] for n in names])
    fact_of = {}
    for name, what in told:
        text = f"{name} is a {kind[name]}." if what == "kind" else f"{name} is {colour[name]}."
        fact_of[(name, what)] = story.say(text)
    story.ask(
        f"What color is {asked}?",
        colour[twin],
        (fact_of[(asked, "kind")], fact_of[(twin, "kind")], fact_of[(twin, "colour")]),
    )
    return story


_STEPS = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}


def _story_qa19(dice: Dice, vocab: Vocabulary) -> Story:
    """Six places on a grid, five adjacencies told; the one two-step way between two of them."""
    while True:
        places = dice.shuffled(vocab.places)[:6]
        grid = {(0, 0): places[0]}
        links: list[tuple[str, str, str]] = []  # (a, direction, b): a is `direction` of b
        for place in places[1:]:
            from_cell = dice.pick(sorted(grid))
            direction = dice.pick(tuple(_STEPS))
            dx, dy = _STEPS[direction]
            cell = (from_cell[0] + dx, from_cell[1] + dy)
            if cell in grid:
                break
            grid[cell] = place
            links.append((place, direction, grid[from_cell]))
        if len(links) < 5:
            continue
        story = Story()
        steps: dict[str, list[tuple[str, str, int]]] = {}  # from -> [(direction, to, fact)]
        for a, direction, b in dice.shuffled(links):
            if dice.chance(0.5):
                fact = story.say(f"The {a} is {direction} of the {b}.")
            else:
                fact = story.say(f"The {b} is {OPPOSITE[direction]} of the {a}.")
            steps.setdefault(b, []).append((direction, a, fact))
            steps.setdefault(a, []).append((OPPOSITE[direction], b, fact))
        routes: dict[tuple[str, str], list] = {}
        for start, first_steps in steps.items():
            for s1, mid, f1 in first_steps:
                for s2, end, f2 in steps[mid]:
                    if end != start:
                        routes.setdefault((start, end), []).append((s1, s2, f1, f2))
        unique = [(ends, r[0]) for ends, r in sorted(routes.items()) if len(r) == 1]
        if not unique:
            continue
        (start, end), (s1, s2, f1, f2) = dice.pick(unique)
        story.ask(f"How do you go from the {start} to the {end}?", f"{DIRECTIONS[s1]},{DIRECTIONS[s2]}", (f1, f2))
        return story


# relation -> (axis, sign): "A is to the left of B" puts A in B's row, at a smaller x
_PLACEMENT = {"to the left of": (0, -1), "to the right of": (0, 1), "below": (1, -1), "above": (1, 1)}


def _story_qa17(dice: Dice, vocab: Vocabulary) -> Story:
    """Three shapes, two told side by side with a shared middle one; yes/no on the outer two."""
    story = Story()
    while True:
        relations = [dice.pick(tuple(_PLACEMENT)), dice.pick(tuple(_PLACEMENT))]
        first, second = (_PLACEMENT[r] for r in relations)
        # same axis, opposite sides (left of B, B left of... reversed) leaves the outer two unordered
        if first[0] != second[0] or first[1] == second[1]:
            break
    outer_a, middle, outer_c = dice.sample(SHAPES, 3)
    # outer_a is relations[0] of middle; middle is relations[1] of outer_c
    offset = [0, 0]  # outer_a's position minus outer_c's, in sign per axis
    offset[first[0]] += first[1]
    offset[second[0]] += second[1]
    facts = [f"The {outer_a} is {relations[0]} the {middle}.", f"The {middle} is {relations[1]} the {outer_c}."]
    order = dice.shuffled((0, 1))
    for k in order:
        story.say(facts[k])
    questions: dict[str, list[str]] = {"yes": [], "no": []}
    for relation, (axis, sign) in _PLACEMENT.items():
        for a, c, along in ((outer_a, outer_c, offset[axis]), (outer_c, outer_a, -offset[axis])):
            questions["yes" if along * sign > 0 else "no"].append(f"Is the {a} {relation} the {c}?")
    support = tuple(order.index(k) for k in (0, 1))
    for _ in range(8):
        answer = dice.pick(("yes", "no"))
        story.ask(dice.pick(questions[answer]), answer, support)
    return story


def _story_qa18(dice: Dice, vocab: Vocabulary) -> Story:
    """Six things of hidden sizes, told pairwise five at a time; yes/no on pairs two steps apart."""
    while True:
        story = Story()
        # as in bAbI: the chocolate is smallest, then the box of chocolates, then the four containers
        containers = dice.shuffled(("box", "container", "chest", "suitcase"))
        size = {thing: k for k, thing in enumerate(("chocolate", "box of chocolates", *containers))}
        told: dict[tuple[str, str], int] = {}  # (smaller, bigger) -> fact
        pairs = [(a, b) for a in CONTAINERS for b in CONTAINERS if size[a] < size[b]]
        while len(told) + 5 <= len(pairs):
            for small, big in dice.sample([p for p in pairs if p not in told], 5):
                if dice.chance(0.5):
                    told[(small, big)] = story.say(f"The {small} fits inside the {big}.")
                else:
                    told[(small, big)] = story.say(f"The {big} is bigger than the {small}.")
            chains = [
                (small, big, (told[(small, mid)], told[(mid, big)]))
                for (small, mid) in told
                for (mid2, big) in told
                if mid2 == mid and (small, big) not in told
            ]
            if chains:
                for _ in range(5):
                    small, big, support = dice.pick(chains)
                    form = dice.below(4)
                    if form == 0:
                        story.ask(f"Is the {big} bigger than the {small}?", "yes", support[::-1])
                    elif form == 1:
                        story.ask(f"Is the {small} bigger than the {big}?", "no", support)
                    elif form == 2:
                        story.ask(f"Does the {small} fit in the {big}?", "yes", support)
                    else:
                        story.ask(f"Does the {big} fit in the {small}?", "no", support[::-1])
                return story


def _story_qa20(dice: Dice, vocab: Vocabulary) -> Story:
    """Four people, each with a need, go where it is met and get what meets it; where/why questions."""
    story = Story()
    names = AGENTS
    plans = {}
    for name in names:
        motive = dice.pick(tuple(MOTIVES))
        steps = ["feel", "go"] + (["get"] if dice.chance(0.85) else [])
        plans[name] = (motive, steps)
    told = {n: 0 for n in names}
    motive_fact: dict[str, int] = {}
    while any(told[n] < len(plans[n][1]) for n in names):
        name = dice.pick([n for n in names if told[n] < len(plans[n][1])])
        motive, steps = plans[name]
        step = steps[told[name]]
        told[name] += 1
        place, thing = MOTIVES[motive]
        who = name.lower()
        if step == "feel":
            motive_fact[name] = story.say(f"{name} is {motive}.")
            story.ask(f"Where will {who} go?", place, (motive_fact[name],))
        elif step == "go":
            story.say(f"{name} {dice.pick(MOVES)} the {place}.")
            story.ask(f"Why did {who} go to the {place}?", motive, (motive_fact[name],))
        else:
            story.say(f"{name} {dice.pick(TAKES)} the {thing} there.")
            story.ask(f"Why did {who} get the {thing}?", motive, (motive_fact[name],))
    return story


_OTHER_TASKS: dict[int, Callable[[Dice, Vocabulary], Story]] = {
    4: _story_qa4,
    9: _story_qa9,
    10: _story_qa10,
    11: lambda dice, vocab: _story_pairs(dice, vocab, together=False),
    12: _story_qa12,
    13: lambda dice, vocab: _story_pairs(dice, vocab, together=True),
    14: _story_qa14,
    15: _story_qa15,
    16: _story_qa16,
    17: _story_qa17,
    18: _story_qa18,
    19: _story_qa19,
    20: _story_qa20,
}


# --- public API -------------------------------------------------------------------------------


def simulate(qa: str, n: int, seed: int, *, wide_vocabulary: bool = False, check: bool = False) -> list[BabiSample]:
    """`n` new samples of bAbI task `qa`, the same for the same arguments on any machine.

    Samples come story by story, several questions per story as in the bAbI files; the last story
    may stop after fewer questions to give exactly `n`. With `check`, each answer is re-derived from
    the text by `verify.answer_from_story` and a disagreement raises (a bug, never to be dropped).
    """
    number = task_number(qa)
    if n < 0:
        raise ValueError(f"n={n}: the number of samples must be 0 or more")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r}: the simulator's seed must be a whole number, 0 or more")
    dice = Dice(seed, number)
    vocab = vocabulary(qa, wide_vocabulary)
    if number in _MOVEMENT_TASKS:
        make_story = partial(_movement_story, dice, vocab, *_MOVEMENT_TASKS[number])
    else:
        make_story = partial(_OTHER_TASKS[number], dice, vocab)
    samples: list[BabiSample] = []
    story_index = 0
    while len(samples) < n:
        story = make_story()
        for n_facts, question, answer, supporting in story.questions[: n - len(samples)]:
            samples.append(BabiSample(tuple(story.facts[:n_facts]), question, answer, supporting, story_index))
        story_index += 1
    if check:
        for sample in samples:
            derived = answer_from_story(f"qa{number}", sample.facts, sample.question)
            if derived != sample.answer:
                raise AssertionError(
                    f"simulator bug in qa{number} (seed {seed}): story {sample.story} question "
                    f"{sample.question!r}: simulated {sample.answer!r}, re-derived {derived!r}"
                )
    return samples


def write_babi_file(samples: Sequence[BabiSample], path: str | Path) -> Path:
    """Write `samples` in the bAbI text format; `babi.read_babi(path)` gives them back.

    Samples of one story (same `story`, consecutive, each one's facts extending the previous one's)
    share one numbered story; numbering restarts at 1 with each story, and a question line reads
    `N question<TAB>answer<TAB>supporting line numbers`.
    """
    path = Path(path)
    lines: list[str] = []
    story, written, line_of = None, 0, list[int]()  # line_of[i]: line number of fact i in the current story
    number = 0
    current_facts: Sequence[str] = ()
    for sample in samples:
        if (
            sample.story != story
            or len(sample.facts) < written
            or tuple(sample.facts[:written]) != tuple(current_facts[:written])
        ):
            story, written, line_of, number = sample.story, 0, [], 0
        for fact in sample.facts[written:]:
            number += 1
            line_of.append(number)
            lines.append(f"{number} {fact}")
        written = len(sample.facts)
        current_facts = sample.facts
        number += 1
        support = " ".join(str(line_of[i]) for i in sample.supporting)
        lines.append(f"{number} {sample.question}\t{sample.answer}\t{support}")
    atomic_write(path, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
    return path

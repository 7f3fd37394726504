"""The bAbI simulator's world: the words each task draws from, the seeded dice, the recency of asked facts,
and the movement world's bookkeeping."""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.official_check import TASK_LABELS
from lm_eval_longmem.babilong.simulate_world import (
    RECENCY,
    Dice,
    MoveSpec,
    Story,
    World,
    labels_for_simulated,
    pick_recent,
    vocabulary,
)

TASKS = [f"qa{i}" for i in range(1, 21)]


@pytest.mark.parametrize("qa", TASKS)
def test_added_words_never_hide_in_other_labels(qa):
    """The authors' check finds labels by substring, so no added word may contain or be inside another."""
    published = {label.lower() for label in TASK_LABELS[qa]}
    vocab = vocabulary(qa, wide_vocabulary=True)
    words = {w.lower() for w in (*labels_for_simulated(qa, True), *vocab.people, *vocab.places, *vocab.objects)}
    for added in words - published:
        clashes = [w for w in words if w != added and (w in added or added in w)]
        assert not clashes, f"{qa}: {added!r} overlaps {clashes}"


def test_dice_are_seeded_by_seed_and_task():
    one, other = Dice(3, 1), Dice(3, 1)
    assert [one.random() for _ in range(5000)] == [other.random() for _ in range(5000)]  # past one block of 4096
    assert Dice(3, 1).random() not in (Dice(4, 1).random(), Dice(3, 2).random())


def test_dice_draws_stay_in_range():
    dice = Dice(0, 1)
    assert all(0 <= dice.below(7) < 7 for _ in range(2000))
    assert {dice.weighted([0.0, 1.0, 0.0]) for _ in range(200)} == {1}
    assert sorted(dice.sample(range(10), 10)) == list(range(10))
    assert sorted(dice.shuffled("abcde")) == list("abcde")


def test_pick_recent_only_picks_facts_within_the_recency_window():
    dice = Dice(0, 1)
    assert pick_recent(dice, 20, [(5, "old"), (19 - len(RECENCY), "too old")]) is None
    picks = {
        pick_recent(dice, 20, [(19, "newest"), (15, "fifth back"), (14, "sixth back"), (20, "not yet said")])
        for _ in range(500)
    }
    assert picks == {"newest", "fifth back"}


def test_the_movement_world_keeps_holders_and_places_consistent():
    """After many moves, pick-ups, drops and gives: each object has at most one holder, the holders'
    lists agree with it, and every statement names the actor's action in one sentence."""
    dice, story = Dice(0, 7), Story()
    spec = MoveSpec(move=0.4, take=0.2, drop=0.2, give=0.2, meet=0.5)
    world = World(dice, vocabulary("qa7"), story, spec)
    for _ in range(2000):
        world.act(spec)
    assert len(story.facts) == 2000 and all(fact.endswith(".") for fact in story.facts)
    for person, objects in world.holding.items():
        assert all(world.holder[o] == person for o in objects)
    assert sum(len(objects) for objects in world.holding.values()) == sum(p is not None for p in world.holder.values())
    assert {i for i, *_ in world.gives} <= set(range(len(story.facts)))
    assert all(place in world.vocab.places for place in world.where.values())

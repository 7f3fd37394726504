"""The shared bAbI vocabulary: the answer checks' label sets built from it are the authors' sets."""

from __future__ import annotations

from lm_eval_longmem.babilong import words
from lm_eval_longmem.babilong.official_check import TASK_LABELS

AUTHORS = {  # booydar/babilong TASK_LABELS, written out here independently of words.py
    "qa5": {"Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"},
    "qa7": {"none", "one", "two", "three"},
    "qa8": {"apple", "football", "milk", "nothing"},
    "qa14": {"bedroom", "cinema", "kitchen", "office", "park", "school"},
    "qa15": {"cat", "mouse", "sheep", "wolf"},
    "qa16": {"gray", "green", "white", "yellow"},
    "qa19": {"e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w"},
    "qa20": {"bedroom", "bored", "garden", "hungry", "kitchen", "thirsty", "tired"},
}


def test_label_sets_built_from_the_vocabulary_are_the_authors():
    for qa, labels in AUTHORS.items():
        assert set(TASK_LABELS[qa]) == labels, qa
    for qa in ("qa1", "qa2", "qa3", "qa4", "qa11", "qa12", "qa13"):
        assert set(TASK_LABELS[qa]) == {"bathroom", "bedroom", "garden", "hallway", "kitchen", "office"}


def test_qa19_paths_never_step_back():
    """Every two-step path label combines two compass letters that are not opposite."""
    letter = words.DIRECTIONS
    back = {(letter[a], letter[b]) for a, b in words.OPPOSITE.items()}
    paths = {f"{a},{b}" for a in letter.values() for b in letter.values() if (a, b) not in back}
    assert paths == set(TASK_LABELS["qa19"])


def test_pronouns_and_plurals_are_consistent():
    assert words.SHE == {"Mary", "Sandra", "Alice", "Nina", "Grace", "Leah", "Rosa", "Irene"}
    assert set(words.ANIMALS) == AUTHORS["qa15"] and len(set(words.ANIMALS.values())) == 4
    assert set(words.OPPOSITE_POSITION) == set(words.POSITIONS)

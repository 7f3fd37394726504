"""The corrected answer check: the listed shapes read as the rubric says, every other answer abstains.

Rows are (task, target, question, output, expected): expected is the corrected verdict (True/False) for a
shape the check reads, or ABSTAIN. The rubric is the first section of docs/babilong-corrected-check.md.
"""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.corrected import ABSTENTIONS, SHAPES, check, read
from lm_eval_longmem.babilong.corrected.forms import FORMS
from lm_eval_longmem.babilong.corrected.labels import WORD_FORMS, bare_labels, normalize, vocabulary
from lm_eval_longmem.babilong.official_check import TASK_LABELS, labels_for, official_correct

ABSTAIN = "abstain"
Q_MARY = "Where is Mary?"
Q_COUNT = "How many objects is Mary carrying?"
Q_CARRY = "What is Mary carrying?"
Q_KITCHEN = "Is Mary in the kitchen?"
Q_BEDROOM = "Is Mary in the bedroom?"
Q_PARK = "Is Bill in the park?"
Q_EMILY = "What is Emily afraid of?"
Q_PATH = "How do you go from the kitchen to the garden?"
Q_GAVE = "Who gave the apple?"


def verdict(qa: str, target: str, question: str, output: str) -> bool | str:
    result = check(qa, target, output, question)
    if result.abstained:
        assert result.acc_corrected == result.acc  # an abstention keeps the authors' verdict
        return ABSTAIN
    return result.acc_corrected


# The official check's matching defects: the answer says only labels, so its reading is exact (shape `label`).
MECHANICAL = [
    ("qa7", "none", Q_COUNT, "none", True),  # "none" also contains "one" for the authors' check
    ("qa7", "none", Q_COUNT, "None.", True),
    ("qa7", "none", Q_COUNT, "zero", True),
    ("qa7", "none", Q_COUNT, "0", True),
    ("qa7", "one", Q_COUNT, "none", False),
    ("qa7", "two", Q_COUNT, "2 objects", True),
    ("qa15", "mouse", Q_EMILY, "Mice", True),
    ("qa15", "wolf", Q_EMILY, "wolves.", True),
    ("qa15", "sheep", Q_EMILY, "Sheep", True),
    ("qa8", "football,apple", Q_CARRY, "apple, football", True),
    ("qa8", "football, apple", Q_CARRY, "football and apple", True),  # a target with spaces
    ("qa8", "football,apple", Q_CARRY, "apple", False),
    ("qa8", "nothing", Q_CARRY, "Nothing.", True),
    ("qa19", "n,w", Q_PATH, "n, w", True),
    ("qa19", "n,w", Q_PATH, "north, then west", True),
    ("qa19", "n,w", Q_PATH, "w,n", False),
    ("qa16", "gray", "What color is Lily?", "Grey", True),
    ("qa20", "thirsty", "Why did jason go to the kitchen?", "thirst", True),
    ("qa10", "maybe", Q_PARK, "Perhaps.", True),
    ("qa6", "no", Q_KITCHEN, "No", True),
    ("qa1", "office", Q_MARY, "**Office**", True),
    ("qa1", "office", Q_MARY, "Answer: in the office", True),
    ("qa3", "kitchen", "Where was the apple before the kitchen?", "kitchen", False),  # the question's own place
    ("qa1", "kitchen", Q_MARY, "", False),  # empty
]


@pytest.mark.parametrize(("qa", "target", "question", "output", "expected"), MECHANICAL)
def test_mechanical_shapes_are_exact(qa, target, question, output, expected):
    assert verdict(qa, target, question, output) == expected
    assert read(output, question, labels_for(qa)).shape in ("label", "empty")


# Every shape the issue quotes from models nobody here had read, as quoted, then mutated (other labels, tasks,
# wording): each abstains or reads as the rubric says.
QUOTED_SHAPES = [
    # a hedge: the target with another candidate in parentheses or after "or"
    ("qa1", "office", Q_MARY, "office (or garden, …)", ABSTAIN),
    ("qa1", "bedroom", Q_MARY, "bedroom (or possibly bathroom …)", ABSTAIN),
    ("qa16", "white", "What color is Lily?", "white (or possibly gray …)", ABSTAIN),
    ("qa14", "school", "Where was Bill before the park?", "at the school or at home", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "kitchen (or perhaps the hallway)", ABSTAIN),
    ("qa4", "garden", "What is north of the office?", "The garden, or the bathroom.", ABSTAIN),
    ("qa15", "cat", Q_EMILY, "cats / wolves", ABSTAIN),
    ("qa2", "hallway", "Where is the milk?", "hallway (possibly)", ABSTAIN),
    # "cannot tell" is no answer outside qa10; "likely" commits to nothing
    ("qa6", "no", Q_KITCHEN, "It cannot be determined whether Mary is in the kitchen.", False),
    ("qa6", "yes", Q_KITCHEN, "It is not explicitly stated whether Mary is in the kitchen.", False),
    ("qa6", "yes", Q_KITCHEN, "It is likely that Mary is in the kitchen.", ABSTAIN),
    ("qa9", "no", "Is Daniel in the office?", "There is no information about Daniel being in the office.", False),
    ("qa17", "no", "Is the triangle above the red square?", "The story does not say.", False),
    ("qa18", "yes", "Does the box fit in the chest?", "It is not possible to tell from the text.", False),
    ("qa10", "maybe", Q_PARK, "It cannot be determined whether Bill is in the park.", True),
    ("qa10", "maybe", Q_PARK, "It is unknown.", True),
    ("qa6", "yes", Q_KITCHEN, "Mary is probably in the kitchen.", ABSTAIN),
    ("qa9", "yes", "Is John in the garden?", "John might be in the garden.", ABSTAIN),
    # narration that reaches no conclusion
    ("qa6", "no", Q_KITCHEN, "Mary went to the hallway. Then she picked up the milk.", ABSTAIN),
    # the label from the explanation, or from a fact the answer only cites
    ("qa1", "garden", Q_MARY, "Mary went to the garden after she left the kitchen.", ABSTAIN),
    ("qa2", "office", "Where is the apple?", "Based on the fact that John took the apple to the office, ...", ABSTAIN),
    # a bare label and its explanation: the label is the answer
    ("qa15", "cat", Q_EMILY, "Cat, since Emily is a mouse and mice are afraid of cats.", True),
    ("qa15", "wolf", Q_EMILY, "Wolf, because Emily is a sheep and sheep are afraid of wolves.", True),
    ("qa15", "cat", Q_EMILY, "Wolf, since Emily is a sheep.", False),
    ("qa5", "apple", "What did Fred give to Jeff?", "Apple, based on the following facts: Fred took the apple.", True),
    ("qa5", "milk", "What did Bill give to Mary?", "Milk - based on the story, Bill handed it over.", True),
    ("qa4", "bathroom", "What is east of the hallway?", "bathroom\n(The bathroom is east of the hallway.)", True),
    ("qa4", "office", "What is west of the kitchen?", "office\n(The office is west of the kitchen.)", True),
    ("qa4", "office", "What is west of the kitchen?", "office\n(The garden is west of the kitchen.)", ABSTAIN),
    # a relation that states the answer, its restatement cut off
    (
        "qa4",
        "bedroom",
        "What is the hallway east of?",
        "The bedroom is west of the hallway, so the hallway is east of the",
        True,
    ),
    (
        "qa4",
        "kitchen",
        "What is the garden north of?",
        "The kitchen is south of the garden, so the garden is north of",
        True,
    ),
    # a committed "no" phrased as a sentence
    ("qa6", "no", Q_BEDROOM, "Mary is not in the bedroom.", True),
    ("qa6", "no", Q_BEDROOM, "No, Mary is in the garden.", True),
    ("qa9", "no", "Is Sandra in the office?", "Sandra is no longer in the office.", True),
    ("qa6", "yes", Q_BEDROOM, "Mary is in the bedroom.", True),
    ("qa6", "no", Q_BEDROOM, "Mary is in the hallway.", True),
    ("qa6", "yes", Q_BEDROOM, "Yes, Mary is in the hallway.", ABSTAIN),  # contradicts itself
    ("qa6", "yes", Q_BEDROOM, "Yes. No, she left.", ABSTAIN),
]


@pytest.mark.parametrize(("qa", "target", "question", "output", "expected"), QUOTED_SHAPES)
def test_quoted_shapes_and_their_mutations(qa, target, question, output, expected):
    assert verdict(qa, target, question, output) == expected


READING = [
    # statements of the asked fact about the question's own person or thing
    ("qa1", "kitchen", Q_MARY, "The most recent location of Mary is kitchen.", True),
    ("qa1", "kitchen", Q_MARY, "She is in the kitchen.", True),
    ("qa1", "kitchen", Q_MARY, "John is in the kitchen.", False),  # another person: another question
    ("qa2", "office", "Where is the milk?", "Mary moved to the office.", ABSTAIN),  # she may carry the milk
    (
        "qa3",
        "garden",
        "Where was the apple before the kitchen?",
        "Before the kitchen the apple was in the garden.",
        True,
    ),
    (
        "qa3",
        "garden",
        "Where was the apple before the kitchen?",
        "Before the bedroom the apple was in the garden.",
        False,
    ),
    (
        "qa3",
        "garden",
        "Where was the apple before the kitchen?",
        "The apple was in the garden before it was dropped.",
        ABSTAIN,
    ),
    ("qa5", "Mary", Q_GAVE, "Mary gave the apple to Fred.", True),
    ("qa5", "Fred", "Who received the apple?", "Mary gave the apple to Fred.", True),
    ("qa5", "Fred", "Who gave the apple to Mary?", "Mary gave the apple to Fred.", False),  # roles swapped
    ("qa5", "football", "What did Fred give to Jeff?", "Jeff gave the football to Fred.", False),
    ("qa5", "Bill", "Who received the milk?", "The milk was passed from Jeff to Bill.", True),
    ("qa5", "Jeff", Q_GAVE, "Jeff gave the apple.", True),
    ("qa7", "two", Q_COUNT, "Mary is carrying two objects.", True),
    ("qa7", "none", Q_COUNT, "Mary is not carrying anything.", True),
    ("qa8", "apple,milk", Q_CARRY, "Mary is carrying the milk and the apple.", True),
    ("qa15", "wolf", Q_EMILY, "Emily is afraid of wolves.", True),
    ("qa16", "white", "What color is Lily?", "Lily is white.", True),
    (
        "qa17",
        "yes",
        "Is the red square to the left of the triangle?",
        "The triangle is to the right of the red square.",
        True,
    ),
    (
        "qa17",
        "no",
        "Is the red square to the left of the triangle?",
        "The red square is not to the left of the triangle.",
        True,
    ),
    ("qa18", "no", "Does the box fit in the chest?", "The box does not fit in the chest.", True),
    ("qa18", "yes", "Is the chest bigger than the box?", "The box is smaller than the chest.", True),
    ("qa19", "s,e", Q_PATH, "Go south, then east.", True),
    ("qa20", "kitchen", "Where will jason go?", "Jason will go to the kitchen.", True),
    # an answer, then an invented prompt: the invention changes nothing unless it asks this question again
    (
        "qa5",
        "football",
        "What did Fred give to Jeff?",
        "Answer: football\n\nExample:\nFred gave the apple to Bill.",
        True,
    ),
    (
        "qa6",
        "no",
        "Is Daniel in the bedroom?",
        "Answer: no\n\nQuestion: Is Daniel in the bedroom?\n\nAnswer: yes",
        ABSTAIN,
    ),
    ("qa6", "no", "Is Daniel in the bedroom?", "Answer: no\n\nQuestion: Is John in the garden?\n\nAnswer: yes", True),
    # lists of options, several labels, corrections, prompt imitation before any answer
    ("qa1", "kitchen", Q_MARY, "A: kitchen\nB: office", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "Options: kitchen, office", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "1) kitchen 2) office", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "kitchen office", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "Kitchen. Actually, the office.", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "Question: Where is Mary? Answer: kitchen", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "the parking lot", ABSTAIN),
    ("qa1", "kitchen", Q_MARY, "1. The kitchen", True),  # a list of one
    ("qa1", "kitchen", Q_MARY, "Based on the story, Mary is in the kitchen.", True),
]


@pytest.mark.parametrize(("qa", "target", "question", "output", "expected"), READING)
def test_reading_shapes(qa, target, question, output, expected):
    assert verdict(qa, target, question, output) == expected


def test_an_answer_of_no_listed_shape_abstains_as_unlisted():
    reading = read("The answer lies in the room where the milk is kept.", Q_MARY, labels_for("qa1"))
    assert (
        reading.labels is None
        and reading.abstained == "unlisted shape"
        and reading.reason == "abstained: unlisted shape"
    )


def test_every_reading_names_a_listed_shape_or_abstention():
    rows = MECHANICAL + QUOTED_SHAPES + READING
    reasons = {read(output, question, labels_for(qa)) for qa, _, question, output, _ in rows}
    assert {r.shape for r in reasons if r.labels is not None} <= SHAPES.keys()
    assert {r.abstained for r in reasons if r.labels is None} <= ABSTENTIONS.keys()
    assert {r.shape for r in reasons if r.labels is not None} == SHAPES.keys()  # every shape has a row here


def test_abstaining_keeps_the_authors_verdict_bit_for_bit():
    for qa, target, question, output, _ in MECHANICAL + QUOTED_SHAPES + READING:
        result = check(qa, target, output, question)
        assert result.acc == official_correct(target, output, question, labels_for(qa))
        if result.abstained:
            assert result.acc_corrected == result.acc


def test_word_forms_are_forms_of_their_own_task_labels_only():
    every_label = {label.lower() for labels in TASK_LABELS.values() for label in labels} | {"n", "s", "e", "w"}
    assert set(WORD_FORMS) <= every_label
    for form_label in WORD_FORMS:
        for form in WORD_FORMS[form_label]:
            assert form == normalize(form)


def test_a_bare_answer_says_nothing_but_labels():
    vocab = vocabulary(labels_for("qa1"), normalize(Q_MARY))
    assert bare_labels(normalize("In the kitchen."), vocab) == ("kitchen",)
    assert bare_labels(normalize("not the kitchen"), vocab) is None
    assert bare_labels(normalize("kitchenette"), vocab) is None


def test_every_question_form_of_babi_has_statement_forms():
    questions = {
        "qa1": Q_MARY, "qa3": "Where was the apple before the kitchen?", "qa4": "What is north of the garden?",
        "qa5": Q_GAVE, "qa6": Q_KITCHEN, "qa7": Q_COUNT, "qa8": Q_CARRY, "qa15": Q_EMILY,
        "qa16": "What color is Lily?", "qa17": "Is the red square to the left of the triangle?",
        "qa18": "Does the box fit in the chest?", "qa19": Q_PATH, "qa20": "Where will jason go?",
    }  # fmt: skip
    for question in questions.values():
        assert any(form.question.fullmatch(normalize(question)) for form in FORMS), question

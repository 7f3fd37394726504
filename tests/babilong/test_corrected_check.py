"""The corrected answer check (`acc_corrected`): adversarial tables, the rules, the abstentions."""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.corrected_check import (
    ABSTENTIONS,
    WORD_FORMS,
    check,
    corrected_correct,
    deciding_rule,
    find_answer,
    normalize_answer,
    read,
)
from lm_eval_longmem.babilong.official_check import TASK_LABELS, official_correct

# (task, target, output, question, acc, acc_corrected). `acc_corrected` is the verdict a careful
# reader gives; `acc` is what the authors' check says, wrong where the reader disagrees with it.
Q_MARY = "Where is Mary?"
Q_COUNT = "How many objects is Mary carrying?"
Q_CARRY = "What is Mary carrying?"
Q_OFFICE = "Is Mary in the office?"
Q_PARK = "Is Bill in the park?"
Q_AFRAID = "What is Gertrude afraid of?"
Q_PATH = "How do you go from the kitchen to the garden?"
CASES = [
    # qa1: plain answers
    ("qa1", "office", "The most recent location of Mary is office.", Q_MARY, True, True),
    ("qa1", "office", "office", Q_MARY, True, True),
    ("qa1", "office", "OFFICE", Q_MARY, True, True),
    ("qa1", "kitchen", "The most recent location of \u2019Mary\u2019 is \u2019kitchen\u2019", Q_MARY, True, True),
    # two labels named: wrong under both
    ("qa1", "office", "Mary is in the office or the kitchen.", Q_MARY, False, False),
    # only the first sentence counts
    ("qa1", "office", "Office. Earlier she was in the kitchen.", Q_MARY, True, True),
    ("qa1", "office", "She moved. Then to the office.", Q_MARY, False, False),
    # imitating the prompt is cut off
    ("qa1", "office", "office<example>kitchen", Q_MARY, True, True),
    ("qa1", "office", "office <context> kitchen", Q_MARY, True, True),
    ("qa1", "office", "", Q_MARY, False, False),
    # a negated mention is not the answer
    ("qa1", "office", "Mary is not in the kitchen, she is in the office.", Q_MARY, False, True),
    ("qa1", "office", "Mary isn't in the office.", Q_MARY, True, False),
    # qa2, qa3, qa4: labels named in the question are ignored
    ("qa2", "garden", "The football is in the garden.", "Where is the football?", True, True),
    ("qa2", "garden", "The football is in the hallway.", "Where is the football?", False, False),
    (
        "qa3",
        "garden",
        "Before the kitchen the apple was in the garden.",
        "Where was the apple before the kitchen?",
        True,
        True,
    ),
    (
        "qa3",
        "garden",
        "Before the kitchen the apple was in the hallway.",
        "Where was the apple before the kitchen?",
        False,
        False,
    ),
    ("qa3", "bathroom", "In the bathroom, not in the garden.", "Where was the apple before the kitchen?", False, True),
    ("qa4", "office", "The office is north of the kitchen.", "What is north of the kitchen?", True, True),
    ("qa4", "garden", "The kitchen is north of the garden.", "What is the kitchen north of?", True, True),
    ("qa4", "office", "The bedroom.", "What is north of the kitchen?", False, False),
    # qa5
    ("qa5", "Fred", "Fred", "Who gave the apple to Jeff?", True, True),
    ("qa5", "apple", "Fred gave the apple.", "What did Fred give to Jeff?", True, True),
    ("qa5", "apple", "Fred gave Jeff the apples.", "What did Fred give to Jeff?", True, True),
    ("qa5", "Bill", "Bill gave the milk to Jeff, not Fred.", "Who gave the milk to Jeff?", False, True),
    ("qa5", "Jeff", "Mary", "Who received the football?", False, False),
    # qa6: "not" contains "no"; "No idea" and "no way to tell" are not the answer "no"
    ("qa6", "no", "It is not known.", Q_OFFICE, True, False),
    ("qa6", "yes", "yes, she is not elsewhere", Q_OFFICE, False, True),
    ("qa6", "no", "No", Q_OFFICE, True, True),
    ("qa6", "no", "No.", Q_OFFICE, True, True),
    ("qa6", "no", "No, Mary is in the kitchen.", Q_OFFICE, True, True),
    ("qa6", "no", "No! She left.", Q_OFFICE, True, True),
    ("qa6", "no", "No Mary is not in the office", Q_OFFICE, True, True),
    ("qa6", "no", "No it is not", Q_OFFICE, True, True),
    ("qa6", "no", "The answer is no", Q_OFFICE, True, True),
    ("qa6", "yes", "Yes, Mary is in the office.", Q_OFFICE, True, True),
    ("qa6", "no", "No idea", Q_OFFICE, True, False),
    ("qa6", "no", "There is no way to tell.", Q_OFFICE, True, False),
    ("qa6", "no", "yes and no", Q_OFFICE, False, False),
    # qa7: "none" contains "one"; digits, "zero", "nothing"; "no one" is not "one"
    ("qa7", "none", "none", Q_COUNT, False, True),
    ("qa7", "one", "none", Q_COUNT, False, False),
    ("qa7", "one", "one", Q_COUNT, True, True),
    ("qa7", "three", "Mary is carrying three objects.", Q_COUNT, True, True),
    ("qa7", "two", "Mary is carrying two objects, not one.", Q_COUNT, False, True),
    ("qa7", "none", "zero", Q_COUNT, False, True),
    ("qa7", "none", "0", Q_COUNT, False, True),
    ("qa7", "none", "nothing", Q_COUNT, False, True),
    ("qa7", "none", "Mary is carrying no objects.", Q_COUNT, False, True),
    ("qa7", "none", "Mary is not carrying anything.", Q_COUNT, False, True),
    ("qa7", "one", "1", Q_COUNT, False, True),
    ("qa7", "two", "2", Q_COUNT, False, True),
    ("qa7", "one", "No one knows.", Q_COUNT, True, False),
    ("qa7", "two", "3", Q_COUNT, False, False),
    # qa8: comma lists with or without spaces, plurals, negation, ways to say "nothing"
    ("qa8", "apple,football", "apple,football", Q_CARRY, True, True),
    ("qa8", "apple,football", "football, apple", Q_CARRY, True, True),
    ("qa8", "football, apple", "apple, football", Q_CARRY, False, True),
    ("qa8", "apple,football", "apple", Q_CARRY, False, False),
    ("qa8", "apple,football", "apple, football, milk", Q_CARRY, False, False),
    ("qa8", "apple,milk", "apples and milk", Q_CARRY, True, True),
    ("qa8", "nothing", "nothing", Q_CARRY, True, True),
    ("qa8", "nothing", "none", Q_CARRY, False, True),
    ("qa8", "nothing", "Mary is not carrying anything.", Q_CARRY, False, True),
    ("qa8", "apple", "apples", Q_CARRY, True, True),
    ("qa8", "apple", "not the apple", Q_CARRY, True, False),
    ("qa8", "milk", "Mary is carrying the milk, not the apple.", Q_CARRY, False, True),
    ("qa8", "milk", "Mary is carrying not only the milk but also the apple.", Q_CARRY, False, False),
    # qa9
    ("qa9", "no", "no", "Is Mary in the kitchen?", True, True),
    ("qa9", "no", "No, Mary is not in the kitchen.", "Is Mary in the kitchen?", True, True),
    ("qa9", "yes", "Yes.", "Is Mary in the kitchen?", True, True),
    ("qa9", "no", "No idea.", "Is Mary in the kitchen?", True, False),
    # qa10: the phrasings of "maybe"
    ("qa10", "maybe", "maybe", Q_PARK, True, True),
    ("qa10", "maybe", "It is not known.", Q_PARK, False, True),
    ("qa10", "maybe", "unknown", Q_PARK, False, True),
    ("qa10", "maybe", "It cannot be determined.", Q_PARK, False, True),
    ("qa10", "maybe", "It can't be determined", Q_PARK, False, True),
    ("qa10", "maybe", "There is no way to tell.", Q_PARK, False, True),
    ("qa10", "maybe", "Bill may be in the park.", Q_PARK, False, True),
    ("qa10", "no", "There is no way to tell.", Q_PARK, True, False),
    ("qa10", "no", "It is not known.", Q_PARK, True, False),
    ("qa10", "no", "nobody knows", Q_PARK, True, False),
    ("qa10", "no", "No, Bill is in the office.", Q_PARK, True, True),
    ("qa10", "yes", "Yes, Bill is in the park.", Q_PARK, True, True),
    # qa11, qa12, qa13
    ("qa11", "hallway", "Daniel is in the hallway.", "Where is Daniel?", True, True),
    ("qa11", "hallway", "Daniel is in the garden.", "Where is Daniel?", False, False),
    ("qa12", "kitchen", "John and Mary are in the kitchen.", "Where is John?", True, True),
    ("qa12", "kitchen", "the Kitchen!", "Where is John?", True, True),
    ("qa13", "bedroom", "Sandra is in the bedroom.", "Where is Sandra?", True, True),
    ("qa13", "bedroom", "Sandra is neither in the garden nor in the bedroom.", "Where is Sandra?", False, False),
    # qa14: whole words ("park" is not in "parking")
    ("qa14", "park", "the parking lot", "Where was Mary before the school?", True, False),
    ("qa14", "park", "Mary was in the park before the school.", "Where was Mary before the school?", True, True),
    ("qa14", "cinema", "Before the school Mary was at the cinema.", "Where was Mary before the school?", True, True),
    # qa15: plurals of the animals
    ("qa15", "cat", "cats", Q_AFRAID, True, True),
    ("qa15", "cat", "Gertrude is afraid of cats.", Q_AFRAID, True, True),
    ("qa15", "mouse", "Gertrude is afraid of mice.", Q_AFRAID, False, True),
    ("qa15", "mouse", "mice", Q_AFRAID, False, True),
    ("qa15", "wolf", "wolves", Q_AFRAID, False, True),
    ("qa15", "sheep", "sheep", Q_AFRAID, True, True),
    ("qa15", "wolf", "Gertrude is not afraid of cats, she is afraid of wolves.", Q_AFRAID, False, True),
    ("qa15", "mouse", "cat", Q_AFRAID, False, False),
    # qa16: colours
    ("qa16", "gray", "Greg is gray.", "What color is Greg?", True, True),
    ("qa16", "gray", "grey", "What color is Greg?", False, True),
    ("qa16", "white", "Greg is yellow.", "What color is Greg?", False, False),
    ("qa16", "green", "green", "What color is Greg?", True, True),
    # qa17, qa18: a plain "no" is still "no"
    ("qa17", "no", "No.", "Is the triangle above the red square?", True, True),
    ("qa17", "no", "no", "Is the triangle above the red square?", True, True),
    ("qa17", "no", "No, the triangle is below the red square.", "Is the triangle above the red square?", True, True),
    ("qa17", "yes", "Yes.", "Is the triangle above the red square?", True, True),
    ("qa17", "no", "no way to tell", "Is the triangle above the red square?", True, False),
    ("qa18", "no", "No, it does not fit.", "Does the box fit in the suitcase?", True, True),
    ("qa18", "yes", "Yes", "Does the box fit in the suitcase?", True, True),
    ("qa18", "no", "No idea", "Does the box fit in the suitcase?", True, False),
    # qa19: paths, in order, as letters or compass words
    ("qa19", "n,w", "n,w", Q_PATH, True, True),
    ("qa19", "n,w", "n, w", Q_PATH, False, True),
    ("qa19", "n,w", "w,n", Q_PATH, False, False),
    ("qa19", "n,w", "north, west", Q_PATH, False, True),
    ("qa19", "n,w", "north west", Q_PATH, False, True),
    ("qa19", "n,w", "Go north, then west.", Q_PATH, False, True),
    ("qa19", "s,s", "s,s", Q_PATH, True, True),
    ("qa19", "s,s", "south", Q_PATH, False, False),
    ("qa19", "e,n", "east, north, west", Q_PATH, False, False),
    # qa20: motives, also as nouns; the place in the question is ignored
    ("qa20", "hungry", "hungry", "Why did John go to the kitchen?", True, True),
    (
        "qa20",
        "hungry",
        "John went to the kitchen because he was hungry.",
        "Why did John go to the kitchen?",
        True,
        True,
    ),
    ("qa20", "bored", "boredom", "Why did John go to the garden?", True, True),
    ("qa20", "bored", "Out of boredom.", "Why did John get the football?", True, True),
    ("qa20", "thirsty", "thirst", "Why did John go to the kitchen?", False, True),
    ("qa20", "tired", "John was tired, not hungry.", "Why did John go to the bedroom?", False, True),
    ("qa20", "kitchen", "John will go to the kitchen.", "Where will John go?", True, True),
]

# The answer reader of v3 (issue 18): the answer part, statements for yes/no, the asked part of a
# statement, negation scope, plurals and emphasis. Outputs are as the issue quotes them.
Q_KITCHEN = "Is Mary in the kitchen?"
READER_CASES = [
    # yes/no stated as a sentence
    ("qa6", "no", "Based on the context provided, Mary is not in the kitchen.", Q_KITCHEN, True, True),
    ("qa6", "yes", "Based on the context provided, Mary is not in the kitchen.", Q_KITCHEN, False, False),
    ("qa6", "yes", "Mary is in the kitchen.", Q_KITCHEN, False, True),
    ("qa6", "no", "Mary is in the garden.", Q_KITCHEN, False, True),
    ("qa6", "no", "Mary is no longer in the kitchen.", Q_KITCHEN, True, True),
    ("qa6", "no", "Mary is not in the office.", Q_OFFICE, True, True),
    ("qa9", "no", "Daniel is no longer in the bathroom", "Is Daniel in the bathroom?", True, True),
    ("qa10", "maybe", "Bill is either in the park or the school.", Q_PARK, False, True),
    ("qa17", "no", "The triangle is below the red square.", "Is the triangle above the red square?", False, True),
    ("qa17", "yes", "The red square is below the triangle.", "Is the triangle above the red square?", False, True),
    ("qa18", "no", "the suitcase does not fit inside the box", "Does the suitcase fit in the box?", True, True),
    ("qa18", "yes", "The box is bigger than the chocolate.", "Is the box bigger than the chocolate?", False, True),
    (
        "qa18",
        "no",
        "The box of chocolates is smaller than the chest.",
        "Is the box of chocolates bigger than the chest?",
        False,
        True,
    ),
    # qa19: the path from the answer part only
    (
        "qa19",
        "w,w",
        "Answer: w, w\n\nExplanation: the office is west of the hallway, north of ...",
        Q_PATH,
        False,
        True,
    ),
    ("qa19", "s,e", "s,e\n\nExplanation: from the kitchen move south, then east.", Q_PATH, True, True),
    ("qa19", "n,w", "north, west (n, w)", Q_PATH, False, True),
    # word forms inside an explanation add nothing
    (
        "qa20",
        "kitchen",
        "kitchen\n\nJohn is thirsty, so he goes to the kitchen to quench his thirst.",
        "Where will john go?",
        False,
        True,
    ),
    (
        "qa15",
        "wolf",
        "Wolf\n\nMice are afraid of wolves and Emily is a mouse.",
        "What is emily afraid of?",
        False,
        True,
    ),
    # the conclusion of a reasoning sentence, and the asked part of a statement
    (
        "qa15",
        "cat",
        "Based on the given context, Gertrude is a sheep, and sheep are afraid of cats.",
        Q_AFRAID,
        False,
        True,
    ),
    ("qa16", "white", "Lily is a swan, and swans are white, so Lily is white.", "What color is Lily?", True, True),
    ("qa5", "Mary", "Mary gave the apple to Fred.", "Who gave the apple?", False, True),
    ("qa5", "Fred", "Mary gave the apple to Fred.", "Who received the apple?", False, True),
    ("qa5", "Fred", "Mary gave the apple to Fred.", "Who gave the apple to Mary?", True, True),
    ("qa5", "milk", "Mary gave the milk to Bill.", "What did Fred give to Mary?", False, False),
    ("qa5", "Fred", "Jeff handed the apple to Fred.", "Who gave the apple to Jeff?", True, True),
    (
        "qa5",
        "Fred",
        "Bill gave the apple to Fred, Mary, and then kept it.",
        "Who did Bill give the apple to?",
        False,
        False,
    ),
    # negation scoped to the words it governs
    ("qa16", "green", "Lions are not gray or green.", "What color is Greg?", False, False),
    ("qa15", "wolf", "Emily is not afraid of wolves.", "What is emily afraid of?", False, False),
    (
        "qa2",
        "office",
        "The milk is no longer in the office, it was left there by Daniel",
        "Where is the milk?",
        True,
        False,
    ),
    # plural rooms, markdown, an "Answer:" line, a list, narration before the answer
    ("qa4", "garden", "The gardens are north of the bathroom.", "What is north of the bathroom?", True, True),
    (
        "qa4",
        "garden",
        "The hallway is north of the kitchen and the garden.",
        "What is the hallway north of?",
        False,
        False,
    ),
    ("qa1", "bathroom", "_bathroom_", Q_MARY, True, True),
    ("qa1", "office", "**Answer:** office", Q_MARY, True, True),
    ("qa1", "office", "1. In the office.", Q_MARY, False, True),
    ("qa1", "office", "1. In the office. 2. In the kitchen.", Q_MARY, False, False),
    ("qa1", "garden", "Where is the garden?  Where is the bathroom?", Q_MARY, False, False),
    ("qa1", "garden", " Daniel asked.\n\nShe is in the garden, Sandra replied.", Q_MARY, False, False),
    ("qa1", "garden", "I thought so.\n\nI am going to the garden.", Q_MARY, False, False),
    ("qa1", "office", "The most recent location of John M. is office.", "Where is John?", False, True),
    ("qa2", "bedroom", "Mary got it from the kitchen and took it to the bedroom.", "Where is the milk?", False, False),
    (
        "qa2",
        "bedroom",
        "Based on the context, Daniel got the milk in the bedroom. Therefore the milk stayed.\n\nThe milk is in the bedroom.",
        "Where is the milk?",
        True,
        True,
    ),
]


@pytest.mark.parametrize(("qa", "target", "output", "question", "acc", "acc_corrected"), READER_CASES)
def test_answer_reader(qa, target, output, question, acc, acc_corrected):
    assert check(qa, target, output, question)[:2] == (acc, acc_corrected)


@pytest.mark.parametrize(("qa", "target", "output", "question", "acc", "acc_corrected"), CASES)
def test_checks(qa, target, output, question, acc, acc_corrected):
    assert check(qa, target, output, question)[:2] == (acc, acc_corrected)


# The failure kinds of issue 29, each in the shape the issue gives (written for the issue, not judged
# rows): (task, target, output, question, acc, acc_corrected, the reader's abstention or "").
FAILURE_KINDS = [
    # 1. a complete answer, then a later line that is cut off: the cut-off line names nothing and is passed over
    (
        "qa1",
        "bathroom",
        "The most recent location of John is the bathroom.\n\nAnswer: The most recent location",
        "Where is John?",
        True,
        True,
        "",
    ),
    # 2. the answer on the line after a header, or split by a line break
    ("qa5", "milk", "A: The answer is:\n\nThe milk", "What did Mary give to Fred?", True, True, ""),
    ("qa1", "office", "Daniel is in the\n\noffice", "Where is Daniel?", True, True, ""),
    # 3. option lists the model invents: no answer to read, whatever the format
    ("qa1", "kitchen", "Options: A. In the kitchen. B. In the hallway. C. ...", Q_MARY, False, False, "options"),
    ("qa1", "kitchen", "A. In the kitchen.\nB. In the hallway.\nC. In the garden.", Q_MARY, False, False, "options"),
    ("qa1", "hallway", "* In the kitchen\n* In the hallway", Q_MARY, False, False, "options"),
    ("qa1", "kitchen", "1. In the kitchen. 2. In the hallway.", Q_MARY, False, False, "options"),
    # 4. a label from quoted context or from narration, not from the answer given
    ("qa1", "kitchen", "(Document[3]) Mary went to the kitchen.", Q_MARY, True, True, "quote"),
    ("qa1", "kitchen", "(Document[3]) ... went to the kitchen", Q_MARY, False, False, "elsewhere"),
    ("qa1", "kitchen", 'The context says: "Mary went to the kitchen."', Q_MARY, True, True, "quote"),
    ("qa1", "garden", " Daniel asked.\n\nShe is in the garden, Sandra replied.", Q_MARY, False, False, "elsewhere"),
    # 5. hedges: not "no" (qa6); "maybe" in qa10, where the honest reading is that the story does not tell
    (
        "qa6",
        "no",
        "There is no information about Daniel being in the kitchen",
        "Is Daniel in the kitchen?",
        True,
        False,
        "",
    ),
    (
        "qa10",
        "maybe",
        "The text does not provide information that Mary is in the park",
        "Is Mary in the park?",
        False,
        True,
        "",
    ),
    (
        "qa10",
        "no",
        "The text does not provide information that Mary is in the park",
        "Is Mary in the park?",
        True,
        False,
        "",
    ),
    # 6. a cut-off reasoning ("Therefore," and nothing after) or an opening exclamation is not the answer
    ("qa2", "bathroom", "John went to the bathroom with the milk. Therefore,", "Where is the milk?", True, True, ""),
    ("qa6", "yes", "Oh no, Mary is in the kitchen.", Q_KITCHEN, False, False, "exclamation"),
    # 7. qa19: one step and an explanation repeating a direction is one step
    ("qa19", "s,s", "first go south, since the bathroom is south of", Q_PATH, False, False, ""),
    # 8. qa15: the answer stated as the deduction, before a cut-off "Therefore,"
    (
        "qa15",
        "cat",
        "Emily is a mouse and mice are afraid of cats. Therefore,",
        "What is emily afraid of?",
        False,
        True,
        "",
    ),
    # 9. qa20: a motive word in the explanation is no second label for a "where" question
    ("qa20", "kitchen", "He will go to the kitchen to quench his thirst", "Where will John go?", True, True, ""),
    # and the other abstentions: several labels, two candidates, a qa5 statement of another question
    (
        "qa2",
        "bedroom",
        "Mary got it from the kitchen and took it to the bedroom.",
        "Where is the milk?",
        False,
        False,
        "several",
    ),
    (
        "qa4",
        "kitchen",
        "Answer: bedroom\n\n- response: The kitchen is south of the hallway.",
        "What is south of the hallway?",
        False,
        False,
        "conflict",
    ),
    ("qa5", "football", "Jeff gave the football to Fred.", "What did Fred give to Jeff?", True, True, "statement"),
    ("qa5", "milk", "Fred picked up the milk there.", "What did Jeff give to Mary?", False, False, "statement"),
]


@pytest.mark.parametrize(("qa", "target", "output", "question", "acc", "acc_corrected", "abstained"), FAILURE_KINDS)
def test_failure_kinds_are_handled_or_abstained_on(qa, target, output, question, acc, acc_corrected, abstained):
    verdict = check(qa, target, output, question)
    assert verdict == (acc, acc_corrected, bool(abstained))
    assert read(output, question, TASK_LABELS[qa]).abstained == abstained
    if abstained:
        assert abstained in ABSTENTIONS and verdict.acc_corrected == verdict.acc


def test_table_covers_every_task_and_enough_rows():
    assert len(CASES) >= 80
    assert {case[0] for case in CASES} == set(TASK_LABELS)


# Answers a reader might accept that the corrected check, by design, does not: it reads labels and
# the listed forms only (see docs/babilong-corrected-check.md).
LIMITS = [
    ("qa1", "office", "I don't know. She went to the office.", Q_MARY),  # the answer is "I don't know"
    ("qa6", "no", "John is not in the office.", Q_OFFICE),  # a statement about someone else
    ("qa14", "cinema", "The movie theater.", "Where was Mary before the school?"),  # a synonym
    ("qa10", "maybe", "I have no idea.", Q_PARK),  # about the speaker, not the story
]


@pytest.mark.parametrize(("qa", "target", "output", "question"), LIMITS)
def test_documented_limits(qa, target, output, question):
    assert not check(qa, target, output, question).acc_corrected


@pytest.mark.parametrize(
    ("qa", "target", "output", "question", "rule"),
    [
        ("qa7", "none", "none", Q_COUNT, "whole-word"),
        ("qa15", "mouse", "mice", Q_AFRAID, "word-form"),
        ("qa6", "no", "No idea", Q_OFFICE, "negation"),
        ("qa8", "football, apple", "apple, football", Q_CARRY, "list"),
        ("qa19", "n,w", "north, west", Q_PATH, "path"),
        ("qa7", "none", "zero", Q_COUNT, "whole-word+word-form"),
        ("qa10", "no", "There is no way to tell.", Q_PARK, "word-form"),
        ("qa19", "n,w", "n-w", Q_PATH, "normalize"),
        ("qa6", "no", "Mary is in the garden.", Q_KITCHEN, "polarity"),
        ("qa5", "Mary", "Mary gave the apple to Fred.", "Who gave the apple?", "role"),
        ("qa1", "office", "1. In the office.", Q_MARY, "answer"),
    ],
)
def test_deciding_rule(qa, target, output, question, rule):
    assert deciding_rule(target, output, question, TASK_LABELS[qa]) == rule


def test_word_forms_are_sound():
    """Forms are written normalised, belong to labels, and never name two labels in one task."""
    all_labels = {label.lower() for labels in TASK_LABELS.values() for label in labels}
    assert set(WORD_FORMS) <= all_labels
    for label, forms in WORD_FORMS.items():
        assert all(normalize_answer(form) == form for form in forms), label
    for qa, labels in TASK_LABELS.items():
        forms = [form for label in labels for form in WORD_FORMS.get(label.lower(), ())]
        assert len(forms) == len(set(forms)), qa
        assert not {label.lower() for label in labels} & set(forms), qa


def test_official_and_corrected_are_separate_functions():
    labels = TASK_LABELS["qa7"]
    assert not official_correct("none", "none", "How many?", labels)
    assert corrected_correct("none", "none", "How many?", labels)


# Issue 33: an answer that lists several candidates of the answer's kind in parallel form has made no choice, so
# the reader abstains (`options`) and `acc_corrected` keeps `acc`'s verdict. The issue's shapes, each an invented
# enumeration a base model answered with (the first credited "garden" before):
ISSUE_33_SHAPES = [
    ("qa1", "garden", "Option A: In the garden\n\nOption B: In the bedroom\n\nOption C: In the kitchen", Q_MARY),
    ("qa1", "kitchen", "Option A: the kitchen\n\nOption B: the bathroom\n\nOption C: the", Q_MARY),
    (
        "qa1",
        "bathroom",
        "Option: The bathroom\n\nOption: The bedroom\n\nOption: The kitchen\n\nOption: The hallway",
        Q_MARY,
    ),
]

# The kinds the issue names, as the rule was written from them: labelled with letters or words (in other alphabets
# and languages too), bulleted, numbered, one line frame repeated with different fillers, inline.
PARALLEL_FORMS = [
    ("qa1", "garden", "Option A: In the garden\n\nOption B: In the", Q_MARY),  # cut off: labelled all the same
    ("qa1", "garden", "Choice 1 - garden\nChoice 2 - kitchen", Q_MARY),
    ("qa1", "garden", "Opci\u00f3n A: garden\nOpci\u00f3n B: kitchen", Q_MARY),
    ("qa1", "garden", "M\u00f6glichkeit 1: garden\nM\u00f6glichkeit 2: kitchen", Q_MARY),
    ("qa1", "garden", "\u9009\u9879A\uff1agarden\n\u9009\u9879B\uff1akitchen", Q_MARY),
    (
        "qa1",
        "garden",
        "\u0412\u0430\u0440\u0438\u0430\u043d\u0442 \u0410: garden\n\u0412\u0430\u0440\u0438\u0430\u043d\u0442 \u0411: kitchen",
        Q_MARY,
    ),
    ("qa1", "garden", "\u03b1) garden \u03b2) kitchen", Q_MARY),
    ("qa1", "garden", "A) garden B) kitchen C) office", Q_MARY),
    ("qa1", "garden", "(i) garden (ii) kitchen", Q_MARY),
    ("qa1", "garden", "First: garden\nSecond: kitchen", Q_MARY),
    ("qa1", "garden", "Option A: garden. Option B: kitchen.", Q_MARY),
    ("qa1", "garden", "Possible answer: garden\nPossible answer: kitchen", Q_MARY),
    ("qa1", "garden", "garden\nkitchen\noffice", Q_MARY),
    ("qa1", "garden", "Mary is in the garden. Mary is in the kitchen.", Q_MARY),
    ("qa4", "garden", "The garden\n\nThe hallway\n\nThe hallway", "What is west of the bedroom?"),
    ("qa5", "Mary", "Option A: Mary\nOption B: Fred", "Who gave the apple?"),
    ("qa5", "Bill", "Answer:\n\nBill\n\nJeff\n\nMary", "Who received the milk?"),
    ("qa6", "yes", "Option A: Mary is in the kitchen.\nOption B: Mary is in the garden.", Q_KITCHEN),
    ("qa6", "yes", "Option A: yes\nOption B: no", Q_KITCHEN),
]

# Shapes written after the rule was frozen, never used to write it: other label words, languages, closing marks,
# frames and tasks. Each must abstain.
UNSEEN_PARALLEL_FORMS = [
    ("qa1", "garden", "Alternative 1 \u2192 the garden\nAlternative 2 \u2192 the office", Q_MARY),
    ("qa1", "kitchen", "R\u00e9ponse A : kitchen\nR\u00e9ponse B : garden", Q_MARY),
    ("qa1", "office", "Opzione 1) office\nOpzione 2) hallway\nOpzione 3) garden", Q_MARY),
    ("qa1", "hallway", "Antwort A \u2013 hallway\nAntwort B \u2013 kitchen", Q_MARY),
    ("qa1", "bedroom", "* Choice: bedroom\n* Choice: bathroom", Q_MARY),
    (
        "qa1",
        "garden",
        "Mary could be in the garden.\nMary could be in the kitchen.\nMary could be in the office.",
        Q_MARY,
    ),
    ("qa1", "garden", "Candidate answer #1: garden\nCandidate answer #2: kitchen", Q_MARY),
    ("qa2", "kitchen", "(a) the kitchen; (b) the garden; (c) the hallway", "Where is the milk?"),
    (
        "qa4",
        "office",
        "The office is north of the garden.\nThe kitchen is north of the garden.",
        "What is north of the garden?",
    ),
    ("qa5", "Fred", "Option A - Fred\nOption B - Jeff", "Who received the apple?"),
    ("qa6", "yes", "Answer option 1: Yes\nAnswer option 2: No", Q_KITCHEN),
    ("qa14", "cinema", "Possibility one: cinema\nPossibility two: park", "Where was Mary before the school?"),
    ("qa15", "cat", "Choice A) cats\nChoice B) wolves", Q_AFRAID),
    ("qa16", "white", "1 - white\n2 - gray\n3 - green", "What color is Lily?"),
    ("qa1", "kitchen", "\u9078\u629e\u80a2A\uff1akitchen\n\u9078\u629e\u80a2B\uff1agarden", Q_MARY),
    ("qa1", "garden", "Option I: garden\nOption II: kitchen", Q_MARY),
    ("qa10", "maybe", "A. Yes B. No C. Maybe", Q_PARK),
    ("qa1", "garden", "She is in the garden!\nShe is in the bedroom!", Q_MARY),
]

# Not lists of candidates: an answer and facts narrated after it, one answer said twice, a list question's list.
NOT_PARALLEL = [
    ("qa1", "garden", "Answer: garden\n\nMary went to the office. Mary went to the garden.", Q_MARY, True),
    (
        "qa4",
        "garden",
        "Answer: garden\n\nThe garden is west of the bedroom. The bedroom is west of the kitchen.",
        "What is west of the bedroom?",
        True,
    ),  # fmt: skip
    ("qa1", "garden", "In the garden. In the garden.", Q_MARY, True),
    ("qa2", "kitchen", "The milk is in the kitchen. The apple is in the garden.", "Where is the milk?", True),
    ("qa8", "apple,football", "apple\nfootball", Q_CARRY, True),
    ("qa1", "garden", "1. In the garden.", Q_MARY, True),
    ("qa1", "garden", "Option: garden", Q_MARY, True),
]


@pytest.mark.parametrize(
    ("qa", "target", "output", "question"), ISSUE_33_SHAPES + PARALLEL_FORMS + UNSEEN_PARALLEL_FORMS
)
def test_parallel_candidates_are_no_choice(qa, target, output, question):
    verdict = check(qa, target, output, question)
    assert read(output, question, TASK_LABELS[qa]).abstained == "options"
    assert verdict.abstained and verdict.acc_corrected == verdict.acc


@pytest.mark.parametrize(("qa", "target", "output", "question"), ISSUE_33_SHAPES)
def test_the_issue_shapes_would_be_wrong_credits(qa, target, output, question):
    """`acc` fails each and its first item names the target: a reader taking the first item (2.6's) credits it."""
    assert not official_correct(target, output, question, TASK_LABELS[qa])
    assert target in output.splitlines()[0].lower()


def test_a_repeated_frame_without_letters_is_seen_by_the_frame_alone():
    """The third shape has no letter or number: the labelled-list test does not see it, the repeated frame does."""
    qa, _, output, question = ISSUE_33_SHAPES[2]
    assert not find_answer(output).abstained
    assert read(output, question, TASK_LABELS[qa]).abstained == "options"


@pytest.mark.parametrize(("qa", "target", "output", "question", "credited"), NOT_PARALLEL)
def test_an_answer_with_other_text_in_parallel_form_is_still_read(qa, target, output, question, credited):
    reading = read(output, question, TASK_LABELS[qa])
    assert reading.abstained == "" and check(qa, target, output, question).acc_corrected is credited

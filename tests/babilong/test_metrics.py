"""The BABILong answer checks: adversarial tables, and parity with the authors' published figures."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lm_eval_longmem.babilong.metrics import (
    TASK_LABELS,
    check,
    corrected_correct,
    first_sentence,
    official_correct,
    read_predictions,
    score_file,
)

# (task, target, output, question, acc, acc_corrected)
CASES = [
    # plain answers
    ("qa1", "office", "The most recent location of Mary is office.", "Where is Mary?", True, True),
    ("qa1", "office", "office", "Where is Mary?", True, True),
    ("qa1", "office", "OFFICE", "Where is Mary?", True, True),
    # two labels named: wrong under both
    ("qa1", "office", "Mary is in the office or the kitchen.", "Where is Mary?", False, False),
    # only the first sentence counts
    ("qa1", "office", "Office. Earlier she was in the kitchen.", "Where is Mary?", True, True),
    ("qa1", "office", "She moved. Then to the office.", "Where is Mary?", False, False),
    # imitating the prompt is cut off
    ("qa1", "office", "office<example>kitchen", "Where is Mary?", True, True),
    ("qa1", "office", "office <context> kitchen", "Where is Mary?", True, True),
    # labels named in the question are ignored
    ("qa3", "garden", "Before the kitchen the apple was in the garden.", "Where was the apple before the kitchen?", True, True),
    ("qa5", "Fred", "Fred", "Who gave the apple to Jeff?", True, True),
    ("qa5", "apple", "Fred gave the apple.", "What did Fred give to Jeff?", True, True),
    # "none" contains "one": the authors' check marks the right answer wrong
    ("qa7", "none", "none", "How many objects is Mary carrying?", False, True),
    ("qa7", "one", "none", "How many objects is Mary carrying?", False, False),
    ("qa7", "one", "one", "How many objects is Mary carrying?", True, True),
    ("qa7", "two", "Mary is carrying two objects, not one.", "How many objects is Mary carrying?", False, False),
    # "not" contains "no"
    ("qa6", "no", "It is not known.", "Is Mary in the office?", True, False),
    ("qa6", "yes", "yes, she is not elsewhere", "Is Mary in the office?", False, True),
    ("qa6", "no", "No", "Is Mary in the office?", True, True),
    ("qa10", "maybe", "maybe", "Is Bill in the park?", True, True),
    ("qa10", "no", "nobody knows", "Is Bill in the park?", True, False),
    # comma lists (qa8): output with or without spaces, target with or without spaces
    ("qa8", "apple,football", "apple,football", "What is Mary carrying?", True, True),
    ("qa8", "apple,football", "football, apple", "What is Mary carrying?", True, True),
    ("qa8", "football, apple", "apple, football", "What is Mary carrying?", False, True),
    ("qa8", "apple,football", "apple", "What is Mary carrying?", False, False),
    ("qa8", "apple,football", "apple, football, milk", "What is Mary carrying?", False, False),
    ("qa8", "nothing", "nothing", "What is Mary carrying?", True, True),
    # qa19 pairs are single labels; a space after the comma hides the answer from the authors' check
    ("qa19", "n,w", "n,w", "How do you go from the bathroom to the hallway?", True, True),
    ("qa19", "n,w", "n, w", "How do you go from the bathroom to the hallway?", False, True),
    ("qa19", "n,w", "w,n", "How do you go from the bathroom to the hallway?", False, False),
    ("qa19", "s,s", "s,s", "How do you go from the kitchen to the garden?", True, True),
    # whole words: "bedroom" is not found inside "bedrooms"? it is a different word
    ("qa20", "hungry", "hungry", "Why did John go to the kitchen?", True, True),
    ("qa14", "park", "the parking lot", "Where was Mary before the school?", True, False),
    # empty answer
    ("qa1", "office", "", "Where is Mary?", False, False),
]


@pytest.mark.parametrize(("qa", "target", "output", "question", "acc", "acc_corrected"), CASES)
def test_checks(qa, target, output, question, acc, acc_corrected):
    assert check(qa, target, output, question) == (acc, acc_corrected)


def test_first_sentence_lowercases_and_cuts():
    assert first_sentence("The Office. Kitchen") == "the office"
    assert first_sentence("office<context>x") == "office"


def test_every_task_has_labels():
    assert sorted(TASK_LABELS, key=lambda q: int(q[2:])) == [f"qa{n}" for n in range(1, 21)]
    assert len(TASK_LABELS["qa19"]) == 12 and len(TASK_LABELS["qa20"]) == 7
    with pytest.raises(ValueError, match="qa1..qa20"):
        check("qa21", "x", "x", "q")


# ---------------------------------------------------------------- parity with the authors' figures

PUBLISHED = {  # the BABILong authors' scores of these files (percent)
    ("qa1", "0k"): 100.0,
    ("qa1", "16k"): 91.3,
    ("qa1", "32k"): 77.2,
    ("qa1", "128k"): 66.0,
    ("qa1", "1M"): 57.0,
    ("qa2", "0k"): 98.3,
    ("qa3", "0k"): 86.99,
    ("qa4", "0k"): 100.0,
    ("qa5", "0k"): 97.4,
}
PREDICTIONS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "babilong_predictions"
FILES = sorted(PREDICTIONS.rglob("*.csv"))


def _oracle(target: str, output: str, question: str, labels) -> bool:
    """The issue's description of the authors' check, written out a second time, independently."""
    text = output.lower()
    text = text[: text.index(".")] if "." in text else text
    for tag in ("<context>", "<example>"):
        if tag in text:
            text = text[: text.index(tag)]
    lowered = [label.lower() for label in labels]
    found = [label for label in lowered if label in text and label not in question.lower()]
    target = target.lower()
    if len(target) > 3 and "," in target:
        return sorted(found) == sorted(target.split(","))
    return found == [target]


def _task_and_length(path: Path) -> tuple[str, str]:
    qa, length = path.name.split("_")[:2]
    return qa, length


def test_all_published_files_are_present(shared_data):
    found = {_task_and_length(p) for p in (shared_data / "babilong_predictions").rglob("*.csv")}
    assert set(PUBLISHED) <= found


@pytest.mark.parametrize("path", FILES, ids=[p.name.split("_instruction")[0] for p in FILES])
def test_official_check_reproduces_every_file(path):
    qa, length = _task_and_length(path)
    score = score_file(path, qa)
    rows = read_predictions(path)
    with open(path, newline="", encoding="utf-8") as fh:
        assert score.n == sum(1 for _ in csv.DictReader(fh)) > 0
    oracle = 100.0 * sum(_oracle(r["target"], r["output"], r["question"], TASK_LABELS[qa]) for r in rows) / len(rows)
    assert score.acc == pytest.approx(oracle, abs=1e-9)
    if (qa, length) in PUBLISHED:
        assert round(score.acc, 2) == PUBLISHED[(qa, length)]
    assert 0.0 <= score.acc_corrected <= 100.0


def test_official_and_corrected_are_separate_functions():
    labels = TASK_LABELS["qa7"]
    assert not official_correct("none", "none", "How many?", labels)
    assert corrected_correct("none", "none", "How many?", labels)


def test_read_predictions_names_missing_columns(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("target,answer\nx,y\n")
    with pytest.raises(ValueError, match="target, output and question"):
        read_predictions(bad)

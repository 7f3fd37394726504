"""BABILong prediction files: reading the authors' CSVs, and the audit of where the two checks differ."""

from __future__ import annotations

import csv

import pytest

from lm_eval_longmem.babilong.predictions import audit_rows, read_predictions, read_task_predictions
from lm_eval_longmem.common.errors import UsageError

Q_COUNT = "How many objects is Mary carrying?"


def test_audit_lists_disagreements_with_their_shape():
    rows = [
        {"target": "none", "output": "None.", "question": Q_COUNT},
        {"target": "two", "output": "John is carrying two objects.", "question": Q_COUNT},
        {"target": "one", "output": "one", "question": Q_COUNT},
        {"target": "none", "output": "zero. Or one", "question": Q_COUNT},
        {"target": "one", "output": "A. one\nB. two", "question": Q_COUNT},
    ]
    audit = audit_rows(rows, "qa7")
    assert audit.score == (5, 40.0, 40.0, 40.0)
    assert audit.abstentions == {"alternative": 1, "options": 1}
    assert [(d.row, d.answer, d.acc, d.acc_corrected, d.rule) for d in audit.disagreements] == [
        (0, "None", False, True, "label"),
        (1, "John is carrying two objects", True, False, "statement"),
    ]
    assert audit.by_rule == {"label": 1, "statement": 1}


def test_read_predictions_names_missing_columns(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("target,answer\nx,y\n")
    with pytest.raises(ValueError, match="target, output and question"):
        read_predictions(bad)


def test_read_predictions_takes_long_outputs_and_names_the_real_cause(tmp_path):
    """A UTF-8 CSV with an output longer than the csv module's default 128 KiB cell limit is read."""
    long_output = "bathroom. " + "é" * 1_500_000
    good = tmp_path / "long.csv"
    good.write_text(f"target,output,question\nbathroom,{long_output},Where is Mary?\n", encoding="utf-8")
    assert read_predictions(good) == [{"target": "bathroom", "output": long_output, "question": "Where is Mary?"}]
    assert csv.field_size_limit() == 131072  # the process-wide limit is left as it was
    latin = tmp_path / "latin.csv"
    latin.write_bytes("target,output,question\ncafé,café,Where?\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"latin\.csv is not UTF-8 text \(byte 26\)"):
        read_predictions(latin)


def test_a_file_is_read_as_the_task_its_content_answers(tmp_path):
    """`read_task_predictions` (what `score` and `audit` read): the rows when they answer `qa`, else one clear error."""
    path = tmp_path / "preds5.csv"
    path.write_text(
        "target,output,question\nFred,Fred,Who gave the apple to Jeff?\napple,apple,What did Fred give to Jeff?\n"
    )
    assert read_task_predictions(path, "qa5") == read_predictions(path) != []
    with pytest.raises(
        UsageError, match=r"preds5\.csv: targets such as 'Fred', 'apple' are not qa1 answers; it looks like qa5"
    ):
        read_task_predictions(path, "qa1")

"""`lm-eval-longmem babilong audit`: every disagreement between the two checks, with its rule, and the counts."""

from __future__ import annotations

import csv
import json

import pytest

from lm_eval_longmem.cli import main

ROWS = [  # (target, output); the question is the same for all
    ("none", "None."),  # acc 0 ("none" contains "one"), acc_corrected 1: whole-word
    ("one", "No one knows"),  # acc 1, acc_corrected 0: negation
    ("one", "one"),  # both 1: not listed
    ("none", "zero"),  # acc 0, acc_corrected 1: whole-word+word-form
    ("two", "three"),  # both 0: not listed
]


@pytest.fixture
def predictions(tmp_path):
    path = tmp_path / "qa7_0k_predictions.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["", "target", "output", "question"])
        for index, (target, output) in enumerate(ROWS):
            writer.writerow([index, target, output, "How many objects is Mary carrying?"])
    return path


def test_audit_prints_each_disagreement_and_the_counts(predictions, capsys):
    main(["babilong", "audit", str(predictions), "--task", "qa7"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "row 0: target='none' answer='None' acc=0 acc_corrected=1 rule=whole-word",
        "row 1: target='one' answer='No one knows' acc=1 acc_corrected=0 rule=negation",
        "row 3: target='none' answer='zero' acc=0 acc_corrected=1 rule=whole-word+word-form",
    ]
    assert lines[3] == (
        f"{predictions}: n=5  acc=40.00  acc_corrected=60.00  disagreeing rows=3 "
        "(by rule: whole-word 1, negation 1, whole-word+word-form 1)"
    )
    assert len(lines) == 4


def test_audit_json(predictions, capsys):
    main(["babilong", "audit", str(predictions), "--task", "qa7", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (report["n"], report["acc"], report["acc_corrected"]) == (5, 40.0, 60.0)
    assert [(row["row"], row["output"], row["rule"]) for row in report["disagreements"]] == [
        (0, "None.", "whole-word"),
        (1, "No one knows", "negation"),
        (3, "zero", "whole-word+word-form"),
    ]
    assert report["by_rule"] == {"whole-word": 1, "negation": 1, "whole-word+word-form": 1}


def test_audit_of_a_file_where_the_checks_agree(tmp_path, capsys):
    path = tmp_path / "qa1.csv"
    path.write_text("target,output,question\noffice,The most recent location of Mary is office.,Where is Mary?\n")
    main(["babilong", "audit", str(path), "--task", "qa1"])
    assert capsys.readouterr().out == f"{path}: n=1  acc=100.00  acc_corrected=100.00  disagreeing rows=0 (by rule: none)\n"

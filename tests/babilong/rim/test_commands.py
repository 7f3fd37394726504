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


def test_audit_lists_each_disagreement_with_rows(predictions, capsys):
    main(["babilong", "audit", str(predictions), "--task", "qa7", "--rows"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "row 0: target='none' answer='None' acc=0 acc_corrected=1 rule=whole-word",
        "row 1: target='one' answer='No one knows' acc=1 acc_corrected=0 rule=negation",
        "row 3: target='none' answer='zero' acc=0 acc_corrected=1 rule=whole-word+word-form",
    ]
    assert lines[3] == (
        f"{predictions}: qa7 n=5  acc=40.00  acc_corrected=60.00  disagreeing=3 "
        "(credited: whole-word 1, whole-word+word-form 1; failed: negation 1)  both fail=1  abstained=0.00 (none)"
    )
    assert len(lines) == 4


def test_audit_takes_the_task_from_the_file_name(predictions, capsys):
    main(["babilong", "audit", str(predictions)])
    assert capsys.readouterr().out.startswith(f"{predictions}: qa7 n=5 ")


def test_audit_json(predictions, capsys):
    main(["babilong", "audit", str(predictions), "--task", "qa7", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (report["n"], report["acc"], report["acc_corrected"]) == (5, 40.0, 60.0)
    assert [(row["row"], row["output"], row["rule"], row["direction"]) for row in report["disagreements"]] == [
        (0, "None.", "whole-word", "credited"),
        (1, "No one knows", "negation", "failed"),
        (3, "zero", "whole-word+word-form", "credited"),
    ]
    assert report["by_rule"] == {"whole-word": 1, "negation": 1, "whole-word+word-form": 1}
    assert report["by_direction"] == {
        "credited": {"whole-word": 1, "whole-word+word-form": 1},
        "failed": {"negation": 1},
    }
    assert report["both_fail"] == 1


def test_audit_sample_is_stratified_and_seeded(predictions, tmp_path, capsys):
    other = tmp_path / "qa1_0k_more.csv"
    other.write_text("target,output,question\noffice,kitchen,Where is Mary?\noffice,garden,Where is Mary?\n")
    main(["babilong", "audit", str(predictions), str(other), "--sample", "4", "--seed", "1", "--jobs", "1"])
    first = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(first) if line.startswith("# sample of 4"))
    picked = [json.loads(line) for line in first[header + 1 :]]
    # five strata (qa1 both fail; qa7 both fail, credited by two rules, failed by negation): four
    # answers come from four of them, none twice
    assert len(picked) == 4 and len({(p["task"], p["stratum"]) for p in picked}) == 4
    assert {p["task"] for p in picked} <= {"qa1", "qa7"}
    main(["babilong", "audit", str(predictions), str(other), "--sample", "4", "--seed", "1", "--jobs", "2"])
    assert capsys.readouterr().out.splitlines() == first


def test_audit_of_a_file_where_the_checks_agree(tmp_path, capsys):
    path = tmp_path / "qa1.csv"
    path.write_text("target,output,question\noffice,The most recent location of Mary is office.,Where is Mary?\n")
    main(["babilong", "audit", str(path), "--task", "qa1"])
    assert capsys.readouterr().out == (
        f"{path}: qa1 n=1  acc=100.00  acc_corrected=100.00  disagreeing=0 (none)  both fail=0  abstained=0.00 (none)\n"
    )


def test_audit_and_score_show_where_the_corrected_reader_abstained(tmp_path, capsys):
    path = tmp_path / "qa1.csv"
    path.write_text(
        'target,output,question\noffice,office,Where is Mary?\n"kitchen","A. kitchen\nB. hallway",Where is Mary?\n'
    )
    main(["babilong", "audit", str(path), "--task", "qa1", "--json"])
    audit = json.loads(capsys.readouterr().out)
    assert audit["abstained"] == 50.0 and audit["abstentions"] == {"options": 1}
    main(["babilong", "score", str(path), "--task", "qa1"])
    assert capsys.readouterr().out.endswith("abstained=50.00\n")


# ---------------------------------------------------------------- issue 21, defect 4: the content names the task

QA5_ROWS = [
    ("Fred", "Fred", "Who gave the apple to Jeff?"),
    ("apple", "apple", "What did Fred give to Jeff?"),
    ("Jeff", "Jeff", "Who received the football?"),
]


@pytest.fixture
def renamed_qa5(tmp_path):
    path = tmp_path / "preds5.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["target", "output", "question"])
        writer.writerows(QA5_ROWS)
    return path


@pytest.mark.parametrize("command", ["score", "audit"])
def test_a_file_of_another_task_is_refused_naming_the_likely_task(renamed_qa5, command, capsys):
    with pytest.raises(SystemExit, match="1"):
        main(["babilong", command, str(renamed_qa5), "--task", "qa1"])
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert str(renamed_qa5) in err[0] and "not qa1 answers" in err[0] and "--task qa5" in err[0]


def test_questions_of_another_task_are_refused(tmp_path, capsys):
    path = tmp_path / "preds9.csv"
    path.write_text("target,output,question\nyes,yes,Is Mary in the kitchen?\nno,no,Is John in the office?\n")
    with pytest.raises(SystemExit, match="1"):
        main(["babilong", "score", str(path), "--task", "qa17"])
    err = capsys.readouterr().err
    assert "of its questions have the form of qa17" in err and "qa6 or qa9 or qa10" in err


def test_the_right_task_scores(renamed_qa5, capsys):
    main(["babilong", "score", str(renamed_qa5), "--task", "qa5"])
    assert capsys.readouterr().out == f"{renamed_qa5}: n=3  acc=100.00  acc_corrected=100.00  abstained=0.00\n"


def test_an_empty_target_is_named_as_such(tmp_path, capsys):
    """Issue 28, defect 9: one row with an empty target was "not a qa1 answer ... pass --task qa1", contradicting `--task qa1`."""
    path = tmp_path / "qa1_emptytarget.csv"
    path.write_text(
        "target,output,question\n,The most recent location of Mary is office.,Where is Mary?\n", encoding="utf-8"
    )
    with pytest.raises(SystemExit, match="1"):
        main(["babilong", "score", str(path), "--task", "qa1"])
    err = capsys.readouterr().err
    assert err == (
        f"lm-eval-longmem: error: {path}: the target of row 1 is empty (1 of 1 rows have no target): give every row its gold "
        "answer in the target column (rows are counted from 1, after the header)\n"
    )


def test_a_csv_with_a_byte_order_mark_scores(tmp_path, capsys):
    """A UTF-8 CSV saved with a byte-order mark (as spreadsheet programs save it) has its target column."""
    path = tmp_path / "qa1_bom.csv"
    path.write_text(
        "target,output,question\noffice,office,Where is Mary?\nkitchen,garden,Where is John?\n", encoding="utf-8-sig"
    )
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    main(["babilong", "score", str(path), "--task", "qa1"])
    assert capsys.readouterr().out == f"{path}: n=2  acc=50.00  acc_corrected=50.00  abstained=0.00\n"


@pytest.mark.parametrize(
    ("bad_row", "fields"),
    [("office,Where is Mary?", 2), ("office,It is the office, I think,Where is Mary?", 4)],
    ids=["too-few-fields", "an-unquoted-comma"],
)
@pytest.mark.parametrize("command", ["score", "audit"])
def test_a_ragged_csv_is_refused_naming_its_first_bad_row(tmp_path, capsys, bad_row, fields, command):
    """A row with fewer or more fields than the header (an unquoted comma in an output) would shift its cells: refused."""
    path = tmp_path / "qa1_ragged.csv"
    path.write_text(f"target,output,question\nkitchen,kitchen,Where is John?\n{bad_row}\nhall,hall,Where is Sandra?\n")
    with pytest.raises(SystemExit, match="1"):
        main(["babilong", command, str(path), "--task", "qa1"])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"lm-eval-longmem: error: {path}: row 2 (line 3) has {fields} fields, the header 3: quote every cell that holds "
        "a comma (rows are counted from 1, after the header)\n"
    )


@pytest.mark.parametrize("command", ["score", "audit"])
def test_a_file_given_twice_is_refused(predictions, capsys, command):
    """A file named twice (here once through `..`) would be scored twice, and weigh twice in `audit --sample`."""
    again = predictions.parent / ".." / predictions.parent.name / predictions.name
    with pytest.raises(SystemExit, match="1"):
        main(["babilong", command, str(predictions), str(again), "--task", "qa7"])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"lm-eval-longmem: error: {again} is given twice: name each file once\n"

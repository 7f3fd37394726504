"""`lm-eval-longmem babilong audit`: every disagreement between the two checks, with its shape, and the counts."""

from __future__ import annotations

import csv
import json

import pytest

from lm_eval_longmem.cli import main

ROWS = [  # (target, output); the question is the same for all
    ("none", "None."),  # acc 0 ("none" contains "one"), acc_corrected 1: label
    ("two", "John is carrying two objects."),  # acc 1, acc_corrected 0: a statement about another person
    ("one", "one"),  # both 1
    ("none", "zero"),  # acc 0, acc_corrected 1: label
    ("two", "three"),  # both 0
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
        "row 0: target='none' answer='None' acc=0 acc_corrected=1 rule=label",
        "row 1: target='two' answer='John is carrying two objects' acc=1 acc_corrected=0 rule=statement",
        "row 3: target='none' answer='zero' acc=0 acc_corrected=1 rule=label",
    ]
    assert lines[3] == (
        f"{predictions}: qa7 n=5  acc=40.00  acc_corrected=60.00  disagreeing=3 "
        "(credited: label 2; failed: statement 1)  both fail=1  abstained=0.00 (none)"
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
        (0, "None.", "label", "credited"),
        (1, "John is carrying two objects.", "statement", "failed"),
        (3, "zero", "label", "credited"),
    ]
    assert report["by_rule"] == {"label": 2, "statement": 1}
    assert report["by_direction"] == {"credited": {"label": 2}, "failed": {"statement": 1}}
    assert report["both_fail"] == 1


def _sample(qa: str, target: str, question: str, output: str, logged: tuple[float, float, float, str | None]) -> str:
    acc, corrected, abstained, reason = logged
    summary = {"qa": qa, "length": 0, "acc": acc, "acc_corrected": corrected, "corrected_abstained": abstained}
    if reason is not None:
        summary["corrected_reason"] = reason
    doc = {"qa": qa, "length": 0, "target": target, "question": question}
    return json.dumps({"doc": doc, "filtered_resps": [output], "summary": summary})


def test_audit_of_a_run_shows_the_reasons_it_logged(tmp_path, capsys):
    """A run's samples file: one audit per bAbI task, of the verdicts and the reasons the run logged."""
    path = tmp_path / "samples_babilong_2026-11-29T00-00-00.jsonl"
    path.write_text(
        "\n".join(
            [
                _sample("qa7", "none", "How many objects is Mary carrying?", "None.", (0.0, 1.0, 0.0, "label")),
                _sample("qa7", "one", "How many objects is Mary carrying?", "one", (1.0, 1.0, 0.0, "label")),
                _sample(
                    "qa1", "office", "Where is Mary?", "office or kitchen", (0.0, 0.0, 1.0, "abstained: alternative")
                ),
                _sample("qa1", "garden", "Where is Mary?", "Garden.", (0.0, 1.0, 0.0, None)),  # an older file
            ]
        )
        + "\n"
    )
    main(["babilong", "audit", str(path), "--rows"])
    assert capsys.readouterr().out.splitlines() == [
        "row 1: target='garden' answer='' acc=0 acc_corrected=1 rule=not logged",
        f"{path}: qa1 n=2  acc=0.00  acc_corrected=50.00  disagreeing=1 (credited: not logged 1)  both fail=1  "
        "abstained=50.00 (alternative 1)",
        "row 0: target='none' answer='' acc=0 acc_corrected=1 rule=label",
        f"{path}: qa7 n=2  acc=50.00  acc_corrected=100.00  disagreeing=1 (credited: label 1)  both fail=0  "
        "abstained=0.00 (none)",
    ]


def test_a_file_that_is_no_samples_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "samples_other.jsonl"
    path.write_text('{"doc": {"x": 1}}\n')
    with pytest.raises(SystemExit, match="1"):
        main(["babilong", "audit", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}, line 1: not a babilong sample" in err[0]


def test_audit_sample_is_stratified_and_seeded(predictions, tmp_path, capsys):
    other = tmp_path / "qa1_0k_more.csv"
    other.write_text("target,output,question\noffice,kitchen,Where is Mary?\noffice,garden,Where is Mary?\n")
    main(["babilong", "audit", str(predictions), str(other), "--sample", "4", "--seed", "1", "--jobs", "1"])
    first = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(first) if line.startswith("# sample of 4"))
    picked = [json.loads(line) for line in first[header + 1 :]]
    # four strata (qa1 both fail; qa7 both fail, credited by label, failed by statement): four answers, one of
    # each
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


# ---------------------------------------------------------------- the content names the task

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
    """One row with an empty target is named as such (not "not a qa1 answer ... pass --task qa1")."""
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

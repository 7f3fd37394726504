"""Which (task, length) runs, the metadata options, the hub sets, and the bAbI reader."""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.babi import read_babi, task_file
from lm_eval_longmem.babilong.data import (
    HUB_SETS,
    STANDARD_LENGTHS,
    Options,
    load_docs,
    parse_depth,
    parse_options,
    parse_tasks,
    select,
)


def test_defaults():
    options = parse_options({})
    assert options == Options()
    assert options.source == "hub" and options.lengths is None and options.tasks == ("qa1", "qa2", "qa3", "qa4", "qa5")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[0k,4k]", (0, 4096)),  # --metadata babilong_lengths=[0k,4k] arrives as this string
        ("0k,4k", (0, 4096)),
        ([0, 1024], (0, 1024)),
        ("1M", (1048576,)),
        ("fit", None),
    ],
)
def test_lengths_option(value, expected):
    assert parse_options({"babilong_lengths": value}).lengths == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("qa1-qa3", ("qa1", "qa2", "qa3")),
        ("qa5,qa1", ("qa1", "qa5")),
        ("[qa1,qa2]", ("qa1", "qa2")),
        (["qa20"], ("qa20",)),
        ("all", tuple(f"qa{n}" for n in range(1, 21))),
    ],
)
def test_tasks_option(value, expected):
    assert parse_tasks(value) == expected


@pytest.mark.parametrize("bad", ["qa0", "qa21", "qa1-qa25", "task1", ""])
def test_bad_tasks_option(bad):
    with pytest.raises(ValueError, match="babilong_tasks|qa1..qa20"):
        parse_tasks(bad)


def test_depth_and_switch_options():
    assert parse_depth("0-0.25") == (0.0, 0.25)
    assert parse_depth([0.5, 1]) == (0.5, 1.0)
    for bad in ("0.5-0.25", "1-2", "x"):
        with pytest.raises(ValueError, match="babilong_depth"):
            parse_depth(bad)
    switches = parse_options({"babilong_examples": False, "babilong_answer_format": "no"}).switches
    assert (switches.instruction, switches.examples, switches.answer_format) == (True, False, False)
    with pytest.raises(ValueError, match="true or false"):
        parse_options({"babilong_instruction": "maybe"})
    with pytest.raises(ValueError, match="babilong_source"):
        parse_options({"babilong_source": "web"})


def test_default_runs_every_standard_length_within_the_window():
    options = parse_options({})
    runs = [ln for ln in STANDARD_LENGTHS if select("qa1", ln, options, 8192).runs]
    assert runs == ["0k", "1k", "2k", "4k", "8k"]
    reason = select("qa1", "16k", options, 8192).reason
    assert "exceeds the model's window (8192)" in reason


def test_unknown_window_needs_explicit_lengths():
    with pytest.raises(ValueError, match="max_length"):
        select("qa1", "4k", parse_options({}), None)
    assert select("qa1", "4k", parse_options({"babilong_lengths": "4k"}), None).runs


def test_explicit_lengths_restrict_and_an_impossible_one_is_an_error():
    options = parse_options({"babilong_lengths": "0k,2k"})
    assert select("qa2", "2k", options, 4096).runs
    assert "not in babilong_lengths (0k,2k)" in select("qa2", "4k", options, 4096).reason
    with pytest.raises(ValueError, match="remove 8k from babilong_lengths"):
        select("qa1", "8k", parse_options({"babilong_lengths": "8k"}), 4096)


def test_tasks_outside_the_selection_or_the_hub_set_do_not_run():
    options = parse_options({"babilong_lengths": "0k,4k", "babilong_tasks": "all"})
    assert select("qa20", "0k", options, None).runs
    assert "RMT-team/babilong has no qa11 at 4k" in select("qa11", "4k", options, None).reason
    assert select("qa10", "4k", options, None).runs
    one_k = parse_options({"babilong_lengths": "4k", "babilong_tasks": "all", "babilong_source": "hub-1k"})
    assert not select("qa6", "4k", one_k, None).runs
    assert "qa9 is not in babilong_tasks" in select("qa9", "0k", parse_options({"babilong_lengths": "0k"}), None).reason
    generated = parse_options({"babilong_lengths": "4k", "babilong_tasks": "all", "babilong_source": "generate"})
    assert select("qa19", "4k", generated, None).runs


def test_hub_sets():
    assert HUB_SETS["hub"].has("qa10", "1M") and not HUB_SETS["hub"].has("qa11", "1k")
    assert HUB_SETS["hub-1k"].has("qa20", "0k") and not HUB_SETS["hub-1k"].has("qa1", "256k")


def test_not_selected_task_gets_no_docs_and_says_why():
    docs = load_docs(qa="qa7", length="0k", babilong_lengths="0k")["test"]
    assert len(docs) == 0
    assert "qa7 is not in babilong_tasks" in docs.info.description


def test_hub_offline_is_a_clear_error():
    # conftest sets HF_DATASETS_OFFLINE=1: the hub set is unreachable here
    with pytest.raises(RuntimeError, match="babilong_source=generate"):
        load_docs(qa="qa1", length="0k", babilong_lengths="0k")


def test_generate_needs_babi_dir():
    with pytest.raises(ValueError, match="babilong_babi_dir"):
        load_docs(qa="qa1", length="0k", babilong_lengths="0k", babilong_source="generate", tokenizer="unused")


def test_babi_reader(shared_data, tmp_path):
    samples = read_babi(task_file(shared_data / "babi" / "en", "qa1"))
    assert len(samples) == 1000
    first = samples[0]
    assert first.facts == ("John travelled to the hallway.", "Mary journeyed to the bathroom.")
    assert (first.question, first.answer, first.supporting) == ("Where is John?", "hallway", (0,))
    second = samples[1]  # the same story goes on; the earlier question is not a fact
    assert len(second.facts) == 4 and second.story == 0 and second.answer == "bathroom"
    lists = read_babi(task_file(shared_data / "babi" / "en", "qa8"))
    assert any("," in s.answer for s in lists)
    path = tmp_path / "qa1_x_test.txt"
    path.write_text("1 Mary went home.\n2 Where is Mary? \thome\t1\n1 Bill left.\n2 Bill came back.\n3 Where is Bill?\tback\t1 2\n")
    parsed = read_babi(path)
    assert [s.story for s in parsed] == [0, 1] and parsed[1].supporting == (0, 1)
    with pytest.raises(FileNotFoundError, match="babilong_babi_dir"):
        task_file(tmp_path / "missing", "qa1")


def test_hub_rows_become_docs(monkeypatch):
    import datasets

    from lm_eval_longmem.babilong import data

    calls = []

    def fake_load_dataset(path, name, split):
        calls.append((path, name, split))
        return datasets.Dataset.from_dict(
            {"input": ["Mary went to the office. " * 3], "question": ["Where is Mary?"], "target": ["office"]}
        )

    monkeypatch.setattr(data.datasets, "load_dataset", fake_load_dataset)
    docs = load_docs(qa="qa2", length="4k", babilong_lengths="4k", babilong_source="hub-1k")["test"]
    assert calls == [("RMT-team/babilong-1k-samples", "4k", "qa2")]
    doc = docs[0]
    assert (doc["qa"], doc["length"], doc["length_name"], doc["target"], doc["skip_reason"]) == ("qa2", 4096, "4k", "office", "")

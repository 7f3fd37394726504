"""The `babilong_*` options, which cells run, the hub sets, the interleaved docs, and the bAbI reader."""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.babi import read_babi, task_file
from lm_eval_longmem.babilong.data import HUB_SETS, babilong_options, load_docs, selected_lengths
from lm_eval_longmem.babilong.options import STANDARD_LENGTHS, BabilongOptions
from lm_eval_longmem.common.errors import UsageError


def test_defaults():
    options = babilong_options({})
    assert options == BabilongOptions()
    assert options.source == "hub" and options.lengths is None and options.tasks == ("qa1", "qa2", "qa3", "qa4", "qa5")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[0k,4k]", (0, 4096)),  # --metadata babilong_lengths=[0k,4k] arrives as this string
        ("4k,0k", (0, 4096)),
        ([0, 1024], (0, 1024)),
        ("1M", (1048576,)),
        ("fit", None),
    ],
)
def test_lengths_option(value, expected):
    """Lengths are token counts from the moment they are parsed."""
    assert babilong_options({"babilong_lengths": value}).lengths == expected


def test_a_length_given_twice_is_refused():
    """Written two ways (1k and 1024) it is one cell, which a repeat would run or merge without a word."""
    with pytest.raises(
        UsageError, match=r"^--metadata babilong_lengths='\[0, 1k, 1024\]': 1k is given twice: name each length once"
    ):
        babilong_options({"babilong_lengths": "[0, 1k, 1024]"})


def test_standard_lengths_are_the_authors_splits_in_tokens():
    assert STANDARD_LENGTHS[:4] == (0, 1024, 2048, 4096) and STANDARD_LENGTHS[-1] == 1048576


def test_non_standard_length_is_an_error_listing_the_valid_ones():
    with pytest.raises(UsageError, match=r"babilong_lengths=.*3k is not a BABILong length; choose among 0k,1k,2k"):
        babilong_options({"babilong_lengths": "[3k]"})
    with pytest.raises(UsageError, match=r"babilong_lengths=.*unknown length spec 'four'"):
        babilong_options({"babilong_lengths": "[0k,four]"})


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
    assert babilong_options({"babilong_tasks": value}).tasks == expected


@pytest.mark.parametrize("bad", ["qa0", "qa21", "qa1-qa25", "task1"])
def test_bad_tasks_option(bad):
    with pytest.raises(UsageError, match="babilong_tasks"):
        babilong_options({"babilong_tasks": bad})


def test_depth_and_switch_options():
    assert babilong_options({"babilong_depth": "0-0.25"}).depth == (0.0, 0.25)
    assert babilong_options({"babilong_depth": [0.5, 1]}).depth == (0.5, 1.0)
    for bad in ("0.5-0.25", "1-2", "x"):
        with pytest.raises(UsageError, match="babilong_depth"):
            babilong_options({"babilong_depth": bad})
    switches = babilong_options({"babilong_examples": False, "babilong_answer_format": "no"}).switches
    assert (switches.instruction, switches.examples, switches.answer_format) == (True, False, False)
    with pytest.raises(UsageError, match="babilong_instruction='maybe': expected true or false"):
        babilong_options({"babilong_instruction": "maybe"})
    with pytest.raises(UsageError, match="babilong_source"):
        babilong_options({"babilong_source": "web"})


def test_default_runs_every_standard_length_within_the_window():
    assert selected_lengths(babilong_options({}), 8192) == (0, 1024, 2048, 4096, 8192)
    assert selected_lengths(babilong_options({}), 10**7) == STANDARD_LENGTHS


def test_unknown_window_needs_explicit_lengths():
    with pytest.raises(UsageError, match="max_length"):
        selected_lengths(babilong_options({}), None)
    assert selected_lengths(babilong_options({"babilong_lengths": "4k"}), None) == (4096,)


def test_an_explicit_length_beyond_the_window_is_an_error():
    with pytest.raises(UsageError, match="remove 8k"):
        selected_lengths(babilong_options({"babilong_lengths": "8k"}), 4096)


def test_hub_sets():
    assert HUB_SETS["hub"].has("qa10", 1048576) and not HUB_SETS["hub"].has("qa11", 1024)
    assert HUB_SETS["hub"].has("qa1", 10 * 1048576)  # 10M: on the hub, not a standard length here
    assert HUB_SETS["hub-1k"].has("qa20", 0) and not HUB_SETS["hub-1k"].has("qa1", 262144)


def test_a_cell_the_hub_set_lacks_is_an_error(tiny_llama_dir):
    with pytest.raises(UsageError, match="RMT-team/babilong has no qa11 at 4k"):
        load_docs(pretrained=str(tiny_llama_dir), max_length=8192, babilong_lengths="4k", babilong_tasks="qa11")


def test_hub_offline_is_a_clear_error(tiny_llama_dir):
    # conftest sets HF_DATASETS_OFFLINE=1: the hub set is unreachable here
    with pytest.raises(UsageError, match="babilong_source=generate"):
        load_docs(pretrained=str(tiny_llama_dir), babilong_lengths="0k")


def test_generate_with_babi_facts_needs_babi_dir(tiny_llama_dir):
    with pytest.raises(UsageError, match="babilong_babi_dir"):
        load_docs(pretrained=str(tiny_llama_dir), babilong_lengths="0k", babilong_source="generate")


def test_one_dataset_holds_every_cell_interleaved(tiny_llama_dir):
    docs = load_docs(
        pretrained=str(tiny_llama_dir), babilong_source="generate", babilong_facts="simulated",
        babilong_lengths="0k", babilong_tasks="qa1-qa3", babilong_samples=3,
    )["test"]  # fmt: skip
    assert len(docs) == 9
    assert sorted(docs["qa"][:3]) == ["qa1", "qa2", "qa3"]  # --limit 3 covers every cell
    assert {d["length_name"] for d in docs} == {"0k"}


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


def test_babi_reader_on_a_written_file(tmp_path):
    path = tmp_path / "qa1_x_test.txt"
    path.write_text(
        "1 Mary went home.\n2 Where is Mary? \thome\t1\n1 Bill left.\n2 Bill came back.\n3 Where is Bill?\tback\t1 2\n"
    )
    parsed = read_babi(path)
    assert [s.story for s in parsed] == [0, 1] and parsed[1].supporting == (0, 1)
    with pytest.raises(UsageError, match="babilong_babi_dir"):
        task_file(tmp_path / "missing", "qa1")


def test_hub_rows_become_docs(monkeypatch, tiny_llama_dir):
    import datasets

    from lm_eval_longmem.babilong import data

    calls = []

    def fake_load_dataset(path, name, split):
        calls.append((path, name, split))
        return datasets.Dataset.from_dict(
            {"input": ["Mary went to the office. " * 3], "question": ["Where is Mary?"], "target": ["office"]}
        )

    monkeypatch.setattr(data.datasets, "load_dataset", fake_load_dataset)
    docs = load_docs(
        pretrained=str(tiny_llama_dir),
        max_length=8192,
        babilong_lengths="4k",
        babilong_tasks="qa2",
        babilong_source="hub-1k",
    )["test"]
    assert calls == [("RMT-team/babilong-1k-samples", "4k", "qa2")]
    doc = docs[0]
    assert (doc["qa"], doc["length"], doc["length_name"], doc["target"], doc["skip_reason"]) == (
        "qa2",
        4096,
        "4k",
        "office",
        "",
    )
    assert "input" not in doc and doc["prompt_sha256"] == ""  # the haystack stays in the HF cache; counted at run time
    haystacks = data.Haystacks(data.babilong_options({"babilong_source": "hub-1k"}))
    assert (
        haystacks(doc) == haystacks(doc) == "Mary went to the office. " * 3 and len(calls) == 2
    )  # each split loaded once

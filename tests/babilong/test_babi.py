"""The bAbI reader: what a task file holds, and one line naming the file for anything that is not one."""

from __future__ import annotations

import pytest

from lm_eval_longmem.babilong.babi import read_babi, task_file
from lm_eval_longmem.common.errors import UsageError

STORY = "1 Mary went to the hallway.\n2 John moved to the office.\n3 Where is Mary?\thallway\t1\n4 Mary got the milk.\n5 Where is John?\toffice\t2\n"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "qa1_single-supporting-fact_test.txt").write_text(STORY + STORY)
    return tmp_path


def test_each_question_is_a_sample_with_the_facts_before_it(folder):
    samples = read_babi(task_file(folder, "qa1"))
    assert [s.question for s in samples] == ["Where is Mary?", "Where is John?"] * 2
    assert samples[1].facts == ("Mary went to the hallway.", "John moved to the office.", "Mary got the milk.")
    assert samples[1].supporting == (1,) and samples[1].answer == "office"
    assert [s.story for s in samples] == [0, 0, 1, 1]


@pytest.mark.parametrize("form", [b"\r\n", b"\r"])
def test_crlf_line_ends_and_a_byte_order_mark_read_the_same_samples(folder, form):
    path = task_file(folder, "qa1")
    expected = read_babi(path)
    path.write_bytes(b"\xef\xbb\xbf" + (STORY + STORY).encode().replace(b"\n", form))
    assert read_babi(path) == expected


def test_missing_or_empty_folder_is_one_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"bAbI folder '.*nowhere' not found: set --metadata babilong_babi_dir=PATH"):
        task_file(tmp_path / "nowhere", "qa1")
    with pytest.raises(
        UsageError, match=r"expected one file qa1_\*_test\.txt in the bAbI folder .*, found none: set --metadata"
    ):
        task_file(tmp_path, "qa1")


@pytest.mark.parametrize(
    "content,match",
    [
        ("Mary went to the hallway.\n", r"line 1: expected 'N text'"),
        ("1 Mary went to the hallway.\n2 Where is Mary?\t\t1\n", r"line 2: expected 'N question<TAB>answer"),
        ("1 Mary went to the hallway.\n2 Where is Mary?\thallway\tone\n", r"line 2: expected 'N question"),
        (
            "1 Mary went to the hallway.\n2 Where is Mary?\thallway\t7\n",
            r"line 2: expected 'N question",
        ),  # no statement 7
        ("2 Mary went to the hallway.\n", r"line 1: the first story does not start at line number 1"),
        ("1 Mary went to the hallway.\n", r"holds no bAbI questions"),
        (b"1 Mary went to the caf\xe9.\n", r"is not UTF-8 text \(byte 22 is 0xe9\)"),
    ],
)
def test_a_malformed_file_is_one_usage_error_naming_it(folder, content, match):
    path = task_file(folder, "qa1")
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UsageError, match=rf"{path}.*{match}.*babilong_babi_dir=PATH"):
        read_babi(path)

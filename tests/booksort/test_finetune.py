"""Book-SORT's fine-tuned memory condition (`booksort/finetune.py`, `instructions.py`): book chunks, instruction
sources, options and flags, what training scores. The command run end to end, its summary and the report's
section: `rim/test_finetune_commands.py`.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from lm_eval_longmem.booksort import finetune as ft
from lm_eval_longmem.booksort.instructions import conversation, generated_instructions, load_instructions
from lm_eval_longmem.common.errors import UsageError

# --- book chunks ---------------------------------------------------------------------------------

WORDS = [f"w{i}" for i in range(40)]


def _excerpt(row):
    start = row["excerpt_start"]
    return " ".join(WORDS[start : start + row["excerpt_length"]])


def _row(start, length, book="b"):
    return {"book_id": book, "book_title": "T", "excerpt_start": start, "excerpt_length": length}


def test_chunks_merge_overlapping_excerpts_and_never_repeat_a_word():
    rows = [_row(5, 10), _row(0, 10), _row(20, 5), _row(22, 2)]  # [0,15) and [20,25) once merged
    chunks = ft.book_chunks(rows, _excerpt, chunk_words=4)
    words = " ".join(c.text for c in chunks).split()
    assert words == WORDS[0:15] + WORDS[20:25]
    assert [len(c.text.split()) for c in chunks] == [
        4,
        4,
        4,
        3,
        4,
        1,
    ]  # a span's last chunk may be short, never joined to the next


def test_chunks_of_hub_rows_are_the_distinct_excerpt_texts():
    rows = [
        {"book_id": "1", "book_title": "T", "excerpt_text": "a b c"},
        {"book_id": "1", "book_title": "T", "excerpt_text": "a b c"},  # the same excerpt, another segment pair
        {"book_id": "2", "book_title": "U", "excerpt_text": "d e"},
    ]
    chunks = ft.book_chunks(rows, lambda row: row["excerpt_text"], chunk_words=2)
    assert [(c.book_id, c.title, c.text) for c in chunks] == [("1", "T", "a b"), ("1", "T", "c"), ("2", "U", "d e")]


# --- instruction data -------------------------------------------------------------------------------


def test_generated_instructions_are_seeded_and_their_answers_are_right():
    first = generated_instructions(200, seed=0)
    assert first == generated_instructions(200, seed=0)
    assert first != generated_instructions(200, seed=1)
    checked = 0
    for user, assistant in ((c[0]["content"], c[1]["content"]) for c in first):
        if m := re.fullmatch(r"What is (\d+) (plus|minus|times) (\d+)\?", user):
            a, op, b = int(m[1]), m[2], int(m[3])
            assert assistant.endswith(f" is {a + b if op == 'plus' else a - b if op == 'minus' else a * b}.")
            checked += 1
        elif m := re.fullmatch(r"Sort these numbers from smallest to largest: (.*)\.", user):
            assert assistant == ", ".join(map(str, sorted(int(x) for x in m[1].split(", "))))
            checked += 1
        elif m := re.fullmatch(r'Spell the word "(\w+)" backwards\.', user):
            assert assistant == m[1][::-1]
            checked += 1
    assert checked > 30


@pytest.mark.parametrize(
    "row,expected",
    [
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, [("user", "q"), ("assistant", "a")]),
        ({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
         [("system", "s"), ("user", "q"), ("assistant", "a")]),
        ({"instruction": "do", "input": "this", "output": "done"}, [("user", "do\n\nthis"), ("assistant", "done")]),
        ({"instruction": "do", "input": "", "output": "done"}, [("user", "do"), ("assistant", "done")]),
        ({"prompt": "q", "response": "a"}, [("user", "q"), ("assistant", "a")]),
        ({"messages": [{"role": "user", "content": "q"}]}, None),  # no assistant turn to learn
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}]}, None),  # empty reply
        ({"conversations": [{"from": "narrator", "value": "q"}, {"from": "gpt", "value": "a"}]}, None),  # unknown speaker
        ({"text": "plain text only"}, None),
        (["not", "a", "row"], None),
    ],
)  # fmt: skip
def test_conversation_layouts(row, expected):
    got = conversation(row)
    assert (None if got is None else [(m["role"], m["content"]) for m in got]) == expected


def test_a_jsonl_source_gives_a_seeded_draw_and_refuses_to_run_short(tmp_path):
    path = tmp_path / "mix.jsonl"
    rows = [{"prompt": f"q{i}", "response": f"a{i}"} for i in range(10)] + [{"text": "unusable"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    drawn = load_instructions(str(path), 4, seed=3)
    assert drawn == load_instructions(str(path), 4, seed=3) and len(drawn) == 4
    assert [int(c[0]["content"][1:]) for c in drawn] == sorted(
        int(c[0]["content"][1:]) for c in drawn
    )  # file order kept
    with pytest.raises(
        UsageError, match=r"10 usable conversations.*fewer than booksort_finetune_instruction_samples=11"
    ):
        load_instructions(str(path), 11, seed=0)
    path.write_text('{"prompt": "q", "response": "a"}\n{broken\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r"mix.jsonl, line 2"):
        load_instructions(str(path), 1, seed=0)
    with pytest.raises(UsageError, match="no such file"):
        load_instructions(str(tmp_path / "absent.jsonl"), 1, seed=0)


# --- options and flags ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata,message",
    [
        ({"booksort_finetune_epoch": 2}, "did you mean booksort_finetune_epochs"),
        ({"booksort_finetune_method": "qlora"}, "expected one of lora, full"),
        ({"booksort_finetune_learning_rate": "-1"}, "expected a number > 0"),
        ({"booksort_finetune_epochs": 0}, "booksort_finetune_epochs=0"),
        (
            {"booksort_excerpt_length": 250},
            "did you mean booksort_excerpt_lengths",
        ),  # the task's keys are checked up front too
    ],
)
def test_bad_options_are_one_usage_error_naming_the_key(metadata, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        ft.split_metadata(metadata)


def test_options_split_between_training_and_the_evaluated_task():
    options, rest = ft.split_metadata(
        {"booksort_finetune_epochs": "3", "booksort_data": "d", "booksort_finetune_method": "FULL"}
    )
    assert (options.epochs, options.method, options.lr) == (3, "full", 5e-6)
    assert rest == {"booksort_data": "d"}


def test_flags_are_taken_as_the_harness_takes_them():
    from lm_eval_longmem.cli import build_parser

    args = build_parser().parse_args(
        ["booksort", "finetune", "--model_args", '{"pretrained": "m", "dtype": "float32"}',
         "--metadata", "booksort_data=d", "booksort_excerpt_lengths=[250,1000]", "--output_path", "o"]
    )  # fmt: skip
    assert args.model_args == {"pretrained": "m", "dtype": "float32"}
    assert args.metadata == {"booksort_data": "d", "booksort_excerpt_lengths": [250, 1000]}


def test_missing_peft_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` now raises ImportError
    with pytest.raises(UsageError) as err:
        ft.require_peft()
    assert 'pip install "lm-eval-longmem[finetune]"' in str(err.value)


# --- tokenization -----------------------------------------------------------------------------------

CHAT_TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"


def test_instructions_are_scored_on_the_reply_only_and_chunks_on_every_token(tiny_llama_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    messages = [{"role": "user", "content": "What is 2 plus 2?"}, {"role": "assistant", "content": "4."}]
    plain = ft.tokenize(tokenizer, messages, "instruction")
    assert tokenizer.decode(plain.ids[plain.scored_from :], skip_special_tokens=True) == "4."
    assert plain.ids[-1] == tokenizer.eos_token_id
    tokenizer.chat_template = CHAT_TEMPLATE
    chat = ft.tokenize(tokenizer, messages, "instruction")
    assert tokenizer.decode(chat.ids[chat.scored_from :]) == "4.\n"
    assert tokenizer.decode(chat.ids[: chat.scored_from]) == "<user>What is 2 plus 2?\n<assistant>"
    chunk = ft.tokenize(tokenizer, ft.chunk_conversation(ft.Chunk("b", "Macbeth", "So foul and fair a day")), "book")
    assert (
        chunk.scored_from == 0
        and "Macbeth" in tokenizer.decode(chunk.ids)
        and "So foul and fair a day" in tokenizer.decode(chunk.ids)
    )

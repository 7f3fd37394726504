"""`booksort_protocol=authors`: the SORT authors' prompt configs, memory-less prompt, title casing and readout.

The expected prompt strings are written out here for fixed inputs, as the authors' evaluation script
(bridge-ai-neuro/SORT, sort/evaluation/evaluation.py) fills in its prompt configs; the expected
decisions follow their HF path: the larger of the log-probabilities of the last token of
`tokenizer.encode("A")` and of `tokenizer.encode("B")` after their prompt.
"""

from __future__ import annotations

import lm_eval
import numpy as np
import pytest
from tolerances import ARITHMETIC_RTOL
from transformers import AutoTokenizer

from lm_eval_longmem import task_manager
from lm_eval_longmem.backends.request_type import TokenAccuracy, compact_ids
from lm_eval_longmem.booksort.build import book_title
from lm_eval_longmem.booksort.data import build_docs, make_doc, user_text
from lm_eval_longmem.booksort.prompts import AUTHORS_PROMPTS, authors_title
from lm_eval_longmem.booksort.task import authors_answer, authors_answer_space, authors_label_ids, our_answer
from lm_eval_longmem.common.errors import UsageError

ROW = {
    "book_title": "The Murder of Roger Ackroyd",  # as our local build writes it
    "segment_1": "It was early.",
    "segment_2": "It was late.",
    "present_seg1_first": 0,  # the later segment is shown as A
}
EXCERPT = "The doctor walked home."

PROMPT_2_IN_CONTEXT = (
    "I need you to thoroughly read and comprehend this extract from the book The Murder Of Roger Ackroyd. The passage "
    "is as follows: The doctor walked home.Your task is to recall which text segment, either A or B, appeared first in "
    "the book The Murder Of Roger Ackroyd. Please read the segments carefully to remember in which order they appeared "
    "in The Murder Of Roger Ackroyd and respond with either A or B: Segment A: It was late. Segment B: It was early.\n"
    " Which of these, A or B, was first in the book The Murder Of Roger Ackroyd?"
)
PROMPT_6_MEMORYLESS = (
    "You will be shown pairs of text fragments from The Murder Of Roger Ackroyd. Please select which of two fragments "
    "appeared first in the book. You will be shown 10 such pairs. Segment A: It was late. Segment B: It was early.\n"
    " Which fragment appeared first in the book, A or B?"
)


def test_their_prompt_strings_for_fixed_inputs():
    doc = make_doc(ROW, variant_name="prompt_2", condition="in_context", protocol="authors")
    assert doc["prompt_system"] == "You are a helpful, respectful and honest assistant."
    assert user_text(doc, EXCERPT) == PROMPT_2_IN_CONTEXT  # the excerpt runs straight into the task, as in theirs
    assert doc["prompt_answer"] == "Answer: Segment"
    assert doc["label"] == 1  # B (the earlier segment) is right
    # Memory-less: the read part goes, the book is still named (ours names no book there).
    bare = make_doc(ROW, variant_name="prompt_6", condition="memoryless", protocol="authors")
    assert user_text(bare, "") == PROMPT_6_MEMORYLESS
    ours = make_doc(ROW, variant_name="default", condition="memoryless")
    assert "Ackroyd" not in user_text(ours, "") + ours["prompt_system"]
    # prompt_12 only adds to the system prompt.
    twelve = make_doc(ROW, variant_name="prompt_12", condition="in_context", protocol="authors")
    assert twelve["prompt_system"] == "You are a helpful, respectful and honest assistant. Please only answer A or B."
    assert user_text(twelve, EXCERPT) == PROMPT_2_IN_CONTEXT
    assert len(AUTHORS_PROMPTS) == 13


def test_title_casing_is_theirs_only_in_their_protocol():
    """Their builder writes `str.title()` titles; the hub's (built by them) stay as they are."""
    ours = make_doc(ROW, variant_name="prompt_2", condition="in_context")
    assert "The Murder of Roger Ackroyd." in user_text(ours, EXCERPT) and "Murder Of" not in user_text(ours, EXCERPT)
    hub_row = {**ROW, "book_title": "Pomona; Or, The Future Of English"}
    theirs = make_doc(hub_row, variant_name="prompt_2", condition="in_context", protocol="authors")
    assert "from the book Pomona; Or, The Future Of English." in user_text(theirs, EXCERPT)


def test_a_title_line_is_read_before_their_banner_and_without_it_their_title_is_ours():
    """docs/parity.md: their builder reads the `*** START OF ... EBOOK <title> ***` banner, ours the `Title:` line
    first; a book without its `Title:` line gets their title (in their casing under their protocol)."""
    banner = "*** START OF THE PROJECT GUTENBERG EBOOK HAMLET ***"
    assert book_title(f"Title: Hamlet, Prince of Denmark\n\n{banner}\n", "x") == "Hamlet, Prince of Denmark"
    assert authors_title(book_title(f"{banner}\n", "x")) == "HAMLET".title()


def test_decisions_on_fixed_log_probabilities(smollm2_dir):
    """SmolLM2 (byte-level BPE): theirs reads the bare `A`/`B` tokens, ours the ` A`/` B` that follow "Segment"."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    bare = authors_label_ids(tokenizer)
    spaced = [tokenizer.encode(f"Answer: Segment {label}")[-1] for label in "AB"]
    assert tokenizer.convert_ids_to_tokens(bare) == ["A", "B"] and tokenizer.convert_ids_to_tokens(spaced) == [
        "ĠA",
        "ĠB",
    ]
    assert authors_answer_space(tokenizer) == ""  # SmolLM2 folds spaces into words: no space after "Segment"

    def decide(next_token: dict[str, float]) -> tuple[str | None, str | None]:
        logprobs = np.full(len(tokenizer), -30.0)
        for token, value in next_token.items():
            logprobs[tokenizer.convert_tokens_to_ids(token)] = value
        return our_answer(logprobs[spaced]), authors_answer(logprobs[bare])

    assert decide({"ĠA": -0.5, "ĠB": -1.5, "A": -6.0, "B": -4.0}) == ("A", "B")  # they disagree
    assert decide({"ĠA": -2.0, "ĠB": -1.0, "A": -3.0, "B": -5.0}) == ("B", "A")
    assert decide({"ĠA": -1.0, "ĠB": -2.0, "A": -2.0, "B": -3.0}) == ("A", "A")
    assert decide({"ĠA": -1.0, "ĠB": -1.0, "A": -2.0, "B": -2.0}) == ("A", "A")  # ties go to A in both
    assert authors_answer([-1e13, -1e13]) is None  # their "X" (no label token found): scored wrong
    assert authors_answer([-1e13, -2.0]) == "B"


@pytest.fixture(scope="module")
def chat_tiny(tiny_llama_dir, tmp_path_factory):
    """The tiny model with a minimal chat template (their prompts are chat prompts)."""
    folder = tmp_path_factory.mktemp("chat-tiny")
    for path in tiny_llama_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% if not loop.last or add_generation_prompt %}"
        "</{{ m['role'] }}>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    tokenizer.save_pretrained(folder)
    return folder


def _meta(model, built_dir, **extra):
    return {
        "pretrained": str(model),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
        "booksort_protocol": "authors",
        "booksort_prompt": "prompt_3",
        **extra,
    }


@pytest.mark.slow
def test_a_run_sends_their_tokens_and_decides_their_way(chat_tiny, built_dir):
    """Through the harness: each trial's two requests are the tokens of `tokenizer(their chat prompt)` and one
    label token each; the answers are `authors_answer` of the returned log-probabilities."""
    meta = _meta(chat_tiny, built_dir)
    out = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={chat_tiny},dtype=float32", tasks=["booksort_memoryless"], device="cpu",
        batch_size=2, limit=6, log_samples=True, apply_chat_template=True, bootstrap_iters=0,
        task_manager=task_manager(metadata=meta, include_defaults=False),
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(chat_tiny)
    space = authors_answer_space(tokenizer)
    assert space == " "  # one token per character: spaces are tokens of their own, so theirs ends "Segment "
    labels = authors_label_ids(tokenizer)
    assert labels == tokenizer.convert_tokens_to_ids(["A", "B"])
    docs = {d["trial_id"]: d for d in build_docs(meta, "test", "memoryless")}
    samples = out["samples"]["booksort_memoryless"]
    assert len(samples) == 6
    correct = []
    for sample in samples:
        doc = docs[sample["doc"]["trial_id"]]
        messages = [
            {"role": "system", "content": doc["prompt_system"]},
            {"role": "user", "content": user_text(doc, "")},
        ]
        theirs = (
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            + "Answer: Segment"
            + space
        )
        context = tokenizer(theirs)["input_ids"]  # default special tokens: BOS first, as their HF path
        assert context[0] == tokenizer.bos_token_id and doc["book_title"].title() in user_text(doc, "")
        assert [tuple(args) for args in sample["arguments"]] == [
            (compact_ids(context), compact_ids([label])) for label in labels
        ]
        logprobs = [TokenAccuracy(*resp[0]).logprob for resp in sample["resps"]]
        answer = authors_answer(logprobs)
        assert sample["acc"] == float(answer == "AB"[doc["label"]]) and sample["pct_A"] == float(answer == "A")
        correct.append(sample["acc"])
    config = out["configs"]["booksort_memoryless"]["longmem"]
    assert config["protocol"] == "authors" and config["prompt"] == "prompt_3"
    assert out["results"]["booksort_memoryless"]["acc,none"] == pytest.approx(np.mean(correct), rel=ARITHMETIC_RTOL)


@pytest.mark.slow
def test_their_protocol_needs_their_prompt_and_a_chat_template(chat_tiny, built_dir):
    with pytest.raises(UsageError, match="prompt_0 .. prompt_12"):
        build_docs(_meta(chat_tiny, built_dir, booksort_prompt="default"), "test", "memoryless")
    with pytest.raises(UsageError, match="--apply_chat_template"):
        lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={chat_tiny},dtype=float32", tasks=["booksort_memoryless"],
            device="cpu", limit=2, task_manager=task_manager(metadata=_meta(chat_tiny, built_dir), include_defaults=False),
        )  # fmt: skip


def _macbeth_task(model, built_dir):
    """Our in-context task on Macbeth alone, as a harness run loads it."""
    meta = {**_meta(model, built_dir), "booksort_books": "macbeth"}
    return task_manager(metadata=meta, include_defaults=False).load(["booksort_in_context"])["tasks"][
        "booksort_in_context"
    ]


def _harness_chat(tokenizer):
    """The call HFLM.apply_chat_template makes: the generation prompt, or the last assistant turn continued."""

    def chat(history, add_generation_prompt=True):
        return tokenizer.apply_chat_template(
            history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )

    return chat


def _their_prompt(tokenizer, task, doc):
    """Their script's prompt: system and user turns through the template, with its generation prompt."""
    messages = [
        {"role": "system", "content": doc["prompt_system"]},
        {"role": "user", "content": user_text(doc, task.excerpts(doc))},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def test_the_harness_renders_their_chat_prompt_with_a_real_template(smollm2_dir, built_dir):
    """lm-eval puts the answer prefix in the assistant turn (`continue_final_message`); with SmolLM2's template
    that is their `apply_chat_template(..., add_generation_prompt=True) + "Answer: Segment"`, character for character."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    task, chat = _macbeth_task(smollm2_dir, built_dir), _harness_chat(tokenizer)

    for doc in list(task.test_docs())[:3]:
        ours = task.rendered_prompt(doc, apply_chat_template=True, chat_template=chat)
        assert ours == _their_prompt(tokenizer, task, doc) + "Answer: Segment"
        assert "Macbeth" in user_text(doc, task.excerpts(doc))


def test_a_template_whose_assistant_turn_opens_otherwise_puts_that_opening_before_the_prefix(smollm2_dir, built_dir):
    """docs/parity.md: with a Qwen3-style template (an empty think block in the last assistant turn, none in the
    generation prompt) the harness's prompt is theirs with that block before "Answer: Segment"."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    tokenizer.chat_template = (
        "{% for m in messages %}{% if m.role == 'assistant' and loop.last %}"
        "{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + m.content }}"
        "{% else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    task, chat = _macbeth_task(smollm2_dir, built_dir), _harness_chat(tokenizer)

    doc = next(iter(task.test_docs()))
    ours = task.rendered_prompt(doc, apply_chat_template=True, chat_template=chat)
    assert ours == _their_prompt(tokenizer, task, doc) + "<think>\n\n</think>\n\nAnswer: Segment"

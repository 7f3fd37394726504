"""Instruction data mixed into Book-SORT fine-tuning, so the model keeps following instructions.

The paper (section 3; its reference code draws 3,500 conversations from OpenHermes-2.5) mixes
unrelated instruction data into both arms of the fine-tuned memory condition: with the book
chunks (memory arm) and alone (control arm). The source is one of

- ``generated`` (the offline default): small tasks about numbers and letters, drawn from a seeded
  generator written here. Nothing in them is about books or stories, so the control arm learns
  nothing about the book; they teach the short question-and-answer format only.
- ``hf:OWNER/NAME`` (e.g. ``hf:teknium/OpenHermes-2.5``): a Hugging Face dataset's train split;
- a local ``.jsonl`` file.

Rows of a dataset or file are read in any of the common chat layouts: ``messages`` (a list of
``{"role", "content"}``), ``conversations`` (ShareGPT's ``{"from", "value"}``, as OpenHermes-2.5
stores them), ``instruction`` (+ optional ``input``) with ``output``, or ``prompt`` with
``response``. Every conversation must end with an assistant turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_longmem.common.errors import UsageError

Conversation = list[dict[str, str]]
"""Chat messages ``[{"role": "system"|"user"|"assistant", "content": ...}, ...]``."""

GENERATED = "generated"
_SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
_WORDS = (
    "apple", "bridge", "candle", "dolphin", "engine", "forest", "guitar", "harbor", "island", "jacket",
    "kettle", "ladder", "magnet", "needle", "orange", "pepper", "rocket", "saddle", "tablet", "valley",
    "window", "yogurt", "zipper", "button", "copper", "garden", "helmet", "marble", "pillow", "silver",
)  # fmt: skip
_UNITS = (("hours", "minutes", 60), ("minutes", "seconds", 60), ("kilometres", "metres", 1000), ("days", "hours", 24))


def _arithmetic(rng: np.random.Generator) -> tuple[str, str]:
    a, b = (int(x) for x in rng.integers(2, 100, size=2))
    op = int(rng.integers(3))
    if op == 0:
        return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    if op == 1:
        a, b = max(a, b), min(a, b)
        return f"What is {a} minus {b}?", f"{a} minus {b} is {a - b}."
    return f"What is {a} times {b}?", f"{a} times {b} is {a * b}."


def _sort_numbers(rng: np.random.Generator) -> tuple[str, str]:
    numbers = [int(x) for x in rng.choice(100, size=int(rng.integers(3, 7)), replace=False)]
    return (
        f"Sort these numbers from smallest to largest: {', '.join(map(str, numbers))}.",
        ", ".join(map(str, sorted(numbers))),
    )


def _reverse_word(rng: np.random.Generator) -> tuple[str, str]:
    word = _WORDS[int(rng.integers(len(_WORDS)))]
    return f'Spell the word "{word}" backwards.', word[::-1]


def _count_letter(rng: np.random.Generator) -> tuple[str, str]:
    word = _WORDS[int(rng.integers(len(_WORDS)))]
    letter = word[int(rng.integers(len(word)))]
    n = word.count(letter)
    return (
        f'How many times does the letter "{letter}" occur in "{word}"?',
        f'"{letter}" occurs {n} time{"s" * (n != 1)} in "{word}".',
    )


def _convert_units(rng: np.random.Generator) -> tuple[str, str]:
    big, small, factor = _UNITS[int(rng.integers(len(_UNITS)))]
    amount = int(rng.integers(2, 20))
    return f"How many {small} are there in {amount} {big}?", f"There are {amount * factor} {small} in {amount} {big}."


def _larger(rng: np.random.Generator) -> tuple[str, str]:
    a, b = (round(float(x), 2) for x in rng.uniform(0, 10, size=2))
    if a == b:
        b = round(b + 0.01, 2)
    return f"Which number is larger, {a} or {b}?", f"{max(a, b)} is larger."


def _uppercase(rng: np.random.Generator) -> tuple[str, str]:
    words = [_WORDS[int(i)] for i in rng.choice(len(_WORDS), size=3, replace=False)]
    phrase = " ".join(words)
    return f'Write "{phrase}" in capital letters.', phrase.upper()


def _even_odd(rng: np.random.Generator) -> tuple[str, str]:
    n = int(rng.integers(1, 1000))
    return f"Is {n} an even or an odd number?", f"{n} is {'even' if n % 2 == 0 else 'odd'}."


_TEMPLATES: tuple[Callable[[np.random.Generator], tuple[str, str]], ...] = (
    _arithmetic, _sort_numbers, _reverse_word, _count_letter, _convert_units, _larger, _uppercase, _even_odd,
)  # fmt: skip


def generated_instructions(n: int, seed: int) -> list[Conversation]:
    """`n` question-answer pairs about numbers and letters; the same `n` and `seed` give the same list."""
    rng = np.random.default_rng([seed, 20])
    out = []
    for _ in range(n):
        question, answer = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))](rng)
        out.append([{"role": "user", "content": question}, {"role": "assistant", "content": answer}])
    return out


def conversation(row: Any) -> Conversation | None:
    """The chat messages of one dataset row (layouts in the module docstring), or None when it has none.

    None also for a row whose last turn is not the assistant's or whose turns are not text.
    """
    if not isinstance(row, dict):
        return None
    if isinstance(row.get("messages"), list):
        turns = [(m.get("role"), m.get("content")) for m in row["messages"] if isinstance(m, dict)]
    elif isinstance(row.get("conversations"), list):
        turns = [
            (_SHAREGPT_ROLES.get(str(m.get("from"))), m.get("value"))
            for m in row["conversations"]
            if isinstance(m, dict)
        ]
    elif "instruction" in row and "output" in row:
        prompt = "\n\n".join(str(part) for part in (row["instruction"], row.get("input")) if part)
        turns = [("user", prompt), ("assistant", row["output"])]
    elif "prompt" in row and "response" in row:
        turns = [("user", row["prompt"]), ("assistant", row["response"])]
    else:
        return None
    if (
        not turns
        or turns[-1][0] != "assistant"
        or any(role is None or not isinstance(text, str) or not text for role, text in turns)
    ):
        return None
    return [{"role": str(role), "content": str(text)} for role, text in turns]  # (text: a str, checked above)


def _read_jsonl(path: Path) -> Iterable[Any]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(
            f"--metadata booksort_finetune_instructions={path}: cannot read it as UTF-8 text ({err})"
        ) from None
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as err:
                raise UsageError(
                    f"{path}, line {number}: not a JSON object ({err.msg}); write one conversation per line"
                ) from None


def _read_hub(name: str) -> Iterable[Any]:
    import datasets

    try:
        return datasets.load_dataset(name, split="train")
    except Exception as err:  # offline, gated, missing: all end the same way for the user
        raise UsageError(
            f"--metadata booksort_finetune_instructions=hf:{name}: could not load its train split "
            f"({type(err).__name__}: {err}); offline, use the default `generated` or a local .jsonl file"
        ) from err


def load_instructions(source: str, n: int, seed: int) -> list[Conversation]:
    """`n` conversations from `source` (``generated``, ``hf:OWNER/NAME`` or a ``.jsonl`` path).

    A dataset or file with more usable rows than `n` gives a seeded draw of `n` of them, in their
    order there (the paper draws 3,500 from OpenHermes-2.5); one with fewer is an error, never a
    silently smaller mix.
    """
    if n == 0:
        return []
    if source == GENERATED:
        return generated_instructions(n, seed)
    if source.startswith("hf:"):
        rows, where = _read_hub(source[3:]), source
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise UsageError(
                f"--metadata booksort_finetune_instructions={source}: no such file; give `generated`, "
                "hf:OWNER/NAME or a .jsonl file with one conversation per line"
            )
        rows, where = _read_jsonl(path), str(path)
    usable = [c for c in map(conversation, rows) if c is not None]
    if len(usable) < n:
        raise UsageError(
            f"{where} has {len(usable)} usable conversations (messages, conversations, instruction/output or "
            f"prompt/response, ending with the assistant), fewer than booksort_finetune_instruction_samples={n}: "
            "lower it or give a larger source"
        )
    keep = np.sort(np.random.default_rng([seed, 21]).choice(len(usable), size=n, replace=False))
    return [usable[int(i)] for i in keep]

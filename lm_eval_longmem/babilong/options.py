"""The `babilong_*` options, declared once (the task card's table is checked against this)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lm_eval_longmem.babilong.prompts import PromptSwitches
from lm_eval_longmem.common.lengths import format_length, parse_lengths
from lm_eval_longmem.common.options import (
    distinct,
    flag,
    fraction_band,
    items,
    lengths,
    limit_order_option,
    one_of,
    option,
    text,
    whole_number,
)

NAME = "babilong"
"""The evaluation's name (its registry entry, group task, task folder and the `evaluation` its tasks record)."""
PREFIX = f"{NAME}_"
STANDARD_LENGTHS: tuple[int, ...] = tuple(parse_lengths("0k,1k,2k,4k,8k,16k,32k,64k,128k,256k,512k,1M"))
"""The lengths BABILong defines, in tokens (the authors' splits 0k-1M; 10M left out)."""
ALL_TASKS: tuple[str, ...] = tuple(f"qa{n}" for n in range(1, 21))
DEFAULT_TASKS: tuple[str, ...] = ("qa1", "qa2", "qa3", "qa4", "qa5")
"""The paper's headline tasks (Table 2 averages qa1-qa5)."""


def standard_lengths(value: Any) -> tuple[int, ...] | None:
    """ "fit" (None: every standard length within the window) or a list of standard lengths (tokens), in length order."""
    if isinstance(value, str) and value.strip().lower() == "fit":
        return None
    chosen = set(lengths(value))
    if unknown := [n for n in chosen if n not in STANDARD_LENGTHS]:
        raise ValueError(
            f"{format_length(min(unknown))} is not a BABILong length; choose among "
            f"{','.join(map(format_length, STANDARD_LENGTHS))} or fit"
        )
    return tuple(n for n in STANDARD_LENGTHS if n in chosen)


def task_list(value: Any) -> tuple[str, ...]:
    """bAbI tasks from "qa1-qa5", "qa1,qa3", "all" or a list; in qa order."""
    chosen: list[int] = []
    for item in (str(i).strip().lower() for i in items(value)):
        if item in {"all", "*"}:
            chosen += range(1, 21)
        elif match := re.fullmatch(r"qa(\d+)(?:\s*-\s*qa(\d+))?", item):
            first, last = int(match[1]), int(match[2] or match[1])
            if not 1 <= first <= last <= 20:
                raise ValueError(f"{item}: tasks run from qa1 to qa20")
            chosen += range(first, last + 1)
        else:
            raise ValueError(f"{item!r} is not a bAbI task; write e.g. qa1-qa5, qa1,qa3 or all")
    if not chosen:
        raise ValueError("no task given")
    return tuple(f"qa{n}" for n in sorted(distinct(chosen, "task", shown=lambda n: f"qa{n}")))


@dataclass(frozen=True)
class BabilongOptions:
    """What `--metadata babilong_*` can set."""

    source: str = option(
        "hub",
        one_of("hub", "hub-1k", "generate"),
        "hub (100 samples), hub-1k (1000 samples) or generate (fresh, seeded)",
        "generate",
    )
    lengths: tuple[int, ...] | None = option(
        None,
        standard_lengths,
        "lengths to run; default fit: every standard length within the model's window",
        "[0k,1k,4k]",
    )
    tasks: tuple[str, ...] = option(DEFAULT_TASKS, task_list, "bAbI tasks to run", "qa1-qa5")
    facts: str = option(
        "babi", one_of("babi", "simulated"), "generate: facts from bAbI files (babi) or the simulator", "simulated"
    )
    wide_vocabulary: bool = option(
        False, flag, "generate with facts=simulated: more names, places and objects than bAbI's", "true"
    )
    babi_dir: str | None = option(
        None,
        text,
        "folder of bAbI test files (qa1_..._test.txt): generate with facts=babi; hub sets under retrieval (recall)",
        "tasks_1-20_v1-2/en",
        local_input=True,
    )
    corpus: str | None = option(
        None,
        text,
        "generate: background text (.txt file or folder of books, or hf:OWNER/NAME); default: PG-19 test books",
        "/path/to/books",
        local_input=True,
    )
    seed: int = option(0, whole_number(0), "generate: seed of every random choice", "1")
    samples: int = option(100, whole_number(1), "generate: questions per task and length", "100")
    depth: tuple[float, float] = option(
        (0.0, 1.0), fraction_band, "generate: band of the context the facts lie in", "0-0.25"
    )
    reserve_tokens: int = option(
        0, whole_number(0), "generate: tokens kept free besides the answer's 20 (e.g. chat template)", "64"
    )
    instruction: bool = option(True, flag, "show the task instruction", "false")
    examples: bool = option(True, flag, "show the worked examples", "false")
    answer_format: bool = option(True, flag, "show the answer-format instruction", "false")
    retrieval: str = option(
        "none",
        one_of("none", "sentences", "chunks"),
        "condition: none (in-context) or retrieval of the haystack's sentences (RAG-S) or token chunks (RAG-C)",
        "sentences",
    )
    retrieval_chunk_tokens: int = option(
        512, whole_number(1), "retrieval=chunks: tokens per chunk, in the evaluated model's tokenizer", "512"
    )
    retrieval_k: int = option(5, whole_number(1), "retrieval: pieces retrieved per question (top k)", "20")
    retriever: str = option(
        "bm25",
        text,
        "retrieval: bm25, minilm (the embedded all-MiniLM-L6-v2), or a sentence-transformers model name or folder",
        "minilm",
        local_input=True,
    )
    retrieval_order: str = option(
        "score", one_of("score", "text"), "retrieval: retrieved pieces by score (the paper) or in text order", "text"
    )
    limit_order: str = limit_order_option()

    @property
    def uses_retrieval(self) -> bool:
        """Whether the run is the retrieval condition (`babilong_retrieval` sentences or chunks), not in-context."""
        return self.retrieval != "none"

    @property
    def switches(self) -> PromptSwitches:
        return PromptSwitches(self.instruction, self.examples, self.answer_format)

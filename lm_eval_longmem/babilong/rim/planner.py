"""BABILong's rows of `lm-eval-longmem plan`: the selected lengths (`data.selected_lengths`) x tasks x samples,
100 per cell on `RMT-team/babilong`, 1000 on `RMT-team/babilong-1k-samples`, `babilong_samples` when
generated. A hub sample's haystack is the length in the authors' tokenizer, so its tokens here are
estimates; generated samples are filled up to the length in the model's own tokenizer (to within a
sentence, so their count is an upper bound)."""

from __future__ import annotations

from typing import Any

from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.model_info import Window
from lm_eval_longmem.plan import Row, TaskFacts, corpus_text

ZERO_LENGTH_NOTE = "0k holds only the bAbI facts, counted here as none"

SENTENCE_TOKENS = 32
"""Tokens of one retrieved sentence (RAG-S), a rough figure for book text."""


def babilong_rows(
    task: TaskFacts, metadata: dict[str, Any], tokenizer: Any, window: Window
) -> tuple[list[Row], list[str]]:
    """One row per selected length (`common.evaluations.Planner`)."""
    from lm_eval_longmem.babilong.data import HUB_SETS, babilong_options, selected_lengths
    from lm_eval_longmem.babilong.prompts import build_prompt

    options = babilong_options(metadata)
    lengths = selected_lengths(options, window.tokens)
    generated = options.source == "generate"
    template = {qa: len(tokenizer(build_prompt(qa, "", "", options.switches))["input_ids"]) for qa in options.tasks}
    rows, notes = [], []
    for length in lengths:
        name = format_length(length)
        docs, tokens, missing = 0, [], []
        for qa in options.tasks:
            if generated:
                count = options.samples
            elif HUB_SETS[options.source].has(qa, length):
                count = 1000 if options.source == "hub-1k" else 100
            else:
                count = 0
                missing.append(qa)
            docs += count
            tokens += [prompt_tokens(options, length, template[qa]) + task.max_gen_toks] * count
        note = []
        if missing:
            note.append(f"{HUB_SETS[options.source].path} has no {','.join(missing)} at {name}: the run stops there")
        if length == 0:
            note.append(ZERO_LENGTH_NOTE)
        longest = max(tokens, default=0)
        if window.tokens is not None and longest > window.tokens:
            note.append(
                f"about {longest:,} tokens against a {window.tokens:,}-token window: the fit check may skip docs"
            )
        prompts = sum(tokens) - docs * task.max_gen_toks
        rows.append(
            Row(
                task.name, task.output_type, name, length, docs, docs, docs, sum(tokens), longest,
                forward_positions=round(prompts / docs) if docs else 0, head_positions=1, new_tokens=task.max_gen_toks,
                data_tokens=prompts, build_tokens=prompts if generated else 0,
                estimated=True, note="; ".join(note),
            )
        )  # fmt: skip
    source = (
        f"generated from {'the simulator' if options.facts == 'simulated' else 'bAbI files'} over {corpus_text(options.corpus)}"
        if generated
        else HUB_SETS[options.source].path
    )
    notes.append(f"{task.name}: {', '.join(options.tasks)} from {source}")
    return rows, notes


def prompt_tokens(options: Any, length: int, template: int) -> int:
    """A BABILong prompt's tokens: generated samples are filled to the length; hub haystacks count as the length."""
    from lm_eval_longmem.babilong.generate import ANSWER_TOKENS

    if options.retrieval == "chunks":
        return template + min(length, options.retrieval_k * options.retrieval_chunk_tokens)
    if options.retrieval == "sentences":
        return template + min(length, options.retrieval_k * SENTENCE_TOKENS)
    if length == 0:
        return template
    if options.source == "generate":
        return length - ANSWER_TOKENS - options.reserve_tokens
    return length + template

"""The forgetting curve's rows of `lm-eval-longmem plan`: its length grid (`data.resolve_lengths`) x `samples`,
two requests per doc of 2L + 2 tokens; lengths past the backend's position limit are skipped, as the run
skips them. The corpus is tokenized once per tokenizer and cached."""

from __future__ import annotations

from typing import Any

from lm_eval_longmem.common.model_info import Window
from lm_eval_longmem.plan import Row, TaskFacts, corpus_text


def rows(task: TaskFacts, metadata: dict[str, Any], tokenizer: Any, window: Window) -> tuple[list[Row], list[str]]:
    """One row per length of the sweep (`common.evaluations.Planner`)."""
    from lm_eval_longmem.forgetting_curve.data import (
        COPY,
        PREFIX_ROLE,
        model_inputs,
        position_limit,
        resolve_lengths,
        sweep_options,
        sweep_sources,
    )

    options = sweep_options(metadata)
    lengths, claimed = resolve_lengths(options, metadata)
    limit, why = position_limit(options, metadata, claimed)
    named = sweep_sources(options)
    rows = []
    for length in lengths:
        runs = limit is None or model_inputs(length) <= limit
        short = [shortfall(named, role, length) for role in (COPY, PREFIX_ROLE)] if runs else []
        refused = "; ".join(said for said, surely in short if surely)
        docs = options.samples if runs and not refused else 0
        tokens = model_inputs(length) + 1  # [bos] S [bos] S: the last token is only a target
        note = "; ".join(said for said, surely in short if said and not surely)
        rows.append(
            Row(
                task.name, task.output_type, str(length), length, docs, 2 * docs, 2 * docs, 2 * docs * tokens, tokens,
                forward_positions=tokens - 1, head_positions=length - length // 2, new_tokens=0, skipped=0 if runs else options.samples,
                note=note if runs else f"skipped: {model_inputs(length)} input positions exceed {limit} ({why})", refused=refused,
            )
        )  # fmt: skip
    sources = {source for source in named[:2] if source != "random"}
    notes = [
        f"data phase: {corpus_text(source)}, tokenized once per tokenizer and cached"
        for source in sorted(sources, key=str)
    ]
    return rows, notes


def shortfall(sources: Any, role: int, length: int) -> tuple[str, bool]:
    """Whether `role`'s text source can give length `length` its span, as the run checks it (`data.sample_spans`,
    `data.source_start`: 2L tokens for S and a disjoint I cut from one source, L from a source of its own)."""
    from lm_eval_longmem.forgetting_curve.data import COPY, RANDOM
    from lm_eval_longmem.plan import corpus_shortfall

    spec = sources.of(role)
    if spec == RANDOM or (role != COPY and sources.of(COPY) == spec):  # one source: checked once, for S
        return "", False
    return corpus_shortfall(spec, 2 * length if sources.shared(role) else length, sources.key(role))

"""Book-SORT's rows of `lm-eval-longmem plan`: the published layout of `memari/booksort` (100 test excerpts per
book x L_E x L_S, one trial per distance bin; Pomona has no 10,000- or 20,000-word excerpts) under the
`booksort_*` selection, or, for a local build, its trials (read, not built). Tokens are words x the
tokenizer's tokens per word (measured on the build's text, or `WORD_TOKENS` for hub data) plus the
prompt's own tokens (rendered and counted). One row per excerpt length L_E."""

from __future__ import annotations

from typing import Any, cast

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import Window
from lm_eval_longmem.plan import Row, TaskFacts

WORD_TOKENS = 4 / 3
"""Tokens per English word of a typical BPE tokenizer, for hub trials whose text is not at hand
(`booksort.data.prompt_work` uses the same ratio)."""

HUB_BOOKS = ("69087", "72578", "72600", "72869", "72958", "72963", "72972", "73017", "73042")
"""The nine books of `memari/booksort` (Gutenberg numbers); Pomona (73017) is too short for L_E >= 10,000."""
SHORT_BOOK, SHORT_LIMIT = "73017", 10_000
TEST_EXCERPTS = 100
"""Test excerpts per book x L_E x L_S on the hub, each with one trial per distance bin (paper, section 2.2)."""


def booksort_rows(
    task: TaskFacts, metadata: dict[str, Any], tokenizer: Any, window: Window
) -> tuple[list[Row], list[str]]:
    """One row per excerpt length (`common.evaluations.Planner`)."""
    from lm_eval_longmem.booksort.build import EXCERPT_LENGTHS, N_BINS, SEGMENT_LENGTHS
    from lm_eval_longmem.booksort.data import add_bin_index, booksort_options, read_split, select
    from lm_eval_longmem.booksort.prompts import Condition, get_variant, render

    options = booksort_options(metadata)
    condition = cast(Condition, task.dataset_kwargs.get("condition", "in_context"))
    template = render(
        get_variant(options.prompt), title="The Title of a Book", excerpt="", first="", second="", condition=condition
    )
    template_tokens = len(tokenizer(template.system + template.user + template.answer_prefix)["input_ids"])
    notes = []
    if options.data == "hub" or options.data.startswith("hf:"):
        books = options.books or HUB_BOOKS
        bins = len(options.distance_bins or range(N_BINS))
        trials = [
            (excerpt, segment)
            for excerpt in options.excerpt_lengths or EXCERPT_LENGTHS
            for segment in options.segment_lengths or SEGMENT_LENGTHS
            for book in books
            if book in HUB_BOOKS and not (book == SHORT_BOOK and excerpt >= SHORT_LIMIT)
            for _ in range(TEST_EXCERPTS * bins)
        ]
        ratio = WORD_TOKENS
        notes.append(
            f"{task.name}: counts are memari/booksort's published layout; tokens at {WORD_TOKENS:.2f} per word"
        )
        unknown = (
            "" if options.data == "hub" else f"docs unknown offline: {options.data} counted as memari/booksort's layout"
        )
    else:
        source = read_split(options.data, "test")
        add_bin_index(source.rows)
        chosen = select(source.rows, options)
        trials = [(int(row["excerpt_length"]), int(row["segment_length"])) for row in chosen]
        sample = " ".join(source.excerpt(max(chosen, key=lambda row: int(row["excerpt_length"]))).split()[:5000])
        ratio = len(tokenizer(sample, add_special_tokens=False)["input_ids"]) / max(1, len(sample.split()))
        unknown = ""
        notes.append(
            f"{task.name}: {len(trials):,} test trials of {options.data}; {ratio:.2f} tokens per word in its text"
        )
    if not trials:
        raise UsageError(
            f"no Book-SORT trial of memari/booksort matches booksort_books={list(options.books or ())}: its books are "
            f"{', '.join(HUB_BOOKS)}"
        )
    rows = []
    answer = task.max_gen_toks if task.output_type == "generate_until" else 1  # generated tokens, or the label
    for excerpt in sorted({e for e, _ in trials}):
        cell = [segment for e, segment in trials if e == excerpt]
        words = [(excerpt if condition == "in_context" else 0) + 2 * segment for segment in cell]
        every = [template_tokens + round(ratio * w) + answer for w in words]
        tokens = [n for n in every if window.tokens is None or n <= window.tokens]
        skipped = len(every) - len(tokens)
        note = (
            f"{skipped:,} trials of about {max(every):,} tokens exceed the {window.tokens:,}-token window: skipped"
            if skipped
            else ""
        )
        note = "; ".join(part for part in (unknown, note) if part)
        if not tokens:
            rows.append(
                Row(task.name, task.output_type, f"LE{excerpt}", max(every), 0, 0, 0, 0, 0, 0, 0, 0,
                    skipped=skipped, estimated=True, note=note)
            )  # fmt: skip
            continue
        docs, generating = len(tokens), task.output_type == "generate_until"
        mean = round(sum(tokens) / docs)
        rows.append(
            Row(
                task.name, task.output_type, f"LE{excerpt}", max(tokens), docs, docs * (1 if generating else 2), docs,
                sum(tokens) * (1 if generating else 2), max(tokens), forward_positions=mean - answer if generating else mean - 1,
                head_positions=1 if generating else mean - 1, new_tokens=task.max_gen_toks if generating else 0,
                data_tokens=sum(every), skipped=skipped, estimated=True, note=note,
            )
        )  # fmt: skip
    return rows, notes

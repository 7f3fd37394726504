"""Book-SORT's rows of `lm-eval-longmem plan`: the published layout of `memari/booksort` (100 test excerpts per
book x L_E x L_S, one trial per distance bin; Pomona has no 10,000- or 20,000-word excerpts) under the
`booksort_*` selection, or, for a local build, its trials (read, not built). Tokens are words x the
tokenizer's tokens per word (measured on the build's text, or `WORD_TOKENS` for hub data) plus the
prompt's own tokens (rendered and counted). One row per excerpt length L_E.

The work follows how Book-SORT's multiple-choice trials are scored (`shared_work`): through our LM head at
the answer position only, and, in context, the trials of one excerpt together: the prefix up to the end of
the excerpt computed once per excerpt, its KV cache reused for each trial's suffix (segments, question,
answer)."""

from __future__ import annotations

import math
from collections.abc import Callable
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
SAMPLE_WORDS = 50_000
"""Words of a local build's excerpts (and of its segments) whose tokens give their tokens per word: texts spread
evenly over the chosen trials (`spread`), so character lists and verse weigh as often as they occur."""
SEGMENTS = ("segment_1", "segment_2")
TEST_EXCERPTS = 100
"""Test excerpts per book x L_E x L_S on the hub, each with one trial per distance bin (paper, section 2.2)."""


def rows(task: TaskFacts, metadata: dict[str, Any], tokenizer: Any, window: Window) -> tuple[list[Row], list[str]]:
    """One row per excerpt length (`common.evaluations.Planner`)."""
    from lm_eval_longmem.booksort.build import EXCERPT_LENGTHS, N_BINS, SEGMENT_LENGTHS
    from lm_eval_longmem.booksort.data import HUB_DATASET, add_bin_index, booksort_options, make_doc, read_split, select
    from lm_eval_longmem.booksort.prompts import Condition

    options = booksort_options(metadata)
    condition = cast(Condition, task.dataset_kwargs.get("condition", "in_context"))
    doc = make_doc(
        {"book_title": "The Title of a Book", "segment_1": "", "segment_2": "", "present_seg1_first": 1},
        variant_name=options.prompt, condition=condition, protocol=options.protocol,
    )  # fmt: skip
    before_excerpt = doc["prompt_system"] + doc["prompt_before_excerpt"] if condition == "in_context" else ""
    prefix_tokens = len(tokenizer(before_excerpt)["input_ids"]) if before_excerpt else 0
    whole = doc["prompt_system"] + doc["prompt_before_excerpt"] + doc["prompt_after_excerpt"] + doc["prompt_answer"]
    template_tokens = len(tokenizer(whole)["input_ids"])
    notes = []
    if options.data == "hub" or options.data.startswith("hf:"):
        books = options.books or HUB_BOOKS
        bins = len(options.distance_bins or range(N_BINS))
        trials = [
            (excerpt, segment, f"{book}-{excerpt}-{segment}-{k}")
            for excerpt in options.excerpt_lengths or EXCERPT_LENGTHS
            for segment in options.segment_lengths or SEGMENT_LENGTHS
            for book in books
            if book in HUB_BOOKS and not (book == SHORT_BOOK and excerpt >= SHORT_LIMIT)
            for k in range(TEST_EXCERPTS)
            for _ in range(bins)
        ]
        excerpt_ratio = segment_ratio = WORD_TOKENS
        notes.append(
            f"{task.name}: counts are memari/booksort's published layout; tokens at {WORD_TOKENS:.2f} per word"
        )
        unknown = (
            "" if options.data == "hub" else f"docs unknown offline: {options.data} counted as memari/booksort's layout"
        )
        if options.data == "hub":
            notes.append(
                f"{task.name}: {HUB_DATASET} is gated: before the run, accept its terms at "
                f"https://huggingface.co/datasets/{HUB_DATASET} and log in (`hf auth login` or HF_TOKEN), or build the "
                "trials locally (`lm-eval-longmem booksort build`, then --metadata booksort_data=DIR)"
            )
    else:
        source = read_split(options.data, "test")
        add_bin_index(source.rows)
        chosen = select(source.rows, options)
        trials = [
            (int(row["excerpt_length"]), int(row["segment_length"]), str(row["trial_id"]).rsplit("-", 1)[0])
            for row in chosen
        ]
        excerpts = spread(_first_of_each(chosen), lambda row: int(row["excerpt_length"]))
        segments = spread(chosen, lambda row: 2 * int(row["segment_length"]))
        excerpt_ratio = words_ratio(tokenizer, [source.excerpt(row) for row in excerpts])
        segment_ratio = words_ratio(tokenizer, [row[key] for row in segments for key in SEGMENTS])
        unknown = ""
        notes.append(
            f"{task.name}: {len(trials):,} test trials of {options.data}; {excerpt_ratio:.2f} tokens per word in its "
            f"excerpts, {segment_ratio:.2f} in its segments (a spread sample)"
        )
    if not trials:
        raise UsageError(
            f"no Book-SORT trial of memari/booksort matches booksort_books={list(options.books or ())}: its books are "
            f"{', '.join(HUB_BOOKS)}"
        )
    rows = []
    answer = task.max_gen_toks if task.output_type == "generate_until" else 1  # generated tokens, or the label
    for excerpt in sorted({e for e, _, _ in trials}):
        cell = [(segment, group) for e, segment, group in trials if e == excerpt]
        shown = excerpt_ratio * excerpt if condition == "in_context" else 0
        every = [template_tokens + round(shown + segment_ratio * 2 * segment) + answer for segment, _ in cell]
        fitting = [(n, group) for n, (_, group) in zip(every, cell) if window.tokens is None or n <= window.tokens]
        tokens = [n for n, _ in fitting]
        skipped = len(every) - len(tokens)
        note = (
            f"{skipped:,} trials of about {max(every):,} tokens exceed the model's window of {window.tokens:,}: skipped"
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
        common: dict[str, Any] = dict(
            task=task.name, output_type=task.output_type, cell=f"LE{excerpt}", length=max(tokens), docs=docs,
            input_tokens=sum(tokens) * (1 if generating else 2), sequence_tokens=max(tokens), data_tokens=sum(every),
            skipped=skipped, estimated=True, note=note,
        )  # fmt: skip
        if generating:
            rows.append(
                Row(**common, requests=docs, forwards=docs, forward_positions=mean - answer, head_positions=1,
                    new_tokens=task.max_gen_toks)
            )  # fmt: skip
        else:
            shared = prefix_tokens + round(excerpt_ratio * excerpt) if condition == "in_context" else 0
            rows.append(Row(**common, **shared_work(docs, mean, max(tokens), shared, len({g for _, g in fitting}))))
    return rows, notes


def _first_of_each(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One trial of each excerpt (its trials share the excerpt's text)."""
    return list({str(row["trial_id"]).rsplit("-", 1)[0]: row for row in rows}.values())


def spread(rows: list[dict[str, Any]], words: Callable[[dict[str, Any]], int]) -> list[dict[str, Any]]:
    """About `SAMPLE_WORDS` words' worth of `rows` (`words` of each), evenly spaced over them."""
    step = max(1, math.ceil(sum(words(row) for row in rows) / SAMPLE_WORDS))
    return rows[::step]


def words_ratio(tokenizer: Any, texts: list[str]) -> float:
    """Tokens per word of `texts` as written (line breaks and indentation are tokens too)."""
    text = "\n".join(texts)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) / max(1, len(text.split()))


def shared_work(trials: int, mean_tokens: int, longest: int, shared: int, groups: int) -> dict[str, Any]:
    """The work of scoring `trials` multiple-choice trials (prompt and one-token answer, `mean_tokens` on average)
    that fall into `groups` of trials sharing their first `shared` tokens (one excerpt's; 0 when memoryless).

    As the backend does it: each trial's two answers ("A", "B") are two requests read from one forward, with the
    LM head at the answer position only (our head, `loglikelihood_accuracy`); the prefix each group shares is
    computed once and its KV cache reused for every trial's suffix, so memory is one sequence plus a group's
    suffixes. The one place this cost model is written: `Plan.costs` evaluates the fields it returns.
    """
    positions = mean_tokens - 1  # the prompt; the answer is read at its last position
    group_size = math.ceil(trials / groups) if groups else 1
    return dict(
        requests=2 * trials, forwards=trials, forward_positions=positions, head_positions=1, new_tokens=0,
        groups=groups if shared else 0, shared_positions=shared,
        group_kv_tokens=shared + group_size * (longest - shared) if shared else 0, scoring="loglikelihood_accuracy",
    )  # fmt: skip

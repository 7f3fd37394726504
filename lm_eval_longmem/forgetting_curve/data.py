"""Forgetting-curve data: corpus -> token stream -> length grid -> seeded S/I spans -> docs and sequences.

Protocol (Liu et al., sections 3-4): all books of the corpus are tokenized one by one with the
evaluated model's tokenizer and concatenated into one long stream. For every length L of the
grid and every sample k, S is a random L-token span of the stream and I a random L-token span
disjoint from S. The model reads

    copy: [bos] S [bos] S        LM: [bos] I [bos] S

under teacher forcing, and only the later half of the second S is scored (its first L//2 tokens
are the cue that shows the model what to copy). The paper's final [eos] is never scored, so it is
left out. [bos] is the tokenizer's BOS token; for tokenizers without one, its EOS token (see
`separator_id`).

Docs hold only numbers (length, sample, span offsets), so `--log_samples` stays small; the token
ids are cut from the stream when requests are built. Each (seed, L, k) has its own RNG, so a
sample does not change when other lengths or more samples are added, nor with batch size or
backend. Every length of the grid gets its docs; lengths whose sequences the backend cannot run are
skipped (and counted) by the task before any request is built, like every other skip.

Sources (section 3.4, Table 2): `forgetting_curve_copy_source` and `forgetting_curve_prefix_source`
draw S and I from other text sources, or from uniform random token ids (`random`). See `Sources`
for which span each role gets; with neither set, the docs are exactly those of a one-corpus run.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import numpy as np

from lm_eval_longmem.common.corpus import DEFAULT_DATASET, check_text_source, load_texts, token_stream
from lm_eval_longmem.common.embedded import BOOKS_HINT
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import load_tokenizer, model_window
from lm_eval_longmem.common.options import parse_options
from lm_eval_longmem.common.order import forward_work, interleave
from lm_eval_longmem.forgetting_curve.options import DEFAULT_POINTS, PREFIX, RANDOM, SweepOptions

log = logging.getLogger(f"lm_eval.{__name__}")


def sweep_options(metadata: dict[str, Any]) -> SweepOptions:
    """The run's `forgetting_curve_*` options (parsed once per run, shared with the task)."""
    return parse_options(SweepOptions, PREFIX, metadata)


def length_grid(claimed: int, points: int = DEFAULT_POINTS) -> list[int]:
    """The paper's grid: L = l/n, 2l/n, ..., l (integer division, duplicates and L < 2 dropped)."""
    return [L for L in dict.fromkeys(k * claimed // points for k in range(1, points + 1)) if L >= 2]


def resolve_lengths(options: SweepOptions, metadata: dict[str, Any]) -> tuple[list[int], int | None]:
    """(ascending lengths to test, claimed window or None)."""
    claimed = options.claimed_length if options.claimed_length is not None else model_window(metadata).tokens
    if options.lengths is not None:
        return sorted(options.lengths), claimed
    if claimed is None:
        raise UsageError(
            "cannot tell the model's claimed context length for the forgetting-curve grid: pass "
            f"--metadata {PREFIX}claimed_length=8192 (grid of {PREFIX}points lengths up to it) or "
            f"explicit lengths, e.g. --metadata {PREFIX}lengths=[1k,2k,4k]"
        )
    lengths = length_grid(claimed, options.points)
    if not lengths:
        raise UsageError(f"--metadata {PREFIX}points={options.points}: claimed length {claimed} gives no length >= 2 tokens")
    return lengths, claimed


def position_limit(options: SweepOptions, metadata: dict[str, Any], claimed: int | None) -> tuple[int | None, str]:
    """(the most input positions a sequence may use, why), None when only memory limits it.

    Order: `forgetting_curve_max_tokens`; the claimed window when `forgetting_curve_beyond_window`
    is false; otherwise what the backend can physically run (`model_info.model_window`: vLLM's
    `max_model_len` - 2, or the HF rule for the model's position encoding).
    """
    if options.max_tokens is not None:
        return options.max_tokens, f"{PREFIX}max_tokens"
    if not options.beyond_window:
        return claimed, f"{PREFIX}beyond_window=false keeps inputs within the claimed window"
    window = model_window(metadata)
    return window.positions, f"what the {window.backend} backend can run"


def model_inputs(length: int) -> int:
    """Positions the model runs for one sequence of length L: [bos] X [bos] S minus the last token."""
    return 2 * length + 1


def separator_id(tokenizer: Any, separator: str | None = None) -> int:
    """The token used for [bos]: `separator` if given (a token or an id), else BOS, else EOS.

    Tokenizers without BOS (e.g. Qwen's) get their EOS token: like BOS it marks a document
    boundary, which is the role [bos] plays between the two halves of the sequence.
    """
    if separator is not None:
        if separator.strip().lstrip("-").isdigit():
            return int(separator)
        token_id = tokenizer.convert_tokens_to_ids(separator)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise UsageError(f"--metadata {PREFIX}separator={separator!r} is not a single token of this tokenizer; give a token or an id")
        return int(token_id)
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    raise UsageError(
        "the tokenizer has neither a BOS nor an EOS token to separate the two halves of each sequence: "
        f"choose one with --metadata {PREFIX}separator=TOKEN (a token string or id)"
    )


class Spans(NamedTuple):
    """Where one sample's S and I start in the token stream (each is `length` tokens long)."""

    s_start: int
    i_start: int


def sample_spans(n_tokens: int, length: int, sample: int, seed: int) -> Spans:
    """S uniform over the starts that leave room for a disjoint I; I uniform over the disjoint starts.

    The RNG is `default_rng([seed, length, sample])`: one stream per (length, sample).
    """
    if n_tokens < 2 * length:
        raise UsageError(
            f"the corpus has {n_tokens} tokens, fewer than the {2 * length} that length {length} needs "
            f"(S and a disjoint I): use a larger corpus ({PREFIX}corpus=/path/to/books) or shorter lengths"
        )
    rng = np.random.default_rng([seed, length, sample])
    last = n_tokens - length  # last possible start of any span
    # S may start at s when I fits before it (s >= L) or after it (s + 2L <= N).
    low_end, high_start = n_tokens - 2 * length, length
    if low_end + 1 >= high_start:
        s = int(rng.integers(0, last + 1))
    else:
        u = int(rng.integers(0, 2 * (low_end + 1)))
        s = u if u <= low_end else high_start + (u - low_end - 1)
    before = max(0, s - length + 1)  # I in [0, s - L]
    after = max(0, last - (s + length) + 1)  # I in [s + L, N - L]
    v = int(rng.integers(0, before + after))
    i = v if v < before else s + length + (v - before)
    return Spans(s, i)


class Sequences(NamedTuple):
    """The two requests of one doc: (context, continuation) token ids each."""

    copy: tuple[np.ndarray, np.ndarray]
    """[bos] S [bos] S[:L//2]  |  S[L//2:]"""
    lm: tuple[np.ndarray, np.ndarray]
    """[bos] I [bos] S[:L//2]  |  S[L//2:]"""


def sequences(stream: np.ndarray, sep: int, length: int, spans: Spans) -> Sequences:
    """The copy and LM sequences of one sample, split into the unscored context and the scored half."""
    s = stream[spans.s_start : spans.s_start + length]
    i = stream[spans.i_start : spans.i_start + length]
    return pair_sequences(s, i, sep)


def pair_sequences(s: np.ndarray, i: np.ndarray, sep: int) -> Sequences:
    """The copy and LM sequences of S and I (equally long), split into the unscored context and the scored half."""
    half = len(s) // 2
    bos = np.asarray([sep], dtype=s.dtype)
    cue = s[:half]
    return Sequences(
        copy=(np.concatenate([bos, s, bos, cue]), s[half:]),
        lm=(np.concatenate([bos, i.astype(s.dtype), bos, cue]), s[half:]),
    )


def corpus_stream(options: SweepOptions, metadata: dict[str, Any]) -> np.ndarray:
    """The corpus as one token stream in the model's tokenizer (tokenized once, cached on disk)."""
    return source_stream(options.corpus, metadata)


def source_stream(source: str | None, metadata: dict[str, Any], key: str | None = None) -> np.ndarray:
    """A text source (None: the default PG-19 test books) as one token stream in the model's tokenizer.

    `key` names the option that chose the source, for errors about it.
    """
    try:
        texts = load_texts(source)
    except UsageError as err:
        if key is not None:
            raise UsageError(f"--metadata {key}={source}: {err}") from err
        if source is not None:
            raise
        raise UsageError(
            f"{err}; for the forgetting curve: --metadata {PREFIX}corpus=/path/to/books (a .txt file or a "
            "folder of .txt books, e.g. Project Gutenberg texts), or hf:OWNER/NAME[:SPLIT][#FIELD]"
        ) from err
    return token_stream(texts, load_tokenizer(metadata))


def source_problems(metadata: dict[str, Any]) -> list[str]:
    """What keeps this run's text sources from loading, one line each with the local alternative; checked
    before the model loads (`lm_eval_longmem.preflight`), so an offline run names them all at once."""
    sources = sweep_sources(sweep_options(metadata))
    problems, seen = [], set()
    for role in (COPY, PREFIX_ROLE):
        spec, key = sources.of(role), sources.key(role)
        if spec == RANDOM or spec in seen:
            continue
        seen.add(spec)
        if why := check_text_source(spec):
            shown = f"{key}={spec}" if spec is not None else f"{key} (default: hub dataset {DEFAULT_DATASET!r}, PG-19 test books)"
            problems.append(f"{shown}: {why}; local alternative: --metadata {key}=BOOKS ({BOOKS_HINT})")
    return problems


# --- sources of S and I (section 3.4) ---------------------------------------------------------

COPY, PREFIX_ROLE = 1, 2
"""The two roles, S and I; each tags its own RNG stream (`default_rng([seed, L, k, role])`)."""


class Sources(NamedTuple):
    """Where S (`copy`) and I (`prefix`) come from: a text source (None: the default corpus) or RANDOM.

    Which tokens each role gets, for sample k of length L:

    * RANDOM: L uniform draws from `vocabulary_ids` with `default_rng([seed, L, k, role])`.
    * the same text source as the other role, or the run's corpus: its span of `sample_spans` on
      that stream (S and I disjoint when they share it). So a run that changes only one role's
      source keeps the other role's tokens: with a random prefix, every S (and so the copy curve)
      is the one the one-corpus run has, and the two LM curves are paired sample by sample.
    * another text source: a uniform L-token span of it, with `default_rng([seed, L, k, role])`.
    """

    copy: str | None
    prefix: str | None
    corpus: str | None
    given: tuple[bool, bool] = (False, False)
    """Whether the copy and prefix sources were set by their own options."""

    @property
    def default(self) -> bool:
        """Both from the corpus: today's one-stream sweep, docs unchanged."""
        return self.copy == self.prefix == self.corpus

    def of(self, role: int) -> str | None:
        return self.copy if role == COPY else self.prefix

    def key(self, role: int) -> str:
        """The option that chose `role`'s source: its own, or the corpus when it was not given."""
        given = self.given[role - 1]
        return f"{PREFIX}{'copy' if role == COPY else 'prefix'}_source" if given else f"{PREFIX}corpus"

    def streams(self, metadata: dict[str, Any]) -> dict[int, np.ndarray | None]:
        """The token stream each role is cut from (None for a random role), each source loaded once."""
        loaded: dict[str | None, np.ndarray] = {}
        out: dict[int, np.ndarray | None] = {}
        for role in (COPY, PREFIX_ROLE):
            spec = self.of(role)
            if spec != RANDOM and spec not in loaded:
                loaded[spec] = source_stream(spec, metadata, self.key(role) if self.given[role - 1] else None)
            out[role] = None if spec == RANDOM else loaded[spec]
        return out

    def shared(self, role: int) -> bool:
        """Whether `role` takes its span from `sample_spans` (see the class docstring)."""
        spec = self.of(role)
        other = self.of(PREFIX_ROLE if role == COPY else COPY)
        return spec != RANDOM and (spec == other or spec == self.corpus)


def sweep_sources(options: SweepOptions) -> Sources:
    def pick(given: str | None) -> str | None:
        return options.corpus if given is None else given

    given = (options.copy_source is not None, options.prefix_source is not None)
    return Sources(pick(options.copy_source), pick(options.prefix_source), options.corpus, given)


def vocabulary_ids(tokenizer: Any) -> np.ndarray:
    """Every token id of the tokenizer except special tokens (BOS, EOS, PAD, added special tokens)."""
    special = set(tokenizer.all_special_ids)
    special.update(i for i, token in getattr(tokenizer, "added_tokens_decoder", {}).items() if token.special)
    ids = np.setdiff1d(np.arange(len(tokenizer), dtype=np.int64), np.fromiter(special, dtype=np.int64, count=len(special)))
    return ids.astype(np.int32)


def random_tokens(vocabulary: np.ndarray, length: int, sample: int, seed: int, role: int) -> np.ndarray:
    """L uniform draws from `vocabulary` for one role of one sample (its own RNG: reproducible alone)."""
    rng = np.random.default_rng([seed, length, sample, role])
    return vocabulary[rng.integers(0, len(vocabulary), size=length)]


def source_start(sources: Sources, role: int, sizes: dict[int, int], length: int, sample: int, seed: int) -> int:
    """Where `role`'s L-token span starts in its stream of `sizes[role]` tokens; -1 for a random role."""
    if sources.of(role) == RANDOM:
        return -1
    if sources.shared(role):
        spans = sample_spans(sizes[role], length, sample, seed)
        return spans.s_start if role == COPY else spans.i_start
    if sizes[role] < length:
        raise UsageError(
            f"--metadata {sources.key(role)}: the source has {sizes[role]} tokens, fewer than length {length}: "
            "use a larger source or shorter lengths"
        )
    return int(np.random.default_rng([seed, length, sample, role]).integers(0, sizes[role] - length + 1))


def role_tokens(doc: dict[str, Any], sources: Sources, role: int, stream: np.ndarray | None, vocabulary: np.ndarray | None) -> np.ndarray:
    """The L tokens of S (`COPY`) or I (`PREFIX_ROLE`) of one doc: cut from its stream, or drawn at random."""
    length = int(doc["length"])
    if sources.of(role) == RANDOM:
        return random_tokens(vocabulary, length, int(doc["sample"]), int(doc["seed"]), role)
    start = int(doc["s_start"] if role == COPY else doc["i_start"])
    return stream[start : start + length]


def doc_work(doc: dict[str, Any], limit: int | None = None) -> int:
    """Estimated work of a doc's requests (two forwards of the same length), for balancing ranks.

    A length beyond the backend's position `limit` is skipped and costs nothing. The limit decides
    that, not `s_start`: a random S has no start either, and it runs.
    """
    inputs = model_inputs(int(doc["length"]))
    return 0 if limit is not None and inputs > limit else 2 * forward_work(inputs)


class Sweep(NamedTuple):
    """What the data builder decided: the docs and the lengths behind them."""

    docs: list[dict[str, Any]]
    lengths: list[int]
    claimed: int | None


def build_sweep(metadata: dict[str, Any]) -> Sweep:
    """All docs of a sweep: sample 0 of every length, then sample 1, ..., so `--limit` covers the curve.

    Within each such round the lengths are placed to give data-parallel ranks equal work
    (`common.order.interleave`); a skipped length costs nothing.

    Every length of the grid gets its docs; the task skips (and counts) the lengths the backend
    cannot run. A length beyond that limit needs no span of the corpus (it never runs), so a
    short corpus is an error only for lengths that will run.
    """
    options = sweep_options(metadata)
    lengths, claimed = resolve_lengths(options, metadata)
    limit, _ = position_limit(options, metadata, claimed)
    tokenizer = load_tokenizer(metadata)
    sep = separator_id(tokenizer, options.separator)
    sources = sweep_sources(options)
    sizes = {role: 0 if stream is None else len(stream) for role, stream in sources.streams(metadata).items()}
    by_length = [[] for _ in lengths]
    for k in range(options.samples):
        for cell, L in zip(by_length, lengths, strict=True):
            runs = limit is None or model_inputs(L) <= limit
            if sources.default:
                spans = sample_spans(sizes[COPY], L, k, options.seed) if runs else Spans(-1, -1)
            else:
                spans = Spans(*(source_start(sources, role, sizes, L, k, options.seed) if runs else -1 for role in (COPY, PREFIX_ROLE)))
            cell.append(
                {
                    "length": L,
                    "sample": k,
                    "s_start": spans.s_start,
                    "i_start": spans.i_start,
                    "scored": L - L // 2,
                    "separator_id": sep,
                    "seed": options.seed,
                    **doc_sizes(sources, sizes),
                }
            )
    docs = interleave(by_length, cost=lambda doc: doc_work(doc, limit))
    return Sweep(docs, lengths, claimed)


def doc_sizes(sources: Sources, sizes: dict[int, int]) -> dict[str, int]:
    """The stream sizes a doc records (checked when its tokens are cut); 0 for a random role."""
    if sources.default:
        return {"corpus_tokens": sizes[COPY]}
    return {"copy_tokens": sizes[COPY], "prefix_tokens": sizes[PREFIX_ROLE]}


def build_dataset(**metadata: Any) -> dict[str, Any]:
    """`custom_dataset` hook: the sweep's docs as the `test` split."""
    import datasets

    sweep = build_sweep(metadata)
    log.info("forgetting_curve: %d docs, %d lengths (%s), claimed window %s", len(sweep.docs), len(sweep.lengths),
             ",".join(map(str, sweep.lengths)), sweep.claimed)  # fmt: skip
    return {"test": datasets.Dataset.from_list(sweep.docs)}

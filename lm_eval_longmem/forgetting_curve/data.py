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

`forgetting_curve_protocol=authors` builds the samples as the authors' tool does instead (the
section "the authors' construction" below): its grid, its stream, its spans (S drawn with Python's
`random`, I the last L tokens of the stream), its separator id and its random token ids. The
sequences keep the same shape, `[sep] X [sep] S`, and are scored the same way.
"""

from __future__ import annotations

import logging
import random
from typing import Any, NamedTuple

import numpy as np

from lm_eval_longmem.common.cache import texts_digest
from lm_eval_longmem.common.corpus import (
    DEFAULT_DATASET,
    check_text_source,
    hub_dataset_spec,
    load_hub_dataset,
    load_texts,
    token_stream,
)
from lm_eval_longmem.common.embedded import BOOKS_HINT
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import load_tokenizer, model_window
from lm_eval_longmem.common.options import parse_options
from lm_eval_longmem.common.order import forward_work, interleave
from lm_eval_longmem.forgetting_curve.analysis import scored_tokens
from lm_eval_longmem.forgetting_curve.options import (
    AUTHORS,
    DEFAULT_POINTS,
    LINEAR,
    LOG,
    OURS,
    PREFIX,
    RANDOM,
    SweepOptions,
)

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
    if options.protocol == AUTHORS:
        return authors_grid(claimed, options.points, options.grid), claimed
    if options.grid == LOG:
        raise UsageError(
            f"--metadata {PREFIX}grid={LOG} is the authors' tool's grid: add {PREFIX}protocol={AUTHORS}, "
            f"or give explicit {PREFIX}lengths"
        )
    lengths = length_grid(claimed, options.points)
    if not lengths:
        raise UsageError(
            f"--metadata {PREFIX}points={options.points}: claimed length {claimed} gives no length >= 2 tokens"
        )
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


def separator_id(tokenizer: Any, separator: str | None = None, protocol: str = OURS) -> int:
    """The token used for [bos]: `separator` if given (a token or an id), else BOS, else EOS; with
    the authors' protocol and no `separator`, their hard-coded id (`AUTHORS_SEPARATOR`).

    Tokenizers without BOS (e.g. Qwen's) get their EOS token: like BOS it marks a document
    boundary, which is the role [bos] plays between the two halves of the sequence.
    """
    if separator is None and protocol == AUTHORS:
        return AUTHORS_SEPARATOR
    if separator is not None:
        size = len(tokenizer)
        if separator.strip().lstrip("-").isdigit():
            token_id = int(separator)
            if not 0 <= token_id < size:
                raise UsageError(
                    f"--metadata {PREFIX}separator={token_id}: not a token id of this tokenizer (its ids run from 0 to "
                    f"{size - 1}); give an id in that range or a token"
                )
            return token_id
        # the vocabulary itself, not convert_tokens_to_ids: a real token may share its id with the unknown token
        token_id = tokenizer.get_vocab().get(separator)
        if token_id is None:
            raise UsageError(
                f"--metadata {PREFIX}separator={separator!r} is not a single token of this tokenizer; give a token or an id"
            )
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


def source_stream(
    source: str | None, metadata: dict[str, Any], key: str | None = None, protocol: str = OURS
) -> np.ndarray:
    """A text source (None: the default PG-19 test books) as one token stream in the model's tokenizer.

    `key` names the option that chose the source, for errors about it. Ours: each text tokenized
    without special tokens; the authors' protocol: their pieces (`authors_pieces`), each tokenized
    with the tokenizer's default special tokens, as their tool calls it.
    """
    return token_stream(
        source_texts(source, key, protocol), load_tokenizer(metadata), special_tokens=protocol == AUTHORS
    )


def source_texts(source: str | None, key: str | None = None, protocol: str = OURS) -> list[str]:
    """The texts of a source (see `source_stream`; the authors' protocol: their pieces), with errors naming the option `key`."""
    try:
        return authors_pieces(source) if protocol == AUTHORS else load_texts(source)
    except UsageError as err:
        if key is not None:
            raise UsageError(f"--metadata {key}={source}: {err}") from err
        if source is not None:
            raise
        raise UsageError(
            f"{err}; for the forgetting curve: --metadata {PREFIX}corpus=/path/to/books (a .txt file or a "
            "folder of .txt books, e.g. Project Gutenberg texts), or hf:OWNER/NAME[:SPLIT][#FIELD]"
        ) from err


def source_problems(metadata: dict[str, Any]) -> list[str]:
    """What keeps this run's text sources from loading, one line each with the local alternative; checked
    before the model loads (`lm_eval_longmem.preflight`), so an offline run names them all at once. The
    sources are taken as named (reading them to compare their texts is the run's job)."""
    sources = named_sources(sweep_options(metadata))
    problems, seen = [], set()
    for role in (COPY, PREFIX_ROLE):
        spec, key = sources.of(role), sources.key(role)
        if spec == RANDOM or spec in seen:
            continue
        seen.add(spec)
        if why := check_text_source(spec):
            shown = (
                f"{key}={spec}"
                if spec is not None
                else f"{key} (default: hub dataset {DEFAULT_DATASET!r}, PG-19 test books)"
            )
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
    protocol: str = OURS
    """Whose construction cuts the streams (`forgetting_curve_protocol`): ours here, the authors' in `authors_draws`."""

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
                key = self.key(role) if self.given[role - 1] else None
                loaded[spec] = source_stream(spec, metadata, key, self.protocol)
            out[role] = None if spec == RANDOM else loaded[spec]
        return out

    def shared(self, role: int) -> bool:
        """Whether `role` takes its span from `sample_spans` (see the class docstring)."""
        spec = self.of(role)
        other = self.of(PREFIX_ROLE if role == COPY else COPY)
        return spec != RANDOM and (spec == other or spec == self.corpus)


def named_sources(options: SweepOptions) -> Sources:
    """The run's sources as its options name them (a role not given takes the corpus)."""

    def pick(given: str | None) -> str | None:
        return options.corpus if given is None else given

    given = (options.copy_source is not None, options.prefix_source is not None)
    return Sources(pick(options.copy_source), pick(options.prefix_source), options.corpus, given, options.protocol)


def sweep_sources(options: SweepOptions) -> Sources:
    """The run's sources, compared as texts (`same_texts`): options naming the same texts are one source."""
    sources = same_texts(named_sources(options))
    if options.protocol == AUTHORS and sources.prefix == RANDOM and sources.copy != RANDOM:
        raise UsageError(
            f"--metadata {PREFIX}prefix_source=random with {PREFIX}protocol=authors: the authors' tool draws a random "
            f"prefix only beside a random copied text (its `random` data type): add {PREFIX}copy_source=random, "
            f"or use {PREFIX}protocol=ours"
        )
    return sources


def same_texts(sources: Sources) -> Sources:
    """`sources` with every source that holds the same texts as an earlier one (corpus, copy, prefix) named
    as that one, so sources are compared as texts, not as option strings.

    `books/` and `books`, a relative and an absolute path, or a folder holding just the corpus's books
    all read the same texts: they are the same source, so S and I are drawn disjoint from one stream
    (`sample_spans`), exactly as in a run that names the corpus once. Two different sources that
    share a text (a folder holding the other source's book and more) would let I contain S: refused.
    The corpus counts only when a role uses it or it was given.
    """
    specs = [spec for spec in (sources.copy, sources.prefix) if spec != RANDOM]
    if sources.corpus is not None or not all(sources.given):
        specs.insert(0, sources.corpus)
    distinct = list(dict.fromkeys(specs))
    if len(distinct) < 2:
        return sources
    keys = {sources.corpus: f"{PREFIX}corpus"}
    keys |= {sources.of(role): sources.key(role) for role in (PREFIX_ROLE, COPY) if sources.given[role - 1]}
    texts = {spec: tuple(texts_digest([t]) for t in source_texts(spec, keys.get(spec))) for spec in distinct}
    canonical = {spec: next(first for first in distinct if texts[first] == texts[spec]) for spec in distinct}
    named = sources._replace(
        copy=canonical.get(sources.copy, sources.copy),
        prefix=canonical.get(sources.prefix, sources.prefix),
        corpus=canonical.get(sources.corpus, sources.corpus),
    )
    copy, prefix = named.copy, named.prefix
    if RANDOM not in (copy, prefix) and copy != prefix and set(texts[copy]) & set(texts[prefix]):
        shared = len(set(texts[copy]) & set(texts[prefix]))
        raise UsageError(
            f"--metadata {named.key(COPY)}={sources.copy} and {named.key(PREFIX_ROLE)}={sources.prefix} share {shared} "
            "text(s) but are not the same source, so the prefix I could contain the copied text S: give both the same "
            "source (S and I are then drawn disjoint) or sources with no text in common"
        )
    return named


def vocabulary_ids(tokenizer: Any) -> np.ndarray:
    """Every token id of the tokenizer except special tokens (BOS, EOS, PAD, added special tokens)."""
    special = set(tokenizer.all_special_ids)
    special.update(i for i, token in getattr(tokenizer, "added_tokens_decoder", {}).items() if token.special)
    ids = np.setdiff1d(
        np.arange(len(tokenizer), dtype=np.int64), np.fromiter(special, dtype=np.int64, count=len(special))
    )
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


def role_tokens(
    doc: dict[str, Any], sources: Sources, role: int, stream: np.ndarray | None, vocabulary: np.ndarray | None
) -> np.ndarray:
    """The L tokens of S (`COPY`) or I (`PREFIX_ROLE`) of one doc: cut from its stream, or drawn at random."""
    length = int(doc["length"])
    if sources.of(role) == RANDOM:
        assert vocabulary is not None, "a random role draws from the vocabulary"
        return random_tokens(vocabulary, length, int(doc["sample"]), int(doc["seed"]), role)
    assert stream is not None, "a text role is cut from its stream"
    start = int(doc["s_start"] if role == COPY else doc["i_start"])
    return stream[start : start + length]


def running_lengths(lengths: list[int], limit: int | None) -> list[int]:
    """The lengths whose 2L+1 input positions the backend can run (the others are skipped, never drawn for)."""
    return [L for L in lengths if limit is None or model_inputs(L) <= limit]


def doc_work(doc: dict[str, Any], limit: int | None = None) -> int:
    """Estimated work of a doc's requests (two forwards of the same length), for balancing ranks.

    A length beyond the backend's position `limit` is skipped and costs nothing. The limit decides
    that, not `s_start`: a random S has no start either, and it runs.
    """
    inputs = model_inputs(int(doc["length"]))
    return 0 if limit is not None and inputs > limit else 2 * forward_work(inputs)


# --- the authors' construction (forgetting_curve_protocol=authors) ---------------------------
#
# Read from their tool (github.com/1azybug/ForgettingCurve, draw.py at e3b76dc; the code here is
# ours): one `random.seed(0)` for the whole run; PG-19 test books tokenized piece by piece; for each
# length of a linear grid and each sample, S starts at `random.randint(0, N - 3L)` and I is the last
# L tokens of the whole stream (the same for every sample); sequences `[1] X [1] S [2]`, ids 1 and 2
# whatever the tokenizer; the last ceil(L/2) tokens of the second S scored, as ours. Their `random`
# data type draws 2L ids with `random.randint(10, 31999)` per sample instead.

AUTHORS_SEPARATOR = 1
"""The id their tool writes as [bos] whatever the tokenizer (and 2 as the final [eos], never scored, so
not sent): Llama-2's BOS, SmolLM2's BOS by chance, some other token elsewhere. Their bug, kept in this
protocol; `forgetting_curve_separator` replaces it (a corrected authors' run)."""
AUTHORS_FIRST_LENGTH = 8
"""Their grid starts at 8 tokens."""
AUTHORS_RANDOM_IDS = (10, 31999)
"""Their random token ids: `random.randint(10, 31999)`, both ends included, whatever the vocabulary."""
AUTHORS_TITLE_FIELD = "short_book_title"
"""The PG-19 column their tool puts (with a newline) before each book's text (also with a newline)."""


def authors_grid(last: int | None, points: int, spacing: str = LINEAR) -> list[int]:
    """Their grid (`last` plays their `--test_max_length`, `points` their `--granularity`): linear,
    `np.linspace(8, last, points, dtype=int)`, or log, `np.unique(np.geomspace(8, last, points, dtype=int))`
    (their `--granularity_type log`, which drops repeated lengths)."""
    if last is None or last < AUTHORS_FIRST_LENGTH:
        raise UsageError(
            f"{PREFIX}protocol=authors: the authors' grid runs from {AUTHORS_FIRST_LENGTH} tokens up to "
            f"{PREFIX}claimed_length (their --test_max_length), here {last}: pass e.g. --metadata "
            f"{PREFIX}claimed_length=16000 (their Llama-3-8B run), or explicit {PREFIX}lengths"
        )
    if spacing == LOG:
        return [int(L) for L in np.unique(np.geomspace(AUTHORS_FIRST_LENGTH, last, num=points, dtype=int))]
    grid = [int(L) for L in np.linspace(AUTHORS_FIRST_LENGTH, last, points, dtype=int)]
    if len(set(grid)) < len(grid):
        raise UsageError(
            f"{PREFIX}protocol=authors: the authors' grid from {AUTHORS_FIRST_LENGTH} to {last} in {points} points "
            f"repeats lengths: pass {PREFIX}claimed_length of at least {AUTHORS_FIRST_LENGTH + points - 1}, fewer "
            f"{PREFIX}points, or explicit {PREFIX}lengths"
        )
    return grid


def authors_pieces(source: str | None) -> list[str]:
    """The strings the authors' tool tokenizes one by one, in stream order.

    Their script reads PG-19's test books from the hub and tokenizes, for each book, its
    `short_book_title` and a newline, then its text and a newline (verbatim). Their Python API takes a
    list of texts and tokenizes each as given. So a hub source whose rows have `short_book_title` gives
    the script's pieces; any other source (local books, read as `load_texts` reads them; a hub dataset
    without titles) gives its texts, the API's pieces.
    """
    hub = hub_dataset_spec(source)
    if hub is not None:
        name, split, field = hub
        dataset = load_hub_dataset(name, split, hint_default=source is None)
        if {AUTHORS_TITLE_FIELD, field} <= set(dataset.column_names):
            return [piece for row in dataset for piece in (f"{row[AUTHORS_TITLE_FIELD]}\n", f"{row[field]}\n")]
    return load_texts(source)


class AuthorsDraw(NamedTuple):
    """One sample of the authors' random sequence."""

    s_start: int
    """Where S starts in the stream (-1 for a random S)."""
    state: tuple
    """Python's `random` state before this sample's calls (a random S and I are drawn again from it)."""


def authors_draws(
    lengths: list[int], samples: int, seed: int, copy_tokens: int | None
) -> dict[tuple[int, int], AuthorsDraw]:
    """The authors' one `random` sequence (seeded once with `seed`), call by call, per (L, sample).

    `lengths` are those that run, ascending (a length that cannot run is never drawn for; only
    longer ones follow it). A text S (`copy_tokens`: its stream's size N) takes one
    `randint(0, N - 3L)` per sample: its start. A random S (`copy_tokens` None) takes 2L
    `randint(10, 31999)` per sample: L ids for S, then L for I, drawn even when I is taken from a text
    (their code draws them before it looks for a given prefix).
    """
    rng = random.Random(seed)
    out = {}
    for L in lengths:
        if copy_tokens is not None and copy_tokens < 3 * L:
            raise UsageError(
                f"{PREFIX}protocol=authors: the copy stream has {copy_tokens} tokens, fewer than the {3 * L} the authors' "
                f"tool needs for length {L} (S starts in the first N - 3L tokens): use a larger corpus or shorter lengths"
            )
        for k in range(samples):
            state = rng.getstate()
            if copy_tokens is None:
                for _ in range(2 * L):
                    rng.randint(*AUTHORS_RANDOM_IDS)
                out[L, k] = AuthorsDraw(-1, state)
            else:
                out[L, k] = AuthorsDraw(rng.randint(0, copy_tokens - 3 * L), state)
    return out


def authors_random_tokens(draw: AuthorsDraw, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The random S and I of one sample: L ids, then L more, from the state before its calls."""
    rng = random.Random()
    rng.setstate(draw.state)

    def ids() -> np.ndarray:
        return np.fromiter((rng.randint(*AUTHORS_RANDOM_IDS) for _ in range(length)), dtype=np.int32, count=length)

    return ids(), ids()


def authors_prefix_start(n_tokens: int, length: int) -> int:
    """Where the authors' I starts: the last L tokens of its stream."""
    if n_tokens < length:
        raise UsageError(
            f"the prefix stream has {n_tokens} tokens, fewer than length {length}: use a larger source or shorter lengths"
        )
    return n_tokens - length


def check_authors_vocabulary(sources: Sources, tokenizer: Any) -> None:
    """Their random ids run up to 31999: a random role needs a tokenizer with more tokens than that."""
    if RANDOM in (sources.copy, sources.prefix) and len(tokenizer) <= AUTHORS_RANDOM_IDS[1]:
        raise UsageError(
            f"{PREFIX}protocol=authors with a random source draws ids up to {AUTHORS_RANDOM_IDS[1]}, but this tokenizer "
            f"has {len(tokenizer)} tokens: use {PREFIX}protocol=ours (random ids from this vocabulary)"
        )


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
    sep = separator_id(tokenizer, options.separator, options.protocol)
    sources = sweep_sources(options)
    sizes = {role: 0 if stream is None else len(stream) for role, stream in sources.streams(metadata).items()}
    running = running_lengths(lengths, limit)
    if options.protocol == AUTHORS:
        check_authors_vocabulary(sources, tokenizer)
        # A random S has no start to record: the task draws its tokens (`authors_random_tokens`).
        draws = {} if sources.copy == RANDOM else authors_draws(running, options.samples, options.seed, sizes[COPY])
    by_length: list[list[dict[str, Any]]] = [[] for _ in lengths]
    for k in range(options.samples):
        for cell, L in zip(by_length, lengths, strict=True):
            if L not in running:
                spans = Spans(-1, -1)
            elif options.protocol == AUTHORS:
                prefix = -1 if sources.prefix == RANDOM else authors_prefix_start(sizes[PREFIX_ROLE], L)
                spans = Spans(draws[L, k].s_start if draws else -1, prefix)
            elif sources.default:
                spans = sample_spans(sizes[COPY], L, k, options.seed)
            else:
                spans = Spans(*(source_start(sources, role, sizes, L, k, options.seed) for role in (COPY, PREFIX_ROLE)))
            cell.append(
                {
                    "length": L,
                    "sample": k,
                    "s_start": spans.s_start,
                    "i_start": spans.i_start,
                    "scored": scored_tokens(L),
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

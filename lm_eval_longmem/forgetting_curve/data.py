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
backend. Lengths whose sequences the backend cannot run are skipped here, up front, with one
warning that lists them; every doc records the skipped lengths so the results can say so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from lm_eval_longmem.common.corpus import load_texts, token_stream
from lm_eval_longmem.common.lengths import parse_length, parse_lengths
from lm_eval_longmem.common.model_info import claimed_window, load_config, load_tokenizer, trust_remote_code
from lm_eval_longmem.common.options import option, parse_flag

log = logging.getLogger(__name__)

DEFAULT_POINTS = 32
"""The paper's grid granularity n (section 4, footnote 10)."""
DEFAULT_SAMPLES = 10
"""Samples per length, as in the paper (section 3.3)."""
DEFAULT_SEED = 0
PREFIX = "forgetting_curve_"


@dataclass(frozen=True)
class SweepOptions:
    """The `forgetting_curve_*` metadata keys, parsed (see task_configs/forgetting_curve/README.md)."""

    lengths: tuple[int, ...] | None
    """Explicit lengths L; None means the grid l/n, 2l/n, ..., l."""
    claimed: int | None
    """The claimed window l; None means: read it from the model (max_length or its config)."""
    points: int
    """Grid granularity n."""
    samples: int
    """Samples per length."""
    seed: int
    """Seed of every sample's RNG."""
    corpus: str | None
    """Text source (None = PG-19 test from the hub; a .txt file/folder; hf:OWNER/NAME[:SPLIT][#FIELD])."""
    max_tokens: int | None
    """Longest model input the backend can run; None = find out from the model config."""
    beyond_window: bool
    """Whether sequences may be longer than the claimed window (the paper's grid needs up to 2l+2)."""
    separator: str | None
    """Token (string or id) used as [bos]; None = the tokenizer's BOS, else its EOS."""

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> SweepOptions:
        """Parse and check the options; errors name the key and a valid example."""
        lengths = option(metadata, PREFIX + "lengths")
        claimed = option(metadata, PREFIX + "claimed_length")
        max_tokens = option(metadata, PREFIX + "max_tokens")
        options = cls(
            lengths=tuple(parse_lengths(lengths)) if lengths is not None else None,
            claimed=parse_length(claimed) if claimed is not None else None,
            points=_positive_int(metadata, "points", DEFAULT_POINTS),
            samples=_positive_int(metadata, "samples", DEFAULT_SAMPLES),
            seed=int(option(metadata, PREFIX + "seed", DEFAULT_SEED)),
            corpus=option(metadata, PREFIX + "corpus"),
            max_tokens=parse_length(max_tokens) if max_tokens is not None else None,
            beyond_window=parse_flag(option(metadata, PREFIX + "beyond_window", True), PREFIX + "beyond_window"),
            separator=None if option(metadata, PREFIX + "separator") is None else str(metadata[PREFIX + "separator"]),
        )
        if options.lengths is not None and min(options.lengths) < 2:
            raise ValueError(
                f"{PREFIX}lengths must all be >= 2 tokens (half of S is the cue, half is scored); "
                f"got {list(options.lengths)}"
            )
        return options


def _positive_int(metadata: dict[str, Any], key: str, default: int) -> int:
    value = option(metadata, PREFIX + key, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or str(value).strip() != str(number):
        raise ValueError(f"{PREFIX}{key} must be a positive whole number, e.g. {PREFIX}{key}={default}; got {value!r}")
    return number


def length_grid(claimed: int, points: int = DEFAULT_POINTS) -> list[int]:
    """The paper's grid: L = l/n, 2l/n, ..., l (integer division, duplicates and L < 2 dropped)."""
    return [L for L in dict.fromkeys(k * claimed // points for k in range(1, points + 1)) if L >= 2]


def resolve_lengths(options: SweepOptions, metadata: dict[str, Any]) -> tuple[list[int], int | None]:
    """(ascending lengths to test, claimed window or None)."""
    claimed = options.claimed if options.claimed is not None else claimed_window(metadata)
    if options.lengths is not None:
        return sorted(options.lengths), claimed
    if claimed is None:
        raise ValueError(
            "cannot tell the model's claimed context length for the forgetting-curve grid: pass "
            f"--metadata {PREFIX}claimed_length=8192 (grid of {PREFIX}points lengths up to it) or "
            f"explicit lengths, e.g. --metadata {PREFIX}lengths=[1k,2k,4k]"
        )
    lengths = length_grid(claimed, options.points)
    if not lengths:
        raise ValueError(f"claimed length {claimed} / {options.points} points gives no length >= 2 tokens")
    return lengths, claimed


def physical_limit(options: SweepOptions, metadata: dict[str, Any], claimed: int | None) -> int | None:
    """The longest model input (positions) the backend can run, or None when only memory limits it.

    Order: `forgetting_curve_max_tokens`; vLLM's `max_model_len` (its engine scores at most
    max_model_len - 1 tokens, i.e. 2L+2 <= max_model_len - 1, so inputs 2L+1 <= max_model_len - 2);
    the claimed window when `forgetting_curve_beyond_window=false`; otherwise the HF backend's own
    rule (`backends.hf.physical_max_length`: rotary/ALiBi models have no positional limit, learned
    position tables cap the input at their size, anything else keeps the claimed window), applied
    to the model built on the meta device from its config (no weights are loaded).
    """
    if options.max_tokens is not None:
        return options.max_tokens
    if option(metadata, "max_model_len") is not None:
        return int(metadata["max_model_len"]) - 2
    if not options.beyond_window:
        return claimed
    return _hf_physical_limit(metadata, claimed)


def _hf_physical_limit(metadata: dict[str, Any], claimed: int | None) -> int | None:
    name = option(metadata, "pretrained")
    if not isinstance(name, str):
        return claimed  # the model is not named here (e.g. a served model): stay inside its window
    import torch
    from transformers import AutoModelForCausalLM

    from lm_eval_longmem.backends.hf import physical_max_length

    config = load_config(metadata)
    try:
        if config is None:
            raise OSError("no model config")
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code(metadata))
    except (OSError, ValueError, TypeError, ImportError) as err:
        log.warning("forgetting_curve: cannot inspect %s (%s); keeping inputs within its window %s", name, err, claimed)
        return claimed
    return physical_max_length(model, claimed or 0).tokens


def model_inputs(length: int) -> int:
    """Positions the model runs for one sequence of length L: [bos] X [bos] S minus the last token."""
    return 2 * length + 1


def split_runnable(lengths: Sequence[int], limit: int | None) -> tuple[list[int], list[int]]:
    """(lengths that fit the backend's limit, lengths to skip)."""
    if limit is None:
        return list(lengths), []
    return [L for L in lengths if model_inputs(L) <= limit], [L for L in lengths if model_inputs(L) > limit]


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
            raise ValueError(f"{PREFIX}separator={separator!r} is not a single token of this tokenizer; give a token or an id")
        return int(token_id)
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    raise ValueError(
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
        raise ValueError(
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
    half = length // 2
    bos = np.asarray([sep], dtype=stream.dtype)
    cue = s[:half]
    return Sequences(
        copy=(np.concatenate([bos, s, bos, cue]), s[half:]),
        lm=(np.concatenate([bos, i, bos, cue]), s[half:]),
    )


def corpus_stream(options: SweepOptions, metadata: dict[str, Any]) -> np.ndarray:
    """The corpus as one token stream in the model's tokenizer (tokenized once, cached on disk)."""
    try:
        texts = load_texts(options.corpus)
    except RuntimeError as err:
        if options.corpus is not None:
            raise
        raise RuntimeError(
            f"{err}\nFor the forgetting curve: --metadata {PREFIX}corpus=/path/to/books (a .txt file or a "
            "folder of .txt books, e.g. Project Gutenberg texts), or hf:OWNER/NAME[:SPLIT][#FIELD]"
        ) from err
    return token_stream(texts, load_tokenizer(metadata))


class Sweep(NamedTuple):
    """What the data builder decided: the docs and the lengths behind them."""

    docs: list[dict[str, Any]]
    tested: list[int]
    skipped: list[int]
    claimed: int | None
    limit: int | None


def build_sweep(metadata: dict[str, Any]) -> Sweep:
    """All docs of a sweep, lengths interleaved (L1 k0, L2 k0, ..., L1 k1, ...) so `--limit` covers the curve."""
    options = SweepOptions.from_metadata(metadata)
    lengths, claimed = resolve_lengths(options, metadata)
    limit = physical_limit(options, metadata, claimed)
    tested, skipped = split_runnable(lengths, limit)
    if skipped:
        log.warning(
            "forgetting_curve: skipping lengths %s: their %s-token inputs exceed what the backend can run "
            "(%s tokens); the results mark memory lengths reaching the last tested length as censored",
            skipped,
            [model_inputs(L) for L in skipped],
            limit,
        )
    if not tested:
        raise ValueError(
            f"no forgetting-curve length fits the backend's limit of {limit} input tokens (a length L needs "
            f"2L+1): choose shorter lengths with --metadata {PREFIX}lengths=..."
        )
    tokenizer = load_tokenizer(metadata)
    sep = separator_id(tokenizer, options.separator)
    n_tokens = len(corpus_stream(options, metadata))
    docs = []
    for k in range(options.samples):
        for L in tested:
            spans = sample_spans(n_tokens, L, k, options.seed)
            docs.append(
                {
                    "length": L,
                    "sample": k,
                    "s_start": spans.s_start,
                    "i_start": spans.i_start,
                    "scored": L - L // 2,
                    "separator_id": sep,
                    "seed": options.seed,
                    "corpus_tokens": n_tokens,
                    "claimed_length": claimed,
                    "skipped_lengths": skipped,
                }
            )
    return Sweep(docs, tested, skipped, claimed, limit)


def build_dataset(**metadata: Any) -> dict[str, Any]:
    """`custom_dataset` hook: the sweep's docs as the `test` split."""
    import datasets

    return {"test": datasets.Dataset.from_list(build_sweep(metadata).docs)}

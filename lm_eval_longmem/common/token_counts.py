"""Exact token counts of long prompts without tokenizing them again on every run.

The window fit (`common/task.py`) must know, before any request is built, how many tokens each
prompt has exactly as the backend will receive it (special tokens, system instruction and chat
template included): a count that is one token short lets the backend cut the prompt silently. At
1M tokens one tokenization takes seconds, so counts are made once and reused, in two exact ways:

* **Sums of counts a builder already has** (`join_additive`). For most fast tokenizers the tokens of
  pieces joined by single spaces are exactly the tokens of each piece alone (the first one bare,
  every later one with its leading space): with no normalizer, the pre-tokenizer splits the text
  into words before the model sees it, and the model (BPE, WordPiece, Unigram, ...) tokenizes each
  word on its own; a GPT-2 or Llama-3 style split never joins a space to what precedes it. So a
  builder that knows the count of every piece (every background sentence, cached) adds
  them up. `join_additive` accepts a tokenizer only when this holds for it: no normalizer, added
  tokens without white space that do not swallow the space after them, and a pre-tokenizer that
  splits every probe `left + " " + right` exactly into the words of `left` and of `" " + right`.
  Others (a SentencePiece normalizer that prepends a space marker, no pre-tokenizer, a slow
  tokenizer) are counted by tokenizing the whole text.
* **Counts by content** (`TokenCounts`). Any text's exact count, kept on disk under the
  tokenizer's fingerprint and the sha256 of the text: a prompt is tokenized the first time it is
  seen, in any run, and afterwards only hashed (milliseconds at 1M tokens).
"""

from __future__ import annotations

import logging
from typing import Any

from lm_eval_longmem.common.cache import merge_table, read_table, sha256_hex
from lm_eval_longmem.common.model_info import tokenizer_fingerprint

log = logging.getLogger(f"lm_eval.{__name__}")

_PROBES = (
    "word", "Word", "I", "42", "3.5", "1,000", ".", ",", "!", "?", ";", ":", "'", '"', "\u201d", "\u2019s", "n't",
    "'s", ")", "(", "]", "-", "\u2014", "\u2026", "...", "\u00e9t\u00e9", "\u65e5\u672c", "\U0001f600", "$", "_", "*", "#",
)  # fmt: skip
"""Both sides of every probe join: words, numbers, punctuation, quotes, contractions, other scripts, symbols."""

_ADDITIVE: dict[str, bool] = {}
"""`join_additive` per tokenizer fingerprint (probing takes a few milliseconds; fingerprints are cheap to compare)."""


def _words(pre_tokenizer: Any, text: str) -> list[tuple[str, tuple[int, int]]]:
    return pre_tokenizer.pre_tokenize_str(text)


def join_additive(tokenizer: Any) -> bool:
    """Whether `len(tok(" ".join(pieces)))` is the sum of the pieces' own counts (see the module docstring).

    Pieces must be non-empty and carry no white space at either end (stripped sentences, facts,
    words); the first piece is counted bare, every later one as `" " + piece`, special tokens once.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    fingerprint = tokenizer_fingerprint(tokenizer)
    if fingerprint not in _ADDITIVE:
        _ADDITIVE[fingerprint] = _probe(tokenizer, backend)
    return _ADDITIVE[fingerprint]


def _probe(tokenizer: Any, backend: Any) -> bool:
    if backend.normalizer is not None or backend.pre_tokenizer is None:
        return False
    for token in getattr(tokenizer, "added_tokens_decoder", {}).values():
        if token.rstrip or any(ch.isspace() for ch in token.content):
            return False
    pre = backend.pre_tokenizer
    for left in _PROBES:
        for right in _PROBES:
            joined = _words(pre, f"{left} {right}")
            alone = _words(pre, left) + [(w, (a + len(left), b + len(left))) for w, (a, b) in _words(pre, " " + right)]
            if joined != alone:
                return False
    return True


class TokenCounts:
    """Exact token counts of texts in one tokenizer, special tokens included (`len(tokenizer(text)["input_ids"])`),
    kept on disk by content (namespace `token-counts`, one table per tokenizer fingerprint)."""

    NAMESPACE = "token-counts"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.table = f"{tokenizer_fingerprint(tokenizer)}-with-special-tokens"
        self.known: dict[str, int] = read_table(self.NAMESPACE, self.table)
        self.new: dict[str, int] = {}
        """Counts made since the last `save`."""
        self.read = 0
        """Counts found in the table (this object's lifetime)."""
        self.counted = 0
        """Texts tokenized (this object's lifetime)."""

    def count(self, text: str, digest: str | None = None) -> int:
        """The exact count of `text`: looked up by its sha256 (`digest`, when the caller has it), else tokenized once."""
        digest = digest or sha256_hex(text)
        if digest in self.known:
            self.read += 1
            return int(self.known[digest])
        if digest not in self.new:
            self.new[digest] = len(self.tokenizer(text)["input_ids"])
            self.counted += 1
        return self.new[digest]

    def save(self) -> None:
        """Add this run's new counts to the table on disk (merged under a lock with other processes' counts)."""
        if self.new:
            merge_table(self.NAMESPACE, self.table, self.new)
            self.known |= self.new
            self.new = {}

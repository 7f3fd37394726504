"""Fresh BABILong samples at any length, sized in the evaluated model's tokenizer.

The construction follows the paper (section 2, Appendix N): each bAbI question becomes one sample;
its facts are inserted, in story order, between sentences of consecutive background text (PG-19
test books by default) at positions drawn uniformly at random; background sentences are added in
their natural order until the sample reaches the target length.

Where we differ from the authors' generator, on purpose:

* Length is measured in the evaluated model's tokenizer, and for the whole prompt the model sees
  (instruction, examples, answer format, context and question), not GPT-2 tokens of the context
  alone. A sample of length L leaves room for the 20 answer tokens: prompt + answer <= L, so a
  model whose window is L can run length L. Each prompt is measured exactly and lands at most a
  few tokens below its target, never above.
* Background ends on a word boundary (the last background sentence may be cut between words);
  the authors cut the last sentence between tokens.
* Everything is seeded (`numpy.random.default_rng([seed, task, length, sample])`) and the result
  is cached on disk under a key of every input, so the same seed and tokenizer give the same
  samples on any machine.
* Facts can be confined to a depth band, e.g. `(0.0, 0.25)`: every fact then lies entirely within
  the first quarter of the context's tokens (the paper's Appendix K study).
* Sentences are split with pysbd (offline), paragraph by paragraph after joining hard-wrapped
  lines; the authors used NLTK's Punkt.

A sample is stored as what rebuilds its text, not as the text (`context_of`): its run of
background sentences, where each fact goes, how many words of the last sentence it keeps. A
`--log_samples` line then holds the text once, in the prompt the harness logs, and a 1M-token
sample is about a kilobyte in the cache. Its exact prompt length is stored with it
(`prompt_tokens`, with `prompt_sha256`, the digest of the prompt it counts), so the window fit
reads it instead of tokenizing 1M tokens again. The count is made without tokenizing the whole
prompt when the tokenizer allows it (`common.token_counts.join_additive`: the cached counts of
the sentences add up exactly), else by tokenizing it; both give the same number.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_longmem.babilong.babi import BabiSample, read_babi, task_file
from lm_eval_longmem.babilong.options import STANDARD_LENGTHS
from lm_eval_longmem.babilong.prompts import PromptParts, PromptSwitches, format_prompt, harness_prompt_parts
from lm_eval_longmem.common.cache import cache_key, content_digest, load_or_build, sha256_hex, texts_digest
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.model_info import tokenizer_fingerprint
from lm_eval_longmem.common.text import READER_VERSION
from lm_eval_longmem.common.token_counts import join_additive

log = logging.getLogger(f"lm_eval.{__name__}")

GENERATOR_VERSION = 3
"""Bump when the construction or the stored fields change, so cached samples are rebuilt (3: samples
are stored as references to the background, with the prompt's digest; the texts are those of 2)."""
ANSWER_TOKENS = 20
"""Tokens left for the answer (the paper's runs generate 20 new tokens)."""
_TOLERANCE = 3
"""Stop refining a sample once its prompt is this close below the target."""


@dataclass(frozen=True)
class GenerationSpec:
    """Everything that decides the samples of one (task, length), apart from the text inputs."""

    qa: str
    """bAbI task, "qa1".."qa20"."""
    length: int
    """Target length in tokens of prompt + answer; 0 means the bAbI facts alone (no background)."""
    samples: int = 100
    """How many bAbI questions to use (drawn without replacement, the same ones at every length)."""
    seed: int = 0
    """Seed of every random choice."""
    depth: tuple[float, float] = (0.0, 1.0)
    """Fraction of the context (in tokens) within which all facts must lie."""
    answer_tokens: int = ANSWER_TOKENS
    """Tokens kept free for the answer."""
    reserve_tokens: int = 0
    """Further tokens kept free, e.g. for a chat template added by the harness."""
    switches: PromptSwitches = field(default_factory=PromptSwitches)
    """Prompt parts shown (they count towards the length)."""

    @property
    def target_prompt_tokens(self) -> int:
        """The most prompt tokens a sample of this spec may have."""
        return self.length - self.answer_tokens - self.reserve_tokens


class Background:
    """Consecutive sentences of the background texts, with each sentence's token count in one tokenizer."""

    def __init__(
        self, sentences: Sequence[str], token_counts: np.ndarray, digest: str, *, name: str = "", additive: bool = False
    ) -> None:
        self.sentences = sentences
        """All sentences of all texts, texts in order."""
        self.token_counts = token_counts
        """Tokens of `" " + sentence` for each sentence (how many it adds when appended with a space)."""
        self.digest = digest
        """Hash of the texts the sentences come from (part of the sample cache key)."""
        self.name = name
        """The corpus as the user named it (for messages)."""
        self.additive = additive
        """Whether counts of pieces joined by spaces add up exactly in this tokenizer (`token_counts.join_additive`,
        checked on a stretch of these sentences too): then a prompt is counted without tokenizing it whole."""
        self.offsets = np.concatenate([[0], np.cumsum(token_counts, dtype=np.int64)])
        """`offsets[i]` = tokens before sentence i."""

    @property
    def total_tokens(self) -> int:
        return int(self.offsets[-1])


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` (pysbd), paragraph by paragraph, hard-wrapped lines joined first."""
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = re.sub(r"\s+", " ", paragraph).strip()
        if paragraph:
            sentences.extend(s.strip() for s in segmenter.segment(paragraph) if s.strip())
    return sentences


def _cached_sentences(text: str) -> list[str]:
    """`split_sentences(text)`, cached on disk by the text's hash (splitting is the slow step)."""

    def dump(value: list[str], path: Path) -> None:
        path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")

    def load(path: Path) -> list[str]:
        return json.loads(path.read_text(encoding="utf-8"))

    key = cache_key(text=sha256_hex(text), splitter="pysbd-en-paragraphs", v=1)
    return load_or_build("babilong-sentences", key, lambda: split_sentences(text), dump=dump, load=load, suffix=".json")


def corpus_sentences(texts: Sequence[str]) -> list[str]:
    """Every sentence of `texts`, texts in order (each text split once, then read from the cache)."""
    from tqdm.auto import tqdm

    sentences: list[str] = []
    for text in tqdm(texts, desc="babilong: splitting background sentences", disable=len(texts) < 5):
        sentences.extend(_cached_sentences(text))
    return sentences


_STRETCH = 2000
"""Sentences of the background on which `build_background` checks that their counts add up."""


def build_background(
    texts: Sequence[str], tokenizer: Any, *, name: str = "", sentences: Sequence[str] | None = None
) -> Background:
    """Sentences of `texts` and their token counts in `tokenizer` (both cached on disk)."""
    sentences = corpus_sentences(texts) if sentences is None else sentences
    if not sentences:
        raise UsageError(f"{name or 'the background corpus'} holds no sentences: give it books with running text")
    digest = texts_digest(texts)

    def build() -> np.ndarray:
        counts = np.empty(len(sentences), dtype=np.int32)
        step = 4096
        for start in range(0, len(sentences), step):
            batch = [" " + s for s in sentences[start : start + step]]
            ids = tokenizer(batch, add_special_tokens=False)["input_ids"]
            counts[start : start + len(batch)] = [len(row) for row in ids]
        return counts

    def dump(value: np.ndarray, path: Path) -> None:
        with open(path, "wb") as fh:
            np.save(fh, value)

    key = cache_key(texts=digest, tokenizer=tokenizer_fingerprint(tokenizer), unit="space+sentence", v=1)
    counts = load_or_build("babilong-sentence-tokens", key, build, dump=dump, load=lambda p: np.load(p), suffix=".npy")
    additive = join_additive(tokenizer)
    if additive:  # the same check on real text: a stretch of these sentences, counted both ways
        stretch = sentences[:_STRETCH]
        whole = len(tokenizer(" ".join(stretch), add_special_tokens=False)["input_ids"])
        summed = len(tokenizer(stretch[0], add_special_tokens=False)["input_ids"]) + int(counts[1 : len(stretch)].sum())
        if whole != summed:
            log.warning(
                "babilong: token counts of joined sentences do not add up in this tokenizer (%d vs %d over %d "
                "sentences); each sample's prompt is measured by tokenizing it whole (slower at long lengths)",
                whole, summed, len(stretch),
            )  # fmt: skip
            additive = False
    return Background(sentences, counts, digest, name=name, additive=additive)


def prompt_tokens(tokenizer: Any, prompt: str) -> int:
    """Tokens of `prompt` as the model receives it (special tokens such as BOS included)."""
    return len(tokenizer(prompt, add_special_tokens=True)["input_ids"])


def _count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(" " + text, add_special_tokens=False)["input_ids"])


_SLOT = "\0"
"""Stands for the context when a prompt is split into what comes before and after it (never in a prompt)."""


def prompt_frame(render: Any) -> tuple[str, str]:
    """(head, tail): the prompt `render(context)` is exactly `head + context + tail` for a stripped context."""
    head, tail = render(_SLOT).split(_SLOT)
    return head, tail


@dataclass(frozen=True)
class Layout:
    """Where a sample's text comes from: a run of background sentences with the facts between them."""

    start: int
    """First background sentence."""
    end: int
    """One past the last whole background sentence."""
    partial_words: int
    """Words of sentence `end` that close the text (0: none)."""
    slots: tuple[int, ...]
    """Fact j goes before whole sentence `start + slots[j]` (`end - start`: after the last one)."""


def pieces(layout: Layout, facts: Sequence[str], sentences: Sequence[str]) -> list[tuple[str, int]]:
    """The text's pieces in order, each with its kind: fact j -> (fact, -1 - j); sentence i -> (sentence, i).

    The text is the pieces joined by single spaces; the closing words of sentence `end` are (words, `end`).
    """
    out: list[tuple[str, int]] = []
    fact = 0
    for i in range(layout.end - layout.start + 1):
        while fact < len(facts) and layout.slots[fact] == i:
            out.append((facts[fact], -1 - fact))
            fact += 1
        if i < layout.end - layout.start:
            out.append((sentences[layout.start + i], layout.start + i))
    if layout.partial_words:
        out.append((" ".join(sentences[layout.end].split(" ")[: layout.partial_words]), layout.end))
    return out


@dataclass(frozen=True)
class _Draft:
    """One assembled sample and its exact prompt length."""

    context: str
    prompt_tokens: int
    fact_depths: tuple[float, ...]
    fact_starts: tuple[int, ...]
    """Character offset of each fact in `context` (where retrieval recall looks for it)."""
    layout: Layout


def _assemble(
    sample: BabiSample,
    background: Background,
    tokenizer: Any,
    *,
    start: int,
    budget: int,
    depth: tuple[float, float],
    rng: np.random.Generator,
    render: Any,
) -> _Draft | None:
    """Background from sentence `start` filling about `budget` tokens, with the facts inserted.

    Returns None when the facts cannot all lie within the depth band.
    """
    offsets = background.offsets
    # Whole sentences while they fit, then words of the next one.
    end = int(np.searchsorted(offsets, offsets[start] + budget, side="right")) - 1
    end = max(end, start)
    used = int(offsets[end] - offsets[start])
    partial_words = 0
    if end < len(background.sentences) and budget - used > 0:
        words = background.sentences[end].split(" ")
        lo, hi = 0, len(words)
        while lo < hi:  # the longest prefix of words that fits the remaining budget
            mid = (lo + hi + 1) // 2
            if _count(tokenizer, " ".join(words[:mid])) <= budget - used:
                lo = mid
            else:
                hi = mid - 1
        partial_words = lo
    sentence_tokens = background.token_counts[start:end].astype(np.int64)
    partial = " ".join(background.sentences[end].split(" ")[:partial_words]) if partial_words else ""
    partial_tokens = _count(tokenizer, partial) if partial else 0
    fact_tokens = np.array([_count(tokenizer, f) for f in sample.facts], dtype=np.int64)
    total = int(sentence_tokens.sum()) + partial_tokens + int(fact_tokens.sum())

    # Fact j goes before full sentence positions[j] (end - start = after the last full sentence).
    boundary = np.concatenate([[0], np.cumsum(sentence_tokens)])  # background tokens before each boundary
    lo_tok, hi_tok = depth[0] * total, depth[1] * total
    allowed = np.flatnonzero((boundary >= lo_tok) & (boundary + fact_tokens.sum() <= hi_tok))
    if allowed.size == 0:
        return None
    positions = np.sort(rng.choice(allowed, size=len(sample.facts), replace=True))
    layout = Layout(start, end, partial_words, tuple(int(p) for p in positions))

    texts: list[str] = []
    counts: list[int] = []
    depths: list[float] = []
    starts: list[int] = []
    cursor = 0  # tokens placed so far
    chars = 0  # characters placed so far (pieces are joined by one space)
    for text, kind in pieces(layout, sample.facts, background.sentences):
        tokens = (
            int(fact_tokens[-1 - kind])
            if kind < 0
            else partial_tokens
            if kind == end
            else int(background.token_counts[kind])
        )
        if kind < 0:
            depths.append(cursor / total if total else 0.0)
            starts.append(chars)
        texts.append(text)
        counts.append(tokens)
        chars += len(text) + 1
        cursor += tokens
    context = " ".join(texts)
    if background.additive:
        head, tail = prompt_frame(render)
        n = prompt_tokens(tokenizer, head + texts[0] + (tail if len(texts) == 1 else ""))
        if len(texts) > 1:
            n += sum(counts[1:-1]) + len(tokenizer(" " + texts[-1] + tail, add_special_tokens=False)["input_ids"])
    else:
        n = prompt_tokens(tokenizer, render(context))
    return _Draft(context, n, tuple(depths), tuple(starts), layout)


def supporting_spans(sample: BabiSample, starts: Sequence[int]) -> list[list[int]]:
    """[start, end) character spans of the sample's supporting facts, given where each fact starts in the context."""
    return [[int(starts[i]), int(starts[i]) + len(sample.facts[i])] for i in sample.supporting]


def context_of(doc: dict[str, Any], sentences: Sequence[str]) -> str:
    """The text of a generated sample, rebuilt from what it records (checked against its `context_sha256`)."""
    if doc.get("skip_reason"):
        return ""
    layout = Layout(
        int(doc["sentence_start"]), int(doc["sentence_end"]), int(doc["partial_words"]), tuple(doc["fact_slots"])
    )
    context = " ".join(text for text, _ in pieces(layout, doc["facts"], sentences))
    if sha256_hex(context) != doc["context_sha256"]:
        raise UsageError(
            f"BABILong {doc['qa']} at {doc['length_name']}, sample {doc['sample_id']}: its text does not rebuild from the "
            "background corpus, which changed while the run was loading; run again"
        )
    return context


def _too_small(background: Background, budget: int, length: int) -> UsageError:
    """The one-line error for a corpus shorter than a sample's background, with the lengths it can serve."""
    overhead = length - budget  # prompt around the background, answer and reserve
    serves = [n for n in STANDARD_LENGTHS[1:] if n - overhead <= background.total_tokens]
    shorter = (
        f"keep babilong_lengths at or below {format_length(serves[-1])}"
        if serves
        else "choose shorter babilong_lengths"
    )
    return UsageError(
        f"{background.name or 'the background corpus'} has {background.total_tokens:,} tokens of text, fewer than the "
        f"{budget:,} one {format_length(length)} BABILong sample needs: point --metadata babilong_corpus at more books "
        f"(a folder of .txt files), or {shorter}"
    )


def generate_samples(
    spec: GenerationSpec,
    babi: Sequence[BabiSample],
    background: Background | None,
    tokenizer: Any,
    parts: PromptParts,
) -> list[dict[str, Any]]:
    """The samples of one (task, length), in bAbI file order; see the module docstring.

    A sample whose prompt cannot fit the target even without background (its facts are too long)
    is kept with a non-empty `skip_reason` and no text, so the skip is counted, never hidden.
    """
    qa_number = int(spec.qa.lower().removeprefix("qa"))
    chosen = np.random.default_rng([spec.seed, qa_number]).choice(
        len(babi), size=min(spec.samples, len(babi)), replace=False
    )
    rows = []
    for index in np.sort(chosen):
        sample = babi[int(index)]

        def render(context: str, sample: BabiSample = sample) -> str:
            return format_prompt(parts, context, sample.question, spec.switches)

        row = {
            "question": sample.question,
            "target": sample.answer,
            "qa": spec.qa,
            "length": spec.length,
            "length_name": format_length(spec.length),
            "sample_id": int(index),
            "facts": list(sample.facts),
            "fact_slots": [],
            "sentence_start": 0,
            "sentence_end": 0,
            "partial_words": 0,
            "fact_depths": [],
            "supporting": list(sample.supporting),
            "supporting_spans": [],
            "prompt_tokens": 0,
            "prompt_sha256": "",
            "context_sha256": "",
            "skip_reason": "",
        }
        facts_only = " ".join(sample.facts)
        base = prompt_tokens(tokenizer, render(facts_only))
        if spec.length == 0:
            sizes = np.array([_count(tokenizer, fact) for fact in sample.facts], dtype=float)
            depths = (np.cumsum(sizes) - sizes) / max(sizes.sum(), 1.0)
            starts = np.cumsum([0] + [len(f) + 1 for f in sample.facts[:-1]]).tolist()
            rows.append(
                row
                | {
                    "fact_slots": [0] * len(sample.facts),
                    "prompt_tokens": base,
                    "prompt_sha256": sha256_hex(render(facts_only)),
                    "context_sha256": sha256_hex(facts_only),
                    "fact_depths": depths.tolist(),
                    "supporting_spans": supporting_spans(sample, starts),
                }
            )
            continue
        target = spec.target_prompt_tokens
        if base > target:
            rows.append(row | {"skip_reason": "the prompt without background text is longer than the length"})
            continue
        assert background is not None
        rng_seed = [spec.seed, qa_number, spec.length, int(index)]
        budget = target - base
        if background.total_tokens < budget:
            raise _too_small(background, budget, spec.length)
        # Start anywhere that leaves enough text after it.
        last_start = int(np.searchsorted(background.offsets, background.total_tokens - budget, side="right")) - 1
        start = int(np.random.default_rng(rng_seed).integers(0, last_start + 1))
        best: _Draft | None = None
        for _ in range(8):  # token counts are additive up to a token or two per join; refine on the exact count
            draft = _assemble(
                sample, background, tokenizer, start=start, budget=budget, depth=spec.depth,
                rng=np.random.default_rng(rng_seed + [1]), render=render,
            )  # fmt: skip
            if draft is None:
                break
            if draft.prompt_tokens <= target and (best is None or draft.prompt_tokens > best.prompt_tokens):
                best = draft
            gap = target - draft.prompt_tokens
            if 0 <= gap <= _TOLERANCE:
                break
            budget += gap if gap > 0 else min(gap, -1)
            if budget <= 0:
                break
        if best is None:
            reason = "the facts do not fit in the depth band" if draft is None else "no fill fits the length"
            rows.append(row | {"skip_reason": reason})
            continue
        layout = best.layout
        rows.append(
            row
            | {
                "fact_slots": list(layout.slots),
                "sentence_start": layout.start,
                "sentence_end": layout.end,
                "partial_words": layout.partial_words,
                "prompt_tokens": best.prompt_tokens,
                "prompt_sha256": sha256_hex(render(best.context)),
                "context_sha256": sha256_hex(best.context),
                "fact_depths": list(best.fact_depths),
                "supporting_spans": supporting_spans(sample, best.fact_starts),
            }
        )
    return rows


def corpus_label(source: str | None) -> str:
    """The corpus as messages name it."""
    return f"babilong_corpus={source}" if source else "the default corpus (PG-19 test books, emozilla/pg19-test)"


def _corpus_texts(source: str | None) -> tuple[str, ...]:
    """The corpus texts, loaded once per process and content (a file replaced in place is read again)."""
    local = Path(source).expanduser() if source and not str(source).startswith("hf:") else None
    digest = content_digest([local]) if local is not None and local.exists() else None
    return _load_corpus(source, digest)


@lru_cache(maxsize=2)
def _load_corpus(source: str | None, digest: str | None) -> tuple[str, ...]:
    from lm_eval_longmem.common.corpus import load_texts

    return tuple(load_texts(source))


_SENTENCES: dict[str, list[str]] = {}
"""The last corpus's sentences in this process (one per run: every task, length and doc shares them)."""
_BACKGROUNDS: dict[tuple[str, str], Background] = {}
"""The last background built in this process."""


def _sentences(texts: Sequence[str], digest: str) -> list[str]:
    if digest not in _SENTENCES:
        _SENTENCES.clear()
        _SENTENCES[digest] = corpus_sentences(texts)
    return _SENTENCES[digest]


def _background(texts: Sequence[str], digest: str, tokenizer: Any, name: str = "") -> Background:
    key = (digest, tokenizer_fingerprint(tokenizer))
    if key not in _BACKGROUNDS:
        _BACKGROUNDS.clear()
        _BACKGROUNDS[key] = build_background(texts, tokenizer, name=name, sentences=_sentences(texts, digest))
    return _BACKGROUNDS[key]


def generated_context(doc: dict[str, Any], corpus: str | None) -> str:
    """`context_of` a generated doc, with the sentences of the corpus source it was built from."""
    if int(doc["length"]) == 0:
        return context_of(doc, ())
    texts = _corpus_texts(corpus)
    return context_of(doc, _sentences(texts, texts_digest(texts)))


def generated_docs(
    spec: GenerationSpec,
    *,
    facts: str,
    wide_vocabulary: bool = False,
    babi_dir: str | Path | None,
    corpus: str | None,
    tokenizer: Any,
) -> list[dict[str, Any]]:
    """`generate_samples` from bAbI facts and a corpus source, cached per every input.

    `facts` is "babi" (the task's test file in `babi_dir`) or "simulated" (`simulate.simulate`,
    `spec.samples` fresh questions from `spec.seed`, bAbI's vocabulary or a wider one). `corpus` is a `common.corpus.load_texts`
    source (None = PG-19 test books from the hub).
    """
    if facts == "simulated":
        from lm_eval_longmem.babilong.simulate import simulate
        from lm_eval_longmem.babilong.simulate_world import SIMULATOR_VERSION

        facts_key = f"simulator-v{SIMULATOR_VERSION}-wide{int(wide_vocabulary)}"
        load_facts = lambda: simulate(spec.qa, spec.samples, spec.seed, wide_vocabulary=wide_vocabulary)  # noqa: E731
    else:
        assert babi_dir is not None, "bAbI facts are read from babi_dir"
        path = task_file(babi_dir, spec.qa)
        facts_key = sha256_hex(path.read_bytes())
        load_facts = lambda: read_babi(path)  # noqa: E731
    parts = harness_prompt_parts(spec.qa)
    texts = _corpus_texts(corpus) if spec.length > 0 else ()
    corpus_digest = texts_digest(texts)
    key = cache_key(
        spec=asdict(spec),
        facts=facts_key,
        corpus=corpus_digest,
        tokenizer=tokenizer_fingerprint(tokenizer),
        prompt=asdict(parts),
        reader=READER_VERSION,  # the bAbI file and the books are read by common.text
        v=GENERATOR_VERSION,
    )

    def build() -> list[dict[str, Any]]:
        background = _background(texts, corpus_digest, tokenizer, corpus_label(corpus)) if spec.length > 0 else None
        return generate_samples(spec, load_facts(), background, tokenizer, parts)

    def dump(rows: list[dict[str, Any]], out: Path) -> None:
        with open(out, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    def load(src: Path) -> list[dict[str, Any]]:
        with open(src, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    name = f"babilong-generated/{spec.qa}-{format_length(spec.length)}"
    return load_or_build(name, key, build, dump=dump, load=load, suffix=".jsonl")

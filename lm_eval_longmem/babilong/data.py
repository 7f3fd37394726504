"""BABILong docs for the one `babilong` task: every selected (bAbI task, length) cell, interleaved.

The `babilong_*` options (`options.py`) choose the tasks and lengths; by default qa1-qa5 at every
standard length within the model's window. Docs of all cells go into one dataset, interleaved
(sample 0 of every cell, then sample 1, ...) so that `--limit N` covers every cell, like the
forgetting curve's lengths, each round placed so that data-parallel ranks get equal work
(`common.order.interleave`; a doc's cost grows with its length).

Sources: the authors' pre-generated sets on the Hugging Face Hub (`RMT-team/babilong`, 100 samples
per task and length, the default; `RMT-team/babilong-1k-samples`, 1000 samples), or fresh samples
generated in the evaluated model's tokenizer from bAbI facts (files, or the simulator) and
background books (`generate.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from lm_eval_longmem.babilong import retrieval
from lm_eval_longmem.babilong.options import PREFIX, STANDARD_LENGTHS, BabilongOptions
from lm_eval_longmem.common.corpus import DEFAULT_DATASET, check_text_source, hub_failure
from lm_eval_longmem.common.embedded import BOOKS_HINT
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.lengths import format_length, parse_length
from lm_eval_longmem.common.model_info import load_tokenizer, model_window
from lm_eval_longmem.common.options import parse_options
from lm_eval_longmem.common.order import forward_work, interleave

log = logging.getLogger(f"lm_eval.{__name__}")


@dataclass(frozen=True)
class HubSet:
    """One pre-generated BABILong set on the Hugging Face Hub."""

    path: str
    """Dataset name on the hub; configs are lengths (named by `format_length`: "4k"), splits are tasks ("qa1")."""
    lengths: tuple[int, ...]
    """Lengths it has (tokens)."""
    tasks_beyond_0k: int
    """It has qa1..qaN at lengths above 0k (all twenty at 0k)."""

    def has(self, qa: str, length: int) -> bool:
        number = int(qa.removeprefix("qa"))
        return length in self.lengths and (length == 0 or number <= self.tasks_beyond_0k)


HUB_SETS: dict[str, HubSet] = {
    "hub": HubSet("RMT-team/babilong", (*STANDARD_LENGTHS, parse_length("10M")), tasks_beyond_0k=10),
    "hub-1k": HubSet("RMT-team/babilong-1k-samples", STANDARD_LENGTHS[:9], tasks_beyond_0k=5),
}

DOC_FEATURES = datasets.Features(
    {
        "question": datasets.Value("string"),
        "target": datasets.Value("string"),
        "qa": datasets.Value("string"),
        "length": datasets.Value("int64"),
        "length_name": datasets.Value("string"),
        "sample_id": datasets.Value("int64"),
        "facts": datasets.Sequence(datasets.Value("string")),
        "fact_slots": datasets.Sequence(datasets.Value("int64")),
        "sentence_start": datasets.Value("int64"),
        "sentence_end": datasets.Value("int64"),
        "partial_words": datasets.Value("int64"),
        "fact_depths": datasets.Sequence(datasets.Value("float64")),
        "supporting": datasets.Sequence(datasets.Value("int64")),
        "supporting_spans": datasets.Sequence(datasets.Sequence(datasets.Value("int64"))),
        "prompt_tokens": datasets.Value("int64"),
        "prompt_sha256": datasets.Value("string"),
        "context_sha256": datasets.Value("string"),
        "skip_reason": datasets.Value("string"),
        "retrieved": datasets.Sequence(datasets.Value("string")),
        "retrieval_recall": datasets.Value("float64"),
    }
)
"""Fields of every doc. A doc does not hold its haystack (`haystack` rebuilds it), so a `--log_samples`
line holds the text once, in the prompt the harness logs: a generated doc records its run of
background sentences and where its facts go (`generate.Layout`), a hub doc its row of the hub set
(`qa`, `length_name`, `sample_id`).

Generated docs also carry their exact prompt length (`prompt_tokens`, of the prompt whose sha256 is
`prompt_sha256`, which the window fit reads instead of tokenizing it again) and the digest of their
haystack (`context_sha256`, checked when it is rebuilt); hub docs have no fact depths, `prompt_tokens`
0 and empty digests (their prompts are counted at run time, once per content: `common.token_counts`).
`supporting_spans`: [start, end) characters of each supporting fact in the haystack (generated
docs; hub docs only under retrieval with the bAbI files). `retrieved`, `retrieval_recall`: the
retrieval condition's pieces (in prompt order) and whether they hold every supporting fact
(`retrieval.py`); empty and None in-context."""


def babilong_options(metadata: dict[str, Any]) -> BabilongOptions:
    """The run's `babilong_*` options (parsed once per run, shared with the task)."""
    return parse_options(BabilongOptions, PREFIX, metadata)


def selected_lengths(options: BabilongOptions, window: int | None) -> tuple[int, ...]:
    """The lengths this run covers: the chosen ones (each within the window), or every standard one that fits.

    Under the retrieval condition the model reads only the retrieved pieces, so chosen lengths may
    exceed its window (each prompt is still checked against it); `fit` keeps the in-context cells.
    """
    if options.lengths is not None:
        for length in () if options.uses_retrieval else options.lengths:
            if window is not None and length > window:
                raise UsageError(
                    f"--metadata {PREFIX}lengths asks for {format_length(length)} ({length} tokens) but the model's "
                    f"window is {window}: remove {format_length(length)}, or pass max_length={length} in --model_args "
                    "if the model really handles it"
                )
        return options.lengths
    if window is None:
        raise UsageError(
            "BABILong runs every standard length that fits the model's window by default, but the window is "
            f"unknown: pass max_length=N in --model_args, or list lengths with --metadata {PREFIX}lengths=[0k,4k]"
        )
    return tuple(length for length in STANDARD_LENGTHS if length <= window)


def _load_hub_cell(hub: HubSet, qa: str, length: int) -> datasets.Dataset:
    return datasets.load_dataset(hub.path, name=format_length(length), split=qa)


def source_problems(metadata: dict[str, Any]) -> list[str]:
    """What keeps this run's data from loading, one line each with the local alternative; checked before the
    model loads (`lm_eval_longmem.preflight`). A hub set is asked for its first cell (from the local cache
    when it is there); generation needs its background books and, with bAbI facts, the bAbI files."""
    options = babilong_options(metadata)
    generate = f"--metadata {PREFIX}source=generate {PREFIX}facts=simulated {PREFIX}corpus=BOOKS"
    if options.source != "generate":
        hub = HUB_SETS[options.source]
        try:
            _load_hub_cell(hub, options.tasks[0], options.lengths[0] if options.lengths else 0)
        except Exception as err:  # offline, gated, network: datasets raises many types
            return [
                f"{PREFIX}source={options.source} (hub dataset {hub.path!r}): {hub_failure(err)}; local alternative, "
                f"fresh seeded samples from the simulator: {generate} ({BOOKS_HINT})"
            ]
        return []
    problems = []
    if why := check_text_source(options.corpus):
        shown = (
            f"{PREFIX}corpus={options.corpus}"
            if options.corpus
            else f"{PREFIX}corpus (default: hub dataset {DEFAULT_DATASET!r}, PG-19 test books)"
        )
        problems.append(f"{shown}: {why}; local alternative: --metadata {PREFIX}corpus=BOOKS ({BOOKS_HINT})")
    if options.facts == "babi" and not (options.babi_dir and Path(options.babi_dir).expanduser().is_dir()):
        given = (
            f"{PREFIX}babi_dir={options.babi_dir} is not a folder"
            if options.babi_dir
            else f"{PREFIX}facts=babi needs the bAbI test files"
        )
        problems.append(
            f"{given}; pass {PREFIX}babi_dir=PATH (the en/ folder of tasks_1-20_v1-2), or generate without "
            f"files: --metadata {PREFIX}facts=simulated"
        )
    return problems


def _hub_split(hub: HubSet, qa: str, length: int) -> datasets.Dataset:
    """One (task, length) of a hub set, from the local HF cache or the network."""
    if not hub.has(qa, length):
        raise UsageError(
            f"{hub.path} has no {qa} at {format_length(length)}: choose other {PREFIX}tasks/{PREFIX}lengths, or generate the "
            f"data with --metadata {PREFIX}source=generate"
        )
    try:
        return _load_hub_cell(hub, qa, length)
    except Exception as err:  # offline, unknown config, network: datasets raises many types
        raise UsageError(
            f"could not load {hub.path} ({format_length(length)}, {qa}) from the Hugging Face Hub ({type(err).__name__}): check "
            "the network (offline runs need the dataset in the local HF cache), or generate the data locally with "
            f"--metadata {PREFIX}source=generate {PREFIX}facts=simulated {PREFIX}corpus=PATH/TO/books"
        ) from err


def _hub_rows(hub: HubSet, qa: str, length: int) -> list[dict[str, Any]]:
    """The docs of one hub cell: references to its rows (the haystacks stay in the HF cache)."""
    data = _hub_split(hub, qa, length)
    return [
        {
            "question": str(question),
            "target": str(target),
            "qa": qa,
            "length": length,
            "length_name": format_length(length),
            "sample_id": i,
            "facts": [],
            "fact_slots": [],
            "sentence_start": 0,
            "sentence_end": 0,
            "partial_words": 0,
            "fact_depths": [],
            "supporting": [],
            "supporting_spans": [],
            "prompt_tokens": 0,
            "prompt_sha256": "",
            "context_sha256": "",
            "skip_reason": "",
        }
        for i, (question, target) in enumerate(zip(data["question"], data["target"], strict=True))
    ]


class Haystacks:
    """The haystack of any doc of one run, rebuilt from what the doc records (see `DOC_FEATURES`).

    Generated docs: from the background corpus's sentences (split once, cached on disk). Hub docs:
    the row of the hub set, each (task, length) split loaded once from the HF cache (memory-mapped).
    """

    def __init__(self, options: BabilongOptions) -> None:
        self.options = options
        self._splits: dict[tuple[str, int], datasets.Dataset] = {}

    def __call__(self, doc: dict[str, Any]) -> str:
        if self.options.source == "generate":
            from lm_eval_longmem.babilong.generate import generated_context

            return generated_context(doc, self.options.corpus)
        key = (doc["qa"], int(doc["length"]))
        if key not in self._splits:
            self._splits[key] = _hub_split(HUB_SETS[self.options.source], *key)
        return str(self._splits[key][int(doc["sample_id"])]["input"])


def _generated_rows(options: BabilongOptions, qa: str, length: int, metadata: dict[str, Any]) -> list[dict[str, Any]]:
    from lm_eval_longmem.babilong.generate import GenerationSpec, generated_docs

    if options.facts == "babi" and not options.babi_dir:
        raise UsageError(
            f"--metadata {PREFIX}source=generate with {PREFIX}facts=babi needs the bAbI test files: pass "
            f"{PREFIX}babi_dir=PATH (the en/ folder of tasks_1-20_v1-2), or use {PREFIX}facts=simulated"
        )
    spec = GenerationSpec(
        qa=qa,
        length=length,
        samples=options.samples,
        seed=options.seed,
        depth=options.depth,
        reserve_tokens=options.reserve_tokens,
        switches=options.switches,
    )
    return generated_docs(
        spec,
        facts=options.facts,
        wide_vocabulary=options.wide_vocabulary,
        babi_dir=options.babi_dir,
        corpus=options.corpus,
        tokenizer=load_tokenizer(metadata),
    )


def cell_rows(options: BabilongOptions, metadata: dict[str, Any]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(qa, length) -> its docs, for every selected cell, lengths in order then tasks."""
    lengths = selected_lengths(options, model_window(metadata).tokens)
    cells = {}
    for length in lengths:
        for qa in options.tasks:
            if options.source == "generate":
                cells[qa, length] = _generated_rows(options, qa, length, metadata)
            else:
                cells[qa, length] = _hub_rows(HUB_SETS[options.source], qa, length)
    return cells


def doc_work(row: dict[str, Any]) -> int:
    """Estimated work of a doc's prompt for balancing ranks: that of its length (a 0k doc holds only its facts)."""
    return forward_work(row["length"])


def load_docs(**metadata: Any) -> dict[str, datasets.Dataset]:
    """`custom_dataset` hook of the `babilong` task: every selected cell's docs, interleaved."""
    options = babilong_options(metadata)
    retrieval.check_condition(options, metadata)
    cells = cell_rows(options, metadata)
    if options.uses_retrieval:
        cells = retrieval.retrieve_cells(cells, options, metadata, Haystacks(options))
    rows = [{"retrieved": [], "retrieval_recall": None} | row for row in interleave(cells.values(), cost=doc_work)]
    return {"test": datasets.Dataset.from_list(rows, features=DOC_FEATURES)}

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
from lm_eval_longmem.common.lengths import parse_length
from lm_eval_longmem.common.model_info import load_tokenizer, model_window
from lm_eval_longmem.common.options import parse_options
from lm_eval_longmem.common.order import forward_work, interleave

log = logging.getLogger(f"lm_eval.{__name__}")


@dataclass(frozen=True)
class HubSet:
    """One pre-generated BABILong set on the Hugging Face Hub."""

    path: str
    """Dataset name on the hub; configs are lengths ("4k"), splits are tasks ("qa1")."""
    lengths: tuple[str, ...]
    """Lengths it has."""
    tasks_beyond_0k: int
    """It has qa1..qaN at lengths above 0k (all twenty at 0k)."""

    def has(self, qa: str, length: str) -> bool:
        number = int(qa.removeprefix("qa"))
        return length in self.lengths and (length == "0k" or number <= self.tasks_beyond_0k)


HUB_SETS: dict[str, HubSet] = {
    "hub": HubSet("RMT-team/babilong", (*STANDARD_LENGTHS, "10M"), tasks_beyond_0k=10),
    "hub-1k": HubSet("RMT-team/babilong-1k-samples", STANDARD_LENGTHS[:9], tasks_beyond_0k=5),
}

DOC_FEATURES = datasets.Features(
    {
        "input": datasets.Value("string"),
        "question": datasets.Value("string"),
        "target": datasets.Value("string"),
        "qa": datasets.Value("string"),
        "length": datasets.Value("int64"),
        "length_name": datasets.Value("string"),
        "sample_id": datasets.Value("int64"),
        "fact_depths": datasets.Sequence(datasets.Value("float64")),
        "supporting": datasets.Sequence(datasets.Value("int64")),
        "supporting_spans": datasets.Sequence(datasets.Sequence(datasets.Value("int64"))),
        "prompt_tokens": datasets.Value("int64"),
        "skip_reason": datasets.Value("string"),
        "retrieved": datasets.Sequence(datasets.Value("string")),
        "retrieval_recall": datasets.Value("float64"),
    }
)
"""Fields of every doc. Hub docs have no fact depths and `prompt_tokens` 0 (measured at run time).

`supporting_spans`: [start, end) characters of each supporting fact in `input` (generated docs;
hub docs only under retrieval with the bAbI files). `retrieved`, `retrieval_recall`: the retrieval
condition's pieces (in prompt order) and whether they hold every supporting fact (`retrieval.py`);
empty and None in-context."""


def babilong_options(metadata: dict[str, Any]) -> BabilongOptions:
    """The run's `babilong_*` options (parsed once per run, shared with the task)."""
    return parse_options(BabilongOptions, PREFIX, metadata)


def selected_lengths(options: BabilongOptions, window: int | None) -> tuple[str, ...]:
    """The lengths this run covers: the chosen ones (each within the window), or every standard one that fits.

    Under the retrieval condition the model reads only the retrieved pieces, so chosen lengths may
    exceed its window (each prompt is still checked against it); `fit` keeps the in-context cells.
    """
    if options.lengths is not None:
        for length in options.lengths if options.retrieval == "none" else ():
            if window is not None and parse_length(length) > window:
                raise UsageError(
                    f"--metadata {PREFIX}lengths asks for {length} ({parse_length(length)} tokens) but the model's "
                    f"window is {window}: remove {length}, or pass max_length={parse_length(length)} in --model_args "
                    "if the model really handles it"
                )
        return options.lengths
    if window is None:
        raise UsageError(
            "BABILong runs every standard length that fits the model's window by default, but the window is "
            f"unknown: pass max_length=N in --model_args, or list lengths with --metadata {PREFIX}lengths=[0k,4k]"
        )
    return tuple(length for length in STANDARD_LENGTHS if parse_length(length) <= window)


def _load_hub_cell(hub: HubSet, qa: str, length: str) -> datasets.Dataset:
    return datasets.load_dataset(hub.path, name=length, split=qa)


def source_problems(metadata: dict[str, Any]) -> list[str]:
    """What keeps this run's data from loading, one line each with the local alternative; checked before the
    model loads (`lm_eval_longmem.preflight`). A hub set is asked for its first cell (from the local cache
    when it is there); generation needs its background books and, with bAbI facts, the bAbI files."""
    options = babilong_options(metadata)
    generate = f"--metadata {PREFIX}source=generate {PREFIX}facts=simulated {PREFIX}corpus=BOOKS"
    if options.source != "generate":
        hub = HUB_SETS[options.source]
        try:
            _load_hub_cell(hub, options.tasks[0], options.lengths[0] if options.lengths else "0k")
        except Exception as err:  # offline, gated, network: datasets raises many types
            return [
                f"{PREFIX}source={options.source} (hub dataset {hub.path!r}): {hub_failure(err)}; local alternative, "
                f"fresh seeded samples from the simulator: {generate} ({BOOKS_HINT})"
            ]
        return []
    problems = []
    if why := check_text_source(options.corpus):
        shown = f"{PREFIX}corpus={options.corpus}" if options.corpus else f"{PREFIX}corpus (default: hub dataset {DEFAULT_DATASET!r}, PG-19 test books)"
        problems.append(f"{shown}: {why}; local alternative: --metadata {PREFIX}corpus=BOOKS ({BOOKS_HINT})")
    if options.facts == "babi" and not (options.babi_dir and Path(options.babi_dir).expanduser().is_dir()):
        given = f"{PREFIX}babi_dir={options.babi_dir} is not a folder" if options.babi_dir else f"{PREFIX}facts=babi needs the bAbI test files"
        problems.append(
            f"{given}; pass {PREFIX}babi_dir=PATH (the en/ folder of tasks_1-20_v1-2), or generate without "
            f"files: --metadata {PREFIX}facts=simulated"
        )
    return problems


def _hub_rows(hub: HubSet, qa: str, length: str) -> list[dict[str, Any]]:
    if not hub.has(qa, length):
        raise UsageError(
            f"{hub.path} has no {qa} at {length}: choose other {PREFIX}tasks/{PREFIX}lengths, or generate the "
            f"data with --metadata {PREFIX}source=generate"
        )
    try:
        data = _load_hub_cell(hub, qa, length)
    except Exception as err:  # offline, unknown config, network: datasets raises many types
        raise UsageError(
            f"could not load {hub.path} ({length}, {qa}) from the Hugging Face Hub ({type(err).__name__}): check "
            "the network (offline runs need the dataset in the local HF cache), or generate the data locally with "
            f"--metadata {PREFIX}source=generate {PREFIX}facts=simulated {PREFIX}corpus=PATH/TO/books"
        ) from err
    tokens = parse_length(length)
    return [
        {
            "input": str(row["input"]),
            "question": str(row["question"]),
            "target": str(row["target"]),
            "qa": qa,
            "length": tokens,
            "length_name": length,
            "sample_id": i,
            "fact_depths": [],
            "supporting": [],
            "supporting_spans": [],
            "prompt_tokens": 0,
            "skip_reason": "",
        }
        for i, row in enumerate(data)
    ]


def _generated_rows(options: BabilongOptions, qa: str, length: str, metadata: dict[str, Any]) -> list[dict[str, Any]]:
    from lm_eval_longmem.babilong.generate import GenerationSpec, generated_docs

    if options.facts == "babi" and not options.babi_dir:
        raise UsageError(
            f"--metadata {PREFIX}source=generate with {PREFIX}facts=babi needs the bAbI test files: pass "
            f"{PREFIX}babi_dir=PATH (the en/ folder of tasks_1-20_v1-2), or use {PREFIX}facts=simulated"
        )
    spec = GenerationSpec(
        qa=qa,
        length=parse_length(length),
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
        babi_dir=options.babi_dir, corpus=options.corpus, tokenizer=load_tokenizer(metadata)
    )


def cell_rows(options: BabilongOptions, metadata: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
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
    if options.retrieval != "none":
        cells = retrieval.retrieve_cells(cells, options, metadata)
    rows = [{"retrieved": [], "retrieval_recall": None} | row for row in interleave(cells.values(), cost=doc_work)]
    return {"test": datasets.Dataset.from_list(rows, features=DOC_FEATURES)}

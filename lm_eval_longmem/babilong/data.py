"""BABILong docs for one task `babilong_qaN_LEN`: which (task, length) runs, and where its samples come from.

Every (task, length) of the standard grid is its own lm-eval task, so one run covers any set of
lengths. The `babilong_*` metadata (see `Options`) decide which of them get docs; the others get
none and are reported as skipped (`BabilongTask` makes lm-eval accept a task without docs).

Sources: the authors' pre-generated sets on the Hugging Face Hub (`RMT-team/babilong`, 100 samples
per task and length, the default; `RMT-team/babilong-1k-samples`, 1000 samples), or fresh samples
generated from bAbI files and background books in the evaluated model's tokenizer (`generate.py`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import datasets

from lm_eval_longmem.babilong.prompts import PromptSwitches
from lm_eval_longmem.common.lengths import format_length, parse_length, parse_lengths
from lm_eval_longmem.common.options import option, parse_flag

log = logging.getLogger(__name__)

STANDARD_LENGTHS: tuple[str, ...] = ("0k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1M")
"""The lengths that have a task of their own (the authors' splits, 10M left out)."""
ALL_TASKS: tuple[str, ...] = tuple(f"qa{n}" for n in range(1, 21))
DEFAULT_TASKS: tuple[str, ...] = ("qa1", "qa2", "qa3", "qa4", "qa5")
"""The paper's headline tasks (Table 2 averages qa1-qa5)."""

Source = Literal["hub", "hub-1k", "generate"]


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


@dataclass(frozen=True)
class Options:
    """The `babilong_*` metadata keys, parsed (documented in task_configs/babilong/README.md)."""

    source: Source = "hub"
    """`babilong_source`: hub (100 samples), hub-1k (1000 samples) or generate."""
    lengths: tuple[int, ...] | None = None
    """`babilong_lengths`: lengths to run; None = every standard length within the model's window."""
    tasks: tuple[str, ...] = DEFAULT_TASKS
    """`babilong_tasks`: bAbI tasks to run."""
    babi_dir: str | None = None
    """`babilong_babi_dir`: folder of bAbI test files (generate only)."""
    corpus: str | None = None
    """`babilong_corpus`: background text source (generate only; None = PG-19 test books from the hub)."""
    seed: int = 0
    """`babilong_seed` (generate only)."""
    samples: int = 100
    """`babilong_samples`: questions per task and length (generate only)."""
    depth: tuple[float, float] = (0.0, 1.0)
    """`babilong_depth`: where the facts may lie, as a fraction of the context (generate only)."""
    reserve_tokens: int = 0
    """`babilong_reserve_tokens`: tokens kept free besides the answer's 20 (generate only)."""
    switches: PromptSwitches = field(default_factory=PromptSwitches)
    """`babilong_instruction`, `babilong_examples`, `babilong_answer_format`: prompt parts shown."""


def length_name(tokens: int) -> str:
    """The authors' name of a length: 0 -> "0k", 4096 -> "4k", 1048576 -> "1M"."""
    return "0k" if tokens == 0 else format_length(tokens)


def parse_tasks(spec: str | list | tuple) -> tuple[str, ...]:
    """bAbI tasks from "qa1-qa5", "qa1,qa3", "all" or a list; in qa order."""
    items = spec if isinstance(spec, (list, tuple)) else str(spec).strip("[]() ").split(",")
    chosen: set[int] = set()
    for item in (str(i).strip().strip("'\"").lower() for i in items):
        if item in {"all", "*"}:
            chosen.update(range(1, 21))
        elif match := re.fullmatch(r"qa(\d+)(?:\s*-\s*qa(\d+))?", item):
            first, last = int(match[1]), int(match[2] or match[1])
            chosen.update(range(first, last + 1))
        elif item:
            raise ValueError(f"unknown BABILong task {item!r} in babilong_tasks: write e.g. qa1-qa5, qa1,qa3 or all")
    if not chosen or min(chosen) < 1 or max(chosen) > 20:
        raise ValueError(f"babilong_tasks={spec!r}: choose among qa1..qa20 (e.g. qa1-qa5 or all)")
    return tuple(f"qa{n}" for n in sorted(chosen))


def parse_depth(spec: str | list | tuple) -> tuple[float, float]:
    """A depth band from "0-0.25", "0.25,0.5" or [0, 0.25]; fractions of the context, low < high."""
    parts = spec if isinstance(spec, (list, tuple)) else re.split(r"\s*[-,:]\s*", str(spec).strip("[]() "))
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"babilong_depth={spec!r}: write a band like 0-0.25 (fractions of the context)") from None
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"babilong_depth={spec!r}: need 0 <= low < high <= 1, e.g. 0-0.25")
    return low, high


def parse_options(metadata: dict[str, Any]) -> Options:
    """`Options` from the task metadata (`--metadata` merged with `--model_args`)."""
    source = str(option(metadata, "babilong_source", "hub")).strip().lower()
    if source not in ("hub", "hub-1k", "generate"):
        raise ValueError(f"babilong_source={source!r}: use hub (100 samples), hub-1k (1000 samples) or generate")
    lengths_spec = option(metadata, "babilong_lengths", "fit")
    lengths = None if str(lengths_spec).strip().lower() == "fit" else tuple(parse_lengths(lengths_spec))
    return Options(
        source=source,  # type: ignore[arg-type]
        lengths=lengths,
        tasks=parse_tasks(option(metadata, "babilong_tasks", ",".join(DEFAULT_TASKS))),
        babi_dir=option(metadata, "babilong_babi_dir", None),
        corpus=option(metadata, "babilong_corpus", None),
        seed=int(option(metadata, "babilong_seed", 0)),
        samples=int(option(metadata, "babilong_samples", 100)),
        depth=parse_depth(option(metadata, "babilong_depth", "0-1")),
        reserve_tokens=int(option(metadata, "babilong_reserve_tokens", 0)),
        switches=PromptSwitches(
            instruction=parse_flag(option(metadata, "babilong_instruction", True), "babilong_instruction"),
            examples=parse_flag(option(metadata, "babilong_examples", True), "babilong_examples"),
            answer_format=parse_flag(option(metadata, "babilong_answer_format", True), "babilong_answer_format"),
        ),
    )


class Selection(NamedTuple):
    """Whether a (task, length) runs, and if not, why."""

    runs: bool
    reason: str


def select(qa: str, length: str, options: Options, window: int | None) -> Selection:
    """Whether task `qa` at `length` gets docs in this run.

    An explicitly chosen length longer than the window is an error (nothing of it could run);
    by default a length runs when it is at most the window.
    """
    tokens = parse_length(length)
    if qa not in options.tasks:
        return Selection(False, f"{qa} is not in babilong_tasks ({','.join(options.tasks)})")
    if options.lengths is not None:
        if tokens not in options.lengths:
            chosen = ",".join(length_name(n) for n in options.lengths)
            return Selection(False, f"{length} is not in babilong_lengths ({chosen})")
        if window is not None and tokens > window:
            raise ValueError(
                f"babilong_lengths asks for {length} ({tokens} tokens) but the model's window is {window}: "
                f"remove {length} from babilong_lengths, or pass max_length={tokens} in --model_args if the "
                "model really handles it"
            )
    else:
        if window is None:
            raise ValueError(
                "BABILong runs every standard length that fits the model's window by default, but the window "
                "is unknown: pass max_length=N in --model_args, or list lengths with --metadata babilong_lengths=[0k,4k]"
            )
        if tokens > window:
            return Selection(False, f"{length} ({tokens} tokens) exceeds the model's window ({window})")
    if options.source != "generate" and not HUB_SETS[options.source].has(qa, length):
        return Selection(False, f"{HUB_SETS[options.source].path} has no {qa} at {length} (use babilong_source=generate)")
    return Selection(True, "")


_DOC_FEATURES = datasets.Features(
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
        "prompt_tokens": datasets.Value("int64"),
        "skip_reason": datasets.Value("string"),
    }
)
"""Fields of every doc. Hub docs have no fact depths and `prompt_tokens` 0 (measured at run time)."""


def empty_docs(reason: str) -> datasets.Dataset:
    """A dataset without docs whose description says why (read by `BabilongTask`)."""
    return datasets.Dataset.from_dict(
        {name: [] for name in _DOC_FEATURES}, info=datasets.DatasetInfo(description=reason, features=_DOC_FEATURES)
    )


def _hub_docs(hub: HubSet, qa: str, length: str) -> datasets.Dataset:
    try:
        data = datasets.load_dataset(hub.path, name=length, split=qa)
    except Exception as err:  # offline, unknown config, network: datasets raises many types
        raise RuntimeError(
            f"could not load {hub.path} ({length}, {qa}) from the Hugging Face Hub: {err}. To fix: check the "
            "network (offline runs need the dataset in the local HF cache), or generate the data locally with "
            "--metadata babilong_source=generate,babilong_babi_dir=PATH/TO/bAbI/en,babilong_corpus=PATH/TO/books"
        ) from err
    tokens = parse_length(length)
    rows = {
        "input": [str(x) for x in data["input"]],
        "question": [str(x) for x in data["question"]],
        "target": [str(x) for x in data["target"]],
    }
    n = len(data)
    rows |= {
        "qa": [qa] * n,
        "length": [tokens] * n,
        "length_name": [length] * n,
        "sample_id": list(range(n)),
        "fact_depths": [[] for _ in range(n)],
        "supporting": [[] for _ in range(n)],
        "prompt_tokens": [0] * n,
        "skip_reason": [""] * n,
    }
    return datasets.Dataset.from_dict(rows, features=_DOC_FEATURES)


def load_docs(*, qa: str, length: str, **metadata: Any) -> dict[str, datasets.Dataset]:
    """The docs of `babilong_{qa}_{length}` (the `custom_dataset` hook of every BABILong task)."""
    from lm_eval_longmem.common.model_info import claimed_window, load_tokenizer

    options = parse_options(metadata)
    selection = select(qa, length, options, claimed_window(metadata))
    if not selection.runs:
        log.info("babilong_%s_%s: no docs (%s)", qa, length, selection.reason)
        return {"test": empty_docs(selection.reason)}
    if options.source != "generate":
        return {"test": _hub_docs(HUB_SETS[options.source], qa, length)}

    from lm_eval_longmem.babilong.generate import GenerationSpec, generated_docs

    if not options.babi_dir:
        raise ValueError(
            "babilong_source=generate needs the bAbI test files: pass --metadata babilong_babi_dir=PATH, the en/ "
            "folder of tasks_1-20_v1-2 (qa1_single-supporting-fact_test.txt, ...)"
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
    rows = generated_docs(spec, babi_dir=options.babi_dir, corpus=options.corpus, tokenizer=load_tokenizer(metadata))
    return {"test": datasets.Dataset.from_list(rows, features=_DOC_FEATURES)}

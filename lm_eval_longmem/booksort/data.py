"""Book-SORT trials for the harness: from the hub (``memari/booksort``) or from a local build.

`load_booksort` is the tasks' ``custom_dataset``: lm-eval calls it with the run's metadata
(``--metadata`` merged with ``--model_args``) plus the task's ``dataset_kwargs`` and gets back the
``test`` and ``validation`` splits as `datasets.Dataset`s. Each doc carries every grouping key
(excerpt length, segment length, book, distance bin) and its rendered prompt around the excerpt
(`prompt_before_excerpt`, `prompt_after_excerpt`), and the docs are interleaved over cells so
that ``--limit N`` samples the whole sweep, and placed so that data-parallel ranks get equal work
(`common.order.interleave`).

A doc does not hold its excerpt: it records where it is (book and word offset for a local build,
the row of the hub set), and the task puts it in the prompt (`Excerpts`). So the data phase holds
the books once, not one copy of an excerpt per trial (at 20,000-word excerpts the nine books' 6,400
test trials would hold 680 MB of text, and building a `datasets.Dataset` from them took 5.6 GB),
and a `--log_samples` line holds the excerpt once, in the prompt.

Options: `booksort/options.py` (the ``booksort_*`` keys). Trials too long for the model's window
are not dropped here: the task base skips and counts them when it knows the final prompt (chat
template included), without changing the dataset.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.booksort.build import BUILDER_VERSION, N_BINS, Trial
from lm_eval_longmem.booksort.options import AUTHORS, OURS, PREFIX, BooksortOptions
from lm_eval_longmem.booksort.prompts import (
    AUTHORS_PROMPTS,
    Condition,
    authors_title,
    get_variant,
    render,
    render_authors,
)
from lm_eval_longmem.common.cache import sha256_hex
from lm_eval_longmem.common.corpus import hub_failure
from lm_eval_longmem.common.embedded import BOOKS_HINT
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.options import parse_options
from lm_eval_longmem.common.order import forward_work, interleave

HUB_DATASET = "memari/booksort"
SPLITS = ("test", "validation")
_TRIAL_FIELDS = frozenset(Trial._fields)


class Source(NamedTuple):
    """Trials of one split and a way to get each trial's excerpt text."""

    rows: list[dict[str, Any]]
    excerpt: Callable[[dict[str, Any]], str]


CHECKPOINT_RECORD = "checkpoint.json"
"""The record `booksort finetune` writes into each checkpoint it trains (`finetune.py`); a run of a model
folder that holds one is the fine-tuned condition (`BooksortTask.condition`)."""


def fine_tuned_checkpoint(metadata: dict[str, Any]) -> bool:
    """Whether the evaluated model (`peft` adapters, else `pretrained`) is a checkpoint `booksort finetune` trained."""
    model = metadata.get("peft") or metadata.get("pretrained")
    return isinstance(model, str) and (Path(model).expanduser() / CHECKPOINT_RECORD).is_file()


def booksort_options(metadata: dict[str, Any]) -> BooksortOptions:
    """The run's `booksort_*` options (parsed once per run, shared with the task)."""
    return parse_options(BooksortOptions, PREFIX, metadata)


def _load_hub(name: str, split: str) -> Any:
    import datasets

    try:
        return datasets.load_dataset(name, split=split)
    except Exception as err:  # gated, offline, missing: all end the same way for the user
        raise UsageError(
            f"could not load the Book-SORT dataset {name!r} from the Hugging Face hub "
            f"({type(err).__name__}: {err}). It is gated: accept its terms at "
            f"https://huggingface.co/datasets/{name} and log in (`hf auth login` or HF_TOKEN). "
            "Offline or without access, build it from plain-text books instead: "
            "`lm-eval-longmem booksort build --books BOOKS_DIR --output_path DATA_DIR`, then pass "
            "--metadata booksort_data=DATA_DIR"
        ) from err


def _read_hub(name: str, split: str) -> Source:
    dataset = _load_hub(name, split)
    texts = dataset.select_columns(["excerpt_text"]) if "excerpt_text" in dataset.column_names else None
    rows = [dict(row) for row in (dataset.remove_columns(["excerpt_text"]) if texts is not None else dataset)]
    for index, row in enumerate(rows):
        row["hub_row"] = index
        row.setdefault("split", split)
        row.setdefault("book_id", str(row["book_idx"]))
        row.setdefault("distance", int(row["seg2_pos"]) - int(row["seg1_pos"]))
        row.setdefault(
            "trial_id",
            f"{row['book_idx']}-{row['excerpt_length']}-{row['segment_length']}-"
            f"{int(row['excerpt_idx']):03d}-{row['segment_idx']}",
        )
    if texts is None:
        raise UsageError(
            f"the Book-SORT dataset {name!r} has no excerpt_text column: point booksort_data at a Book-SORT set"
        )
    return Source(rows, lambda row: str(texts[int(row["hub_row"])]["excerpt_text"]))


def _rebuild(root: Path) -> str:
    return f"rebuild it with `lm-eval-longmem booksort build --books BOOKS_DIR --output_path {root} --overwrite`"


def _read_text(root: Path, name: str) -> tuple[str, str]:
    """(text, sha256 of the bytes) of the file `name` of the build `root`."""
    path = root / name
    try:
        data = path.read_bytes()
    except OSError as err:
        raise UsageError(
            f"{path}: cannot read this file of the Book-SORT build ({err.strerror}): {_rebuild(root)}"
        ) from err
    try:
        return data.decode("utf-8"), sha256_hex(data)
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not UTF-8 text (byte {err.start}): {_rebuild(root)}") from err


def _check_digest(root: Path, name: str, actual: str, manifest: dict[str, Any]) -> None:
    if actual != manifest["sha256"][name]:
        raise UsageError(
            f"{root / name} differs from the file the build wrote (its sha256 in manifest.json): {_rebuild(root)}"
        )


_SPEC_LISTS = ("excerpt_lengths", "segment_lengths")
"""The lists of a build's `spec` in its manifest (`build.BuildSpec`)."""


def _read_manifest(root: Path) -> dict[str, Any]:
    """manifest.json of a build, with the keys the reader relies on."""
    path = root / "manifest.json"
    if not path.is_file():
        raise UsageError(
            f"{root} is not a Book-SORT build (no manifest.json): create one with "
            f"`lm-eval-longmem booksort build --books BOOKS_DIR --output_path {root}`"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path} is not valid JSON ({err}): {_rebuild(root)}") from err
    if not (
        isinstance(manifest, dict)
        and isinstance(manifest.get("books"), list)
        and all(isinstance(b, dict) and "book_id" in b for b in manifest["books"])
        and isinstance(manifest.get("n_trials"), dict)
        and all(isinstance(manifest["n_trials"].get(split), int) for split in SPLITS)
    ):
        raise UsageError(f"{path} lacks the books or per-split trial counts (n_trials) of a build: {_rebuild(root)}")
    spec = manifest.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    listed = {"book": [b["book_id"] for b in manifest["books"]], **{k: spec.get(k) or [] for k in _SPEC_LISTS}}
    for what, values in listed.items():  # what builds before repeats were refused wrote: each such trial twice
        if twice := next((v for v in values if values.count(v) > 1), None):
            raise UsageError(
                f"{path} lists the {what.removesuffix('s').replace('_', ' ')} {twice} twice, so its trials were "
                f"written twice: {_rebuild(root)}"
            )
    version = manifest.get("builder_version")
    if version != BUILDER_VERSION:
        raise UsageError(
            f"{path} says builder_version {version!r}, but this lm-eval-longmem reads Book-SORT builds of version "
            f"{BUILDER_VERSION} only (their trials may differ): {_rebuild(root)}"
        )
    files = [f"books/{book['book_id']}.txt" for book in manifest["books"]] + [f"{split}.jsonl" for split in SPLITS]
    digests = manifest.get("sha256")
    missing = [name for name in files if not isinstance(digests, dict) or not isinstance(digests.get(name), str)]
    if missing:
        raise UsageError(
            f"{path} lacks the sha256 of {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
            f"(a build from before digests were recorded, or an edited manifest), so the build cannot be verified: {_rebuild(root)}"
        )
    return manifest


def _read_built(root: Path, split: str) -> Source:
    """Trials of `split` from a local build, validated against its manifest.

    Every defect of a build ends in one `UsageError` that names the file (and line) and says how to
    rebuild: a missing or corrupt manifest; a manifest of another `builder_version` or without the
    sha256 of every file; a file whose sha256 differs from the one the build recorded; a line that
    is not a JSON trial; fewer or more trials than the manifest's ``n_trials`` (a truncated copy).
    """
    manifest = _read_manifest(root)
    words = {}
    for book in manifest["books"]:
        name = f"books/{book['book_id']}.txt"
        text, digest = _read_text(root, name)
        _check_digest(root, name, digest, manifest)
        words[book["book_id"]] = text.split()
    name = f"{split}.jsonl"
    text, digest = _read_text(root, name)
    lines = text.split("\n")  # not splitlines(): U+2028 and friends may sit inside a trial's text
    if lines[-1] == "":
        lines.pop()
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{root / name}, line {number}: not a JSON trial ({err.msg}): {_rebuild(root)}") from err
        missing = _TRIAL_FIELDS - row.keys() if isinstance(row, dict) else _TRIAL_FIELDS
        if missing or row["book_id"] not in words:
            what = f"lacks {sorted(missing)}" if missing else f"names book {row['book_id']!r}, not in manifest.json"
            raise UsageError(f"{root / name}, line {number}: the trial {what}: {_rebuild(root)}")
        rows.append(row)
    expected = manifest["n_trials"][split]
    if len(rows) != expected:
        raise UsageError(
            f"{root / name} holds {len(rows)} trials but manifest.json says {expected} "
            f"(a truncated or edited copy): {_rebuild(root)}"
        )
    _check_digest(root, name, digest, manifest)  # last: a broken line or count says more than "differs"

    def excerpt(row: dict[str, Any]) -> str:
        start = row["excerpt_start"]
        return " ".join(words[row["book_id"]][start : start + row["excerpt_length"]])

    return Source(rows, excerpt)


def read_split(data: str, split: str) -> Source:
    """All trials of `split` from `data`: ``hub``, ``hf:OWNER/NAME`` or a built directory."""
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}: use one of {SPLITS}")
    if data == "hub":
        return _read_hub(HUB_DATASET, split)
    if data.startswith("hf:"):
        return _read_hub(data[3:], split)
    path = Path(data).expanduser()
    if not path.is_dir():
        raise UsageError(
            f"--metadata booksort_data={data!r} is neither 'hub', 'hf:OWNER/NAME' nor a directory: build one with "
            "`lm-eval-longmem booksort build --books BOOKS_DIR --output_path DATA_DIR`"
        )
    return _read_built(path, split)


def source_problems(metadata: dict[str, Any]) -> list[str]:
    """What keeps this run's trials from loading, with the local alternative; checked before the model
    loads (`lm_eval_longmem.preflight`). A hub set is loaded (from the local cache when it is there), a
    local build read and verified, as the tasks will."""
    data = booksort_options(metadata).data
    try:
        if data == "hub" or data.startswith("hf:"):
            _load_hub(HUB_DATASET if data == "hub" else data[3:], "test")
        else:
            read_split(data, "test")
    except UsageError as err:
        if not (data == "hub" or data.startswith("hf:")):
            return [str(err)]
        name = HUB_DATASET if data == "hub" else data[3:]
        return [
            f"{PREFIX}data={data} (hub dataset {name!r}, gated): {hub_failure(err.__cause__ or err)}; local alternative: "
            f"`lm-eval-longmem booksort build --books BOOKS --output_path booksort_data`, then --metadata "
            f"{PREFIX}data=booksort_data ({BOOKS_HINT})"
        ]
    return []


def add_bin_index(rows: list[dict[str, Any]]) -> None:
    """Set ``distance_bin_idx`` (0 = nearest) by ranking each excerpt length's ``distance_bin`` edges.

    The hub stores a bin as its right edge in words (e.g. 62 for L_E = 250); ranking the edges
    present per excerpt length gives the same 0..3 index for hub data and local builds. Should a
    source have more than 4 edges for one excerpt length, its ``segment_idx`` (the pair's bin in our
    builds) is used instead.
    """
    edges: dict[int, set[int]] = defaultdict(set)
    for row in rows:
        edges[int(row["excerpt_length"])].add(int(row["distance_bin"]))
    rank = {
        le: {edge: k for k, edge in enumerate(sorted(values))} for le, values in edges.items() if len(values) <= N_BINS
    }
    for row in rows:
        le = int(row["excerpt_length"])
        row["distance_bin_idx"] = rank[le][int(row["distance_bin"])] if le in rank else int(row["segment_idx"])


def select(rows: Sequence[dict[str, Any]], selection: BooksortOptions) -> list[dict[str, Any]]:
    """The rows in the selection of `selection` (excerpt and segment lengths, books, bins); never empty."""

    def keep(row: dict[str, Any]) -> bool:
        s = selection
        return (
            (s.excerpt_lengths is None or int(row["excerpt_length"]) in s.excerpt_lengths)
            and (s.segment_lengths is None or int(row["segment_length"]) in s.segment_lengths)
            and (s.books is None or str(row["book_idx"]) in s.books or str(row["book_id"]) in s.books)
            and (s.distance_bins is None or int(row["distance_bin_idx"]) in s.distance_bins)
        )

    kept = [row for row in rows if keep(row)]
    if not kept:
        have = lambda key: sorted({row[key] for row in rows})  # noqa: E731
        chosen = {k: getattr(selection, k) for k in ("excerpt_lengths", "segment_lengths", "books", "distance_bins")}
        raise UsageError(
            f"no Book-SORT trial matches {chosen}: the data has excerpt lengths {have('excerpt_length')}, "
            f"segment lengths {have('segment_length')}, books {have('book_idx')} and distance bins 0-3"
        )
    return kept


def cells(rows: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The trials of each cell (book x L_E x L_S x distance bin), for `common.order.interleave`.

    Cells are ordered with the excerpt length varying fastest, then segment length, book and
    distance bin; within a cell trials keep their order.
    """
    by_cell: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (int(r["excerpt_idx"]), int(r["segment_idx"]))):
        key = (
            int(row["distance_bin_idx"]),
            str(row["book_idx"]),
            int(row["segment_length"]),
            int(row["excerpt_length"]),
        )
        by_cell[key].append(row)
    return [by_cell[key] for key in sorted(by_cell)]


def prompt_work(row: dict[str, Any], condition: Condition) -> int:
    """Estimated work of a trial's forward: its excerpt (in context only) and two segments, ~4/3 tokens a word."""
    words = 2 * int(row["segment_length"]) + (int(row["excerpt_length"]) if condition == "in_context" else 0)
    return forward_work(4 * words // 3)


_EXCERPT = "\0"
"""Stands for the excerpt while the prompt is rendered and cut around it (never in a prompt)."""


def make_doc(row: dict[str, Any], *, variant_name: str, condition: Condition, protocol: str = OURS) -> dict[str, Any]:
    """A harness doc: the trial's keys, its prompt before and after the excerpt, and the index of the right label.

    `variant_name` is one of our variants or of the authors' configs (`prompts.AUTHORS_PROMPTS`,
    filled in their way); the authors' protocol also writes the title in their casing.
    """
    first, second = (
        (row["segment_1"], row["segment_2"]) if int(row["present_seg1_first"]) else (row["segment_2"], row["segment_1"])
    )
    title = authors_title(row["book_title"]) if protocol == AUTHORS else row["book_title"]
    fill = dict(title=title, excerpt=_EXCERPT, first=first, second=second, condition=condition)
    if variant_name in AUTHORS_PROMPTS:
        prompt = render_authors(AUTHORS_PROMPTS[variant_name], **fill)
    else:
        prompt = render(get_variant(variant_name), **fill)
    before, after = prompt.user.split(_EXCERPT) if condition == "in_context" else ("", prompt.user)
    doc = {k: v for k, v in row.items() if k != "excerpt_text"}
    doc.update(
        condition=condition,
        prompt_variant=variant_name,
        prompt_system=prompt.system,
        prompt_before_excerpt=before,
        prompt_after_excerpt=after,
        prompt_answer=prompt.answer_prefix,
        label=0 if int(row["present_seg1_first"]) else 1,
        present_seg1_first=int(row["present_seg1_first"]),
    )
    return doc


def build_docs(metadata: dict[str, Any], split: str, condition: Condition) -> list[dict[str, Any]]:
    """The docs of one split for the options in `metadata`."""
    options = booksort_options(metadata)
    if options.protocol == AUTHORS and options.prompt not in AUTHORS_PROMPTS:
        raise UsageError(
            f"--metadata {PREFIX}protocol=authors renders the authors' prompt configs: add {PREFIX}prompt=prompt_0 .. "
            f"prompt_12 (the paper takes each model's best on the validation split: `lm-eval-longmem booksort "
            f"select-prompt` with {PREFIX}protocol=authors scores all 13)"
        )
    source = read_split(options.data, split)
    add_bin_index(source.rows)
    rows = interleave(cells(select(source.rows, options)), cost=lambda row: prompt_work(row, condition))
    return [make_doc(row, variant_name=options.prompt, condition=condition, protocol=options.protocol) for row in rows]


def user_text(doc: dict[str, Any], excerpt: str) -> str:
    """The user turn of a doc's prompt (lm-eval's `doc_to_text`), with its excerpt put in (empty: memory-less)."""
    return doc["prompt_before_excerpt"] + excerpt + doc["prompt_after_excerpt"]


class Excerpts:
    """The excerpt of any doc of one run, from where the doc says it is (each split's source read once)."""

    def __init__(self, options: BooksortOptions) -> None:
        self.options = options
        self._sources: dict[str, Source] = {}

    def __call__(self, doc: dict[str, Any]) -> str:
        if doc["condition"] != "in_context":
            return ""
        split = str(doc["split"])
        if split not in self._sources:
            self._sources[split] = read_split(self.options.data, split)
        return self._sources[split].excerpt(doc)


def as_dataset(docs: list[dict[str, Any]]) -> Any:
    """`docs` as a `datasets.Dataset` whose text columns are Arrow `large_string`.

    A build from many books holds more prompt text than the 2 GB that Arrow's `string` (32-bit
    offsets) can address in one array (the paper's recipe on the 42 embedded plays: 146,400 test
    trials, about 5 GB of excerpts), and `datasets` fails with an offset overflow when it hashes
    such a table; `large_string` has 64-bit offsets. The docs themselves are unchanged.
    """
    import datasets
    import pyarrow as pa

    table = pa.Table.from_pylist(docs)
    wide = pa.schema([f.with_type(pa.large_string()) if pa.types.is_string(f.type) else f for f in table.schema])
    return datasets.Dataset(table.cast(wide))


def load_booksort(condition: Condition = "in_context", **metadata: Any) -> dict[str, Any]:
    """``custom_dataset`` hook: ``{"test": Dataset, "validation": Dataset}`` for the run's options."""
    return {split: as_dataset(build_docs(metadata, split, condition)) for split in SPLITS}

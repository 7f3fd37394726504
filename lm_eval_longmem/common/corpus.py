"""Text sources for the evaluations that need long natural text, and their cached token ids.

A source is one of:
  * None: the evaluation's default hub dataset (PG-19's test books, `emozilla/pg19-test`);
  * a path to a `.txt` file, or to a directory of `.txt` files (one text per file, by name);
  * `hf:OWNER/NAME[:SPLIT][#FIELD]` for another hub dataset.
Texts are kept apart (one per book), never merged mid-sentence; callers decide how to join them.
Local files are read as books by `common.text` (encoding, byte-order mark, newlines, Gutenberg
boilerplate; a folder's licence and readme files left out); hub texts get the same normalisation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_longmem.common.cache import cache_key, load_or_build, texts_digest
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import tokenizer_fingerprint
from lm_eval_longmem.common.text import book_files, normalise, read_book, strip_gutenberg

DEFAULT_DATASET = "emozilla/pg19-test"
_HUB_SOURCE = re.compile(r"^hf:(?P<name>[^:#]+)(?::(?P<split>[^#]+))?(?:#(?P<field>.+))?$")


def load_texts(
    source: str | Path | None,
    *,
    default_dataset: str = DEFAULT_DATASET,
    field: str = "text",
    split: str = "test",
) -> list[str]:
    """The texts of `source` (see the module docstring), each stripped of Project Gutenberg boilerplate."""
    if source is None or str(source).strip() == "":
        texts = _load_hub(default_dataset, split, field, hint_default=True)
    elif match := _HUB_SOURCE.match(str(source)):
        texts = _load_hub(match["name"], match["split"] or split, match["field"] or field, hint_default=False)
    else:
        texts = _load_local(Path(str(source)).expanduser())
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise UsageError(f"the text source {source!r} holds no text")
    return texts


def hub_failure(err: BaseException) -> str:
    """Why a hub dataset could not be loaded, in a few words: offline and not cached, or the error's first line."""
    from lm_eval_longmem.common.hub import unusable_reason

    if reason := unusable_reason():
        return f"not in the local Hugging Face cache, and {reason}"
    first = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first[:160]}"


def check_text_source(source: str | Path | None, *, default_dataset: str = DEFAULT_DATASET, split: str = "test") -> str:
    """ "" when `load_texts(source)` can find its text, else why not in a few words (for the checks that
    run before the model loads, `lm_eval_longmem.preflight`). A hub dataset is loaded as `load_texts`
    loads it (from the local cache when it is there); a local source is only looked up, not read."""
    import datasets

    if source is None or str(source).strip() == "" or _HUB_SOURCE.match(str(source)):
        match = _HUB_SOURCE.match(str(source or ""))
        name, part = (match["name"], match["split"] or split) if match else (default_dataset, split)
        try:
            datasets.load_dataset(name, split=part)
        except Exception as err:  # datasets raises many types offline (ConnectionError, OSError, ...)
            return hub_failure(err)
        return ""
    path = Path(str(source)).expanduser()
    if path.is_file() or (path.is_dir() and book_files(path)):
        return ""
    return f"no .txt files in the folder {path}" if path.is_dir() else f"{path} does not exist"


def _load_local(path: Path) -> list[str]:
    if path.is_file():
        return [read_book(path)]
    if path.is_dir():
        files = book_files(path)
        if not files:
            raise UsageError(f"no .txt books in {path}: point the corpus at a folder of plain-text books")
        return [read_book(p) for p in files]
    raise UsageError(
        f"text source {str(path)!r} is neither a file nor a directory; give a .txt file, a folder of "
        ".txt files, or hf:OWNER/NAME[:SPLIT][#FIELD] for a hub dataset"
    )


def hub_dataset_spec(
    source: str | Path | None, *, default_dataset: str = DEFAULT_DATASET, field: str = "text", split: str = "test"
) -> tuple[str, str, str] | None:
    """(name, split, field) of a hub source as `load_texts` reads it; None for a local file or folder."""
    if source is None or str(source).strip() == "":
        return default_dataset, split, field
    if match := _HUB_SOURCE.match(str(source)):
        return match["name"], match["split"] or split, match["field"] or field
    return None


def load_hub_dataset(name: str, split: str, *, hint_default: bool) -> Any:
    """The `datasets.Dataset` of a hub source, or a `UsageError` that says how to use local text instead."""
    import datasets

    try:
        return datasets.load_dataset(name, split=split)
    except Exception as err:  # datasets raises many types offline (ConnectionError, OSError, ...)
        fix = (
            "point the evaluation at local text instead (a .txt file or a folder of .txt books, "
            "e.g. Project Gutenberg books), see the option list in the task README"
            if hint_default
            else "check the name, split and your network/HF token, or use local .txt files"
        )
        raise UsageError(
            f"could not load the hub dataset {name!r} (split {split!r}, {type(err).__name__}); to fix: {fix}"
        ) from err


def _load_hub(name: str, split: str, field: str, *, hint_default: bool) -> list[str]:
    dataset = load_hub_dataset(name, split, hint_default=hint_default)
    if field not in dataset.column_names:
        raise UsageError(f"hub dataset {name!r} has no field {field!r}; its fields: {dataset.column_names}")
    return [strip_gutenberg(normalise(str(t))) for t in dataset[field]]


def tokenize_texts(texts: Sequence[str], tokenizer: Any, *, special_tokens: bool = False) -> list[np.ndarray]:
    """Token ids (int32) of each text, cached on disk per tokenizer and text.

    Without special tokens by default; `special_tokens=True` tokenizes each text as a plain
    ``tokenizer(text)`` call does (e.g. a BOS before every text, for tokenizers that add one).

    One text per call, kept as int32 at once: the tokenizer's per-token records (and Python's lists
    of ids) exist for one book at a time, so the peak memory is that of the longest book, not of the
    corpus (a corpus of 2.6M tokens in one call took 490 MB over the texts; one text per call, 150 MB).
    """
    extra = {"special": True} if special_tokens else {}  # default keys unchanged: existing cache entries stay valid
    key = cache_key(tokenizer=tokenizer_fingerprint(tokenizer), texts=texts_digest(texts), v=1, **extra)

    def build() -> list[np.ndarray]:
        return [
            np.asarray(
                tokenizer(text, add_special_tokens=special_tokens, verbose=False, return_attention_mask=False)[
                    "input_ids"
                ],
                dtype=np.int32,
            )
            for text in texts
        ]

    def dump(arrays: list[np.ndarray], path: Path) -> None:
        with open(path, "wb") as fh:
            np.savez(fh, *arrays)

    def load(path: Path) -> list[np.ndarray]:
        with np.load(path) as data:
            return [data[f"arr_{i}"] for i in range(len(data.files))]

    return load_or_build("tokens", key, build, dump=dump, load=load, suffix=".npz")


def token_stream(
    texts: Sequence[str], tokenizer: Any, *, separator_ids: Sequence[int] = (), special_tokens: bool = False
) -> np.ndarray:
    """All texts' token ids concatenated (int32), with `separator_ids` between consecutive texts
    (each text tokenized with or without the tokenizer's special tokens, see `tokenize_texts`)."""
    parts: list[np.ndarray] = []
    separator = np.asarray(separator_ids, dtype=np.int32)
    for i, ids in enumerate(tokenize_texts(texts, tokenizer, special_tokens=special_tokens)):
        if i and separator.size:
            parts.append(separator)
        parts.append(ids)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)

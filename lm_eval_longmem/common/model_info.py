"""Facts about the evaluated model that data builders need: its tokenizer and its claimed window.

The harness hands each task one flat metadata dict: `--model_args` merged with `--metadata`.
So `pretrained`, `tokenizer`, `revision`, `trust_remote_code`, `max_length` (hf) and
`max_model_len` (vllm) arrive here without any extra flag.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

_TOKENIZER_KEYS = ("tokenizer", "pretrained", "model")
_WINDOW_ARGS = ("max_length", "max_model_len")
_WINDOW_CONFIG_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def tokenizer_name(metadata: dict[str, Any]) -> str:
    """The tokenizer to size data with: `tokenizer`, else `pretrained`, else `model`."""
    for key in _TOKENIZER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    raise ValueError(
        "this task builds its data in the evaluated model's tokenizer, but no model was named: "
        "pass --model_args pretrained=NAME (or --metadata tokenizer=NAME when the model is served elsewhere)"
    )


@functools.cache
def _load_tokenizer(name: str, revision: str | None, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name, revision=revision, trust_remote_code=trust_remote_code)
    except OSError as err:
        raise OSError(
            f"could not load the tokenizer {name!r}: {err}. Offline (HF_HUB_OFFLINE=1) only local "
            "folders and already-downloaded models work; pass a local path with "
            "--model_args pretrained=/path/to/model or --metadata tokenizer=/path/to/tokenizer"
        ) from err


def load_tokenizer(metadata: dict[str, Any]) -> Any:
    """The evaluated model's tokenizer (loaded once per process)."""
    return _load_tokenizer(
        tokenizer_name(metadata),
        metadata.get("revision"),
        str(metadata.get("trust_remote_code", False)).lower() in {"1", "true", "yes"},
    )


@functools.cache
def _config_window(name: str, revision: str | None, trust_remote_code: bool) -> int | None:
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):
        return None
    config = getattr(config, "text_config", None) or config
    for field in _WINDOW_CONFIG_FIELDS:
        value = getattr(config, field, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def claimed_window(metadata: dict[str, Any]) -> int | None:
    """The model's claimed context length in tokens, or None when it cannot be told.

    Order: an explicit `max_length` (hf) / `max_model_len` (vllm) model argument; the model
    config's `max_position_embeddings` (or its older names); the tokenizer's
    `model_max_length` when it is a real number rather than transformers' "very large" default.
    """
    for key in _WINDOW_ARGS:
        if metadata.get(key) not in (None, ""):
            return int(metadata[key])
    name = next((metadata[k] for k in ("pretrained", "model") if isinstance(metadata.get(k), str)), None)
    trust = str(metadata.get("trust_remote_code", False)).lower() in {"1", "true", "yes"}
    if name:
        window = _config_window(name, metadata.get("revision"), trust)
        if window:
            return window
    try:
        tokenizer = load_tokenizer(metadata)
    except (ValueError, OSError):
        return None
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < 10**8 else None


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A stable hash of what the tokenizer does (vocabulary, merges, special tokens), for cache keys.

    Two tokenizers with the same fingerprint produce the same ids, whatever their names or paths.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        payload = backend.to_str()
    else:  # slow tokenizers: the vocabulary is what we can see
        payload = json.dumps(sorted(tokenizer.get_vocab().items()))
    special = json.dumps(
        {k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())}
        | {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id},
        sort_keys=True,
    )
    return hashlib.sha256((payload + special).encode("utf-8")).hexdigest()[:16]

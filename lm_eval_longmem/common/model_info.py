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

from lm_eval_longmem.common.options import parse_flag

_TOKENIZER_KEYS = ("tokenizer", "pretrained", "model")
_WINDOW_ARGS = ("max_length", "max_model_len")


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
def _load_tokenizer(name: str, revision: str | None, trust: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name, revision=revision, trust_remote_code=trust)
    except OSError as err:
        raise OSError(
            f"could not load the tokenizer {name!r}: {err}. Offline (HF_HUB_OFFLINE=1) only local "
            "folders and already-downloaded models work; pass a local path with "
            "--model_args pretrained=/path/to/model or --metadata tokenizer=/path/to/tokenizer"
        ) from err


def trust_remote_code(metadata: dict[str, Any]) -> bool:
    """The `trust_remote_code` model argument as a bool."""
    return parse_flag(metadata.get("trust_remote_code", False), "trust_remote_code")


def load_tokenizer(metadata: dict[str, Any]) -> Any:
    """The evaluated model's tokenizer (loaded once per process)."""
    return _load_tokenizer(tokenizer_name(metadata), metadata.get("revision"), trust_remote_code(metadata))


@functools.cache
def _load_config(name: str, revision: str | None, trust: bool) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=trust)
    except (OSError, ValueError):  # a tokenizer-only name (API models) has no config
        return None


def load_config(metadata: dict[str, Any]) -> Any:
    """The evaluated model's config (`pretrained` or `model`), or None when there is none to load."""
    name = next((metadata[k] for k in ("pretrained", "model") if isinstance(metadata.get(k), str)), None)
    return _load_config(name, metadata.get("revision"), trust_remote_code(metadata)) if name else None


def claimed_window(metadata: dict[str, Any]) -> int | None:
    """The context length the backend will run the model with, in tokens (None when it cannot be told).

    An explicit `max_length` (hf) / `max_model_len` (vllm) model argument wins. Otherwise this is
    exactly what lm_eval's HF backend uses (`lm_eval.models.utils.resolve_max_length`: the config's
    `n_positions`, `max_position_embeddings` or `n_ctx`, else the tokenizer's `model_max_length`,
    else lm_eval's default of 2048), so a prompt we let through is never cut by the backend.
    Without a model config (a tokenizer-only name), the tokenizer's `model_max_length` if real.
    """
    from lm_eval.models.utils import DEFAULT_MAX_LENGTH, TOKENIZER_INFINITY, resolve_max_length

    for key in _WINDOW_ARGS:
        if metadata.get(key) not in (None, ""):
            return int(metadata[key])
    try:
        tokenizer = load_tokenizer(metadata)
    except (ValueError, OSError):
        tokenizer = None
    config = load_config(metadata)
    if config is not None:
        return resolve_max_length(config, tokenizer, default=DEFAULT_MAX_LENGTH)
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < TOKENIZER_INFINITY else None


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

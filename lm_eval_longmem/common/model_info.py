"""Facts about the evaluated model that data builders need: its tokenizer and its claimed window.

The harness hands each task one flat metadata dict: `--model_args` merged with `--metadata`.
So `pretrained`, `tokenizer`, `revision`, `trust_remote_code`, `max_length` (hf) and
`max_model_len` (vllm) arrive here without any extra flag.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from lm_eval_longmem.common.cache import input_digest, input_files, sha256_hex
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.options import parse_flag
from lm_eval_longmem.harness.models import default_window, live_backend, tokenizer_window

log = logging.getLogger(f"lm_eval.{__name__}")

_TOKENIZER_KEYS = ("tokenizer", "pretrained", "model")
_WINDOW_ARGS = ("max_length", "max_model_len")


def tokenizer_name(metadata: dict[str, Any]) -> str:
    """The tokenizer to size data with: `tokenizer`, else `pretrained`, else `model`."""
    for key in _TOKENIZER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    raise UsageError(
        "this task builds its data in the evaluated model's tokenizer, but no model was named: "
        "pass --model_args pretrained=NAME (or --metadata tokenizer=NAME when the model is served elsewhere)"
    )


@functools.cache
def _load_tokenizer(name: str, revision: str | None, trust: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name, revision=revision, trust_remote_code=trust)
    except (OSError, ValueError) as err:
        from lm_eval_longmem.common.hub import unusable_reason

        first = (str(err).strip().splitlines() or [""])[0][:160]
        offline = (
            f"; {reason}, so only local folders and downloaded models work" if (reason := unusable_reason()) else ""
        )
        raise UsageError(
            f"could not load the tokenizer {name!r} ({type(err).__name__}: {first}){offline}; pass a model folder "
            "with --model_args pretrained=/path/to/model, or a tokenizer folder with --metadata tokenizer=/path"
        ) from err


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt", ".onnx")
"""Files that hold weights (their index, `*.index.json`, is not one of them)."""


def model_folder(name: str, revision: str | None = None) -> Path | None:
    """The local files behind a model or tokenizer name: the folder (or file) itself, or its snapshot in the
    Hugging Face cache; None when neither is on this machine (e.g. a model served elsewhere)."""
    path = Path(name).expanduser()
    if path.exists():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - not a repo id, not cached, or another hub error: no local files
        return None


def model_digest(metadata: dict[str, Any], *, weights: bool) -> dict[str, str]:
    """The content of the model and tokenizer the metadata names, for cache keys: {key: digest or name}.

    For `pretrained` and `tokenizer`, the digest of every file of its local folder (or Hugging Face
    cache snapshot), weight files included only with `weights` (a request depends on the tokenizer
    files, the config and the chat template; a fine-tuned checkpoint on the weights too). A name
    with no local files counts by its name and revision. Read once per content (`cache.input_digest`).
    """
    out = {}
    for key in ("pretrained", "tokenizer"):
        name = metadata.get(key)
        if not isinstance(name, str) or not name:
            continue
        folder = model_folder(name, metadata.get("revision"))
        if folder is None:
            out[key] = f"{name}@{metadata.get('revision') or ''}"
            continue
        files = [file for rel, file in input_files(folder) if weights or not rel.endswith(WEIGHT_SUFFIXES)]
        out[key] = input_digest(files)
    return out


def default_device() -> str:
    """What the harness should run on when no `--device` is given: cuda when torch sees a GPU, else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


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
    exactly what lm_eval's HF backend uses (`harness.models.default_window`, R21: the config's
    `n_positions`, `max_position_embeddings` or `n_ctx`, else the tokenizer's `model_max_length`,
    else lm_eval's default of 2048), so a prompt we let through is never cut by the backend.
    Without a model config (a tokenizer-only name), the tokenizer's `model_max_length` if real.
    """
    for key in _WINDOW_ARGS:
        if metadata.get(key) not in (None, ""):
            return int(metadata[key])
    try:
        tokenizer = load_tokenizer(metadata)
    except (ValueError, OSError):
        tokenizer = None
    config = load_config(metadata)
    if config is not None:
        return default_window(config, tokenizer)
    return tokenizer_window(tokenizer)


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
    return sha256_hex(payload + special)[:16]


@dataclass(frozen=True)
class Window:
    """How long the evaluated model's inputs may be, and where we learned it."""

    tokens: int | None
    """The window a prompt plus its answer must fit (the backend left-cuts anything longer); None: unknown."""
    positions: int | None
    """The most input positions the backend can run at all (None: only memory limits it)."""
    backend: str
    """"hf", "vllm", or "unknown" (no live model and no backend-specific model argument)."""
    source: str
    """One phrase saying where `tokens` came from (for messages)."""


def model_window(metadata: dict[str, Any]) -> Window:
    """The window of the model this run evaluates.

    Preferred source: the model the harness created in this process for the `pretrained` named in
    the metadata (`harness.models.live_backend`), so the limit is the backend's own (vLLM's `max_model_len`, HF's resolved `max_length`). Without
    one (a model served elsewhere, direct calls), the model arguments decide: `max_model_len` means
    vLLM, anything else the HF backend's rule (`claimed_window`).

    `positions` is what the backend can physically run: for vLLM the engine rejects prompts of
    `max_model_len` tokens or more (a request of n tokens runs n - 1 positions, so at most
    `max_model_len - 2`); for HF it is `physical_max_length` of the model, built on
    the meta device from its config (rotary/ALiBi: unlimited; learned position tables: their size).
    """
    live = live_backend()
    if live is not None and live.pretrained != metadata.get("pretrained"):
        live = None  # the live model is another one (several evaluations in one process)
    if live is not None and live.kind == "vllm" and live.max_length:
        return Window(live.max_length, live.max_length - 2, "vllm", "the vLLM engine's max_model_len")
    if metadata.get("max_model_len") not in (None, ""):
        limit = int(metadata["max_model_len"])
        return Window(limit, limit - 2, "vllm", "the max_model_len model argument")
    tokens: int | None
    if live is not None and live.max_length:
        tokens, source = live.max_length, f"the {live.kind} backend's max_length"
    else:
        tokens = claimed_window(metadata)
        source = "the max_length model argument" if metadata.get("max_length") not in (None, "") else "the model config"
    return Window(tokens, hf_position_limit(metadata, tokens), live.kind if live else "hf", source)


def hf_position_limit(metadata: dict[str, Any], claimed: int | None) -> int | None:
    """`physical_max_length` of the model named in `metadata`, built on the meta device (no weights)."""
    name = metadata.get("pretrained")
    if not isinstance(name, str):
        return claimed  # the model is not named here (e.g. a served model): stay inside its window
    return _hf_position_limit(name, metadata.get("revision"), trust_remote_code(metadata), claimed)


@functools.cache
def _hf_position_limit(name: str, revision: str | None, trust: bool, claimed: int | None) -> int | None:
    import torch
    from transformers import AutoModelForCausalLM

    config = _load_config(name, revision, trust)
    try:
        if config is None:
            raise OSError("no model config")
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust)
    except (OSError, ValueError, TypeError, ImportError) as err:
        log.warning("cannot inspect %s (%s); keeping inputs within its window %s", name, err, claimed)
        return claimed
    return physical_max_length(model, claimed or 0).tokens


_POSITION_TABLE_NAMES = frozenset({"wpe", "embed_positions", "position_embeddings"})
"""Module names under which transformers keeps learned absolute position-embedding tables."""


class PositionLimit(NamedTuple):
    """How long an input the architecture can physically run, and why."""

    tokens: int | None
    """Maximum number of input positions, or None when only memory limits it."""
    reason: str
    """Human-readable origin of the limit, for error messages."""


def physical_max_length(model: Any, claimed: int) -> PositionLimit:
    """The longest input `model` (a transformers model) can run at all (as opposed to the window it claims).

    Learned absolute position tables cap it at their size; rotary and ALiBi models have no
    architectural cap. Anything we cannot classify keeps the claimed window, so we never promise a
    length a model cannot run.
    """
    import torch

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in _POSITION_TABLE_NAMES:
            size = module.num_embeddings - int(getattr(module, "offset", 0))
            return PositionLimit(size, f"its learned position table {name!r} has {size} positions")
    config = model.config.get_text_config()
    rotary = any("Rotary" in type(m).__name__ for m in model.modules()) or any(
        getattr(config, key, None) is not None for key in ("rope_parameters", "rope_theta", "rope_scaling")
    )
    if rotary:
        return PositionLimit(None, "it uses rotary position embeddings (no positional limit; memory is the limit)")
    if getattr(config, "alibi", False) or config.model_type == "bloom":
        return PositionLimit(None, "it uses ALiBi (no positional limit; memory is the limit)")
    return PositionLimit(claimed, "its position encoding is not one we can classify, so we keep max_length")

"""What a sequence costs on a model: FLOPs, memory, GPU time, and the data phase's tokenizing.

Everything here follows from the model's config (`ModelShape`), never from its weights, so
`lm-eval-longmem plan` can print it before anything is downloaded or built, a run can say what it
will cost before its first request (`common/task.py`), and `--batch_size auto` can keep its probe
within memory (`backends/hf.py`). Conventions: a multiply-add is 2 FLOPs; a "position" is one token
the model runs; bytes are of the model's dtype unless said otherwise.

The terms, for one sequence of n positions:

* **Weights** (`ModelShape.parameters`): per layer, attention has q and o (hidden x heads*head_dim
  each) and k and v (hidden x kv_heads*head_dim each); the MLP has 3 hidden x intermediate
  matrices when gated (SwiGLU/GeGLU: Llama, Mistral, Qwen, Gemma) and 2 otherwise (GPT-2, GPT-NeoX,
  OPT, ...); two norms of `hidden`. Then one final norm, the vocab x hidden embedding and, unless
  tied, an LM head of the same size. Biases are left out (well under 0.1% of any model we run).
* **Matmul FLOPs** (`forward_flops`): 2 per weight and position for every body matrix (the
  embedding is a lookup, not a product), the usual C = 2N per token of Kaplan et al. (2020,
  "Scaling Laws for Neural Language Models", section 2.1), plus 2 x hidden x vocab at each
  position where the LM head runs: every position on the harness's stock `loglikelihood`, only the
  scored ones on our `loglikelihood_accuracy`, the last one when generating.
* **Attention FLOPs**: QK^T and softmax(.)V cost 2 x head_dim FLOPs each per (query, key) pair and
  head, so 4 x heads x head_dim per pair and layer. Causal kernels (PyTorch SDPA's flash and
  memory-efficient kernels, FlashAttention, vLLM) skip the masked upper triangle: n(n+1)/2 pairs.
  "eager" attention computes the whole n x n square and masks it: n^2 pairs (`attention_pairs`).
* **Generation** (`decode_flops`): each new token runs the body and the head once (2N + 2 x hidden x
  vocab) and attends to every cached position.
* **KV cache** (`kv_cache_bytes`): K and V of every layer, 2 x layers x kv_heads x head_dim x n
  elements: what vLLM holds per sequence and what HF's `generate` holds while decoding.
* **Activations of the HF body forward** (`activation_bytes`): n x (3 x intermediate + 4 x hidden)
  elements: a gated MLP holds three intermediate-size tensors at its peak (activated gate, up
  projection, their product), attention and the residual stream about four hidden-size ones.
  Attention kernels that skip the mask keep no n x n matrix; "eager" attention also holds the scores
  and their softmax, 2 x heads x n^2 elements, and the n x n mask (`eager_scores_bytes`). Checked
  on CPU (sdpa, fp32, 1k-16k positions, `tests/common/test_cost.py`, `benchmarks/cost_model.py`):
  with every allocation of 64 KiB or more mmapped (`MALLOC_MMAP_THRESHOLD_=65536`), the resident
  memory a forward adds is within 2-10% of this estimate; with glibc's default it ran up to 1.8x
  above it at 1k-4k positions, where glibc's heap keeps freed blocks below its growing mmap
  threshold (up to 32 MiB), and within 10% once the tensors are larger than that.
* **LM-head chunk** (`head_chunk_rows`): our `loglikelihood_accuracy` on HF applies the head to the
  scored positions in chunks whose logits, turned into log-probabilities in place (vocab elements
  per position in the softmax dtype, fp32 by default, plus the head's own output where its dtype
  differs), take at most `HEAD_MEMORY_SHARE` of what the body forward needs (weights plus
  activations), or `MIN_HEAD_CHUNK_BYTES` when that is more; `backends/hf.py` sizes its chunks
  with these functions.
* **Peak on the HF path** (`hf_peak`): weights plus the larger of the body's activations and what
  the request type makes after the body has run (its output hidden states with the head chunk,
  ours, or with full-vocabulary logits and their `log_softmax` at every position, the harness's
  stock `loglikelihood`, which `multiple_choice` uses); generation adds the KV cache.
* **GPU time** (`gpu_seconds`): FLOPs / (the card's peak dense FLOP/s at the dtype x utilisation);
  the peaks are the vendors' datasheet figures (`GPUS`). Utilisation is an assumption the caller
  states: a Llama-3-8B-shaped body forward (bf16, sdpa) reached 0.54-0.56 of an H200's 989 TFLOP/s
  at 8k-128k tokens, counting attention as causal, and its activations were within 0.4% of
  `activation_bytes` (`torch.cuda.max_memory_allocated`; docs/benchmarks.md).
* **Data phase** (`tokenize_seconds`): CPU seconds to tokenize a number of tokens, at
  `TOKENIZE_TOKENS_PER_CPU_SECOND`.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

HEAD_MEMORY_SHARE = 0.10
"""How much one chunk of the LM head (its logits, turned into log-probabilities in place) may add to
the memory the body forward already needs (weights plus largest activations). 10% keeps the whole
scoring call within the 1.15x-of-body target with room for the allocator; for a Llama-3-8B-shaped
model in bf16 at 128k tokens it is about 3.2 GB: some 4,100 positions per chunk, as bf16 logits and
their fp32 copy."""

MIN_HEAD_CHUNK_BYTES = 64 * 2**20
"""A chunk may always hold this much, however small the body: a matrix product of few rows re-reads
the whole head matrix per chunk and runs far below the machine's speed (measured on one CPU thread,
SmolLM2's head: 128 rows per product took 1.3x the time per row of 1024 rows; 512 rows, 1.01x).
64 MiB is about 340 positions of a 49k vocabulary in fp32, 130 of a 128k one."""

DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "float64": 8}
"""Bytes per element of the dtypes a model is run in (`dtype=` in --model_args, or the config's)."""

NOT_GATED = frozenset(
    {"gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "gpt_bigcode", "phi", "codegen", "starcoder2", "mpt"}
)
"""Model types whose MLP has two matrices (up, down) instead of a gated MLP's three."""

_REQUIRED = object()
CAUSAL_KERNELS = "causal kernels"
EAGER = "eager"

TOKENIZE_TOKENS_PER_CPU_SECOND = 300_000
"""Tokens a fast (Rust) Hugging Face tokenizer turns out per CPU second on one long text. Measured on
the 2-core development machine: SmolLM2's tokenizer on one book (150,502 tokens in 0.46 CPU s,
324k tokens/s); other tokenizers and CPUs differ by a small multiple, so data-phase times are rough."""

HF_GPU_MEMORY_SHARE = 0.90
"""Share of a card's memory the HF path may plan to use (the rest: CUDA context, allocator slack)."""

VLLM_MAX_UTILISATION = 0.95
"""The largest `gpu_memory_utilization` we suggest for vLLM."""

VLLM_LOGITS_SHARE = 0.05
"""Share of a card's memory we let vLLM's per-step logits take (prompt log-probabilities need
vocab x batched tokens fp32 logits and log-probabilities): it decides `max_num_batched_tokens`."""


@dataclass(frozen=True)
class ModelShape:
    """What the cost of a forward depends on, read from a transformers config."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    dtype: str = "float32"
    """The dtype weights and activations are held in (a key of `DTYPE_BYTES`)."""
    tied: bool = False
    """Whether the LM head shares the embedding matrix."""
    gated_mlp: bool = True
    attention: str = CAUSAL_KERNELS
    """`CAUSAL_KERNELS` (SDPA, FlashAttention, vLLM: the masked half is skipped) or `EAGER`."""

    @classmethod
    def from_config(cls, config: Any, dtype: str | None = None, attention: str | None = None) -> ModelShape:
        """The shape of a transformers config (its text part), run in `dtype` (None or "auto": the config's).

        `attention` is the `attn_implementation` model argument: "eager" computes the whole
        attention square; anything else (sdpa, flash_attention_*, vLLM) skips the masked half.
        """
        text = config.get_text_config() if hasattr(config, "get_text_config") else config

        def first(*names: str, default: Any = _REQUIRED) -> Any:
            found = next((getattr(text, n) for n in names if getattr(text, n, None) is not None), default)
            if found is _REQUIRED:
                raise ValueError(
                    f"the model config ({type(text).__name__}) has no {' / '.join(names)}: the cost model covers "
                    "transformer decoders (layers, heads, hidden size, vocabulary)"
                )
            return found

        hidden = int(first("hidden_size", "n_embd", "d_model"))
        heads = int(first("num_attention_heads", "n_head"))
        multi_query = bool(first("multi_query", default=False))
        kv_heads = int(first("num_key_value_heads", "num_kv_heads", default=1 if multi_query else heads))
        if dtype in (None, "auto"):
            dtype = str(first("dtype", "torch_dtype", default="float32"))
        dtype = str(dtype).removeprefix("torch.")
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype {dtype!r}: the cost model knows {', '.join(sorted(DTYPE_BYTES))}")
        return cls(
            layers=int(first("num_hidden_layers", "n_layer", "num_layers")),
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=int(first("head_dim", default=hidden // heads)),
            intermediate=int(first("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)),
            vocab=int(first("vocab_size")),
            dtype=dtype,
            tied=bool(first("tie_word_embeddings", default=True)),
            gated_mlp=str(getattr(text, "model_type", "")) not in NOT_GATED,
            attention=EAGER if attention == EAGER else CAUSAL_KERNELS,
        )

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def body_matmul_weights(self) -> int:
        """Weights of every matrix product of the body (attention and MLP of all layers)."""
        attention = 2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = (3 if self.gated_mlp else 2) * self.hidden * self.intermediate
        return self.layers * (attention + mlp)

    @property
    def parameters(self) -> int:
        """All parameters: body matrices, norms, the embedding and (untied) the LM head."""
        norms = (2 * self.layers + 1) * self.hidden
        return self.body_matmul_weights + norms + self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def weights_bytes(self) -> int:
        return self.parameters * self.itemsize

    def activation_bytes(self, rows: int) -> int:
        """`activation_bytes` of this shape."""
        return activation_bytes(rows, self.hidden, self.intermediate, self.itemsize)

    def describe(self) -> str:
        """One line for people: layers, widths, vocabulary, dtype, size."""
        heads = f"{self.heads} heads" + (f" / {self.kv_heads} KV heads" if self.kv_heads != self.heads else "")
        return (
            f"{self.layers} layers, hidden {self.hidden}, {heads}, head dim {self.head_dim}, MLP {self.intermediate}"
            f"{'' if self.gated_mlp else ' (not gated)'}, vocabulary {self.vocab}{' (tied)' if self.tied else ''}, "
            f"{self.dtype}: {self.parameters / 1e9:.2f}B parameters, {gib(self.weights_bytes)}"
        )


def attention_pairs(shape: ModelShape, queries: int, keys: int | None = None) -> int:
    """(query, key) pairs attention computes for `queries` new positions after `keys - queries` cached ones."""
    keys = queries if keys is None else keys
    if shape.attention == EAGER:
        return queries * keys
    earlier = keys - queries
    return queries * earlier + queries * (queries + 1) // 2


def forward_flops(shape: ModelShape, positions: int, head_positions: int) -> int:
    """FLOPs of one prefill over `positions` tokens, with the LM head at `head_positions` of them."""
    matmuls = 2 * shape.body_matmul_weights * positions + 2 * shape.hidden * shape.vocab * head_positions
    attention = 4 * shape.layers * shape.heads * shape.head_dim * attention_pairs(shape, positions)
    return matmuls + attention


def suffix_flops(shape: ModelShape, positions: int, context: int, head_positions: int) -> int:
    """FLOPs of a forward over the last `positions` of `context` tokens whose earlier keys are cached (a shared
    prefix computed once), with the LM head at `head_positions` of them."""
    matmuls = 2 * shape.body_matmul_weights * positions + 2 * shape.hidden * shape.vocab * head_positions
    return matmuls + 4 * shape.layers * shape.heads * shape.head_dim * attention_pairs(shape, positions, context)


def decode_flops(shape: ModelShape, context: int, steps: int) -> int:
    """FLOPs of generating `steps` tokens after a prefill of `context` (each attends to all before it)."""
    if steps <= 0:
        return 0
    per_token = 2 * shape.body_matmul_weights + 2 * shape.hidden * shape.vocab
    # Token i (0-based) attends to context + i + 1 keys: the sum over i is an arithmetic series.
    keys = steps * (context + 1) + steps * (steps - 1) // 2
    return steps * per_token + 4 * shape.layers * shape.heads * shape.head_dim * keys


def kv_cache_bytes(shape: ModelShape, tokens: int) -> int:
    """K and V of every layer for `tokens` positions (one sequence, the model's dtype)."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * shape.itemsize


def activation_bytes(rows: int, hidden: int, intermediate: int, itemsize: int) -> int:
    """Largest activations of one HF body forward over `rows` positions (all sequences of a batch together)."""
    return rows * (3 * intermediate + 4 * hidden) * itemsize


def eager_scores_bytes(shape: ModelShape, width: int, batch: int = 1) -> int:
    """What eager attention holds for one layer (0 for causal kernels): scores and their softmax for
    every head, and the additive causal mask."""
    return (2 * shape.heads + 1) * batch * width * width * shape.itemsize if shape.attention == EAGER else 0


def head_chunk_row_bytes(vocab: int, softmax_itemsize: int, logits_itemsize: int | None = None) -> int:
    """Bytes one position of an LM-head chunk holds: its `[vocab]` row in the softmax dtype (the
    log-probabilities are written over the logits) and, when the head's output dtype differs (a bf16
    model scored in fp32), the head's output row beside it."""
    extra = vocab * logits_itemsize if logits_itemsize is not None and logits_itemsize != softmax_itemsize else 0
    return vocab * softmax_itemsize + extra


def head_chunk_rows(body_bytes: int, vocab: int, softmax_itemsize: int, logits_itemsize: int | None = None) -> int:
    """Positions per LM-head chunk: within `HEAD_MEMORY_SHARE` of `body_bytes`, or `MIN_HEAD_CHUNK_BYTES`."""
    budget = max(int(HEAD_MEMORY_SHARE * body_bytes), MIN_HEAD_CHUNK_BYTES)
    return max(1, budget // head_chunk_row_bytes(vocab, softmax_itemsize, logits_itemsize))


def head_chunk_bytes(
    body_bytes: int,
    vocab: int,
    softmax_itemsize: int,
    logits_itemsize: int | None = None,
    *,
    positions: int | None = None,
) -> int:
    """Memory of one LM-head chunk for a body needing `body_bytes`: `head_chunk_rows` positions, or the
    `positions` of the sequence when fewer (a chunk never holds more positions than are scored)."""
    rows = head_chunk_rows(body_bytes, vocab, softmax_itemsize, logits_itemsize)
    if positions is not None:
        rows = min(rows, max(1, positions))
    return rows * head_chunk_row_bytes(vocab, softmax_itemsize, logits_itemsize)


class Peak(NamedTuple):
    """Estimated peak memory of one HF forward (bytes), and the parts it is made of."""

    weights: int
    activations: int
    """Largest body activations (and eager attention's scores)."""
    kv_cache: int
    """The KV cache `generate` holds (0 for scoring, which runs without a cache)."""
    logits: int
    """The LM-head chunk (ours) or full-vocabulary logits and log-probabilities (stock `loglikelihood`)."""
    total: int
    """Weights plus whichever is larger: the body's activations, or its output hidden states with the
    logits (they are made after the body's activations are freed); generation adds the KV cache."""


def hf_peak(
    shape: ModelShape,
    output_type: str,
    positions: int,
    *,
    batch: int = 1,
    new_tokens: int = 0,
    softmax_itemsize: int = 4,
) -> Peak:
    """Peak memory of `batch` sequences of `positions` tokens on the harness's HF backend.

    `output_type` is the task's: `loglikelihood_accuracy` (ours: head chunks), `loglikelihood` or
    `multiple_choice` (the harness's stock path: `[positions, vocab]` logits in the model's dtype
    and their `log_softmax`), `generate_until` (prefill, then a KV cache that grows by `new_tokens`).
    The logits come after the body has run and freed its activations, so the two do not add up:
    measured on CPU (SmolLM2's widths, 4 layers, 1k-16k tokens), scoring with our head chunks peaks
    exactly where the bare body does.
    """
    rows = batch * positions
    body = shape.activation_bytes(rows) + eager_scores_bytes(shape, positions, batch)
    hidden_out = rows * shape.hidden * shape.itemsize
    if output_type == "loglikelihood_accuracy":
        logits = head_chunk_bytes(
            shape.weights_bytes + body, shape.vocab, softmax_itemsize, shape.itemsize, positions=rows
        )
        return Peak(shape.weights_bytes, body, 0, logits, shape.weights_bytes + max(body, hidden_out + logits))
    if output_type in ("loglikelihood", "multiple_choice"):
        logits = 2 * rows * shape.vocab * shape.itemsize
        return Peak(shape.weights_bytes, body, 0, logits, shape.weights_bytes + max(body, hidden_out + logits))
    if output_type == "generate_until":
        kv = kv_cache_bytes(shape, batch * (positions + new_tokens))
        return Peak(shape.weights_bytes, body, kv, 0, shape.weights_bytes + body + kv)
    raise ValueError(f"unknown output type {output_type!r}")


@dataclass(frozen=True)
class Gpu:
    """One accelerator: its peak dense matmul throughput and its memory, from the vendor's datasheet."""

    name: str
    half_tflops: float
    """Dense (no sparsity) bf16/fp16 tensor-core TFLOP/s."""
    fp32_tflops: float
    """Plain fp32 TFLOP/s (PyTorch does not use TF32 for matmuls unless asked)."""
    memory_gib: float
    source: str


GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu(
            "a100",
            312,
            19.5,
            80,
            "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM; BF16 312 TFLOPS dense, 624 with sparsity)",
        ),
        Gpu("a100-40gb", 312, 19.5, 40, "NVIDIA A100 Tensor Core GPU datasheet (40GB; BF16 312 TFLOPS dense)"),
        Gpu(
            "h100",
            989,
            67,
            80,
            "NVIDIA H100 Tensor Core GPU datasheet (SXM; BF16 1,979 TFLOPS with sparsity, half dense)",
        ),
        Gpu(
            "h100-pcie",
            756,
            51,
            80,
            "NVIDIA H100 Tensor Core GPU datasheet (PCIe; BF16 1,513 TFLOPS with sparsity, half dense)",
        ),
        Gpu(
            "h200",
            989,
            67,
            141,
            "NVIDIA H200 Tensor Core GPU datasheet (SXM; BF16 1,979 TFLOPS with sparsity, 141 GB HBM3e)",
        ),
        Gpu(
            "b200",
            2250,
            75,
            180,
            "NVIDIA HGX B200 datasheet, per GPU (1/8 of 36 PFLOPS BF16 with sparsity, half dense; 1.4 TB per 8 GPUs)",
        ),
        Gpu("l40s", 362, 91.6, 48, "NVIDIA L40S datasheet (BF16 733 TFLOPS with sparsity, 362 dense; 48 GB GDDR6)"),
        Gpu("l4", 121, 30.3, 24, "NVIDIA L4 datasheet (BF16 242 TFLOPS with sparsity, half dense; 24 GB)"),
        Gpu("mi300x", 1307, 163.4, 192, "AMD Instinct MI300X datasheet (BF16 1,307 TFLOPS dense; 192 GB HBM3)"),
    )
}
"""The cards `plan --gpu` knows (peak figures; memory as the datasheet names it, read as GiB)."""


def gpu_seconds(flops: int, gpu: Gpu, dtype: str, utilisation: float) -> float:
    """Seconds for `flops` on `gpu` at `utilisation` of its peak for `dtype` (fp32 runs without tensor cores)."""
    peak = gpu.fp32_tflops if DTYPE_BYTES.get(dtype, 4) >= 4 else gpu.half_tflops
    return flops / (peak * 1e12 * utilisation)


@functools.cache
def cpu_flops_per_second(dtype: str) -> float:
    """This machine's CPU matrix-product rate in `dtype`, measured now (once per process): the best of a few
    timed 1024 x 1024 products with torch's threads as a run would have them. An estimate of what a forward's
    matmuls reach; attention, the LM head's softmax and the harness's own work come on top."""
    import torch

    size = 1024
    torch_dtype = getattr(torch, dtype, torch.float32) if dtype in DTYPE_BYTES else torch.float32
    a, b = torch.randn(size, size).to(torch_dtype), torch.randn(size, size).to(torch_dtype)
    torch.matmul(a, b)  # warm-up
    best, spent = math.inf, 0.0
    while spent < 0.3 or best == math.inf:
        start = time.perf_counter()
        torch.matmul(a, b)
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
    return 2 * size**3 / best


def gpu_bytes(gpu: Gpu) -> int:
    return int(gpu.memory_gib * 2**30)


class VllmSettings(NamedTuple):
    """vLLM engine arguments that fit one sequence of the plan on a card, and what they need."""

    max_model_len: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    needed_bytes: int
    """Weights + one sequence's KV cache + one step's activations and logits."""
    fits: bool


def vllm_settings(shape: ModelShape, tokens: int, gpu: Gpu, prompt_logprobs: bool) -> VllmSettings:
    """Settings for running sequences of up to `tokens` tokens (prompt and generated) one at a time.

    `max_model_len` is the longest sequence plus the one token vLLM always generates. Each engine step
    runs up to `max_num_batched_tokens` positions (chunked prefill); with prompt log-probabilities
    (our `loglikelihood_accuracy`, the harness's `loglikelihood`) every one of them gets fp32 logits and log-probabilities over the
    vocabulary, so the step is chosen to keep those within `VLLM_LOGITS_SHARE` of the card (a
    multiple of 256, at least 256, at most `max_model_len`). `gpu_memory_utilization` covers
    weights, one sequence's KV cache and one step's activations and logits, plus 2 percentage
    points, and it fits when that stays within `VLLM_MAX_UTILISATION`.
    """
    max_model_len = tokens + 1
    memory = gpu_bytes(gpu)
    per_position_logits = 2 * shape.vocab * 4 if prompt_logprobs else 0
    if per_position_logits:
        step = int(VLLM_LOGITS_SHARE * memory) // per_position_logits // 256 * 256
    else:
        step = 8192
    step = max(256, min(step, -(-max_model_len // 256) * 256))
    needed = (
        shape.weights_bytes
        + kv_cache_bytes(shape, max_model_len)
        + shape.activation_bytes(step)
        + step * per_position_logits
    )
    utilisation = math.ceil(100 * needed / memory + 2) / 100
    return VllmSettings(
        max_model_len, step, min(utilisation, VLLM_MAX_UTILISATION), needed, utilisation <= VLLM_MAX_UTILISATION
    )


def tokenize_seconds(tokens: int) -> float:
    """CPU seconds to tokenize `tokens` tokens (see `TOKENIZE_TOKENS_PER_CPU_SECOND`)."""
    return tokens / TOKENIZE_TOKENS_PER_CPU_SECOND


def gib(n_bytes: float) -> str:
    """Bytes for people: "16.1 GiB", "512 MiB", "96 KiB"."""
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.1f} GiB"
    if n_bytes >= 2**20:
        return f"{n_bytes / 2**20:.0f} MiB"
    return f"{n_bytes / 2**10:.0f} KiB"


def flops_text(flops: float) -> str:
    """FLOPs for people: "3.2 PFLOP"; none is "0"."""
    if not flops:
        return "0"
    for scale, unit in ((1e18, "EFLOP"), (1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP")):
        if flops >= scale:
            return f"{flops / scale:.1f} {unit}"
    return f"{flops / 1e6:.1f} MFLOP"

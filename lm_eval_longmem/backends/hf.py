"""`HFLM.loglikelihood_accuracy`: exact, memory-flat teacher-forced token accuracy on `--model hf`.

The harness's `loglikelihood` runs the whole model and takes `log_softmax` over
`[batch, sequence, vocabulary]` logits: at 32k tokens and a 128k vocabulary that alone is
17-25 GB. Here the model *body* (`model.base_model`) runs once, and the LM head is applied only
at the scored positions, in chunks of positions sized so that one chunk's logits add at most
`cost.HEAD_MEMORY_SHARE` to what the body forward already needs (its weights and largest activations),
but never fewer than `cost.MIN_HEAD_CHUNK_BYTES` (`head_chunk_rows`); each chunk yields argmax hits and
log-probabilities and is dropped. Peak memory is the body's forward plus one chunk, whatever the
vocabulary and sequence length. Few large chunks beat many small ones: every chunk re-reads the
whole head matrix, and a matrix product of a few rows runs far below the machine's speed.

What the head adds beyond its matrix product is two passes over each chunk's logits: one max
reduction that settles the argmax hits (`_argmax_hits`, several times cheaper than an argmax on
CPU) and `log_softmax`, written in place over the logits (one buffer per chunk, not two).

The request type itself (inputs, outputs, worked token example) is specified in
`lm_eval_longmem.backends.request_type`.

Exactness. The head path reproduces the model's own final-logit transforms where we know them
(Gemma-style `final_logit_softcapping`, Granite `logits_scaling`, Cohere `logit_scale`) and,
before first use, checks itself against the model's own `forward` logits on a short probe. If
the model has no separable body/head or the check fails (an output transform we do not know),
the method falls back to the full-logits forward, which is exact but not memory-flat, and logs a
warning (the decision is made once per loaded model). Log-probabilities are computed in fp32 (or `softmax_dtype` when given).

Batching. Requests are sorted longest first. Each request runs right-padded to its own length
rounded up to `PAD_MULTIPLE` tokens, and a batch holds only requests of the same padded width.
No attention mask is needed: in a causal model no real token attends to the padding on its
right, and position ids start at 0 in every row. Why pad to a width that depends on the request
alone: PyTorch's CPU attention kernels block the key axis by the padded length, so the same row
padded to another width differs in the last bits of fp32 (measured: ~5e-7). What the batch size
still changes is the shape of each matrix product, and BLAS libraries (MKL/oneDNN on CPU, cuBLAS
on GPU) pick their blocking, and so the order of each sum, by shape and by machine. So across
batch sizes the accuracy bits are identical but for near-ties and summed log-probabilities agree
to fp32 rounding (measured ~2e-5 on SmolLM2-135M; the tests allow 1e-4), often bit for bit on a
given CPU, but that is not promised. `--batch_size N`
and `auto`/`auto:N` are honoured; `auto` probes this memory-flat path (not the harness's
full-logits one), never tries a size whose estimated peak (`common.cost`) exceeds the memory
available, decides from that estimate alone on CPU (`_auto_batch_size`), and under data
parallelism every rank takes the smallest size any rank found.

Shared prefixes. Requests whose inputs share a long common prefix (`prefix_groups`: the questions on one
excerpt, the answer choices of one question) are scored as a group when the model's cache allows it (`shares_prefixes`):
the body runs the prefix once with its KV cache, then each distinct suffix against that cache, cropped back
after each (`score_group`), so memory is one sequence's cache plus one suffix. The results agree with scoring
each request alone to fp32 rounding (other matrix shapes), whatever the batch size or which requests share the
list; which requests group depends on the request list alone.

Several devices. With `parallelize=True`, a `device_map` (GPU + CPU with `max_memory`, or offload)
or transformers' tensor parallelism (`tp_plan`), the inputs go to `self.device`, the hidden states
come out where the last layer runs, and the logits where the head runs. Positions are moved to the
hidden states, targets to the logits, and the head's chunk budget counts the weights resident on
the hidden states' device. Our direct matmul into a reused buffer is used only for a bare
`nn.Linear` head whose weight is an ordinary tensor on that device (`plain_head`); any other head,
hooked by accelerate (offloaded weights sit on "meta") or sharded by tensor parallelism, runs as
its module so those hooks apply.

Lengths. Nothing is truncated. By default a request whose model input (context plus all but the
last continuation token) exceeds `max_length` raises a ValueError, as a left-cut context would
silently change what is measured. A request that carries the option `beyond_max_length=True`
(see `request_type`) may run past `max_length` up to what the architecture can physically run:
any length for rotary/ALiBi models (memory permitting), the table size for learned absolute
position embeddings, and `max_length` for architectures we cannot classify.
"""

from __future__ import annotations

import gc
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from accelerate.utils import find_executable_batch_size
from tqdm import tqdm

from lm_eval_longmem.backends.request_type import (
    OUTPUT_TYPE,
    EncodedRequest,
    TokenAccuracy,
    check_token_range,
    encode_request,
    progress_label,
)
from lm_eval_longmem.common import cost
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import physical_max_length

if TYPE_CHECKING:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import PreTrainedModel

log = logging.getLogger(f"lm_eval.{__name__}")

PAD_MULTIPLE = 64
"""Every request runs at its length rounded up to a multiple of this (see `padded_width`)."""

MIN_SHARED_PREFIX = 256
"""Fewest leading input tokens requests must share to be scored as a group (`prefix_groups`)."""
SHARED_PREFIX_SHARE = 0.5
"""...and the least share of the group's longest input that prefix must be: below it a group saves little."""


def final_logit_transform(model: PreTrainedModel) -> Callable[[torch.Tensor], torch.Tensor]:
    """The post-LM-head transforms of the model families we know, in the order their forward applies them."""
    config = model.config.get_text_config()
    softcap = getattr(config, "final_logit_softcapping", None)
    scaling = getattr(config, "logits_scaling", None)
    scale = getattr(model, "logit_scale", None)

    def transform(logits: torch.Tensor) -> torch.Tensor:
        if scale is not None:
            logits = logits * scale
        if scaling is not None:
            logits = logits / scaling
        if softcap is not None:
            logits = logits / softcap
            logits = torch.tanh(logits)
            logits = logits * softcap
        return logits

    return transform


def _autocast(self: HFLM):
    return torch.autocast(
        device_type=self.device.type,
        dtype=self.mixed_precision_dtype,
        enabled=self.mixed_precision_dtype is not None,
    )


def uses_chunked_head(self: HFLM, probe: Sequence[int]) -> bool:
    """Whether the memory-flat body + head path reproduces this model's logits (decided once per model).

    Compares `final_logit_transform(head(body(x)))` with `model(x).logits` on the first 16 tokens
    of `probe`; the two run the same operations on the same shapes, so they agree to rounding
    unless the model applies an output transform we do not know.
    """
    decided = getattr(self, "_longmem_chunked_head", None)
    if decided is not None:
        return decided
    model = self.model
    body, head = model.base_model, model.get_output_embeddings()
    reason = "the model has no separate body and LM head"
    usable = body is not model and head is not None
    if usable:
        ids = torch.tensor([list(probe[:16])], dtype=torch.long, device=self.device)
        with torch.no_grad(), _autocast(self):
            reference = model(input_ids=ids, use_cache=False).logits.float()
            try:
                hidden = body(input_ids=ids, use_cache=False).last_hidden_state
                ours = final_logit_transform(model)(head(hidden)).float().to(reference.device)
            except (AttributeError, TypeError) as err:  # e.g. a wrapper whose base_model returns logits
                ours, reason = None, f"its base_model does not return hidden states ({err})"
        if ours is not None:
            tolerance = 4 * torch.finfo(model.dtype).eps * (1 + float(reference.abs().max()))
            usable = ours.shape == reference.shape and bool((ours - reference).abs().max() <= tolerance)
            reason = "its head output differs from the model's own logits (an output transform we do not know)"
        else:
            usable = False
    if not usable:
        log.warning(
            "%s: %s for %s; using the full-logits forward instead (exact, but memory grows with sequence x vocabulary)",
            OUTPUT_TYPE,
            reason,
            type(model).__name__,
        )
    self._longmem_chunked_head = usable
    return usable


def body_forward_bytes(self: HFLM, n_rows: int, device: torch.device | None = None) -> int:
    """Memory one body forward over `n_rows` positions needs on `device`: weights plus its largest activations.

    The activations are estimated from the config (`cost.activation_bytes`: a gated MLP's three
    intermediate-size tensors and about four hidden-size ones per position). Weights: those resident on `device`, the one
    that runs the LM head (of a model split over devices, only its share; offloaded weights sit on
    "meta" and are not counted), or all of them when `device` is None. Counted once per model and device.
    """
    counted = self.__dict__.setdefault("_longmem_weight_bytes", {})
    if device not in counted:
        counted[device] = sum(
            p.numel() * p.element_size() for p in self.model.parameters() if device is None or p.device == device
        )
    config = self.model.config.get_text_config()
    hidden = int(config.hidden_size)
    inner = int(getattr(config, "intermediate_size", None) or 4 * hidden)
    return counted[device] + cost.activation_bytes(n_rows, hidden, inner, torch.finfo(self.model.dtype).bits // 8)


def head_chunk_rows(
    self: HFLM,
    n_rows: int,
    vocab_size: int,
    dtype: torch.dtype,
    device: torch.device | None = None,
    logits_dtype: torch.dtype | None = None,
) -> int:
    """Positions per LM-head chunk on `device` (`cost.head_chunk_rows`: within `cost.HEAD_MEMORY_SHARE` of the
    body's need, or `cost.MIN_HEAD_CHUNK_BYTES`).

    A chunk holds one `[rows, vocabulary]` tensor in `dtype` (the log-probabilities are written over
    the logits) and, when the head's output `logits_dtype` differs (a bf16 model scored in fp32),
    the head's output beside it.
    """
    logits_itemsize = None if logits_dtype is None else torch.finfo(logits_dtype).bits // 8
    return cost.head_chunk_rows(
        body_forward_bytes(self, n_rows, device), vocab_size, torch.finfo(dtype).bits // 8, logits_itemsize
    )


def _argmax_hits(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`logits.argmax(-1) == target` for `[rows, vocabulary]` logits and `[rows, 1]` targets, by one max reduction.

    An argmax reduction carries an index along and runs several times slower than a plain max on
    CPU (measured: 5-10x on 49k-wide fp32 rows, one thread). The target is the argmax exactly when
    its logit is above every other token's, so the target's entry is set to -inf for one `amax`
    and restored. Where the target ties the best other token, or a NaN makes the comparison fail
    both ways, argmax's own rule (the first maximal index; NaN counts as the maximum) decides, on
    those rows only. The result is bit for bit that of `argmax`; `logits` is left as it was.
    """
    picked = logits.gather(-1, target)
    logits.scatter_(-1, target, float("-inf"))
    rival = logits.amax(dim=-1, keepdim=True)
    logits.scatter_(-1, target, picked)
    hits = picked > rival
    unsettled = (~hits & ~(picked < rival)).squeeze(-1)
    if bool(unsettled.any()):
        rows = unsettled.nonzero().squeeze(-1)
        hits[rows] = logits[rows].argmax(dim=-1, keepdim=True) == target[rows]
    return hits.squeeze(-1)


def _score_positions(
    logits_at: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    positions: torch.Tensor,
    targets: torch.Tensor,
    step: int,
    vocab_size: int,
    logits_dtype: torch.dtype | None,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmax hits and target log-probabilities at `positions`, `step` positions of logits at a time.

    `log_softmax` (not a hand-written log-sum-exp) because its kernel treats every row alike
    whatever the number of rows, so how positions fall into chunks never changes a result; a
    plain `sum` reduction may regroup its additions with the chunk's shape. It writes over the
    logits (in `dtype`), after `_argmax_hits` has read them.

    `positions` index the hidden states on their device; the logits may come out on another (a
    head placed on another device, or offloaded), where the targets meet them. `logits_at(index,
    out)` may write its logits into `out`, a `[len(index), vocabulary]` slice of one buffer in
    `logits_dtype` (None: it returns tensors of its own). Every chunk reuses the same buffers (the
    head's output, and the `dtype` copy when the two dtypes differ): fresh ones per chunk cost page
    faults each time and, once glibc serves blocks of that size from its heap, grow the process
    (measured on SmolLM2 at 2k tokens: 0.34 GB over the body's peak instead of the budget's 0.06 GB).
    """
    step = max(1, min(step, len(positions)))
    hits, logprobs = [], []
    logits_buffer = scores_buffer = None
    for start in range(0, len(positions), step):
        index = positions[start : start + step]
        if logits_buffer is None and logits_dtype is not None:
            logits_buffer = torch.empty((step, vocab_size), dtype=logits_dtype, device=positions.device)
        logits = logits_at(index, None if logits_buffer is None else logits_buffer[: len(index)])
        if logits.dtype != dtype:
            if scores_buffer is None:  # where the logits come out: a split model's head may sit on another device
                scores_buffer = torch.empty((step, logits.shape[-1]), dtype=dtype, device=logits.device)
            logits = scores_buffer[: len(index)].copy_(logits)
        target = targets[start : start + step].to(logits.device)[:, None]
        hits.append(_argmax_hits(logits, target))
        log_probs = torch.log_softmax(logits, dim=-1, out=logits)
        logprobs.append(log_probs.gather(-1, target).squeeze(-1))
        del logits, log_probs
    return torch.cat(hits).cpu(), torch.cat(logprobs).cpu()


def padded_width(n_inputs: int, max_length: int, physical: int | None) -> int:
    """The width a request of `n_inputs` positions runs at: rounded up to `PAD_MULTIPLE`, capped.

    The width depends on the request alone, never on its batch-mates, so every request goes
    through exactly the same computation whatever the batch size (see the module docstring).
    Padding never crosses `max_length` for a request within it (rotary variants such as dynamic
    NTK or LongRoPE switch behaviour past the window) nor the physical limit for one beyond it.
    """
    width = -(-n_inputs // PAD_MULTIPLE) * PAD_MULTIPLE
    cap = max_length if n_inputs <= max_length else physical
    return width if cap is None else max(n_inputs, min(width, cap))


def plain_head(head: torch.nn.Module, device: torch.device) -> bool:
    """Whether `head` is a bare `nn.Linear` we may multiply by directly: its weight an ordinary tensor on
    `device` (not offloaded to "meta", not a tensor-parallel shard) and no hook around its forward."""
    hooked = hasattr(head, "_hf_hook") or bool(head._forward_hooks) or bool(head._forward_pre_hooks)
    weight = head.weight if isinstance(head, torch.nn.Linear) else None
    return (
        type(head) is torch.nn.Linear
        and weight is not None
        and not hooked
        and type(weight.data) is torch.Tensor
        and weight.device == device
    )


def head_logits(
    self: HFLM, rows: torch.Tensor
) -> tuple[Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor], int, torch.dtype | None, torch.dtype]:
    """The LM head over hidden-state `rows` as `_score_positions` reads it: `(logits_at, vocabulary, logits dtype or
    None, the head's output dtype for the chunk budget)`."""
    model = self.model
    head, transform = model.get_output_embeddings(), final_logit_transform(model)
    # F.linear's own matmul, written into the chunk buffer: only for a plain Linear head whose
    # weight is an ordinary tensor beside the hidden states and which no hook wraps. Otherwise
    # the head runs as a module, so accelerate's offload hooks and tensor-parallel hooks apply.
    into_buffer = plain_head(head, rows.device) and self.mixed_precision_dtype is None
    # The head's output dtype (autocast: the autocast dtype), for the chunk budget.
    head_dtype = self.mixed_precision_dtype or getattr(head, "weight", rows).dtype
    logits_dtype = head.weight.dtype if into_buffer else None
    # A tensor-parallel shard holds part of the rows: the logits have the config's vocabulary.
    vocab_size = head.weight.shape[0] if into_buffer else model.config.get_text_config().vocab_size

    def logits_at(index: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        if out is None:
            return transform(head(rows[index]))
        if head.bias is None:
            return transform(torch.mm(rows[index], head.weight.t(), out=out))
        return transform(torch.addmm(head.bias, rows[index], head.weight.t(), out=out))

    return logits_at, vocab_size, logits_dtype, head_dtype


def score_batch(self: HFLM, batch: Sequence[EncodedRequest], width: int, chunked: bool) -> list[TokenAccuracy]:
    """One forward over `batch`, right-padded to `width`; scores every continuation token."""
    inputs = [req.context + req.continuation[:-1] for req in batch]
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    spans, targets = [], []
    for row, (seq, req) in enumerate(zip(inputs, batch, strict=True)):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        first = row * width + len(seq) - len(req.continuation)
        spans.append(torch.arange(first, first + len(req.continuation)))
        targets.extend(req.continuation)
    ids = ids.to(self.device)
    positions = torch.cat(spans)
    targets_t = torch.tensor(targets, dtype=torch.long)
    dtype = self.softmax_dtype or torch.float32
    model = self.model
    with torch.no_grad(), _autocast(self):
        if chunked:
            hidden = model.base_model(input_ids=ids, use_cache=False).last_hidden_state
            rows = hidden.reshape(-1, hidden.shape[-1])
            logits_at, vocab_size, logits_dtype, head_dtype = head_logits(self, rows)
        else:
            logits = model(input_ids=ids, use_cache=False).logits
            rows = logits.reshape(-1, logits.shape[-1])
            vocab_size, logits_dtype = rows.shape[-1], rows.dtype
            head_dtype = rows.dtype

            def logits_at(index: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
                return torch.index_select(rows, 0, index, out=out)

        positions = positions.to(rows.device)  # a split model's last layer need not be on self.device
        step = head_chunk_rows(self, ids.numel(), vocab_size, dtype, rows.device, head_dtype)
        hits, logprobs = _score_positions(logits_at, positions, targets_t, step, vocab_size, logits_dtype, dtype)
    results, start = [], 0
    for req in batch:
        end = start + len(req.continuation)
        bits = "".join("1" if hit else "0" for hit in hits[start:end].tolist())
        results.append(TokenAccuracy(bits, float(logprobs[start:end].double().sum())))
        start = end
    return results


def model_input(req: EncodedRequest) -> list[int]:
    """The tokens the model reads for `req`: its context and all but the last continuation token."""
    return req.context + req.continuation[:-1]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def prefix_groups(encoded: Sequence[EncodedRequest]) -> list[tuple[int, list[int]]]:
    """`(shared, members)` for every set of at least two requests whose inputs share their first `shared` tokens.

    Requests are sorted by their input tokens, so inputs with long common prefixes sit side by side, and a run
    of them forms a group while the prefix all share is at least `MIN_SHARED_PREFIX` tokens and
    `SHARED_PREFIX_SHARE` of the longest input. The prefix ends before every member's last context token, so
    each member's scored positions all lie in its own suffix. Which requests group depends on the request list
    only (not on the batch size); `members` are indices into `encoded`.
    """
    inputs = [np.asarray(model_input(req), dtype=np.int64) for req in encoded]
    order = sorted(range(len(encoded)), key=lambda i: tuple(inputs[i].tolist()))
    groups: list[tuple[int, list[int]]] = []
    members: list[int] = []
    shared = longest = 0
    for i in order:
        if members:
            joined = min(shared, common_prefix(inputs[members[-1]], inputs[i]), len(encoded[i].context) - 1)
            widest = max(longest, len(inputs[i]))
            if joined >= MIN_SHARED_PREFIX and joined >= SHARED_PREFIX_SHARE * widest:
                members.append(i)
                shared, longest = joined, widest
                continue
            if len(members) > 1:
                groups.append((shared, members))
        members, shared, longest = [i], len(encoded[i].context) - 1, len(inputs[i])
    if len(members) > 1:
        groups.append((shared, members))
    return groups


def shares_prefixes(self: HFLM, probe: Sequence[int]) -> bool:
    """Whether this model's body can run a prefix once and each suffix against its KV cache (decided once per model).

    Needs a cache of plain `DynamicLayer`s, which `crop` takes back to the prefix exactly; sliding-window or
    other layer kinds, or a body that takes no cache, score every request alone.
    """
    decided = getattr(self, "_longmem_shares_prefixes", None)
    if decided is not None:
        return decided
    ids = torch.tensor([list(probe[:2])], dtype=torch.long, device=self.device)
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer  # DynamicLayer: transformers >= 4.56

        with torch.no_grad(), _autocast(self):
            cache = self.model.base_model(input_ids=ids, use_cache=True).past_key_values
    except (ImportError, TypeError, ValueError) as err:
        log.info("%s: no shared-prefix scoring for %s (%s)", OUTPUT_TYPE, type(self.model).__name__, err)
        cache = None
    usable = (
        cache is not None
        and isinstance(cache, DynamicCache)
        and all(type(layer) is DynamicLayer for layer in cache.layers)
    )
    self._longmem_shares_prefixes = usable
    return usable


def score_group(self: HFLM, group: Sequence[EncodedRequest], shared: int) -> list[TokenAccuracy]:
    """Score requests whose inputs share their first `shared` tokens: the prefix once, each distinct suffix after it.

    The body runs the prefix once and keeps its KV cache; each distinct remainder (requests with the same model
    input, e.g. the labels of one trial, share one) runs against that cache, the chunked head reads its scored
    positions, and the cache is cropped back to the prefix. Memory: one prefix's cache plus one suffix.
    """
    by_suffix: dict[tuple[int, ...], list[int]] = {}
    for k, req in enumerate(group):
        by_suffix.setdefault(tuple(model_input(req)[shared:]), []).append(k)
    prefix = torch.tensor([group[0].context[:shared]], dtype=torch.long, device=self.device)
    dtype = self.softmax_dtype or torch.float32
    body = self.model.base_model
    # transformers 5 names the forward's cache argument `cache` (`past_key_values` deprecated); earlier ones the latter
    cache_arg = "cache" if "cache" in inspect.signature(body.forward).parameters else "past_key_values"
    results: list[TokenAccuracy | None] = [None] * len(group)
    with torch.no_grad(), _autocast(self):
        cache = body(input_ids=prefix, use_cache=True).past_key_values
        for suffix, members in by_suffix.items():
            ids = torch.tensor([suffix], dtype=torch.long, device=self.device)
            rows = body(input_ids=ids, use_cache=True, **{cache_arg: cache}).last_hidden_state[0]
            spans, targets = [], []
            for k in members:
                first = len(group[k].context) - 1 - shared
                spans.append(torch.arange(first, first + len(group[k].continuation)))
                targets.extend(group[k].continuation)
            logits_at, vocab_size, logits_dtype, head_dtype = head_logits(self, rows)
            step = head_chunk_rows(self, shared + len(suffix), vocab_size, dtype, rows.device, head_dtype)
            positions = torch.cat(spans).to(rows.device)
            hits, logprobs = _score_positions(
                logits_at, positions, torch.tensor(targets, dtype=torch.long), step, vocab_size, logits_dtype, dtype
            )
            cache.crop(-len(suffix))
            start = 0
            for k in members:
                end = start + len(group[k].continuation)
                bits = "".join("1" if hit else "0" for hit in hits[start:end].tolist())
                results[k] = TokenAccuracy(bits, float(logprobs[start:end].double().sum()))
                start = end
    return cast("list[TokenAccuracy]", results)


def check_lengths(self: HFLM, encoded: Sequence[EncodedRequest]) -> None:
    """Raise a ValueError, naming length and limit, for any request this model cannot run untruncated."""
    physical = None
    for i, req in enumerate(encoded):
        if req.n_inputs <= self.max_length:
            continue
        head = (
            f"{OUTPUT_TYPE} request {i}: context {len(req.context)} + continuation {len(req.continuation)} tokens"
            f" need {req.n_inputs} input positions"
        )
        if not req.beyond_max_length:
            raise ValueError(
                f"{head}, more than max_length={self.max_length} of this model. Nothing is truncated: shorten"
                " the request, raise max_length in --model_args, or let the task ask for"
                " beyond_max_length (see lm_eval_longmem.backends.request_type)"
            )
        physical = physical or physical_max_length(self.model, self.max_length)
        if physical.tokens is not None and req.n_inputs > physical.tokens:
            raise ValueError(f"{head}, more than this model can run at all: {physical.reason}")


AUTO_MEMORY_SHARE = 0.60
"""Share of the memory available when `--batch_size auto` starts that a batch's estimated memory may take.
The margin is wide: on CPU glibc's heap can hold the process's resident memory well above the
estimate of the tensors (up to 1.8x measured at 1k-4k positions, `common/cost.py`), and other
processes may take memory meanwhile."""


def available_bytes(device: torch.device) -> int | None:
    """Memory free for a batch on `device` now: MemAvailable on CPU (psutil), free memory on CUDA; None elsewhere."""
    if device.type == "cpu":
        import psutil

        return int(psutil.virtual_memory().available)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return None


def trial_forwards(device: torch.device) -> bool:
    """Whether `--batch_size auto` may find its size by running it: only where running out of memory raises.

    On CPU it does not (the system swaps, or kills the process), and a trial forward of a long
    request costs as much as the work itself, so there the memory estimate alone decides.
    """
    return device.type != "cpu"


def largest_batch(extra_bytes: Callable[[int], int], budget: int, most: int) -> int:
    """The largest size in 1..`most` whose `extra_bytes` (growing with the size) stays within `budget`; 0 if none."""
    low, high = 0, most
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if extra_bytes(mid) <= budget else (low, mid - 1)
    return low


def batch_size_cap(self: HFLM, positions: int, extra_bytes: Callable[[int], int], what: str) -> int:
    """The largest batch `--batch_size auto` may try: none whose estimated peak exceeds the memory available.

    `extra_bytes(size)` is the estimated memory a batch of `size` sequences of `positions` positions
    needs beyond the loaded weights (`common.cost`); it may take `AUTO_MEMORY_SHARE` of the memory
    available (on CPU, of this rank's share of it). Logs what it decided, once per call; raises a
    `UsageError` naming `--batch_size 1` when not even one sequence fits the estimate.
    """
    available = available_bytes(self.device)
    if available is None:
        log.info(
            "--batch_size auto (%s): no memory figure for %s; probing from %d as the harness does",
            what,
            self.device,
            self.max_batch_size,
        )
        return self.max_batch_size
    if self.device.type == "cpu":  # data-parallel ranks on CPU share the machine's memory
        available //= max(1, self.world_size)
    size = largest_batch(extra_bytes, int(AUTO_MEMORY_SHARE * available), self.max_batch_size)
    one = cost.gib(extra_bytes(1))
    if size == 0:
        raise UsageError(
            f"--batch_size auto ({what}): one sequence of {positions} positions is estimated to need {one} beyond the "
            f"model's weights, more than {AUTO_MEMORY_SHARE:.0%} of the {cost.gib(available)} available on {self.device}: "
            "free memory or run shorter lengths, or pass --batch_size 1 to run it anyway"
        )
    how = (
        f"trying sizes from {size} down"
        if trial_forwards(self.device)
        else f"using {size}, from the estimate alone (no trial run on CPU)"
    )
    log.info(
        "--batch_size auto (%s): %d positions per sequence need about %s each beyond the weights; %s available on %s: %s",
        what, positions, one, cost.gib(available), self.device, how,
    )  # fmt: skip
    return size


def accuracy_extra_bytes(self: HFLM, rows: int, chunked: bool) -> int:
    """Estimated memory `score_batch` needs over `rows` positions beyond the weights on the device.

    The larger of the body's activations and what comes after the body has freed them: its output
    hidden states, one LM-head chunk and, when the model runs without the chunked head, the full
    logits (`cost.hf_peak` for the same estimate from a config).
    """
    weights = body_forward_bytes(self, 0, self.device)
    body = body_forward_bytes(self, rows, self.device)
    config = self.model.config.get_text_config()
    itemsize = torch.finfo(self.model.dtype).bits // 8
    softmax_itemsize = torch.finfo(self.softmax_dtype or torch.float32).bits // 8
    after = rows * int(config.hidden_size) * itemsize + cost.head_chunk_bytes(
        body, config.vocab_size, softmax_itemsize, positions=rows
    )
    if not chunked:
        after += rows * config.vocab_size * itemsize
    return max(body - weights, after)


def stock_batch_size(self: HFLM, positions: int) -> tuple[int, bool]:
    """For the harness's own `--batch_size auto` probe (`harness.models.install_batch_probe_cap`): (largest size to
    try, whether it is the answer without a trial, as on CPU). The probe runs full-vocabulary logits
    and their `log_softmax` at every position (`cost.hf_peak` of `loglikelihood`)."""
    try:
        shape = cost.ModelShape.from_config(self.model.config, dtype=str(self.model.dtype))
    except ValueError as err:  # not a transformer decoder we can size: the harness probes as before
        log.info("--batch_size auto: no memory estimate for this model (%s)", err)
        return self.max_batch_size, False

    def extra_bytes(size: int) -> int:
        return cost.hf_peak(shape, "loglikelihood", positions, batch=size).total - shape.weights_bytes

    return batch_size_cap(self, positions, extra_bytes, "the harness's full-logits probe"), not trial_forwards(
        self.device
    )


def _auto_batch_size(self: HFLM, longest: EncodedRequest, width: int, chunked: bool) -> int:
    """Largest batch of `longest` that our memory-flat path runs within memory.

    No size whose estimated peak exceeds the memory available is tried (`batch_size_cap`). On CPU
    the cap is the answer (`trial_forwards`); on an accelerator the sizes from the cap down are
    tried, halving on out-of-memory, as the harness does.
    """
    cap = batch_size_cap(self, width, lambda size: accuracy_extra_bytes(self, size * width, chunked), OUTPUT_TYPE)

    @find_executable_batch_size(starting_batch_size=cap)
    def probe(batch_size: int) -> int:
        score_batch(self, [longest] * batch_size, width, chunked)
        return batch_size

    try:
        batch_size = probe() if trial_forwards(self.device) else cap
    except RuntimeError as err:
        if "No executable batch size found" not in str(err):
            raise
        batch_size = 1
    if self.world_size > 1:
        gathered = self.all_gather(torch.tensor([batch_size], device=self.device))
        batch_size = int(gathered.min())
    gc.collect()  # the probe's tensors, before the real batches (as the harness clears after its own probe)
    torch.cuda.empty_cache()
    return batch_size


def _batches(self: HFLM, order: list[int], widths: list[int], encoded: Sequence[EncodedRequest], chunked: bool):
    """Consecutive runs of `order` with one width each, at most the (fixed or auto) batch size long.

    With `auto:N` the size is measured N times along the descending lengths, as the harness does;
    all measurements happen up front, so every data-parallel rank (whose request lists the harness
    pads to equal length) joins the same number of collective calls.
    """
    if self.batch_size == "auto":
        segment = max(1, int(len(order) / self.batch_schedule))
        sizes = {
            pos // segment: _auto_batch_size(self, encoded[order[pos]], widths[order[pos]], chunked)
            for pos in range(0, len(order), segment)
        }
    pos = 0
    while pos < len(order):
        size = sizes[pos // segment] if self.batch_size == "auto" else int(self.batch_size)
        end = pos + 1
        while end < len(order) and end - pos < size and widths[order[end]] == widths[order[pos]]:
            end += 1
        yield order[pos:end]
        pos = end


def loglikelihood_accuracy(self: HFLM, requests: list[Instance], disable_tqdm: bool = False) -> list[TokenAccuracy]:
    """Teacher-forced per-token greedy accuracy and summed log-probability of each continuation.

    Args:
        requests: Instances whose ``args`` are ``(context, continuation)`` or ``(context,
            continuation, {"beyond_max_length": bool})``; context and continuation are strings
            (encoded as for ``loglikelihood``) or token-id lists (used verbatim).
        disable_tqdm: Hide the progress bar.

    Returns:
        One ``TokenAccuracy(bits, logprob)`` per request, in request order: ``bits`` holds '1'
        where the argmax of the next-token distribution equals the continuation token.

    Example::

        context=[bos a b], continuation=[c d e]  ->  one forward over [bos a b c d];
        argmax at b vs c, at c vs d, at d vs e   ->  TokenAccuracy("101", logprob)

    Raises:
        ValueError: a request longer than the model can run (see `check_lengths`), an empty
            continuation, or a token id outside the vocabulary.
        NotImplementedError: a seq2seq model.
    """
    if self.backend != "causal":
        raise NotImplementedError(f"{OUTPUT_TYPE} needs a causal (decoder-only) model; this one is {self.backend}")
    encoded = [encode_request(self, req.args) for req in requests]
    if not encoded:
        return []
    check_token_range(encoded, self.model.get_input_embeddings().num_embeddings)
    check_lengths(self, encoded)
    longest = max(encoded, key=lambda req: req.n_inputs)
    chunked = uses_chunked_head(self, longest.context + longest.continuation)
    physical = physical_max_length(self.model, self.max_length).tokens
    widths = [padded_width(req.n_inputs, self.max_length, physical) for req in encoded]
    probe = longest.context + longest.continuation
    # `--batch_size auto` under data parallelism probes the batch size in collective calls, one per segment of the
    # batched requests, so every rank must batch as many requests: no groups (a rank's share of grouped requests
    # differs), and the ranks' lists padded to the longest (the harness pads a multiple-choice task's requests
    # under `loglikelihood`, not under `loglikelihood_accuracy`).
    collective = self.world_size > 1 and self.batch_size == "auto"
    groups = prefix_groups(encoded) if chunked and not collective and shares_prefixes(self, probe) else []
    grouped = {i for _, members in groups for i in members}
    order = sorted((i for i in range(len(encoded)) if i not in grouped), key=lambda i: -encoded[i].n_inputs)
    if collective:
        most = int(self.all_gather(torch.tensor([len(order)], device=self.device)).max())
        order += [order[-1]] * (most - len(order))  # scored again, the same answer written twice

    results: list[TokenAccuracy | None] = [None] * len(encoded)
    with tqdm(
        total=sum(req.n_tokens for req in encoded),
        unit="tok",
        unit_scale=True,
        disable=disable_tqdm or self.rank != 0,
        desc=progress_label(requests, encoded),
    ) as pbar:  # fmt: skip (closed, its line ended, also when a request fails or the run is interrupted)
        for shared, members in groups:
            for i, answer in zip(members, score_group(self, [encoded[i] for i in members], shared), strict=True):
                results[i] = answer
                self.cache_hook.add_partial(OUTPUT_TYPE, requests[i].args, answer)
            pbar.update(sum(encoded[i].n_tokens for i in members))
        done: set[int] = set()  # a request scored twice (the padding of a rank's share, above) counts once
        for batch in _batches(self, order, widths, encoded, chunked):
            answers = score_batch(self, [encoded[i] for i in batch], widths[batch[0]], chunked)
            for i, answer in zip(batch, answers, strict=True):
                results[i] = answer
                self.cache_hook.add_partial(OUTPUT_TYPE, requests[i].args, answer)
            pbar.update(sum(encoded[i].n_tokens for i in set(batch) - done))
            done.update(batch)
    return cast("list[TokenAccuracy]", results)  # every index was filled by its batch

"""`VLLM.loglikelihood_accuracy` through vLLM's prompt logprobs, and the pure parser of its output.

For each request we send `context + continuation` as a token prompt with
``SamplingParams(prompt_logprobs=0, max_tokens=1, temperature=0, detokenize=False)`` (and
``flat_logprobs=True`` where vLLM has it). ``prompt_logprobs=0`` asks for no top-k list at all:
vLLM still returns, at every prompt position, the actual prompt token with its logprob and its
rank in the vocabulary, and rank 1 means the model's greedy choice is that token. That is all
this request type needs, so no top-k is sorted or shipped back.

Shape of what vLLM returns (vllm/logprobs.py, vllm/outputs.py, checked against vLLM 0.33):
``RequestOutput.prompt_logprobs`` is either a ``list[dict[int, Logprob] | None]`` or a
``FlatLogprobs`` (parallel lists ``token_ids``, ``logprobs``, ``ranks`` with
``start_indices``/``end_indices`` per position). Entry 0 is empty (``None``), because the first
prompt token has nothing before it; entry ``i`` holds the distribution that predicted prompt
token ``i``. ``Logprob`` has ``logprob: float``, ``rank: int | None`` and
``decoded_token: str | None``; vLLM computes the rank as the number of vocabulary entries whose
logprob is ``>=`` the token's own (vllm/v1/sample/ops/logprobs.py), so a tie at the top gives
rank 2.

Lengths: vLLM must fit the prompt plus the one generated token in its ``max_model_len``, so a
request may have at most ``max_length - 1`` tokens in total (the harness's `loglikelihood` uses
the same bound). The engine cannot run past ``max_model_len`` at all, so the request option
``beyond_max_length`` cannot help here: start vLLM with a larger ``max_model_len`` (beyond the
config's window vLLM also wants ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``). Too long a request is a
ValueError, never a left-cut prompt.

Prefix cache. With prefix caching on (vLLM's default in its V1 engine), a request may take the KV
of its prompt's first blocks from an earlier request, computed in another batch; its prompt
logprobs can then depend on the order of the requests (vLLM issue #42019). Our requests set
``skip_reading_prefix_cache=True``: each computes every position itself, so its scores do not
depend on what ran before (what it writes to the cache cannot change its own scores). A vLLM
without that switch gets a warning to start it with ``enable_prefix_caching=False``.

Data and tensor parallelism are those of the harness: requests go through
``VLLM._model_generate``, which spreads them over ``data_parallel_size`` replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, encode_request, progress_label
from lm_eval_longmem.harness.models import vllm_generate

if TYPE_CHECKING:
    from lm_eval.api.instance import Instance
    from lm_eval.models.vllm_causallms import VLLM

log = logging.getLogger(f"lm_eval.{__name__}")


def parse_prompt_logprobs(prompt_logprobs: Any, tokens: Sequence[int], n_context: int) -> TokenAccuracy:
    """Bits and summed logprob of `tokens[n_context:]` from a vLLM ``RequestOutput.prompt_logprobs``.

    Args:
        prompt_logprobs: ``list[dict[int, Logprob] | None]`` or ``FlatLogprobs``, one entry per
            prompt token (entry 0 empty).
        tokens: The prompt token ids, context then continuation.
        n_context: How many leading tokens are context (at least 1).

    Raises:
        ValueError: the output does not cover the prompt, lacks a continuation token, or has no rank.
    """
    if len(prompt_logprobs) != len(tokens):
        raise ValueError(f"vLLM returned prompt logprobs for {len(prompt_logprobs)} positions, expected {len(tokens)}")
    flat = hasattr(prompt_logprobs, "start_indices")
    bits, total = [], 0.0
    for pos in range(n_context, len(tokens)):
        token = tokens[pos]
        if flat:  # FlatLogprobs: read the parallel lists, no per-position dict is built
            span = range(prompt_logprobs.start_indices[pos], prompt_logprobs.end_indices[pos])
            j = next((j for j in span if prompt_logprobs.token_ids[j] == token), None)
            logprob, rank = (None, None) if j is None else (prompt_logprobs.logprobs[j], prompt_logprobs.ranks[j])
        else:
            entry = (prompt_logprobs[pos] or {}).get(token)
            logprob, rank = (None, None) if entry is None else (entry.logprob, entry.rank)
        if logprob is None or rank is None:
            raise ValueError(f"vLLM returned no logprob/rank for prompt token {token} at position {pos}")
        bits.append("1" if rank == 1 else "0")
        total += logprob
    return TokenAccuracy("".join(bits), total)


def _sampling_params():
    """Our scoring parameters; every request reads nothing from vLLM's prefix cache (see the module docstring)."""
    from vllm import SamplingParams

    settings = dict(temperature=0, prompt_logprobs=0, max_tokens=1, detokenize=False)
    for extra in (dict(flat_logprobs=True, skip_reading_prefix_cache=True), dict(flat_logprobs=True)):
        try:
            params = SamplingParams(**settings, **extra)
            break
        except TypeError:  # an older vLLM: without the per-request cache switch, or before FlatLogprobs (< 0.11)
            continue
    else:
        params = SamplingParams(**settings)
    if getattr(params, "skip_reading_prefix_cache", None) is not True:
        log.warning(
            "%s: this vLLM cannot keep a request from reading its prefix cache; start it with"
            " enable_prefix_caching=False in --model_args so scores cannot depend on the order of requests",
            OUTPUT_TYPE,
        )
    return params


def loglikelihood_accuracy(self: VLLM, requests: list[Instance], disable_tqdm: bool = False) -> list[TokenAccuracy]:
    """Teacher-forced per-token greedy accuracy and summed log-probability of each continuation.

    Same contract as the HF backend (`lm_eval_longmem.backends.request_type`): ``args`` are
    ``(context, continuation[, options])``, strings or token-id lists; one
    ``TokenAccuracy(bits, logprob)`` per request comes back, in request order.

    Example::

        context=[bos a b], continuation=[c d e]  ->  prompt [bos a b c d e], prompt_logprobs=0;
        ranks at c, d, e = 1, 4, 1               ->  TokenAccuracy("101", lp(c) + lp(d) + lp(e))

    Raises:
        ValueError: a request of more than ``max_length - 1`` tokens (vLLM's engine limit).
    """
    encoded = [encode_request(self, req.args) for req in requests]
    limit = self.max_length - 1
    for i, req in enumerate(encoded):
        total = len(req.context) + len(req.continuation)
        if total > limit:
            raise ValueError(
                f"{OUTPUT_TYPE} request {i}: context {len(req.context)} + continuation {len(req.continuation)}"
                f" = {total} tokens, more than vLLM can score with max_model_len={self.max_length} (at most"
                f" {limit}: one slot is kept for the generated token). Nothing is truncated: start vLLM with"
                " max_model_len larger (and VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 beyond the model's configured window)"
            )
    longest_first = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].context) - len(encoded[i].continuation))
    size = int(self.batch_size) if self.batch_size != "auto" else 0
    step = size or max(1, len(encoded))  # 0 ("auto"): one batch of all, which vLLM schedules itself
    batches = [longest_first[s : s + step] for s in range(0, len(encoded), step)]
    params = _sampling_params()
    answers: dict[int, TokenAccuracy] = {}
    with tqdm(
        total=sum(req.n_tokens for req in encoded),
        unit="tok",
        unit_scale=True,
        disable=disable_tqdm,
        desc=progress_label(requests, encoded),
    ) as pbar:  # fmt: skip (closed, its line ended, also when a request fails or the run is interrupted)
        for chunk in batches:
            prompts = [encoded[i].context + encoded[i].continuation for i in chunk]
            outputs = vllm_generate(self, prompts, params)
            for i, prompt, output in zip(chunk, prompts, outputs, strict=True):
                answer = parse_prompt_logprobs(output.prompt_logprobs, prompt, len(encoded[i].context))
                answers[i] = answer
                self.cache_hook.add_partial(OUTPUT_TYPE, requests[i].args, answer)
            pbar.update(sum(len(prompt) for prompt in prompts))
    return [answers[i] for i in range(len(encoded))]

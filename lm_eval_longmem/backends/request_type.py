"""The `loglikelihood_accuracy` request type: what a request holds, what comes back, how it is encoded.

Teacher-forced, per-token greedy accuracy of a continuation given a context: the model reads
`context + continuation[:-1]` in one forward pass, and at every continuation position we ask
whether the argmax of its next-token distribution is the true next token.

Request (``Instance.args``)
    ``(context, continuation)`` or ``(context, continuation, options)``.

    * ``context`` / ``continuation``: a string, or a list of token ids. Token-id lists are used
      verbatim (no BOS added, no re-tokenisation). Two strings are encoded exactly as the harness
      encodes ``loglikelihood`` requests (``TemplateLM.loglikelihood``: trailing spaces of the
      context move to the continuation, the pair is encoded whole and split, an empty context
      becomes the prefix token). A string next to a token list is encoded on its own: a string
      context with the tokenizer's usual special tokens, a string continuation without.
    * ``options``: optional dict; the only key is ``"beyond_max_length": bool`` (default False).
      Without it a request whose model input is longer than the backend's ``max_length`` is an
      error. With it the HF backend runs any length the architecture can physically run (rotary
      or ALiBi models: any length that fits in memory; learned position tables: their size), so
      a task can measure memory past a model's claimed window. Nothing is ever
      truncated: a request that cannot run is a ``ValueError`` naming its length and the limit.

Response
    ``TokenAccuracy(bits, logprob)``, a tuple ``(str, float)``: ``bits`` has one character per
    continuation token, ``'1'`` where the model's argmax equals that token, else ``'0'``;
    ``logprob`` is the summed log-probability of the continuation (the number
    ``loglikelihood`` returns for the same pair). Responses come back in request order.

Worked example::

    context      = [bos, a, b]          continuation = [c, d, e]
    model input  = [bos, a, b, c, d]    (the last continuation token is never read)
    positions       0    1  2  3  4
    scored at          b→c  c→d  d→e    (positions 2, 3, 4 predict c, d, e)
    argmax         ...   c    x    e
    bits          = "101"
    logprob       = log p(c|bos a b) + log p(d|bos a b c) + log p(e|bos a b c d)

Compared with ``loglikelihood``, which answers ``(logprob, all_greedy)``, ``all_greedy ==
(bits == "1" * len(bits))`` and ``bits.count("1") / len(bits)`` is the token accuracy.

Ties: the HF backend takes ``torch.argmax`` (the lowest token id among exactly equal maxima);
vLLM reports a token's rank as the number of vocabulary entries whose logprob is ``>=`` its own,
so an exact tie at the top counts as ``'0'`` there. Exact ties are vanishingly rare in fp32 and
uncommon but possible in bf16.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from lm_eval_longmem.harness.models import encode_text_pair

if TYPE_CHECKING:
    from lm_eval.api.model import TemplateLM

OUTPUT_TYPE = "loglikelihood_accuracy"
"""The request type name: `output_type` in task configs, `Instance.request_type`, LM method name."""

BEYOND_MAX_LENGTH = "beyond_max_length"
"""The one key a request's optional options dict may carry."""


class TokenAccuracy(NamedTuple):
    """The response to one `loglikelihood_accuracy` request."""

    bits: str
    """One '0'/'1' per continuation token: '1' where the model's argmax is that token."""
    logprob: float
    """Summed log-probability of the continuation given the context."""


class TokenIds(list):
    """A list of token ids that the harness's sample logger can hash.

    lm-eval's evaluator hashes every request's first argument with ``hash_string(arg)``, which
    calls ``arg.encode("utf-8")``; a plain list would crash `--log_samples`. This subclass adds
    that one method (the UTF-8 of its JSON) and is otherwise a plain ``list[int]``: JSON, pickle
    and the `--use_cache` key see an ordinary list.
    """

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        """The JSON text of the ids, encoded (what `lm_eval.utils.hash_string` hashes)."""
        return json.dumps(list(self)).encode(encoding, errors)


class EncodedRequest(NamedTuple):
    """A request reduced to token ids, ready for a backend."""

    context: list[int]
    """Tokens the model reads before the continuation (at least one)."""
    continuation: list[int]
    """Tokens that are scored (at least one)."""
    beyond_max_length: bool
    """Whether the caller allowed inputs longer than the backend's configured max_length."""

    @property
    def n_inputs(self) -> int:
        """Positions the model runs: context plus all but the last continuation token."""
        return len(self.context) + len(self.continuation) - 1

    @property
    def n_tokens(self) -> int:
        """Tokens of the request, context and continuation: what each task's cost line counts as its input tokens."""
        return len(self.context) + len(self.continuation)


def progress_label(requests: Sequence[Any], encoded: Sequence[EncodedRequest]) -> str:
    """The progress bar's label: it counts input tokens (`EncodedRequest.n_tokens`), of every task whose requests the
    harness handed over together, each task's share named as its cost line names it ("... input tokens of task_a 21,616 + task_b
    46,900").
    A count of requests would show a wrong rate and ETA, since the longest requests run first."""
    shares: dict[str, int] = {}
    for request, tokens in zip(requests, encoded, strict=True):
        task = str(getattr(request, "task_name", None) or "requests")
        shares[task] = shares.get(task, 0) + tokens.n_tokens
    return f"Running {OUTPUT_TYPE} requests, input tokens of " + " + ".join(
        f"{task} {n:,}" for task, n in shares.items()
    )


def as_loglikelihood(answer: Sequence) -> tuple[float, bool]:
    """A `TokenAccuracy` as the harness's `loglikelihood` answers the same pair: ``(logprob, all_greedy)``.

    A task that sends its `multiple_choice` requests as `loglikelihood_accuracy` (to score prompts given
    as exact token ids) stores these in `resps`, so its metrics and logged samples keep the stock shape.
    """
    bits, logprob = answer
    return float(logprob), set(bits) == {"1"}


def compact_ids(ids: object) -> object:
    """A short stand-in for a token-id argument in the logged samples: its length and a digest (strings pass).

    The harness logs every request's arguments verbatim; a task whose docs already say which tokens
    were sent replaces them with this after the model has answered (its `apply_filters`).
    """
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        return ids
    digest = hashlib.sha256(json.dumps([int(t) for t in ids]).encode("utf-8")).hexdigest()[:16]
    return f"<{len(ids)} token ids sha256:{digest}>"


def as_token_ids(tokens: Sequence[int]) -> TokenIds:
    """`tokens` as `TokenIds` of plain Python ints (numpy ints would break JSON cache keys)."""
    return TokenIds(int(t) for t in tokens)


def _options(args: tuple) -> bool:
    if len(args) == 2:
        return False
    if len(args) != 3 or not isinstance(args[2], dict):
        raise ValueError(
            f"a {OUTPUT_TYPE} request is (context, continuation) or (context, continuation, options);"
            f" got {len(args)} arguments"
        )
    unknown = set(args[2]) - {BEYOND_MAX_LENGTH}
    if unknown:
        raise ValueError(f"unknown {OUTPUT_TYPE} option(s) {sorted(unknown)}; the only option is {BEYOND_MAX_LENGTH!r}")
    return bool(args[2].get(BEYOND_MAX_LENGTH, False))


def encode_request(lm: TemplateLM, args: tuple) -> EncodedRequest:
    """Token ids for one request's `(context, continuation[, options])`, encoded like `loglikelihood`.

    Raises:
        ValueError: empty continuation, empty token-id context, or malformed options.
        TypeError: an argument that is neither a string nor a sequence of ints.
    """
    context, continuation = args[0], args[1]
    beyond = _options(args)
    for name, value in (("context", context), ("continuation", continuation)):
        if not isinstance(value, (str, Sequence)):
            raise TypeError(f"{OUTPUT_TYPE} {name} must be a string or a list of token ids, got {type(value).__name__}")
    if isinstance(context, str) and isinstance(continuation, str):
        # As TemplateLM.loglikelihood encodes them (an empty context: the prefix token, BOS/EOS, instead).
        ctx, cont = encode_text_pair(lm, context, continuation)
    else:
        ctx = lm.tok_encode(context) if isinstance(context, str) else [int(t) for t in context]
        cont = (
            lm.tok_encode(continuation, add_special_tokens=False)
            if isinstance(continuation, str)
            else [int(t) for t in continuation]
        )
    if not cont:
        raise ValueError(f"{OUTPUT_TYPE}: the continuation has no tokens; there is nothing to score")
    if not ctx:
        raise ValueError(
            f"{OUTPUT_TYPE}: the context has no tokens, so the first continuation token has nothing to be"
            " predicted from; start token-id contexts with a token such as BOS"
        )
    return EncodedRequest(list(ctx), list(cont), beyond)


def check_token_range(encoded: Sequence[EncodedRequest], vocab_size: int) -> None:
    """Raise a clear ValueError if a token id falls outside the model's embedding table."""
    for i, req in enumerate(encoded):
        low, high = min(min(req.context), min(req.continuation)), max(max(req.context), max(req.continuation))
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"{OUTPUT_TYPE} request {i}: token id {bad} is outside the model's vocabulary [0, {vocab_size})"
            )

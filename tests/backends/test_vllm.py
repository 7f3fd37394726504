"""vLLM backend: the prompt-logprobs parser on outputs shaped like vLLM's, and the method around it.

These run in every venv: where vLLM is not installed (the main test venv; vLLM pins its own
transformers), the structures below copy the fields of vLLM's own (`vllm/logprobs.py` @ 0.33:
`Logprob`, `FlatLogprobs`; `RequestOutput.prompt_logprobs`); the real classes are used instead
whenever vLLM is importable. The real engine is exercised in `test_vllm_engine.py` (CI's
`.ci/vllm` stage, on vLLM's CPU build).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from kit import RecordingBar
from lm_eval.api.instance import Instance

from lm_eval_longmem.backends import vllm as vllm_backend
from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy
from lm_eval_longmem.backends.vllm import parse_prompt_logprobs

try:
    from vllm.logprobs import FlatLogprobs, Logprob
except ImportError:

    @dataclass
    class Logprob:  # fields of vllm.logprobs.Logprob
        logprob: float
        rank: int | None = None
        decoded_token: str | None = None

    @dataclass
    class FlatLogprobs:  # fields of vllm.logprobs.FlatLogprobs, filled the way its append() does
        start_indices: list[int] = field(default_factory=list)
        end_indices: list[int] = field(default_factory=list)
        token_ids: list[int] = field(default_factory=list)
        logprobs: list[float] = field(default_factory=list)
        ranks: list[int | None] = field(default_factory=list)
        decoded_tokens: list[str | None] = field(default_factory=list)

        def append(self, position: dict[int, Logprob] | None) -> None:
            self.start_indices.append(len(self.logprobs))
            for token_id, lp in (position or {}).items():
                self.token_ids.append(token_id)
                self.logprobs.append(lp.logprob)
                self.ranks.append(lp.rank)
                self.decoded_tokens.append(lp.decoded_token)
            self.end_indices.append(len(self.logprobs))

        def __len__(self) -> int:
            return len(self.start_indices)


# prompt [bos=1, 5, 6, 7, 8]: context [1, 5], continuation [6, 7, 8]
TOKENS = [1, 5, 6, 7, 8]
RANKS = {1: 3, 2: 1, 3: 2, 4: 1}  # rank of the actual token at each position after the first
LOGPROBS = {1: -2.5, 2: -0.1, 3: -1.2, 4: -0.3}
TOP1 = {1: (9, -0.4), 3: (9, -0.7)}  # where the actual token is not the argmax, what is


def positions(top_k: int) -> list[dict[int, Logprob] | None]:
    """Per-position dicts as vLLM builds them: the actual token first, then the top-k (rank 1..k)."""
    out: list[dict[int, Logprob] | None] = [None]
    for pos in range(1, len(TOKENS)):
        entry = {TOKENS[pos]: Logprob(LOGPROBS[pos], RANKS[pos], None)}
        if top_k:
            top_id, top_lp = TOP1.get(pos, (TOKENS[pos], LOGPROBS[pos]))
            entry[top_id] = Logprob(top_lp, 1, None)
        out.append(entry)
    return out


def flat(top_k: int) -> FlatLogprobs:
    container = FlatLogprobs()
    for entry in positions(top_k):
        container.append(entry)
    return container


@pytest.mark.parametrize("shape", ["list", "flat"])
@pytest.mark.parametrize("top_k", [0, 1])
def test_parse_prompt_logprobs(shape, top_k):
    output = positions(top_k) if shape == "list" else flat(top_k)
    got = parse_prompt_logprobs(output, TOKENS, n_context=2)
    assert got.bits == "101"  # ranks 1, 2, 1 at the continuation positions
    assert got.logprob == pytest.approx(-0.1 - 1.2 - 0.3)
    whole = parse_prompt_logprobs(output, TOKENS, n_context=1)
    assert whole.bits == "0101" and whole.logprob == pytest.approx(sum(LOGPROBS.values()))


def test_parse_rejects_outputs_that_do_not_fit_the_prompt():
    with pytest.raises(ValueError, match="for 4 positions, expected 5"):
        parse_prompt_logprobs(positions(0)[:-1], TOKENS, n_context=2)
    broken = positions(0)
    broken[3] = {99: Logprob(-1.0, 1, None)}  # the actual token is missing
    with pytest.raises(ValueError, match="no logprob/rank for prompt token 7 at position 3"):
        parse_prompt_logprobs(broken, TOKENS, n_context=2)
    no_rank = positions(0)
    no_rank[4] = {8: Logprob(-0.3, None, None)}
    with pytest.raises(ValueError, match="position 4"):
        parse_prompt_logprobs(no_rank, TOKENS, n_context=2)


class FakeVLLM:
    """The parts of lm_eval's VLLM that `loglikelihood_accuracy` touches, answering like the engine."""

    def __init__(self, max_length: int, batch_size: int | str = "auto") -> None:
        self.max_length, self.batch_size = max_length, batch_size
        self.prefix_token_id = 1
        self.calls: list[list[list[int]]] = []
        self.cache_hook = SimpleNamespace(add_partial=lambda *args: None)

    def tok_encode(self, string, add_special_tokens=None):
        return [ord(c) for c in string]

    def _encode_pair(self, context, continuation):
        return self.tok_encode(context), self.tok_encode(continuation)

    def _model_generate(self, requests, generate, sampling_params):
        assert generate and sampling_params == "params"
        self.calls.append(requests)
        # a fake model that is right exactly at even token ids, with logprob -1 per position
        return [
            SimpleNamespace(
                prompt_logprobs=[None] + [{t: Logprob(-1.0, 1 if t % 2 == 0 else 7, None)} for t in prompt[1:]]
            )
            for prompt in requests
        ]


def test_method_keeps_request_order_and_batches(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_sampling_params", lambda: "params")
    lm = FakeVLLM(max_length=100, batch_size=2)
    pairs = [([1, 3], [2, 4, 5]), ([1, 2, 3, 4, 5, 6], [8]), ([1], [7, 9])]
    got = vllm_backend.loglikelihood_accuracy(
        lm, [Instance(OUTPUT_TYPE, {}, p, i) for i, p in enumerate(pairs)], disable_tqdm=True
    )
    assert got == [TokenAccuracy("110", -3.0), TokenAccuracy("1", -1.0), TokenAccuracy("00", -2.0)]
    assert [len(batch) for batch in lm.calls] == [2, 1]  # longest first, batches of 2
    assert lm.calls[0][0] == [1, 2, 3, 4, 5, 6, 8]  # context + continuation, verbatim


def test_progress_counts_prompt_tokens(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_sampling_params", lambda: "params")
    monkeypatch.setattr(vllm_backend, "tqdm", RecordingBar)
    pairs = [([1, 3], [2, 4, 5]), ([1, 2, 3, 4, 5, 6], [8]), ([1], [7, 9])]
    vllm_backend.loglikelihood_accuracy(
        FakeVLLM(max_length=100, batch_size=2), [Instance(OUTPUT_TYPE, {}, p, i) for i, p in enumerate(pairs)]
    )
    bar = RecordingBar.made[-1]
    assert (bar.total, bar.unit, bar.unit_scale, bar.closed) == (15, "tok", True, True)
    assert bar.steps == [7 + 5, 3], "longest first, two per batch, each batch its tokens"


def test_method_refuses_prompts_past_the_engine_window(monkeypatch):
    monkeypatch.setattr(vllm_backend, "_sampling_params", lambda: "params")
    lm = FakeVLLM(max_length=8)
    ok = ([1, 2, 3], [4, 5, 6, 7])  # 7 tokens = max_model_len - 1
    long = ([1, 2, 3, 4], [5, 6, 7, 8])
    assert (
        len(vllm_backend.loglikelihood_accuracy(lm, [Instance(OUTPUT_TYPE, {}, ok, 0)], disable_tqdm=True)[0].bits) == 4
    )
    for options in ((), ({"beyond_max_length": True},)):
        with pytest.raises(ValueError, match=r"4 \+ continuation 4 = 8 tokens.*max_model_len=8 \(at most 7"):
            vllm_backend.loglikelihood_accuracy(
                lm, [Instance(OUTPUT_TYPE, {}, (*long, *options), 0)], disable_tqdm=True
            )


@pytest.mark.gpu
def test_real_vllm_matches_hf(smollm2_dir, make_lm):
    pytest.importorskip("vllm")
    from lm_eval.models.vllm_causallms import VLLM

    text = "The quick brown fox jumps over the lazy dog. " * 6
    pairs = [(text[:80], text[80:200]), ("Once upon a time", " there was a fox"), (text, text)]
    instances = [Instance(OUTPUT_TYPE, {}, p, i) for i, p in enumerate(pairs)]
    hf = make_lm(smollm2_dir).loglikelihood_accuracy(instances, disable_tqdm=True)
    engine = VLLM(pretrained=str(smollm2_dir), dtype="float32", max_model_len=2048, gpu_memory_utilization=0.3)
    got = engine.loglikelihood_accuracy(instances, disable_tqdm=True)
    for a, b in zip(got, hf, strict=True):
        assert len(a.bits) == len(b.bits)
        assert sum(x != y for x, y in zip(a.bits, b.bits)) <= 1  # GPU vs CPU kernels: allow one near-tie flip
        assert math.isclose(a.logprob, b.logprob, rel_tol=1e-3, abs_tol=1e-2)

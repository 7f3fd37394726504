"""Fixtures for the backend tests: HF models wrapped in the harness's HFLM, and the plain reference."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch
from tolerances import logprob_tol

from lm_eval_longmem.backends import plugin
from lm_eval_longmem.backends.request_type import TokenAccuracy
from lm_eval_longmem.harness import install

install(plugin())


def _make_lm(path, **kwargs):
    """The harness's own HFLM on CPU in fp32 (the configuration the exactness claims are made for)."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(path), device="cpu", dtype="float32", **kwargs)


@pytest.fixture(scope="session")
def make_lm():
    return _make_lm


@pytest.fixture(scope="module")
def tiny_lm(tiny_llama_dir):
    return _make_lm(tiny_llama_dir)


def reference(model: torch.nn.Module, context: list[int], continuation: list[int]) -> TokenAccuracy:
    """Plain full-logits forward of one unpadded sequence: argmax and log_softmax over the whole vocabulary."""
    ids = torch.tensor([context + continuation[:-1]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(context) - 1 :].float()
    target = torch.tensor(continuation)
    bits = "".join("1" if hit else "0" for hit in (logits.argmax(-1) == target).tolist())
    logprob = torch.log_softmax(logits, -1).gather(-1, target[:, None]).sum()
    return TokenAccuracy(bits, float(logprob))


@pytest.fixture(scope="session")
def reference_fn() -> Callable[..., TokenAccuracy]:
    return reference


def assert_same_answers(got: list[TokenAccuracy], want: list[TokenAccuracy]) -> None:
    """Identical bits; each summed log-probability within the tolerance of its tokens (`tolerances.logprob_tol`).

    Another batch size or code path changes the shapes of the model's matrix products, and BLAS libraries pick
    their blocking, and so the order of each sum, by shape and CPU: fp32 rounding only. The accuracy decisions
    (bits) must not move at all."""
    assert [r.bits for r in got] == [r.bits for r in want]
    for a, b in zip(got, want, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=logprob_tol(len(b.bits)))


@pytest.fixture(scope="session")
def same_answers() -> Callable[[list[TokenAccuracy], list[TokenAccuracy]], None]:
    return assert_same_answers


def mixed_requests(model: torch.nn.Module, lengths: list[tuple[int, int]], vocab: range, seed: int = 0):
    """Token-id pairs whose bits are a real mix of 0s and 1s, even for a random model.

    Each continuation is the model's own greedy continuation of a random context, with every
    third token replaced by a random one: greedy tokens score '1' unless a replacement earlier
    changed the model's mind.
    """
    rng = random.Random(seed)
    pairs = []
    for n_context, n_continuation in lengths:
        context = [1] + [rng.choice(vocab) for _ in range(n_context - 1)]
        sequence = list(context)
        for step in range(n_continuation):
            with torch.no_grad():
                greedy = int(model(input_ids=torch.tensor([sequence])).logits[0, -1].argmax())
            sequence.append(rng.choice(vocab) if step % 3 == 2 else greedy)
        pairs.append((context, sequence[n_context:]))
    return pairs


@pytest.fixture(scope="session")
def mixed_requests_fn():
    return mixed_requests

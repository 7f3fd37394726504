"""Exactness on the real SmolLM2-135M (CPU, fp32): a few mixed-length sequences of at most 300 tokens."""

from __future__ import annotations

import pytest
from lm_eval.api.instance import Instance
from tolerances import logprob_tol

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, encode_request

pytestmark = pytest.mark.slow

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting one hundred and"
    " twelve steps, trimming the wick, and writing the state of the sea in a small leather book."
)
PAIRS = [
    (PASSAGE, " " + PASSAGE),  # a repeat: the model copies most of it
    ("Once upon a time, in a village by the river,", " there lived an old miller and his three daughters."),
    (PASSAGE + " " + PASSAGE[:200], PASSAGE[200:] + " The next morning the fog had lifted."),
]


@pytest.fixture(scope="module")
def smollm2(smollm2_dir, make_lm):
    return make_lm(smollm2_dir)


def test_real_model_matches_full_logits_and_harness(smollm2, reference_fn, same_answers):
    instances = [Instance(OUTPUT_TYPE, {}, pair, i) for i, pair in enumerate(PAIRS)]
    smollm2.batch_size_per_gpu = 3
    batched = smollm2.loglikelihood_accuracy(instances, disable_tqdm=True)
    smollm2.batch_size_per_gpu = 1
    same_answers(
        smollm2.loglikelihood_accuracy(instances, disable_tqdm=True), batched
    )  # bits identical, logprobs to rounding
    harness = smollm2.loglikelihood(
        [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(PAIRS)], disable_tqdm=True
    )
    for pair, got, (logprob, greedy) in zip(PAIRS, batched, harness, strict=True):
        encoded = encode_request(smollm2, pair)
        assert encoded.n_inputs <= 300
        want = reference_fn(smollm2.model, encoded.context, encoded.continuation)
        assert got.bits == want.bits
        assert got.logprob == pytest.approx(want.logprob, abs=logprob_tol(len(got.bits)))
        assert got.logprob == pytest.approx(logprob, abs=logprob_tol(len(got.bits)))
        assert (got.bits == "1" * len(got.bits)) == greedy
    copy = batched[0].bits
    assert copy.count("1") / len(copy) > 0.8 and copy.endswith("1" * 20), "SmolLM2 copies a repeated passage"
    assert "0" in "".join(r.bits for r in batched), "and misses some tokens of new text"

"""`HFLM.loglikelihood_accuracy`: exactness, batching, memory-flat head, lengths, soft-capping, caching."""

from __future__ import annotations

import functools
import logging

import pytest
import torch
from kit import RecordingBar, build_tiny_llama
from lm_eval.api.instance import Instance
from lm_eval.api.model import CachingLM
from tolerances import BF16_LOGPROB_TOL, LOGPROB_TOL, logprob_tol

from lm_eval_longmem.backends import hf
from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy
from lm_eval_longmem.common import cost
from lm_eval_longmem.common.errors import UsageError

VOCAB = range(4, 101)  # the tiny tokenizer's printable characters
LENGTHS = [(5, 12), (70, 30), (17, 1), (120, 25), (2, 9), (64, 20), (64, 20)]


def instances(pairs, options=None):
    extra = (options,) if options else ()
    return [Instance(OUTPUT_TYPE, {}, (ctx, cont, *extra), i) for i, (ctx, cont) in enumerate(pairs)]


def run(lm, pairs, batch_size=1, options=None):
    lm.batch_size_per_gpu = batch_size
    return lm.loglikelihood_accuracy(instances(pairs, options), disable_tqdm=True)


@pytest.fixture(scope="module")
def pairs(tiny_lm, mixed_requests_fn):
    return mixed_requests_fn(tiny_lm.model, LENGTHS, VOCAB)


def test_matches_plain_full_logits_forward(tiny_lm, pairs, reference_fn):
    results = run(tiny_lm, pairs, batch_size=3)
    assert all(isinstance(r, TokenAccuracy) for r in results)
    all_bits = "".join(r.bits for r in results)
    assert "0" in all_bits and "1" in all_bits, "the test needs a real mix of hits and misses"
    for (ctx, cont), got in zip(pairs, results, strict=True):
        want = reference_fn(tiny_lm.model, ctx, cont)
        assert len(got.bits) == len(cont)
        assert got.bits == want.bits
        assert got.logprob == pytest.approx(want.logprob, abs=logprob_tol(len(cont)))


def test_same_answers_for_every_batch_size(tiny_lm, pairs, same_answers):
    one = run(tiny_lm, pairs, batch_size=1)
    for batch_size in (2, 3, 7, 64):
        same_answers(run(tiny_lm, pairs, batch_size=batch_size), one)  # bits identical, logprobs to rounding


def _record_batches(monkeypatch):
    """Every batch `score_batch` runs (its size), in order."""
    batches = []
    real_score = hf.score_batch
    monkeypatch.setattr(
        hf,
        "score_batch",
        lambda self, batch, width, chunked: batches.append(len(batch)) or real_score(self, batch, width, chunked),
    )
    return batches


@pytest.mark.slow
def test_auto_batch_size_on_cpu_is_decided_by_the_estimate_without_a_trial(
    tiny_llama_dir, pairs, monkeypatch, make_lm, caplog
):
    lm = make_lm(tiny_llama_dir, batch_size="auto:2", max_batch_size=4)
    batches = _record_batches(monkeypatch)
    monkeypatch.setattr(
        type(lm), "_model_call", lambda *a, **k: pytest.fail("auto must not probe the full-logits path")
    )
    with caplog.at_level(logging.INFO, logger="lm_eval"):
        got = lm.loglikelihood_accuracy(instances(pairs), disable_tqdm=True)
    assert sum(batches) == len(pairs), "no forward beyond the requests themselves: on CPU nothing is tried"
    assert max(batches) > 1, "requests of one width share a batch: the size picked is above 1"
    assert "--batch_size auto (loglikelihood_accuracy)" in caplog.text and "from the estimate alone" in caplog.text
    monkeypatch.undo()
    assert got == run(lm, pairs, batch_size=1)


def test_auto_batch_size_never_picks_a_size_beyond_the_memory_available(tiny_llama_dir, monkeypatch, make_lm):
    lm = make_lm(tiny_llama_dir, batch_size="auto", max_batch_size=64)
    same = [([1] + [10 + i] * 99, [20 + i] * 20) for i in range(7)]  # seven requests of one width (128)
    fits = lambda size: hf.accuracy_extra_bytes(lm, size * 128, True)  # noqa: E731
    assert fits(1) < fits(3) < fits(4)
    # Room for three such sequences under the share of available memory, not four:
    monkeypatch.setattr(hf, "available_bytes", lambda device: int(fits(3) / hf.AUTO_MEMORY_SHARE) + 1)
    batches = _record_batches(monkeypatch)
    lm.loglikelihood_accuracy(instances(same), disable_tqdm=True)
    assert batches == [3, 3, 1]


def test_auto_batch_size_refuses_when_one_sequence_exceeds_the_memory(tiny_llama_dir, pairs, monkeypatch, make_lm):
    lm = make_lm(tiny_llama_dir, batch_size="auto")
    monkeypatch.setattr(hf, "available_bytes", lambda device: 1000)
    with pytest.raises(
        UsageError,
        match=r"--batch_size auto \(loglikelihood_accuracy\): one sequence of \d+ positions.*pass --batch_size 1",
    ):
        lm.loglikelihood_accuracy(instances(pairs), disable_tqdm=True)


@pytest.mark.slow
def test_auto_batch_size_on_an_accelerator_tries_sizes_from_the_cap_down(tiny_llama_dir, pairs, monkeypatch, make_lm):
    lm = make_lm(tiny_llama_dir, batch_size="auto", max_batch_size=64)
    monkeypatch.setattr(hf, "trial_forwards", lambda device: True)  # as on CUDA, where running out of memory raises
    monkeypatch.setattr(hf, "batch_size_cap", lambda self, positions, extra, what: 5)
    batches = _record_batches(monkeypatch)
    lm.loglikelihood_accuracy(instances(pairs), disable_tqdm=True)
    assert batches[0] == 5, "the probe starts at the memory cap, not at max_batch_size"
    assert sum(batches[1:]) == len(pairs)


def test_the_harness_own_auto_probe_stays_within_memory(tiny_llama_dir, monkeypatch, make_lm):
    """`loglikelihood`/`multiple_choice`/`generate_until` on auto: the harness's probe, capped by `stock_batch_size` (R14)."""
    lm = make_lm(tiny_llama_dir, batch_size="auto", max_batch_size=64)
    forwards = []
    lm.model.register_forward_pre_hook(lambda module, args: forwards.append(args[0].shape) if args else None)
    requests = [("k", [1] * 300, [5] * 12)]
    assert lm._detect_batch_size(requests) == 64 and forwards == []  # ample memory, and on CPU no trial forward
    shape = cost.ModelShape.from_config(lm.model.config, dtype="float32")
    one = cost.hf_peak(shape, "loglikelihood", 311).total - shape.weights_bytes
    monkeypatch.setattr(hf, "available_bytes", lambda device: int(5.5 * one / hf.AUTO_MEMORY_SHARE))
    assert lm._detect_batch_size(requests) == 5 and forwards == []
    monkeypatch.setattr(hf, "available_bytes", lambda device: one // 2)
    with pytest.raises(UsageError, match=r"full-logits probe\): one sequence of 311 positions.*--batch_size 1"):
        lm._detect_batch_size(requests)


def test_progress_counts_input_tokens(tiny_lm, pairs, monkeypatch):
    """As each task's cost line counts them (context and continuation), so the label's shares add up to the total."""
    monkeypatch.setattr(hf, "tqdm", RecordingBar)
    run(tiny_lm, pairs, batch_size=2)
    bar = RecordingBar.made[-1]
    tokens = sum(len(ctx) + len(cont) for ctx, cont in pairs)
    assert (bar.total, bar.unit, bar.unit_scale, sum(bar.steps), bar.closed) == (tokens, "tok", True, tokens, True)
    assert bar.steps[0] == 120 + 25, "the longest request runs first, alone in its width"


def test_largest_batch():
    assert hf.largest_batch(lambda size: 10 * size, 35, 64) == 3
    assert hf.largest_batch(lambda size: 10 * size, 5, 64) == 0
    assert hf.largest_batch(lambda size: 10 * size, 10_000, 64) == 64


def test_head_runs_on_bounded_chunks_of_scored_positions(tiny_lm, pairs, monkeypatch, same_answers):
    expected = run(tiny_lm, pairs, batch_size=4)
    head = tiny_lm.model.get_output_embeddings()
    rows_per_call = []
    real_mm = torch.mm

    def mm(a, b, **kwargs):  # the head's matmul (the body's Linear layers go through F.linear)
        rows_per_call.append(a.shape)
        return real_mm(a, b, **kwargs)

    monkeypatch.setattr(hf, "head_chunk_rows", lambda *args: 8)  # 8 positions per chunk
    monkeypatch.setattr(torch, "mm", mm)
    got = run(tiny_lm, pairs, batch_size=4)
    monkeypatch.undo()
    same_answers(got, expected)  # chunking changes nothing but the order of the head's sums
    assert rows_per_call and all(shape == (shape[0], head.in_features) and shape[0] <= 8 for shape in rows_per_call)
    assert sum(shape[0] for shape in rows_per_call) == sum(len(cont) for _, cont in pairs)


def test_head_chunks_stay_within_their_share_of_the_body_forward(tiny_lm):
    vocab = tiny_lm.model.get_output_embeddings().weight.shape[0]
    sizes = {}
    for n_rows in (256, 4096, 65536, 2**22):
        rows = hf.head_chunk_rows(tiny_lm, n_rows, vocab, torch.float32)
        budget = max(cost.HEAD_MEMORY_SHARE * hf.body_forward_bytes(tiny_lm, n_rows), cost.MIN_HEAD_CHUNK_BYTES)
        assert 1 <= rows and rows * vocab * 4 <= budget < (rows + 1) * vocab * 4
        sizes[n_rows] = rows
    assert sizes[256] == sizes[4096] == cost.MIN_HEAD_CHUNK_BYTES // (vocab * 4), "a small body gets the minimum chunk"
    assert sizes[4096] < sizes[2**22], "a longer forward needs more memory, so its chunks may be larger"
    # a bf16 head scored in fp32 holds its bf16 output beside the fp32 log-probabilities
    mixed = hf.head_chunk_rows(tiny_lm, 256, vocab, torch.float32, None, torch.bfloat16)
    assert mixed == cost.MIN_HEAD_CHUNK_BYTES // (vocab * 6)


@pytest.mark.kernels  # vectorised and scalar kernels may break ties and NaN differently
def test_argmax_hits_equal_argmax_bit_for_bit():
    """Ties (the first maximal index wins), NaN (counts as the maximum), -inf rows, bf16's frequent ties."""
    nan, inf = float("nan"), float("inf")
    rows = [
        ([1.0, 3.0, 2.0], [1, 0, 2]),  # a clear maximum: hit only at index 1
        ([3.0, 1.0, 3.0], [0, 2, 1]),  # tied maximum: only the first index counts
        ([1.0, nan, 2.0], [1, 2, 0]),  # NaN is the argmax
        ([nan, 1.0, nan], [0, 2, 1]),  # two NaNs: the first
        ([-inf, -inf, -inf], [0, 1, 2]),  # all -inf: index 0
        ([0.0, -0.0, -1.0], [0, 1, 2]),  # signed zeros tie
        ([inf, 5.0, inf], [0, 2, 1]),
    ]
    for values, targets in rows:
        logits = torch.tensor([values] * len(targets))
        target = torch.tensor(targets)[:, None]
        before = logits.clone()
        got = hf._argmax_hits(logits, target)
        assert got.tolist() == (logits.argmax(-1) == target.squeeze(-1)).tolist(), values
        assert torch.equal(logits.nan_to_num(), before.nan_to_num()) and torch.equal(logits.isnan(), before.isnan())
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(512, 1000, generator=generator).to(torch.bfloat16).float()  # bf16: many exact ties
    target = torch.where(
        torch.rand(512, generator=generator) < 0.5,
        logits.argmax(-1),  # half the targets are the argmax, the rest the runner-up or random
        torch.randint(0, 1000, (512,), generator=generator),
    )
    top2 = logits.topk(2, dim=-1)
    target[::7] = top2.indices[::7, 1]
    ties = (top2.values[:, 0] == top2.values[:, 1]).sum()
    assert ties > 0, "the test needs rows whose maximum is tied"
    want = logits.argmax(-1) == target
    assert 0 < want.sum() < len(want)
    assert torch.equal(hf._argmax_hits(logits, target[:, None]), want)


def test_summed_logprob_equals_harness_loglikelihood(tiny_lm):
    pairs = [("The cat sat on the", " mat."), ("abc ", "def"), ("", "Hello world"), ("x", "yz and more")]
    ours = tiny_lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, p, 0) for p in pairs], disable_tqdm=True)
    harness = tiny_lm.loglikelihood([Instance("loglikelihood", {}, p, 0) for p in pairs], disable_tqdm=True)
    for got, (logprob, greedy) in zip(ours, harness, strict=True):
        assert got.logprob == pytest.approx(logprob, abs=logprob_tol(len(got.bits)))
        assert (got.bits == "1" * len(got.bits)) == greedy


def full_logits_reference(model, context, continuation):
    """Hits and summed log-probability from the model's own full logits, on its device, scored in fp32."""
    ids = torch.tensor([context + continuation[:-1]], device=model.device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(context) - 1 :].float()
    target = torch.tensor(continuation, device=model.device)
    hits = logits.argmax(-1) == target
    return hits.cpu(), float(torch.log_softmax(logits, -1).gather(-1, target[:, None]).sum())


def assert_matches_own_logits(lm, pairs, per_token_tolerance, flips=0):
    """Our answers against the full forward's: at most `flips` differing bits per request (near-ties), log-probabilities to the tolerance."""
    results = run(lm, pairs, batch_size=3)
    assert lm._longmem_chunked_head is True
    for (ctx, cont), got in zip(pairs, results, strict=True):
        hits, logprob = full_logits_reference(lm.model, ctx, cont)
        want = "".join("1" if hit else "0" for hit in hits.tolist())
        assert len(got.bits) == len(want) and sum(a != b for a, b in zip(got.bits, want)) <= flips
        assert got.logprob == pytest.approx(logprob, abs=per_token_tolerance * len(cont))
    again = run(lm, pairs, batch_size=1)
    if lm.model.device.type == "cpu":
        assert again == results  # independent of the batch size, bit for bit
    else:  # cuBLAS may pick other kernels for another batch shape (measured on an H100 in fp32: 5e-7 on -52.4)
        for (_, cont), one, batched in zip(pairs, again, results, strict=True):
            assert sum(a != b for a, b in zip(one.bits, batched.bits)) <= flips
            assert one.logprob == pytest.approx(batched.logprob, abs=per_token_tolerance * len(cont))


def test_bf16_model_is_scored_in_fp32(tiny_llama_dir, pairs):
    """A bf16 head writes its logits into a bf16 buffer, copied into the fp32 one that log_softmax overwrites.

    The tolerance is bf16's: the head's product over a chunk of rows and the model's over the whole
    sequence may round a logit to neighbouring bf16 values (measured here: 6e-5 per token).
    """
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="bfloat16")
    assert lm.model.dtype == torch.bfloat16
    assert_matches_own_logits(lm, pairs, per_token_tolerance=BF16_LOGPROB_TOL)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run with -m gpu on a GPU machine)")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_on_one_gpu_matches_the_models_own_logits(tiny_llama_dir, pairs, dtype):
    """On CUDA: the chunked head, the in-place log_softmax and the max-reduction hits against the full forward.

    cuBLAS may pick another algorithm for a chunk's product than for the whole sequence's, so in
    bf16 a logit may round to a neighbouring value: one near-tie flip per request is allowed there.
    """
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cuda", dtype=dtype)
    assert lm.model.device.type == "cuda"
    bf16 = dtype == "bfloat16"
    assert_matches_own_logits(
        lm, pairs, per_token_tolerance=BF16_LOGPROB_TOL if bf16 else LOGPROB_TOL, flips=1 if bf16 else 0
    )


def test_too_long_request_is_an_error_naming_length_and_limit(tiny_llama_dir, make_lm):
    lm = make_lm(tiny_llama_dir, max_length=64)
    ctx, cont = [1] + [10] * 59, [11] * 10  # 69 input positions
    with pytest.raises(ValueError, match=r"need 69 input positions, more than max_length=64"):
        run(lm, [(ctx, cont)])
    # exactly at the limit runs
    assert len(run(lm, [(ctx[:55], cont)])[0].bits) == 10


def test_opt_in_runs_beyond_max_length_exactly(tiny_llama_dir, reference_fn, make_lm):
    lm = make_lm(tiny_llama_dir, max_length=64)
    ctx, cont = [1] + [10 + i % 50 for i in range(150)], [20 + i % 30 for i in range(40)]
    got = run(lm, [(ctx, cont)], options={"beyond_max_length": True})[0]
    want = reference_fn(lm.model, ctx, cont)
    assert got.bits == want.bits and got.logprob == pytest.approx(want.logprob, abs=logprob_tol(len(cont)))


def test_opt_in_stops_at_a_learned_position_table(tmp_path, make_lm):
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    src = build_tiny_llama(tmp_path / "tok")
    GPT2LMHeadModel(GPT2Config(vocab_size=101, n_positions=48, n_embd=32, n_layer=1, n_head=2)).save_pretrained(
        tmp_path / "gpt2"
    )
    AutoTokenizer.from_pretrained(src).save_pretrained(tmp_path / "gpt2")
    lm = make_lm(tmp_path / "gpt2", max_length=32)
    beyond = {"beyond_max_length": True}
    assert len(run(lm, [([1] * 40, [5] * 9)], options=beyond)[0].bits) == 9  # 48 positions: fits the table
    with pytest.raises(ValueError, match=r"need 49 input positions.*learned position table 'transformer.wpe' has 48"):
        run(lm, [([1] * 40, [5] * 10)], options=beyond)


def test_bad_requests_are_clear_errors(tiny_lm):
    with pytest.raises(ValueError, match="continuation has no tokens"):
        run(tiny_lm, [([1, 2], [])])
    with pytest.raises(ValueError, match="context has no tokens"):
        run(tiny_lm, [([], [5, 6])])
    with pytest.raises(ValueError, match="token id 5000 is outside"):
        run(tiny_lm, [([1, 2], [5000])])
    with pytest.raises(ValueError, match="unknown loglikelihood_accuracy option"):
        run(tiny_lm, [([1, 2], [5])], options={"truncate": True})


@pytest.fixture(scope="module")
def softcapped_dir(tmp_path_factory):
    """A tiny random Gemma2 with a small final soft-cap, so the cap visibly changes the logits."""
    from transformers import AutoTokenizer, Gemma2Config, Gemma2ForCausalLM

    out = tmp_path_factory.mktemp("gemma2")
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_llama(out / "tok"))
    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=101,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        final_logit_softcapping=0.5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    model = Gemma2ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(50)  # logits of several units: far outside tanh's linear range at cap 0.5
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_final_logit_softcapping_is_honoured(softcapped_dir, mixed_requests_fn, reference_fn, make_lm):
    lm = make_lm(softcapped_dir)
    pairs = mixed_requests_fn(lm.model, [(10, 15), (33, 20), (4, 6)], VOCAB, seed=1)
    got = run(lm, pairs, batch_size=2)
    assert lm._longmem_chunked_head is True  # the memory-flat path passed its self-check
    for (ctx, cont), result in zip(pairs, got, strict=True):
        want = reference_fn(lm.model, ctx, cont)
        assert result.bits == want.bits and result.logprob == pytest.approx(want.logprob, abs=logprob_tol(len(cont)))
    # Without the cap the head path would be wrong by far more than rounding:
    hidden = lm.model.base_model(input_ids=torch.tensor([pairs[0][0]])).last_hidden_state
    raw = lm.model.lm_head(hidden)
    assert (raw - lm.model(input_ids=torch.tensor([pairs[0][0]])).logits).abs().max() > 1.0


def test_unknown_output_transform_falls_back_to_full_logits(
    softcapped_dir, mixed_requests_fn, reference_fn, monkeypatch, caplog, make_lm
):
    lm = make_lm(softcapped_dir)
    monkeypatch.setattr(
        hf, "final_logit_transform", lambda model: lambda logits: logits
    )  # pretend we don't know the cap
    pairs = mixed_requests_fn(lm.model, [(10, 15), (4, 6)], VOCAB, seed=2)
    with caplog.at_level(logging.WARNING):
        got = run(lm, pairs)
    assert lm._longmem_chunked_head is False
    assert "using the full-logits forward" in caplog.text
    for (ctx, cont), result in zip(pairs, got, strict=True):
        want = reference_fn(lm.model, ctx, cont)
        assert result.bits == want.bits and result.logprob == pytest.approx(want.logprob, abs=logprob_tol(len(cont)))


def test_use_cache_reuses_responses_without_forward_passes(tiny_llama_dir, pairs, tmp_path, make_lm):
    lm = make_lm(tiny_llama_dir, batch_size=2)
    calls = []
    lm.model.register_forward_pre_hook(lambda *a: calls.append("model"))
    lm.model.base_model.register_forward_pre_hook(lambda *a: calls.append("body"))
    first = CachingLM(lm, str(tmp_path / "cache.db")).loglikelihood_accuracy(instances(pairs))
    assert calls, "the first run computes"
    calls.clear()
    second = CachingLM(lm, str(tmp_path / "cache.db")).loglikelihood_accuracy(instances(pairs))
    assert calls == []
    assert second == first
    # one new request: only it is computed, the rest still come from the cache
    third = CachingLM(lm, str(tmp_path / "cache.db")).loglikelihood_accuracy(instances([*pairs, ([1, 7, 8], [9, 10])]))
    assert third[:-1] == first and calls.count("body") == 1


@pytest.mark.parametrize(
    "n_inputs,max_length,physical,width",
    [
        (1, 2048, None, 64),
        (64, 2048, None, 64),
        (65, 2048, None, 128),
        (2040, 2048, None, 2048),
        (2030, 2040, None, 2040),  # padding never crosses max_length for a request within it
        (2050, 2048, None, 2112),  # beyond max_length on a rotary model: no cap
        (2050, 2048, 2060, 2060),  # beyond max_length: capped by the position table
    ],
)
def test_padded_width(n_inputs, max_length, physical, width):
    assert hf.padded_width(n_inputs, max_length, physical) == width


def test_physical_limit_of_a_rotary_model(tiny_lm):
    assert hf.physical_max_length(tiny_lm.model, tiny_lm.max_length).tokens is None


def shared_prefix_pairs(model, seed=1):
    """Book-SORT-shaped requests: two 'excerpts' of 400 tokens, each followed by several 'trials' (own suffixes),
    each trial asked with two one-token labels (same model input), plus one unrelated short request."""
    import random

    rng = random.Random(seed)
    pairs = []
    for _ in range(2):
        excerpt = [1] + [rng.choice(VOCAB) for _ in range(399)]
        for n_suffix in (30, 45, 45, 60):
            context = excerpt + [rng.choice(VOCAB) for _ in range(n_suffix)]
            pairs += [(context, [label]) for label in (10, 11)]
        context = excerpt + [rng.choice(VOCAB) for _ in range(20)]
        with torch.no_grad():
            greedy = int(model(input_ids=torch.tensor([context])).logits[0, -1].argmax())
        pairs.append((context, [greedy, rng.choice(VOCAB), greedy]))  # a multi-token continuation in a group
    return pairs + [([1, 5, 6, 7], [8, 9])]


def test_shared_prefix_groups_each_prefix_once(tiny_lm):
    pairs = shared_prefix_pairs(tiny_lm.model)
    encoded = [hf.EncodedRequest(ctx, cont, False) for ctx, cont in pairs]
    groups = hf.prefix_groups(encoded)
    assert sorted(len(members) for _, members in groups) == [9, 9]
    assert all(shared >= 400 for shared, _ in groups)
    assert hf.shares_prefixes(tiny_lm, [1, 2, 3])


@pytest.mark.parametrize("batch_size", [1, 2, 4])
def test_shared_prefix_scoring_matches_scoring_each_request_alone(
    tiny_lm, reference_fn, same_answers, batch_size, monkeypatch
):
    """Grouped (the prefix once, each suffix on its KV cache) vs each request alone: identical bits, log-probabilities
    within rounding, for every batch size; and the body runs each excerpt once plus each distinct suffix once."""
    pairs = shared_prefix_pairs(tiny_lm.model)
    assert hf.shares_prefixes(tiny_lm, [1, 2, 3]) and hf.uses_chunked_head(tiny_lm, pairs[0][0])  # before counting
    calls = []
    body = tiny_lm.model.base_model
    original = body.forward
    counted = functools.wraps(original)(lambda *a, **k: calls.append(k["input_ids"].shape[-1]) or original(*a, **k))
    monkeypatch.setattr(body, "forward", counted)
    grouped = run(tiny_lm, pairs, batch_size=batch_size)
    # each excerpt's prefix once, each of its 5 distinct suffixes once (the two labels share one), the lone request
    assert len([n for n in calls if n >= 400]) == 2 and len(calls) == 2 + 2 * 5 + 1
    monkeypatch.setattr(hf, "prefix_groups", lambda encoded: [])
    alone = run(tiny_lm, pairs, batch_size=batch_size)
    same_answers(grouped, alone)
    for (ctx, cont), got in zip(pairs, grouped, strict=True):
        want = reference_fn(tiny_lm.model, ctx, cont)
        assert got.bits == want.bits and got.logprob == pytest.approx(want.logprob, abs=1e-4)


def test_shared_prefix_scoring_with_a_subset_of_the_requests(tiny_lm, same_answers):
    """`--limit`-like subsets (a group missing members, a group of one) score as the whole list does."""
    pairs = shared_prefix_pairs(tiny_lm.model)
    whole = run(tiny_lm, pairs, batch_size=2)
    for keep in ([0, 1, 2], [0, 9], [3], list(range(0, len(pairs), 2))):
        same_answers(run(tiny_lm, [pairs[i] for i in keep], batch_size=2), [whole[i] for i in keep])


@pytest.mark.parametrize("context", ["Which came first?\nAnswer: Segment", "trailing space ", "x"])
def test_string_pairs_are_encoded_as_the_harness_encodes_loglikelihood(tiny_lm, context):
    """Book-SORT's label requests (`(prompt, " A")`) score the very tokens `HFLM.loglikelihood` scores."""
    from lm_eval_longmem.backends.request_type import encode_request

    for label in (" A", " B"):
        encoded = encode_request(tiny_lm, (context, label))
        assert (encoded.context, encoded.continuation) == tuple(tiny_lm._encode_pair(context, label))

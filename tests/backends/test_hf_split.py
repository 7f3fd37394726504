"""`loglikelihood_accuracy` on a model spread over devices: accelerate offload, tensor parallel, GPU + CPU.

What runs where. On CPU-only torch every real device is "cpu", so a split over two devices of
different types cannot be built; what CPU allows is tested here: an LM head (and last layers)
offloaded to disk, whose weights sit on "meta" and reach the head only through accelerate's hook
(the same mechanism as a GPU + CPU split with `max_memory`), and transformers' tensor parallelism
(`tp_plan=auto`) over two CPU processes with gloo. The GPU + CPU split and `parallelize=True` over
several GPUs are the `gpu` tests at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance
from tolerances import logprob_tol

from lm_eval_longmem.backends import hf
from lm_eval_longmem.backends.request_type import OUTPUT_TYPE

VOCAB = range(4, 101)  # the tiny tokenizer's printable characters
LENGTHS = [(5, 12), (70, 30), (17, 1), (120, 25), (64, 20)]
FIXTURES = Path(__file__).parent / "fixtures"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run with -m gpu on a GPU machine)")


def score(lm, pairs, batch_size=2):
    lm.batch_size_per_gpu = batch_size
    return lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, p, i) for i, p in enumerate(pairs)], disable_tqdm=True)


def same(ours, expected):
    """Equal bits and log-probabilities within `tolerances.logprob_tol` (the head runs as a module, not our buffered
    matmul; on GPU, in other kernels)."""
    assert [a.bits for a in ours] == [a.bits for a in expected]
    for a, b in zip(ours, expected, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=logprob_tol(len(b.bits)), rel=0)


@pytest.fixture(scope="module")
def pairs(tiny_lm, mixed_requests_fn):
    return mixed_requests_fn(tiny_lm.model, LENGTHS, VOCAB)


def offloaded(path, tmp_path, device_map):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, device_map=device_map, offload_folder=str(tmp_path)
    )
    return HFLM(pretrained=model, tokenizer=str(path))


@pytest.mark.parametrize(
    "device_map",
    [
        {"model": "cpu", "lm_head": "disk"},
        {
            "model.embed_tokens": "cpu",
            "model.rotary_emb": "cpu",
            "model.layers.0": "cpu",
            "model.layers.1": "disk",
            "model.norm": "disk",
            "lm_head": "disk",
        },
    ],  # fmt: skip
    ids=["head", "last-layers-and-head"],
)
def test_offloaded_head_scores_like_the_whole_model(tiny_llama_dir, tiny_lm, pairs, tmp_path, device_map):
    """Today's direct matmul on an offloaded head read its "meta" weight: silent garbage."""
    lm = offloaded(tiny_llama_dir, tmp_path, device_map)
    assert lm.model.get_output_embeddings().weight.device.type == "meta"
    assert hf.uses_chunked_head(lm, pairs[1][0] + pairs[1][1])
    same(score(lm, pairs), score(tiny_lm, pairs))


def test_plain_head_only_without_hooks_or_foreign_weights(tiny_lm, tiny_llama_dir, tmp_path):
    head = tiny_lm.model.get_output_embeddings()
    assert hf.plain_head(head, torch.device("cpu"))
    offloaded_head = offloaded(tiny_llama_dir, tmp_path, {"model": "cpu", "lm_head": "disk"}).model.lm_head
    assert not hf.plain_head(offloaded_head, torch.device("cpu"))  # meta weight, accelerate hook
    hooked = torch.nn.Linear(4, 4)
    hooked.register_forward_hook(lambda module, args, output: output)
    assert not hf.plain_head(hooked, torch.device("cpu"))


def test_head_budget_counts_the_weights_on_the_head_device(tiny_llama_dir, tiny_lm, tmp_path):
    lm = offloaded(tiny_llama_dir, tmp_path, {"model": "cpu", "lm_head": "disk"})
    head_bytes = lm.model.lm_head.weight.numel() * 4
    cpu = torch.device("cpu")
    assert hf.body_forward_bytes(lm, 100, cpu) == hf.body_forward_bytes(tiny_lm, 100, cpu) - head_bytes
    assert hf.body_forward_bytes(tiny_lm, 100, cpu) == hf.body_forward_bytes(tiny_lm, 100)


@pytest.mark.slow
def test_tensor_parallel_over_two_cpu_processes(tiny_llama_dir, tiny_lm, pairs, tmp_path):
    """`tp_plan=auto` shards the head; today's direct matmul on the shard failed (DTensor mixed with Tensor)."""
    (tmp_path / "pairs.json").write_text(json.dumps(pairs))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(FIXTURES / "tp_score.py"), str(tiny_llama_dir), str(tmp_path / "pairs.json"), str(tmp_path / "out.json")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    answers = [hf.TokenAccuracy(bits, logprob) for bits, logprob in json.loads((tmp_path / "out.json").read_text())]
    same(answers, score(tiny_lm, pairs))


@pytest.mark.gpu
@needs_cuda
def test_gpu_and_cpu_split_matches_one_device(tiny_llama_dir, tiny_lm, pairs, tmp_path):
    """A GPU + CPU split as `max_memory` makes it on a one-GPU machine: body on the GPU, head offloaded to CPU."""
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.layers.0": 0, "model.layers.1": "cpu",
                  "model.norm": "cpu", "lm_head": "cpu"}  # fmt: skip
    same(score(offloaded(tiny_llama_dir, tmp_path, device_map), pairs), score(tiny_lm, pairs))


@pytest.mark.gpu
@needs_cuda
def test_parallelize_over_two_gpus_matches_one_device(tiny_llama_dir, tiny_lm, pairs):
    """`parallelize=True` puts the last layers and the head on another GPU than the inputs."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), dtype="float32", parallelize=True, device_map="balanced")
    assert len(set(lm.model.hf_device_map.values())) > 1
    same(score(lm, pairs), score(tiny_lm, pairs))

"""The cost model on a GPU: a Llama-3-8B-shaped body forward against `common/cost.py`.

A random-weight model of Llama-3-8B's shape (bf16, sdpa attention) is built on the GPU (no
download, no disk); for each length one body forward (no KV cache, as our request type runs it)
is timed with CUDA events (median of --repeats after a warm-up) and its peak memory above the
weights read from `torch.cuda.max_memory_allocated`. Printed beside the cost model's FLOPs (causal
attention) and activation estimate: the achieved TFLOP/s is the utilisation `plan` should assume,
and measured/estimated memory says how far `hf_peak` is off on a GPU. Needs only torch and
transformers (no lm_eval), so it runs on a bare GPU machine.

    python benchmarks/cost_model_gpu.py [--lengths 8k,32k,128k] [--repeats 3] [--gpu h100]
    python benchmarks/cost_model_gpu.py --tiny --device cpu --lengths 256,512   # a smoke run without a GPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LLAMA3_8B = dict(
    hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
    head_dim=128, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0, tie_word_embeddings=False,
)  # fmt: skip
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1000,
)


def main() -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from lm_eval_longmem.common import cost
    from lm_eval_longmem.common.lengths import parse_lengths

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="8k,32k,128k")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--gpu", default="h100", choices=sorted(cost.GPUS), help="the card's datasheet peak to compare with"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a tiny shape, to check the script itself")
    args = parser.parse_args()
    device = torch.device(args.device)
    config = LlamaConfig(**(TINY if args.tiny else LLAMA3_8B), attn_implementation="sdpa")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)  # built in its dtype on the device: no fp32 copy of 8B weights on the way
    with device:
        model = LlamaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    shape = cost.ModelShape.from_config(config, dtype=str(dtype).removeprefix("torch."))
    gpu = cost.GPUS[args.gpu]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name}; {shape.describe()}; torch {torch.__version__}")
    print(
        f"weights: estimated {cost.gib(shape.weights_bytes)}, allocated {cost.gib(torch.cuda.memory_allocated(device)) if device.type == 'cuda' else '-'}"
    )
    print(
        f"{'length':>7} {'ms':>9} {'TFLOP':>8} {'TFLOP/s':>8} {'of ' + gpu.name:>8} {'act GiB':>8} {'est GiB':>8} {'act/est':>7}"
    )
    for n in parse_lengths(args.lengths):
        ids = torch.randint(0, config.vocab_size, (1, n), device=device)
        times = []
        for i in range(args.repeats + 1):
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
                before = torch.cuda.memory_allocated(device)
            sync()
            start = time.perf_counter()
            with torch.no_grad():
                model.model(input_ids=ids, use_cache=False)
            sync()
            if i:  # the first run warms up
                times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        flops = cost.forward_flops(shape, n, head_positions=0)
        estimated = shape.activation_bytes(n)
        measured = torch.cuda.max_memory_allocated(device) - before if device.type == "cuda" else float("nan")
        achieved = flops / seconds / 1e12
        print(
            f"{n:>7} {seconds * 1e3:>9.1f} {flops / 1e12:>8.1f} {achieved:>8.1f} {achieved / gpu.half_tflops:>8.2f} "
            f"{measured / 2**30:>8.2f} {estimated / 2**30:>8.2f} {measured / estimated:>7.2f}"
        )


if __name__ == "__main__":
    main()

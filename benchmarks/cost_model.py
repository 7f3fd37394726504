"""The cost model (`common/cost.py`, what `lm-eval-longmem plan` prints) against CPU time and memory.

For two random-weight Llama shapes (the tests' 64-wide one, and SmolLM2's widths with 4 layers and
its 49k vocabulary) and each length, one copy-style request (second half scored) runs through our
`loglikelihood_accuracy` path (`hf.score_batch`, sdpa attention, fp32, one thread) in a fresh
process; that process reports the CPU seconds of the call (fastest of --repeats) and the peak
resident memory it added (VmHWM, reset before the call), once with glibc's default allocator
("peak") and once with every block of 64 KiB or more mmapped ("mmap", `MALLOC_MMAP_THRESHOLD_`,
which leaves no freed memory in the heap). Printed beside the model's prefill FLOPs and estimated
extra memory: the time estimate is only as good as "CPU seconds grow like FLOPs", which the two
ratio columns (to the first length) show; `tests/common/test_cost.py` checks the FLOP count itself
against torch's counter, and the memory.

    python benchmarks/cost_model.py [--lengths 1k,4k,16k] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHAPES = {
    "tiny-64": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    vocab_size=49152, tie_word_embeddings=False),
    "smol-4L": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=9, num_key_value_heads=3,
                    head_dim=64, vocab_size=49152, tie_word_embeddings=True),
}  # fmt: skip

CHILD = """
import ctypes, json, re, sys, time
import torch
from lm_eval.models.huggingface import HFLM
from lm_eval_longmem.backends import hf, plugin
from lm_eval_longmem.harness import install
from lm_eval_longmem.backends.request_type import EncodedRequest

def status(key):
    return int(re.search(key + r":\\s+(\\d+)", open("/proc/self/status").read())[1]) * 1024

torch.set_num_threads(1)
install(plugin())
lm = HFLM(pretrained=sys.argv[1], device="cpu", dtype="float32")
n, repeats = int(sys.argv[2]), int(sys.argv[3])
context = [1] + [5 + i % 1000 for i in range(n // 2)]
request = EncodedRequest(context, [5 + (7 * i) % 1000 for i in range(n - len(context) + 1)], False)
chunked = hf.uses_chunked_head(lm, context)
hf.score_batch(lm, [EncodedRequest(context[:32], request.continuation[:32], False)], 64, chunked)  # warm-up
cpu, extra = [], []
for _ in range(repeats):
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    open("/proc/self/clear_refs", "w").write("5")
    before, start = status("VmRSS"), time.process_time()
    hf.score_batch(lm, [request], n, chunked)
    cpu.append(time.process_time() - start)
    extra.append(status("VmHWM") - before)
print(json.dumps({"cpu": min(cpu), "extra": min(extra)}))
"""


def child(folder: Path, n: int, repeats: int, env: dict[str, str]) -> dict:
    """CPU seconds and added peak memory of one length, measured in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(n), str(repeats)],
                          capture_output=True, text=True, check=True, env={**os.environ, **env})  # fmt: skip
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build(shape: dict, out: Path, max_positions: int) -> Path:
    """A random-weight Llama of `shape` with SmolLM2's tokenizer (token ids are drawn directly)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from lm_eval_longmem.common.embedded import smollm2_dir

    torch.manual_seed(0)
    LlamaForCausalLM(
        LlamaConfig(**shape, max_position_embeddings=max_positions, bos_token_id=1, eos_token_id=2)
    ).save_pretrained(out)
    AutoTokenizer.from_pretrained(smollm2_dir()).save_pretrained(out)
    return out


def main() -> None:
    from transformers import AutoConfig

    from lm_eval_longmem.common import cost
    from lm_eval_longmem.common.lengths import parse_lengths

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="1k,4k,16k", help="input positions per request (default 1k,4k,16k)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lengths = parse_lengths(args.lengths)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; one torch thread; fp32, sdpa")
    print(
        f"{'shape':8} {'length':>7} {'cpu s':>8} {'GFLOP':>9} {'cpu ratio':>9} {'FLOP ratio':>10} {'peak MB':>8} {'mmap MB':>8} {'est MB':>8} {'mmap/est':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape in SHAPES.items():
            folder = build(shape, Path(tmp) / name, max(lengths) + 64)
            model = cost.ModelShape.from_config(AutoConfig.from_pretrained(folder), dtype="float32")
            first = None
            for n in lengths:
                got = child(folder, n, args.repeats, {})
                got["mmap"] = child(folder, n, 1, {"MALLOC_MMAP_THRESHOLD_": "65536"})["extra"]
                flops = cost.forward_flops(model, n, n - (n // 2 + 1) + 1)
                est = cost.hf_peak(model, "loglikelihood_accuracy", n).total - model.weights_bytes
                first = first or (got, flops, est)
                print(
                    f"{name:8} {n:>7} {got['cpu']:>8.2f} {flops / 1e9:>9.1f} {got['cpu'] / first[0]['cpu']:>9.2f} {flops / first[1]:>10.2f} "
                    f"{got['extra'] / 1e6:>8.1f} {got['mmap'] / 1e6:>8.1f} {est / 1e6:>8.1f} {got['mmap'] / est:>8.2f}"
                )


if __name__ == "__main__":
    main()

"""Cost of `loglikelihood_accuracy` against the floor and the harness's stock path, and how it grows with length.

For each length L, one teacher-forced copy sequence ``[bos] S [bos] S`` of L tokens (context: the
first half, continuation: the second half, as in the forgetting curve) is scored by

    floor  a bare forward of the model body (`model.base_model`) plus one LM-head matrix product
           over just the scored positions, and nothing else: no method can do less. Its time is
           body plus product ("body cpu" is the body alone, in CPU seconds); the product streams through one block
           of `FLOOR_BLOCK` rows, allocated and touched before the timed calls and not counted in
           the peak (a method could make it as small as it likes): the floor's peak is the body
           forward's.
    ours   `HFLM.loglikelihood_accuracy` (the body once, the LM head in chunks at scored positions).
    stock  the harness's `loglikelihood` path, `HFLM._loglikelihood_tokens`: full-vocabulary
           logits and their log_softmax at every position (and the model's KV cache, as the
           harness calls the model with its default `use_cache`). Run only where its estimated
           peak fits `--max-gb`; the estimate is printed for every length.

Each cell (length, variant) runs in a fresh process: it builds or loads the model, reads every
weight once (a memory-mapped checkpoint would otherwise page the LM head in during one variant
only), makes one short warm-up call, then `--repeats` timed calls. With `--rounds N` every cell
runs N such processes, the variants taking turns, so that a change in the machine's load hits all
of them alike. Reported: medians over all timed calls of wall time, CPU time of the process ("cpu
s": the work done with `--threads 1`; other jobs on a shared machine inflate it far less than wall
time, but still by several percent through shared caches) and peak memory. Peak on CPU: the process's peak
resident set size during the call (VmHWM, reset through /proc/self/clear_refs before each call),
so it includes the Python runtime and the resident weights; "over" subtracts the resident size
right before the call. On CUDA: `torch.cuda.max_memory_allocated` during the call. The growth
exponent is the least-squares slope of log(time) against log(length) over the measured lengths
(1: linear; attention's share pushes it towards 2 at long lengths), and per step between lengths.

Models (`--model`): random-weight Llama shapes built in the process, directly on the device, with
`max_position_embeddings` of at least 131,072 (the token ids are drawn at random, so a 4-token
stand-in tokenizer is enough):

    tiny        2 layers, hidden 64, vocabulary 49,152 (SmolLM2's): the head is most of the work
    smollm2-4l  SmolLM2-135M's shape (hidden 576, 9 heads, 3 KV heads, 49,152 tied) with 4 layers
    head-heavy  hidden 256, 4 layers, vocabulary 262,144 tied (Gemma 3's vocabulary size)
    llama3-8b   Llama-3-8B: 32 layers, hidden 4096, 8 KV heads, vocabulary 128,256 (use bf16 on a GPU)

or `smollm2`, the real SmolLM2-135M-Instruct (the package's embedded model, converted once into
the cache, as the tests use it), or the path of any HF model folder.

    python benchmarks/loglikelihood_accuracy.py --model tiny --lengths 4k,16k,32k,64k,128k --threads 1
    python benchmarks/loglikelihood_accuracy.py --model smollm2 --lengths 2k,4k --threads 1 --compare-with /path/to/main
    python benchmarks/loglikelihood_accuracy.py --model llama3-8b --device cuda --lengths 32k,64k,128k --json out.json

`--compare-with DIR` adds the variant `ours@base`: ours as the `lm_eval_longmem` in the checkout DIR
computes it, so a change is measured before/after side by side in one run.
`benchmarks/gpu_cost_growth.sh` runs the llama3-8b table (and the gpu tests) on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ("floor", "ours", "stock")
BASE = "ours@base"
FLOOR_BLOCK = 1024
"""Scored positions per block of the floor's head product: enough rows for a matrix product to run
at full speed on CPU and GPU."""
MIN_WINDOW = 131072

SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=49152, tie_word_embeddings=False),
    "smollm2-4l": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=9,
                       num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0),
    "head-heavy": dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=262144, tie_word_embeddings=True),
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0),
}  # fmt: skip


# ---- the child: one cell in a fresh process -------------------------------------------------


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Peak:
    """Peak memory of what runs between `reset()` and `read()`: VmHWM on CPU, max_memory_allocated on CUDA."""

    def __init__(self, device):
        import torch

        self.torch, self.cuda = torch, device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def now(self) -> int:
        return self.torch.cuda.memory_allocated() if self.cuda else resident_bytes()

    def reset(self) -> None:
        self.sync()
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()
        else:
            with open("/proc/self/clear_refs", "w") as f:  # "5": reset the peak RSS (Linux >= 4.0)
                f.write("5")

    def read(self) -> int:
        self.sync()
        if self.cuda:
            return self.torch.cuda.max_memory_allocated()
        with open("/proc/self/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024


def stand_in_tokenizer():
    """A 4-token tokenizer: the benchmark's token ids are drawn directly, HFLM only needs one to exist."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>")),
        bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
    )  # fmt: skip


def load(model: str, device: str, dtype: str, length: int):
    """HFLM around the random-weight shape `model` (built on `device`) or a model folder."""
    import torch
    from lm_eval.models.huggingface import HFLM

    if model in SHAPES:
        from transformers import AutoModelForCausalLM, LlamaConfig

        config = LlamaConfig(**SHAPES[model], max_position_embeddings=max(MIN_WINDOW, length),
                             bos_token_id=1, eos_token_id=2, pad_token_id=3)  # fmt: skip
        torch.manual_seed(0)
        with torch.device(device):
            built = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        return HFLM(pretrained=built.eval(), tokenizer=stand_in_tokenizer(), batch_size=1)
    if model == "smollm2":
        from lm_eval_longmem.common.embedded import smollm2_dir

        model = str(smollm2_dir())
    lm = HFLM(pretrained=model, device=device, dtype=dtype, batch_size=1)
    with torch.no_grad():  # page every memory-mapped weight in (see the module docstring)
        for param in lm.model.parameters():
            param.sum()
    return lm


def copy_sequence(length: int, vocab_size: int, bos: int) -> tuple[list[int], list[int]]:
    """`[bos] S [bos] S` of `length` tokens (S random, seeded by the length), split into halves."""
    import numpy as np

    half = length // 2
    block = np.random.default_rng([0, length]).integers(100, vocab_size, size=half - 1).tolist()
    sequence = [bos, *block, bos, *block]
    return sequence[:half], sequence[half:]


def measure(variant: str, model: str, length: int, device: str, dtype: str, threads: int, repeats: int) -> dict:
    """Runs in the child: load, warm up, time `repeats` calls; medians of wall, CPU and peak."""
    import torch
    from lm_eval.api.instance import Instance

    from lm_eval_longmem.backends import plugin
    from lm_eval_longmem.harness import install

    torch.set_num_threads(threads)
    install(plugin())
    lm = load(model, device, dtype, length)
    peak = Peak(lm.device)
    bos = lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else lm.prefix_token_id
    vocab = lm.model.get_input_embeddings().num_embeddings
    weight = lm.model.get_output_embeddings().weight
    block = None
    if variant == "floor":  # allocated and touched once: the floor pays no page faults or allocations
        block = torch.zeros((min(FLOOR_BLOCK, length), weight.shape[0]), dtype=weight.dtype, device=weight.device)
    block_bytes = 0 if block is None else block.numel() * block.element_size()
    body_seconds = []

    def call(ctx: list[int], cont: list[int]) -> tuple[float | None, int | None]:
        """The variant's work; returns its log-probability (None for the floor) and, for the floor, its body peak."""
        if variant == "stock":
            return lm._loglikelihood_tokens([(None, ctx, cont)], disable_tqdm=True)[0][0], None
        if variant != "floor":
            return lm.loglikelihood_accuracy(
                [Instance("loglikelihood_accuracy", {}, (ctx, cont), 0)], disable_tqdm=True
            )[0].logprob, None
        start = time.process_time()
        with torch.no_grad():
            ids = torch.tensor([ctx + cont[:-1]], device=lm.device)
            hidden = lm.model.base_model(input_ids=ids, use_cache=False).last_hidden_state
            body_peak = peak.read()
            body_seconds.append(time.process_time() - start)
            rows = hidden[0, len(ctx) - 1 :]  # the positions that predict the continuation
            for first in range(0, len(rows), FLOOR_BLOCK):
                chunk = rows[first : first + FLOOR_BLOCK]
                torch.mm(chunk, weight.t(), out=block[: len(chunk)])
        return None, body_peak

    call(*copy_sequence(64, vocab, bos))
    ctx, cont = copy_sequence(length, vocab, bos)
    walls, cpus, peaks, overs = [], [], [], []
    logprob = None
    body_seconds.clear()  # the warm-up's
    for _ in range(repeats):
        resident = peak.now()
        peak.reset()
        start, cpu_start = time.perf_counter(), time.process_time()
        logprob, body_peak = call(ctx, cont)
        peak.sync()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu_start)
        peaks.append(body_peak - block_bytes if body_peak else peak.read())
        overs.append(peaks[-1] + block_bytes - resident)
    return {"variant": variant, "length": length, "logprob": logprob, "walls": walls, "cpus": cpus, "bodies": body_seconds,
            "peaks": [p / 1e9 for p in peaks], "overs": [o / 1e9 for o in overs]}  # fmt: skip


# ---- the parent: cells, estimates, table ------------------------------------------------------


def model_config(model: str) -> dict:
    """Layers, hidden size, heads, vocabulary of `model` (a shape or a folder), for the stock estimate."""
    if model in SHAPES:
        return SHAPES[model]
    if model == "smollm2":
        from lm_eval_longmem.common.embedded import smollm2_dir

        model = str(smollm2_dir())
    return json.loads((Path(model) / "config.json").read_text())


def stock_extra_bytes(config: dict, length: int, itemsize: int) -> int:
    """What the stock path holds beyond the body forward: logits and log_softmax `[L, vocabulary]`, and the KV cache."""
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_cache = 2 * config["num_hidden_layers"] * length * kv_heads * head_dim * itemsize
    return 2 * length * config["vocab_size"] * itemsize + kv_cache


def run_cell(variant: str, args, length: int, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", variant, "--model", args.model, "--lengths", str(length),
           "--device", args.device, "--dtype", args.dtype, "--threads", str(args.threads), "--repeats", str(args.repeats)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    if variant == BASE:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(args.compare_with).resolve()), env.get("PYTHONPATH", "")])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "length": length, "error": f"timed out after {timeout:.0f} s"}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {
            "variant": variant,
            "length": length,
            "error": f"exit {out.returncode}: {last[-300:]}",
            "stderr": out.stderr[-4000:],
        }
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "timeout_s": timeout}


def merged(runs: list[dict]) -> dict:
    """One row from the runs (rounds) of a cell: medians over all their timed calls, or the first failure."""
    failed = [run for run in runs if "walls" not in run]
    if failed:
        return failed[0]
    calls = {key: [x for run in runs for x in run[key]] for key in ("walls", "cpus", "bodies", "peaks", "overs")}
    return {
        "variant": runs[0]["variant"], "length": runs[0]["length"], "logprob": runs[0]["logprob"], "calls": len(calls["walls"]),
        "seconds": statistics.median(calls["walls"]), "cpu_seconds": statistics.median(calls["cpus"]),
        "body_seconds": statistics.median(calls["bodies"]) if calls["bodies"] else None,
        "peak_gb": statistics.median(calls["peaks"]), "over_gb": statistics.median(calls["overs"]),
    }  # fmt: skip


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) against log(length)."""
    if len(points) < 2:
        return None
    xs, ys = [math.log(p[0]) for p in points], [math.log(p[1]) for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def ratio(a: dict | None, b: dict | None, key: str) -> str:
    if not a or not b or "error" in a or "error" in b or not a.get(key) or not b.get(key):
        return "-"
    return f"{a[key] / b[key]:.3f}"


def print_cell(cell: dict) -> None:
    if "error" in cell or "skipped" in cell:
        print(f"{cell['length']:>7} {cell['variant']:>9}  {cell.get('error') or cell['skipped']}", flush=True)
        return
    body = "" if cell["body_seconds"] is None else f"{cell['body_seconds']:.2f}"
    logprob = "" if cell["logprob"] is None else f"{cell['logprob']:.4f}"
    print(f"{cell['length']:>7} {cell['variant']:>9} {cell['seconds']:>8.2f} {cell['cpu_seconds']:>8.2f} {body:>8}"
          f" {cell['peak_gb']:>8.3f} {cell['over_gb']:>8.3f} {logprob:>13}", flush=True)  # fmt: skip


def summarise(cells: list[dict], lengths: list[int], variants: list[str]) -> None:
    def get(length, variant):
        found = [c for c in cells if c["length"] == length and c["variant"] == variant]
        return found[0] if found and "seconds" in found[0] else None

    print()
    print(
        "ratios (medians): ours over floor and over stock"
        + (f"; {BASE} is ours before the change" if BASE in variants else "")
    )
    heads = ["wall o/f", "cpu o/f", "peak o/f", "wall o/s", "cpu o/s", "peak o/s"]
    if BASE in variants:
        heads += ["cpu b/f", "cpu o/b"]
    print(f"{'length':>7} " + " ".join(f"{h:>9}" for h in heads))
    for length in lengths:
        ours, floor, stock, base = (get(length, v) for v in ("ours", "floor", "stock", BASE))
        row = [ratio(ours, floor, "seconds"), ratio(ours, floor, "cpu_seconds"), ratio(ours, floor, "peak_gb"),
               ratio(ours, stock, "seconds"), ratio(ours, stock, "cpu_seconds"), ratio(ours, stock, "peak_gb")]  # fmt: skip
        if BASE in variants:
            row += [ratio(base, floor, "cpu_seconds"), ratio(ours, base, "cpu_seconds")]
        print(f"{length:>7} " + " ".join(f"{r:>9}" for r in row))
    print("targets: ours/floor <= 1.10 in time and <= 1.15 in peak; ours/stock below 1 in both")
    print()
    print("growth exponent: slope of log(time) vs log(length), fitted over all lengths, then per step")
    for variant in variants:
        for key in ("seconds", "cpu_seconds"):
            points = [(c["length"], c[key]) for c in (get(L, variant) for L in lengths) if c]
            fitted = slope(points)
            if fitted is None:
                continue
            steps = " ".join(f"{a[0] // 1024}k-{b[0] // 1024}k {slope([a, b]):.2f}" for a, b in zip(points, points[1:]))
            print(f"{variant:>9} {'wall' if key == 'seconds' else 'cpu':>4} {fitted:.2f}   ({steps})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="smollm2", help=f"{', '.join(SHAPES)} (random weights), smollm2, or a model folder"
    )
    parser.add_argument("--lengths", default="1k,2k,4k", help="sequence lengths in tokens, e.g. 4k,16k,32k")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which of floor,ours,stock to run")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default=None, help="model dtype (default: float32 on CPU, bfloat16 on CUDA)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per cell")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per cell and round; medians are reported")
    parser.add_argument(
        "--rounds", type=int, default=1, help="fresh processes per cell, interleaved with the other variants'"
    )
    parser.add_argument(
        "--max-gb",
        type=float,
        default=None,
        help="skip stock where its estimated peak exceeds this (default: 3 on CPU, 95%% of the GPU)",
    )
    parser.add_argument(
        "--compare-with", default=None, help="a checkout whose lm_eval_longmem runs the extra variant ours@base"
    )
    parser.add_argument("--cell-timeout", type=float, default=3600.0, help="seconds one cell may take")
    parser.add_argument(
        "--deadline", type=float, default=None, help="seconds for the whole run; later cells are skipped"
    )
    parser.add_argument(
        "--json", default=None, help="also write every cell to this JSON file (rewritten after each cell)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    from lm_eval_longmem.common.lengths import parse_lengths

    lengths = parse_lengths(args.lengths)
    if args.child:
        print(
            json.dumps(measure(args.child, args.model, lengths[0], args.device, args.dtype, args.threads, args.repeats))
        )
        return
    variants = [v for v in args.variants.split(",") if v]
    if unknown := set(variants) - set(VARIANTS):
        raise SystemExit(f"--variants: unknown {sorted(unknown)}; choose from {','.join(VARIANTS)}")
    if args.compare_with:
        if not (Path(args.compare_with) / "lm_eval_longmem").is_dir():
            raise SystemExit(f"--compare-with {args.compare_with}: no lm_eval_longmem package there")
        variants.insert(variants.index("ours") + 1 if "ours" in variants else len(variants), BASE)
    if not (args.model in SHAPES or args.model == "smollm2" or (Path(args.model) / "config.json").is_file()):
        raise SystemExit(
            f"--model {args.model}: not a shape ({', '.join(SHAPES)}), smollm2, or a folder with config.json"
        )

    import torch
    import transformers

    if args.max_gb is None:
        cuda = args.device.startswith("cuda")
        args.max_gb = 0.95 * torch.cuda.get_device_properties(0).total_memory / 1e9 if cuda else 3.0
    config = model_config(args.model)
    itemsize = torch.finfo(getattr(torch, args.dtype)).bits // 8
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"{os.cpu_count()} CPUs"
    print(f"model: {args.model} ({config['num_hidden_layers']} layers, hidden {config['hidden_size']},"
          f" vocabulary {config['vocab_size']})  device: {args.device} ({device_name})  dtype: {args.dtype}"
          f"  threads: {args.threads}  repeats: {args.repeats} x rounds: {args.rounds} (medians)")  # fmt: skip
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}")
    print(
        "one fresh process per cell and round, rounds interleaved; peak = "
        + ("max_memory_allocated" if args.device.startswith("cuda") else "VmHWM (whole process)")
    )
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("stock's estimated extra over the floor (2 x [L, vocabulary] logits + KV cache): "
          + ", ".join(f"{L // 1024}k {stock_extra_bytes(config, L, itemsize) / 1e9:.1f} GB" for L in lengths)
          + f"; run where floor + extra <= {args.max_gb:.1f} GB")  # fmt: skip
    print(
        f"{'length':>7} {'variant':>9} {'wall s':>8} {'cpu s':>8} {'body cpu':>8} {'peak GB':>8} {'over GB':>8} {'logprob':>13}"
    )
    started, runs, cells, floor_peaks = time.monotonic(), [], [], {}
    # Stock last: where a deadline cuts the run short, it cuts the one variant that is a comparison only.
    phases = [[v for v in variants if v != "stock"], [v for v in variants if v == "stock"]]
    for phase, length in ((phase, length) for phase in phases if phase for length in lengths):
        by_variant = {variant: [] for variant in phase}
        for _ in range(args.rounds):  # rounds interleave the variants, so a change in the load hits them alike
            for variant in phase:
                if by_variant[variant] and "walls" not in by_variant[variant][-1]:
                    continue  # failed or skipped: not again
                left = None if args.deadline is None else args.deadline - (time.monotonic() - started)
                run = None
                if left is not None and left < 10:
                    run = {"variant": variant, "length": length, "skipped": "skipped: --deadline reached"}
                elif variant == "stock":
                    estimate = floor_peaks.get(length, 0) + stock_extra_bytes(config, length, itemsize) / 1e9
                    if estimate > args.max_gb:
                        run = {"variant": variant, "length": length, "estimate_gb": estimate,
                               "skipped": f"skipped: estimated peak {estimate:.1f} GB > --max-gb {args.max_gb:.1f}"}  # fmt: skip
                if run is None:
                    run = run_cell(
                        variant, args, length, args.cell_timeout if left is None else min(args.cell_timeout, left)
                    )
                if variant == "floor" and "peaks" in run:
                    floor_peaks[length] = max(run["peaks"])
                by_variant[variant].append(run)
                runs.append(run)
                if args.json:
                    Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1))
        for variant in phase:
            cells.append(merged(by_variant[variant]))
            print_cell(cells[-1])
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    summarise(cells, lengths, variants)


if __name__ == "__main__":
    main()

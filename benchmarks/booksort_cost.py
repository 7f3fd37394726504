"""Book-SORT through the harness's stock `loglikelihood` path and through ours, side by side on the embedded model.

The same trials go through both: a local build from the embedded plays (`lm-eval-longmem booksort build`,
L_S = 20 words), the first `--excerpts` excerpts of each L_E with all four distance bins, prompts and label
pairs exactly as `booksort_in_context` sends them (`build_all_requests` on those docs). Variants:

    stock  `HFLM.loglikelihood` on the (prompt, " A"/" B") pairs: full-vocabulary logits and `log_softmax` at every
           position, each trial's prompt once (the harness groups the two labels by context)
    ours   `HFLM.loglikelihood_accuracy` on the same pairs (what the task sends): the LM head only where a label is
           read, and each excerpt once (`backends.hf`: the shared prefix, then each trial's suffix on its KV cache)

Each cell (L_E, variant) runs in a fresh process (model loaded and every weight read before timing, one
warm-up call on one short pair), `--rounds` times with the variants taking turns. Reported: medians of wall
time and CPU time of the process, and peak resident memory during the call (VmHWM reset through
/proc/self/clear_refs; the whole process, weights included); ratios ours/stock; A/B decisions that agree and
the largest log-likelihood difference. The last line is one JSON object.

    python benchmarks/booksort_cost.py --excerpts 3 --rounds 3 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

LENGTHS = (1000, 2500)


def trial_pairs(data: Path, length: int, excerpts: int, model: str) -> list[list[str]]:
    """[prompt, " A"], [prompt, " B"] of every trial of the first `excerpts` excerpts having all four bins."""
    from lm_eval.tasks import TaskManager

    from lm_eval_longmem.paths import task_configs_dir

    meta = {
        "pretrained": model,
        "booksort_data": str(data),
        "booksort_excerpt_lengths": length,
        "booksort_segment_lengths": 20,
    }
    manager = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=meta)
    task = manager.load(["booksort_in_context"])["tasks"]["booksort_in_context"]
    by_excerpt: dict[tuple, list[int]] = defaultdict(list)
    for i, doc in enumerate(task.test_docs()):
        by_excerpt[(doc["book_idx"], doc["excerpt_idx"])].append(i)
    chosen = [ids for ids in by_excerpt.values() if len(ids) == 4][:excerpts]
    task.build_all_requests(samples=[i for ids in chosen for i in ids])
    return [list(instance.args[:2]) for instance in task.instances]


def peak_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # "5": reset the peak RSS (Linux >= 4.0)
        f.write("5")


def peak_read() -> int:
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024  # type: ignore[union-attr]


def cell(variant: str, pairs_file: str, model: str, threads: int) -> None:
    """One fresh-process measurement; prints one JSON line: wall, cpu, peak and each pair's log-likelihood."""
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from lm_eval_longmem.backends import plugin
    from lm_eval_longmem.backends.request_type import OUTPUT_TYPE
    from lm_eval_longmem.harness import install

    torch.set_num_threads(threads)
    install(plugin())
    pairs = [tuple(p) for p in json.loads(Path(pairs_file).read_text())]
    lm = HFLM(pretrained=model, device="cpu", dtype="float32", batch_size=1)
    sum(float(p.float().sum()) for p in lm.model.parameters())  # every weight read once

    def score(batch: list[tuple]) -> list[float]:
        if variant == "stock":
            return [ll for ll, _ in lm.loglikelihood([Instance("loglikelihood", {}, p, 0) for p in batch], True)]
        return [r.logprob for r in lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, p, 0) for p in batch], True)]

    score([("Which came first?", " A")])
    peak_reset()
    wall, cpu = time.perf_counter(), time.process_time()
    lls = score(pairs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"wall": wall, "cpu": cpu, "peak": peak_read(), "lls": lls}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--excerpts", type=int, default=3, help="excerpts per L_E (4 trials each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cell", nargs=2, metavar=("VARIANT", "PAIRS_JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    from lm_eval_longmem.common.embedded import embedded_books_dir, smollm2_dir

    model = str(smollm2_dir())
    if args.cell:
        cell(args.cell[0], args.cell[1], model, args.threads)
        return
    work = Path(tempfile.mkdtemp(prefix="booksort_cost_"))
    build = ["lm-eval-longmem", "booksort", "build", "--books", str(embedded_books_dir()), "--output_path"]
    subprocess.run(
        [*build, str(work / "data"), "--excerpt_lengths", "1000,2500", "--segment_lengths", "20"], check=True
    )
    files = {}
    for length in LENGTHS:
        files[length] = work / f"pairs_{length}.json"
        files[length].write_text(json.dumps(trial_pairs(work / "data", length, args.excerpts, model)))
    runs: dict[tuple[int, str], list[dict]] = defaultdict(list)
    env = os.environ | {"OMP_NUM_THREADS": str(args.threads)}
    for _ in range(args.rounds):
        for length in LENGTHS:
            for variant in ("stock", "ours"):
                cmd = [sys.executable, __file__, "--threads", str(args.threads), "--cell", variant, str(files[length])]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
                runs[length, variant].append(json.loads(out.strip().splitlines()[-1]))
    summary: dict[str, float | int] = {}
    agree = trials = 0
    print(f"{'L_E':>5} {'variant':>7} {'wall s':>8} {'cpu s':>8} {'peak GB':>8}")
    for length in LENGTHS:
        med = {}
        for variant in ("stock", "ours"):
            cells = runs[length, variant]
            med[variant] = {k: statistics.median(c[k] for c in cells) for k in ("wall", "cpu", "peak")}
            m = med[variant]
            print(f"{length:>5} {variant:>7} {m['wall']:>8.2f} {m['cpu']:>8.2f} {m['peak'] / 1e9:>8.3f}")
        stock, ours = runs[length, "stock"][0]["lls"], runs[length, "ours"][0]["lls"]
        decided = [(stock[i] >= stock[i + 1]) == (ours[i] >= ours[i + 1]) for i in range(0, len(stock), 2)]
        gap = max(abs(s - o) for s, o in zip(stock, ours, strict=True))
        agree, trials = agree + sum(decided), trials + len(decided)
        for key in ("cpu", "wall", "peak"):
            summary[f"{key}_ratio_{length}"] = round(med["ours"][key] / med["stock"][key], 3)
        print(
            f"L_E={length}: ours/stock cpu {summary[f'cpu_ratio_{length}']}, wall {summary[f'wall_ratio_{length}']},"
            f" peak {summary[f'peak_ratio_{length}']}; A/B decisions agree on {sum(decided)}/{len(decided)} trials;"
            f" largest log-likelihood difference {gap:.2e}"
        )
    print(json.dumps(summary | {"agree": agree, "trials": trials}))


if __name__ == "__main__":
    main()

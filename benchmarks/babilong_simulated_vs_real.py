"""SmolLM2 on BABILong qa1 at 0k: simulated facts against the published bAbI test file, same prompt.

Runs `lm_eval` in-process twice on the same model, `babilong_facts=simulated` and
`babilong_facts=babi` (the bAbI test file), 100 questions each at 0k (the facts alone), and prints
both accuracies with Wilson 95% intervals and whether the intervals overlap. Needs the bAbI files
(`--babi-dir`, default ../shared/data/babi/en beside the checkout).

    python benchmarks/babilong_simulated_vs_real.py [--samples 100] [--task qa1] [--pretrained DIR]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def accuracy(pretrained: str, facts: str, args: argparse.Namespace) -> tuple[float, int]:
    import lm_eval

    from lm_eval_longmem import task_manager

    metadata = {
        "pretrained": pretrained,
        "babilong_source": "generate",
        "babilong_facts": facts,
        "babilong_babi_dir": str(args.babi_dir),
        "babilong_lengths": "0k",
        "babilong_tasks": args.task,
        "babilong_samples": args.samples,
        "babilong_seed": args.seed,
    }
    out = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": pretrained, "dtype": "float32"},
        tasks=["babilong"],
        task_manager=task_manager(metadata=metadata),
        device="cpu",
        batch_size=args.batch_size,
        bootstrap_iters=0,
    )
    metrics = out["results"]["babilong"]
    return metrics[f"acc@{args.task}_0k,none"], out["n-samples"]["babilong"]["effective"]


def main() -> None:
    from lm_eval_longmem.common.embedded import smollm2_dir
    from lm_eval_longmem.common.stats import proportion_interval

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--task", default="qa1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--pretrained", default=None, help="model folder (default: the embedded SmolLM2)")
    parser.add_argument("--babi-dir", type=Path, default=REPO.parent / "shared" / "data" / "babi" / "en")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    pretrained = args.pretrained or str(smollm2_dir())
    rows = {}
    for facts in ("simulated", "babi"):
        acc, n = accuracy(pretrained, facts, args)
        rows[facts] = proportion_interval(round(acc * n), n), n
    print(f"{args.task} at 0k, {Path(pretrained).name}, seed {args.seed}")
    print(f"{'facts':<10} {'n':>4} {'acc':>7} {'95% Wilson':>16}")
    for facts, (iv, n) in rows.items():
        print(f"{facts:<10} {n:>4} {iv.estimate:>7.3f}   [{iv.low:.3f}, {iv.high:.3f}]")
    (a, _), (b, _) = rows["simulated"], rows["babi"]
    overlap = a.low <= b.high and b.low <= a.high
    print(f"intervals overlap: {'yes' if overlap else 'no'}; difference {a.estimate - b.estimate:+.3f}")


if __name__ == "__main__":
    main()

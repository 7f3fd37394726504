"""Time of a small forgetting-curve sweep, broken down: tokenisation, docs, requests, forward passes, analysis.

Runs the real task object and the real `HFLM.loglikelihood_accuracy` in one process, in the order
the harness does, and prints each stage's wall time and its share of the total:

    tokenise (cold)   corpus -> token stream with an empty cache (first run for a tokenizer)
    tokenise (warm)   the same from the on-disk cache (every later run)
    build docs        grid, skips, seeded S/I spans (from the warm stream)
    task index        lm_eval's TaskManager indexing every task YAML (harness cost, every run)
    build requests    task construction (builds the docs again) + token-id requests for every doc
    forward passes    loglikelihood_accuracy over all copy and LM sequences (batched, sorted by length)
    analysis          process_results + every aggregation (memory lengths, bootstrap) + summarize

Issue 3's reference size (SmolLM2, l = 2048, n = 8, 3 samples: 48 sequences of up to 4097 tokens):

    python benchmarks/forgetting_curve_sweep.py --claimed 2048 --points 8 --samples 3

Without --pretrained it uses the SmolLM2-135M-Instruct folder that the test suite converts into
~/.cache/lm_eval_longmem/test-models (run `pytest -m slow tests/forgetting_curve` once). The corpus
defaults to the shared Gutenberg books beside the checkout (`../shared/data/books`).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def default_model() -> Path:
    root = os.environ.get("LM_EVAL_LONGMEM_CACHE") or Path.home() / ".cache" / "lm_eval_longmem"
    return Path(root) / "test-models" / "SmolLM2-135M-Instruct"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", default=str(default_model()))
    parser.add_argument("--claimed", default="2048", help="claimed window l (default 2048)")
    parser.add_argument("--points", type=int, default=8, help="grid points n (default 8)")
    parser.add_argument("--samples", type=int, default=3, help="samples per length (default 3)")
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "data" / "books"))
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    # A fresh cache directory, so the first tokenisation is really cold; set before our imports.
    os.environ["LM_EVAL_LONGMEM_CACHE"] = tempfile.mkdtemp(prefix="fc-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from lm_eval_longmem.forgetting_curve.analysis import curve_from_points, summarize
    from lm_eval_longmem.forgetting_curve.data import SweepOptions, build_sweep, corpus_stream

    metadata = {
        "pretrained": args.pretrained,
        "forgetting_curve_claimed_length": args.claimed,
        "forgetting_curve_points": args.points,
        "forgetting_curve_samples": args.samples,
        "forgetting_curve_corpus": args.corpus,
    }
    times: dict[str, float] = {}

    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        times[name] = time.perf_counter() - start
        return value

    options = SweepOptions.from_metadata(metadata)
    stream = timed("tokenise (cold)", lambda: corpus_stream(options, metadata))
    timed("tokenise (warm)", lambda: corpus_stream(options, metadata))
    sweep = timed("build docs", lambda: build_sweep(metadata))

    lm = get_model("hf").create_from_arg_obj(
        {"pretrained": args.pretrained, "dtype": "float32"}, {"batch_size": args.batch_size, "device": "cpu"}
    )

    manager = timed("task index", lambda: TaskManager(metadata=metadata))  # the harness's YAML index

    def requests():
        task = manager.load(["forgetting_curve"])["tasks"]["forgetting_curve"]
        task.build_all_requests(rank=0, world_size=1)
        return task

    task = timed("build requests", requests)
    instances = task.instances
    responses = timed("forward passes", lambda: lm.loglikelihood_accuracy(instances))

    def analysis():
        by_doc: dict[int, list] = {}
        for instance, response in zip(instances, responses, strict=True):
            by_doc.setdefault(instance.doc_id, []).append((instance.idx, response))
        raw: dict[str, list] = {}
        for doc_id, answers in by_doc.items():
            results = [r for _, r in sorted(answers, key=lambda pair: pair[0])]
            for name, value in task.process_results(task.eval_docs[doc_id], results).items():
                raw.setdefault(name, []).append(value)
        aggregations = task.aggregation()
        reported = {name: aggregations[name](values) for name, values in raw.items()}
        return reported, summarize(curve_from_points(raw["fine_memory_length"]))

    reported, summary = timed("analysis", analysis)

    n_tokens = sum(len(i.args[0]) + len(i.args[1]) - 1 for i in instances)
    total = sum(v for k, v in times.items() if k != "tokenise (warm)")
    print(
        f"model {Path(args.pretrained).name}, corpus {len(stream):,} tokens, lengths {sweep.tested}, "
        f"{args.samples} samples -> {len(instances)} sequences, {n_tokens:,} input positions, "
        f"batch size {args.batch_size}, {args.threads} threads"
    )
    print(f"{'stage':<18}{'seconds':>10}{'share':>9}")
    for name, seconds in times.items():
        share = "" if name == "tokenise (warm)" else f"{seconds / total:8.1%}"
        print(f"{name:<18}{seconds:>10.2f}{share:>9}")
    print(f"{'total (cold)':<18}{total:>10.2f}")
    print(
        f"forward throughput: {n_tokens / times['forward passes']:,.0f} positions/s; "
        f"warm/cold tokenisation: {times['tokenise (warm)'] / times['tokenise (cold)']:.3f}"
    )
    print(
        json.dumps(
            {
                "fine": summary.fine.label,
                "coarse": summary.coarse.label,
                **{k: v for k, v in reported.items() if "@" in k},
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main()

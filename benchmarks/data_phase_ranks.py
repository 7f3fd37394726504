"""How long the data phase takes with one process and with two data-parallel ranks on one node.

Each run starts from an empty cache and loads `babilong` (generated, sentence-split books) and
`forgetting_curve` (tokenized books) through the harness's `TaskManager`, which builds their docs,
in every rank at once (torchrun, CPU). With the cache's file locks one rank builds each entry and the
other waits, then reads it; the figure is the slowest rank's wall time.

    python benchmarks/data_phase_ranks.py [--books 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from lm_eval_longmem.common import embedded


def metadata(books: int) -> dict:
    folder = embedded.embedded_books_dir()
    corpus = tempfile.mkdtemp(prefix="books-")
    for book in sorted(folder.glob("*.txt"))[:books]:
        os.symlink(book, os.path.join(corpus, book.name))
    return {
        "pretrained": str(embedded.smollm2_dir()),
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": corpus,
        "babilong_lengths": ["1k", "4k"],
        "babilong_tasks": ["qa1", "qa2"],
        "babilong_samples": 5,
        "forgetting_curve_corpus": corpus,
        "forgetting_curve_samples": 2,
    }


def inner(meta: dict) -> None:
    from lm_eval.tasks import TaskManager

    start = time.perf_counter()
    TaskManager(metadata=meta).load(["babilong", "forgetting_curve"])
    print(json.dumps({"rank": int(os.environ.get("RANK", 0)), "seconds": time.perf_counter() - start}), flush=True)


def outer(ranks: int, meta: dict) -> float:
    env = {**os.environ, "LM_EVAL_LONGMEM_CACHE": tempfile.mkdtemp(prefix="cache-"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks), __file__,
           "--inner", json.dumps(meta)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return max(json.loads(line)["seconds"] for line in out.splitlines() if line.startswith("{"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", type=int, default=3)
    parser.add_argument("--inner")
    args = parser.parse_args()
    if args.inner:
        return inner(json.loads(args.inner))
    meta = metadata(args.books)
    one, two = outer(1, meta), outer(2, meta)
    print(f"data phase, empty cache, slowest rank: 1 rank {one:.1f} s, 2 ranks {two:.1f} s ({two / one:.2f}x)")


if __name__ == "__main__":
    main()

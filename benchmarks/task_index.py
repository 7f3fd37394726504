"""How long `lm_eval` takes to index tasks and to resolve `--tasks babilong`, with and without our plugin.

Each variant runs in a fresh interpreter (as `lm_eval` does), interleaved, several times; the
script prints the medians side by side and their ratio. "resolve" is what `--tasks babilong` costs
before any data are built: indexing every task folder and turning the name into its task configs.

    python benchmarks/task_index.py [--runs 5] [--repo PATH]   # --repo: time another checkout of the package
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

CODE = """
import time
t0 = time.perf_counter()
from lm_eval.tasks import TaskManager
tm = TaskManager()
t1 = time.perf_counter()
names = tm.match_tasks(["babilong"])
configs = [tm._get_config(n) if hasattr(tm, "_get_config") else None for n in names]
t2 = time.perf_counter()
print(t1 - t0, t2 - t0, len(tm.all_tasks))
"""


def measure(env: dict[str, str]) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=None, help="a checkout of lm-eval-longmem to time instead of the installed one")
    args = parser.parse_args()
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if args.repo:
        base["PYTHONPATH"] = f"{args.repo}{os.pathsep}{base.get('PYTHONPATH', '')}"
    variants = {"without plugin": {**base, "LM_EVAL_LONGMEM_AUTOLOAD": "0"}, "with plugin": base}
    found: dict[str, list[tuple[float, float, int]]] = {name: [] for name in variants}
    for _ in range(args.runs):
        for name, env in variants.items():
            found[name].append(measure(env))
    print(f"{args.runs} fresh interpreters per variant, interleaved; medians")
    print(f"{'variant':<16} {'index s':>8} {'resolve babilong s':>19} {'tasks indexed':>14}")
    medians = {}
    for name, rows in found.items():
        index, resolve = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        medians[name] = (index, resolve)
        print(f"{name:<16} {index:>8.2f} {resolve:>19.2f} {rows[0][2]:>14}")
    with_, without = medians["with plugin"], medians["without plugin"]
    print(f"ratio with/without: index {with_[0] / without[0]:.2f}, resolve {with_[1] / without[1]:.2f}")


if __name__ == "__main__":
    main()

"""What the plugin adds to an `lm_eval` command that runs none of our tasks: CPU seconds with the start-up hook
against the same command with it off, paired.

Each pair runs the command twice in fresh interpreters, once with the hook and once with
`LM_EVAL_LONGMEM_AUTOLOAD=0`, in a random order (seeded); a run's cost is its CPU seconds (user + system,
from `os.wait4`), which another process on the machine disturbs less than wall time. The script prints each
variant's median, the median of the pairs' ratios with its spread (10th-90th percentile), and where the
plugin's share goes: the same parts timed inside one interpreter with the hook on (importing
`lm_eval.tasks.manager`, which activates the plugin; the registry of evaluations; indexing our task folders).

    python benchmarks/lm_eval_startup.py [--pairs 10] [--seed 0] [-- ls tasks]
    # the lm_eval arguments after `--` (default: `ls tasks`, the harness's whole task index, listed)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile

PARTS = """
import time
t0 = time.process_time()
import lm_eval.tasks.manager
t1 = time.process_time()
from lm_eval_longmem.common.evaluations import task_folders
folders = task_folders()
t2 = time.process_time()
from lm_eval.tasks._index import TaskIndex
TaskIndex.build(folders)
t3 = time.process_time()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def cpu_seconds(args: list[str], env: dict[str, str], cwd: str) -> float:
    """User + system CPU seconds of one fresh `python ...` process (its children included)."""
    proc = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return usage.ru_utime + usage.ru_stime


def parts(env: dict[str, str], cwd: str, runs: int) -> list[float]:
    """Median CPU seconds of: importing lm_eval.tasks.manager, the registry, indexing our folders (hook on)."""
    rows = [
        [float(x) for x in subprocess.run(
            [sys.executable, "-c", PARTS], capture_output=True, text=True, env=env, cwd=cwd, check=True
        ).stdout.split()]
        for _ in range(runs)
    ]  # fmt: skip
    return [statistics.median(column) for column in zip(*rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("command", nargs="*", default=["ls", "tasks"], help="lm_eval's arguments (after --)")
    args = parser.parse_args()
    cwd = tempfile.mkdtemp()  # not this checkout: `python -m` would import it from the working folder
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    base.pop("LM_EVAL_LONGMEM_AUTOLOAD", None)
    variants = {"with hook": base, "hook off": {**base, "LM_EVAL_LONGMEM_AUTOLOAD": "0"}}
    command = ["-m", "lm_eval", *args.command]
    for env in variants.values():  # warm the file cache and the bytecode of both
        cpu_seconds(command, env, cwd)
    rng = random.Random(args.seed)
    found: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.pairs):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            found[name].append(cpu_seconds(command, variants[name], cwd))
    ratios = [on / off for on, off in zip(found["with hook"], found["hook off"])]
    deciles = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else [ratios[0]] * 9
    print(
        f"lm_eval {' '.join(args.command)}: {args.pairs} pairs in fresh interpreters, order shuffled (seed {args.seed})"
    )
    for name, values in found.items():
        print(
            f"  {name:<10} median {statistics.median(values):7.2f} CPU s  (min {min(values):.2f}, max {max(values):.2f})"
        )
    print(
        f"  with/off   paired ratio median {statistics.median(ratios):.4f}  (p10 {deciles[0]:.4f}, p90 {deciles[-1]:.4f})"
    )
    manager, registry, index = parts(variants["with hook"], cwd, max(3, args.pairs // 2))
    plugin_manager, _, _ = parts(variants["hook off"], cwd, max(3, args.pairs // 2))
    print("  the plugin's parts, CPU s (medians, one interpreter each):")
    print(
        f"    import lm_eval.tasks.manager: {manager:.3f} with hook, {plugin_manager:.3f} off (activation and its imports)"
    )
    print(f"    the registry of evaluations (ours, other packages'): {registry:.3f}")
    print(f"    indexing our task folders: {index:.3f}")


if __name__ == "__main__":
    main()

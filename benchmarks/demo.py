"""README's demo command, run literally: wall time, CPU time, peak memory, and the half-widths of its intervals.

The command is read from README.md (the `lm-eval-longmem demo ...` part of the first-command block, the
install before it left out) and run as a user runs it: in a fresh folder, from an empty cache (so the
model's one-time conversion is included; `--warm-cache` keeps this machine's cache), with the
environment as it is (README's figure is without OMP_NUM_THREADS, so torch uses every core). Then
the results are read back and every interval the demo promises is checked against its target:

* forgetting curve: copy and LM accuracy per length, 95% half-width <= 0.05 at every length;
* BABILong: the headline (mean over every task x length cell), half-width <= 0.08;
* Book-SORT: accuracy (and the answer-bias-corrected accuracy, where the run has it).

    python benchmarks/demo.py [--warm-cache] [--keep DIR]

On a shared machine the wall time is inflated by the load (printed before and after); the CPU time
(user + system of every process the demo ran) is what it needs, summed over threads.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = {"forgetting_curve": 0.05, "babilong": 0.08}


def readme_command() -> list[str]:
    """The `lm-eval-longmem demo ...` command of README's first-command block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^.*&& (lm-eval-longmem demo[^\n]*)$", text, re.MULTILINE)
    if not found:
        raise SystemExit("README.md has no `... && lm-eval-longmem demo ...` line")
    return shlex.split(found[1])


def half(low: float | None, high: float | None) -> float:
    return float("nan") if low is None or high is None else (high - low) / 2


def intervals(results_dir: Path) -> list[tuple[str, str, int | None, float, float, float | None]]:
    """(evaluation, cell, n, estimate, half-width, target) of every interval the demo promises."""
    from lm_eval_longmem.babilong.rim import reader as babilong_report
    from lm_eval_longmem.forgetting_curve.rim.reader import forgetting_curve_task, stored_summary
    from lm_eval_longmem.readers.results import find_results_file, load_run

    run = load_run(find_results_file(results_dir))
    rows = []
    task = forgetting_curve_task(run.data)
    if task:
        for s in stored_summary(run.data, task, path=run.path).per_length:
            rows.append(
                (
                    "forgetting_curve",
                    f"copy_acc@{s.length}",
                    s.n,
                    s.copy.estimate,
                    half(s.copy.low, s.copy.high),
                    TARGETS["forgetting_curve"],
                )
            )
            rows.append(
                (
                    "forgetting_curve",
                    f"lm_acc@{s.length}",
                    s.n,
                    s.lm.estimate,
                    half(s.lm.low, s.lm.high),
                    TARGETS["forgetting_curve"],
                )
            )
    task = babilong_report.babilong_task(run.data)
    if task:
        m, per_cell = run.metrics(task), run.facts(task).get("docs_per_cell") or {}
        for cell, n in per_cell.items():
            rows.append(
                (
                    "babilong",
                    f"acc@{cell}",
                    n,
                    m.get(f"acc@{cell}"),
                    half(m.get(f"acc@{cell}_ci_low"), m.get(f"acc@{cell}_ci_high")),
                    None,
                )
            )
        rows.append(
            (
                "babilong",
                "acc (headline)",
                sum(per_cell.values()),
                m.get("acc"),
                half(m.get("acc_ci_low"), m.get("acc_ci_high")),
                TARGETS["babilong"],
            )
        )
    for task in [t for t in run.tasks if t.startswith("booksort_")]:
        m, n = run.metrics(task), run.n_samples(task)
        for score in ("acc", "acc_calibrated", "pct_A"):
            if m.get(score) is not None:
                rows.append(
                    (
                        "booksort",
                        f"{task} {score}",
                        n,
                        m[score],
                        half(m.get(f"{score}_ci_low"), m.get(f"{score}_ci_high")),
                        None,
                    )
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-cache", action="store_true", help="keep $LM_EVAL_LONGMEM_CACHE (default: an empty one)")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep what the demo writes")
    args = parser.parse_args()

    command = readme_command()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="demo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if not args.warm_cache:
        env["LM_EVAL_LONGMEM_CACHE"] = str(Path(tempfile.mkdtemp(prefix="demo-cache-")))
    print(f"command: {shlex.join(command)}   (in {workdir})")
    print(f"cache: {env.get('LM_EVAL_LONGMEM_CACHE', '~/.cache/lm_eval_longmem')} ({'warm' if args.warm_cache else 'empty'}); "
          f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', 'unset')}; {os.cpu_count()} CPUs")  # fmt: skip
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)

    print("stages (the demo's own lines, with the time since the start):", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    lines = []
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("[") or "done in" in line:
                print(f"  {time.perf_counter() - start:6.0f} s  {line.strip()}", flush=True)
        proc.wait()
        stderr.seek(0)
        errors = stderr.read()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        print("\n".join(lines[-40:]), errors[-5000:], sep="\n")
        raise SystemExit(f"the demo failed with status {proc.returncode}")

    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"\nwall {wall:.0f} s ({wall / 60:.1f} min)   cpu {cpu:.0f} s (user + system, every thread)   "
          f"cpu/wall {cpu / wall:.2f}   peak RSS {after.ru_maxrss / 2**20:.2f} GB")  # fmt: skip

    output = Path(command[command.index("--output_path") + 1]) if "--output_path" in command else Path("longmem_demo")
    rows = intervals(workdir / output / "results")
    print(f"\n{'evaluation':<17} {'cell':<32} {'n':>5} {'estimate':>9} {'half-width':>11} {'target':>7}  ok")
    failed = []
    for evaluation, cell, n, estimate, width, target in rows:
        ok = "" if target is None else ("yes" if width <= target else "NO")
        if ok == "NO":
            failed.append(cell)
        print(f"{evaluation:<17} {cell:<32} {n if n is not None else '-':>5} {estimate:>9.3f} {width:>11.3f} "
              f"{'' if target is None else f'{target:.2f}':>7}  {ok}")  # fmt: skip
    print("\nheadline as printed:")
    for line in [line for line in lines if line.strip()][-3:]:
        print(f"  {line}")
    print(f"\nwithin every target: {'yes' if not failed else 'no (' + ', '.join(failed) + ')'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

"""Wall time of `lm-eval-longmem babilong audit` over every BABILong predictions CSV in a folder.

Usage:
    python benchmarks/babilong_audit.py [--data ../shared/data] [--jobs 1 2]

Runs the audit command (a fresh process, as a user would: reading, both checks, the deciding rule
of each disagreement, a 200-row sample) once per `--jobs` value on all `*.csv` files under
`--data`, and prints files, rows, wall seconds and rows per second side by side. The target
is the ~350-file scale in under 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    files = sorted(p for p in args.data.rglob("*.csv") if p.name.lower().startswith("qa"))
    if not files:
        sys.exit(f"no qaN_*.csv prediction files under {args.data}")
    csv.field_size_limit(1 << 30)
    rows = 0
    for path in files:
        with open(path, newline="", encoding="utf-8") as fh:
            rows += sum(1 for _ in csv.DictReader(fh))
    print(f"{len(files)} files, {rows} rows under {args.data}")
    print(f"{'jobs':>4} {'wall s':>8} {'rows/s':>9}")
    for jobs in args.jobs:
        command = [
            sys.executable,
            "-m",
            "lm_eval_longmem.cli",
            "babilong",
            "audit",
            *map(str, files),
            "--sample",
            "200",
            "--jobs",
            str(jobs),
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        print(f"{jobs:>4} {wall:>8.1f} {rows / wall:>9.0f}")


if __name__ == "__main__":
    main()

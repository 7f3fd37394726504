"""What the `.pth` start-up hook costs a Python process that never imports lm_eval.

Builds two throw-away virtual environments that see the same packages (this checkout on their
path), one with our `lm_eval_longmem.pth` hook line and one without, then times `python -c pass`
in both, interleaved, and prints the medians side by side.

    python benchmarks/startup_hook.py [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make_env(root: Path, with_hook: bool) -> Path:
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "checkout.pth").write_text(f"{REPO}\n")
    if with_hook:
        (Path(purelib) / "lm_eval_longmem.pth").write_text((REPO / "lm_eval_longmem.pth").read_text())
    return python


def time_start(python: Path) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", "pass"], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        without = make_env(Path(tmp) / "without", with_hook=False)
        with_hook = make_env(Path(tmp) / "with", with_hook=True)
        check = subprocess.run(
            [with_hook, "-c", "import sys; print(any(type(f).__name__ == 'LmEvalLongmemHook' for f in sys.meta_path))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert check == "True", "the hook did not arm in the benchmark environment"
        times: dict[str, list[float]] = {"without hook": [], "with hook": []}
        for _ in range(5):  # warm the file cache
            time_start(without), time_start(with_hook)
        for _ in range(args.runs):
            times["without hook"].append(time_start(without))
            times["with hook"].append(time_start(with_hook))
    base = statistics.median(times["without hook"])
    print(f"python -c pass, {args.runs} interleaved runs each ({sys.version.split()[0]}, {sysconfig.get_platform()})")
    print(f"{'variant':<14}{'median ms':>11}{'p10 ms':>9}{'p90 ms':>9}{'ratio':>8}")
    for name, values in times.items():
        q = statistics.quantiles(values, n=10)
        print(
            f"{name:<14}{statistics.median(values) * 1e3:>11.2f}{q[0] * 1e3:>9.2f}{q[-1] * 1e3:>9.2f}"
            f"{statistics.median(values) / base:>8.3f}"
        )


if __name__ == "__main__":
    main()

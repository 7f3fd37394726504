"""How far the reference runs' floats drift from their frozen values in this environment: the measurement
behind `tests/tolerances.LOGPROB_TOL`.

Reruns the reference runs (`tests/reference_runs.py`) and prints, per reference and task, the largest
change of a log-probability per scored token against the frozen file, the largest relative change of a
perplexity score, and how many A/B or greedy decisions differ. Run it natively, with a reduced kernel set
and with another PyTorch kernel set, then compare with `LOGPROB_TOL`:

    python benchmarks/reference_drift.py
    .ci/reduced-kernels python benchmarks/reference_drift.py
    ATEN_CPU_CAPABILITY=avx2 python benchmarks/reference_drift.py

The last line is one JSON object: `max_logprob_per_token`, `max_perplexity_rel`, `flipped` (decisions
that differ), `docs` (docs compared).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import reference_runs  # noqa: E402
from reference_runs import RUNS, execute, load, perplexity_scores, scored_tokens  # noqa: E402
from tolerances import LOGPROB_TOL  # noqa: E402


def drift(old: dict, new: dict) -> tuple[float, float, int, int]:
    """(largest |logprob change| per scored token, largest relative perplexity change, flipped decisions, docs)."""
    per_token = rel = 0.0
    flipped = docs = 0
    for name, task in old["tasks"].items():
        kind = task["output_type"]
        perplexities = perplexity_scores(name, new["tasks"][name])
        fresh = {d["doc_id"]: d for d in new["tasks"][name]["docs"]}
        for doc in task["docs"]:
            other = fresh.get(doc["doc_id"])
            if other is None or other["inputs"] != doc["inputs"]:
                continue
            docs += 1
            if kind == "loglikelihood_accuracy":
                for (bits, a), (bits_new, b), n in zip(doc["outputs"], other["outputs"], scored_tokens(doc, kind)):
                    per_token = max(per_token, abs(a - b) / max(1, n))
                    flipped += bits != bits_new
            elif kind == "multiple_choice":
                for a, b in zip(doc["outputs"], other["outputs"]):
                    per_token = max(per_token, abs(a - b))  # Book-SORT's answers are one token each
                flipped += max(range(len(doc["outputs"])), key=doc["outputs"].__getitem__) != max(
                    range(len(other["outputs"])), key=other["outputs"].__getitem__
                )
            else:
                flipped += doc["outputs"] != other["outputs"]
            for score in perplexities & doc["scores"].keys():
                a, b = doc["scores"][score], other["scores"][score]
                if isinstance(a, float) and isinstance(b, float) and math.isfinite(a) and a:
                    rel = max(rel, abs(b - a) / abs(a))
    return per_token, rel, flipped, docs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"references (default: all): {', '.join(RUNS)}")
    args = parser.parse_args()
    from lm_eval_longmem.common import embedded

    totals = [0.0, 0.0, 0, 0]
    for name in args.names or list(RUNS):
        run = RUNS[name]
        if run.books == "shared" and not reference_runs.SHARED_DATA.is_dir():
            print(f"{name}: needs {reference_runs.SHARED_DATA}; skipped")
            continue
        work = Path(tempfile.mkdtemp(prefix=f"drift-{name}-"))
        try:
            new = execute(run, embedded.smollm2_dir(), work, cache=work / "cache")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        per_token, rel, flipped, docs = drift(load(name), new)
        print(f"{name:32s} logprob/token {per_token:.2e}  perplexity rel {rel:.2e}  flipped {flipped} of {docs} docs")
        totals = [max(totals[0], per_token), max(totals[1], rel), totals[2] + flipped, totals[3] + docs]
    print(f"LOGPROB_TOL = {LOGPROB_TOL:g}: the largest drift is {totals[0] / LOGPROB_TOL:.2f} of it")
    keys = ("max_logprob_per_token", "max_perplexity_rel", "flipped", "docs")
    print(json.dumps(dict(zip(keys, totals))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-doc payload and aggregation of a BABILong sweep, before and after the payload became per-doc.

A synthetic `babilong_tasks` qa1-qa20 x 12 standard lengths (240 cells) sweep, no model: every doc
gets a random 0/1 answer check. Printed side by side from one run, at 24k docs (100 per cell) and
240k docs (1,000 per cell):

* bytes of metric keys per logged sample (what `--log_samples` writes for a doc's metrics: the
  values, and the `metrics` list of their names the harness adds);
* aggregation time: building the per-doc payloads as the harness collects them, then the results
  row (through the harness's `_compute_task_aggregations`, i.e. our hook, for "after");
* peak memory of that (tracemalloc, Python allocations), in a fresh process per case.

"before" is a faithful re-implementation of the old `LongmemTask.process_results` / `aggregation`
(every doc reported every `score@cell{,_ci_low,_ci_high}` key of the run, None outside its cell,
plus one copy of its summary item per summary name). Its 240k case needs about 3 GB; it runs only
with `--before-at-240k` and is otherwise estimated from the 24k case (marked "est.").

    python benchmarks/results_payload.py [--before-at-240k]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import time
import tracemalloc
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from lm_eval_longmem.babilong.options import ALL_TASKS, STANDARD_LENGTHS
from lm_eval_longmem.babilong.task import BabilongTask
from lm_eval_longmem.common import stats
from lm_eval_longmem.common.metric_names import cell

FILTER = "none"
LENGTHS = list(STANDARD_LENGTHS)


def synthetic_task() -> BabilongTask:
    """A `BabilongTask` with the sweep's cells, without a model or a dataset (only what aggregation reads)."""
    task = BabilongTask.__new__(BabilongTask)
    task.cells = [cell(qa, length) for qa in ALL_TASKS for length in LENGTHS]
    task.skips = {}
    task._config = SimpleNamespace(metadata={})  # default options (in-context: no retrieval summaries)
    task.score = lambda doc, results: {
        "acc": results[0],
        "acc_corrected": results[0],
        "corrected_abstained": 0.0,
    }  # no model
    return task


def docs(per_cell: int, seed: int = 0) -> list[tuple[dict[str, Any], list[float]]]:
    """(doc, its answer check) for every cell, cells interleaved as the data builders order them."""
    rng = random.Random(seed)
    return [
        ({"qa": qa, "length": length}, [float(rng.random() < 0.6)])
        for _ in range(per_cell)
        for qa in ALL_TASKS
        for length in LENGTHS
    ]


# ---- before: the old shape, re-implemented -------------------------------------------------------------


def old_names(task: BabilongTask) -> dict[str, tuple[str, str, str]]:
    return {
        f"{score}@{c}{suffix}": (score, c, suffix)
        for score in ("acc", "acc_corrected")
        for c in task.cells
        for suffix in ("", "_ci_low", "_ci_high")
    }


def old_payload(task: BabilongTask, names: dict, summaries: dict, doc: dict, results: list[float]) -> dict[str, Any]:
    scores = task.score(doc, results)
    mine = set(task.doc_cells(doc))
    out = {name: (scores[score] if c in mine else None) for name, (score, c, _) in names.items()}
    item = task.summary_item(doc, scores)
    out.update({name: item for name in summaries})
    return out | {"skipped": None, "skip_reasons": None}


def old_statistic(suffix: str, values: list[float]) -> float:
    if suffix == "":
        return sum(values) / len(values)
    return stats.proportion_interval(int(sum(values)), len(values))[1 if suffix == "_ci_low" else 2]


def run_before(per_cell: int) -> tuple[int, dict[str, Any]]:
    task = synthetic_task()
    names, summaries = old_names(task), task.summary_directions()
    raw: dict[tuple[str, str], list[Any]] = defaultdict(list)
    first = None
    for doc, results in docs(per_cell):
        payload = old_payload(task, names, summaries, doc, results)
        first = first or payload
        for key, value in payload.items():
            raw[key, FILTER].append(value)
    row, summarized = {}, None
    for (key, _), items in raw.items():
        if key in names:
            row[key] = old_statistic(names[key][2], [v for v in items if v is not None])
        elif key in summaries:
            summarized = summarized or task.summarize(items)  # the old summaries shared one grouping of the items
            row[key] = summarized[key]
    return len(raw), first


# ---- after: the real task code and our aggregation hook ----------------------------------------------


def run_after(per_cell: int) -> tuple[int, dict[str, Any]]:
    from lm_eval import evaluator_utils

    task = synthetic_task()
    raw: dict[tuple[str, str], list[Any]] = defaultdict(list)
    first = None
    for doc, results in docs(per_cell):
        payload = task.process_results(doc, results)
        first = first or payload
        for key, value in payload.items():
            raw[key, FILTER].append(value)
    row, count = evaluator_utils._compute_task_aggregations(task, raw, 100000)
    assert count == per_cell * len(task.cells) and f"acc@qa20_{LENGTHS[-1]},none" in row
    return len(row), first


def sample_bytes(payload: dict[str, Any]) -> int:
    """Bytes `--log_samples` writes for a doc's metrics: the values and the harness's `metrics` name list."""
    return len(json.dumps(payload).encode()) + len(json.dumps(list(payload)).encode())


def measure(variant: str, per_cell: int, memory: bool) -> dict[str, float]:
    run = run_before if variant == "before" else run_after
    if memory:
        tracemalloc.start()
        run(per_cell)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return {"peak_mb": peak / 2**20}
    start = time.perf_counter()
    keys, first = run(per_cell)
    return {"seconds": time.perf_counter() - start, "bytes": sample_bytes(first), "keys": keys}


def in_child(variant: str, per_cell: int, memory: bool) -> dict[str, float]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(measure, (variant, per_cell, memory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--before-at-240k", action="store_true", help="also run the old shape at 240k docs (about 3 GB)"
    )
    args = parser.parse_args()
    cells = len(ALL_TASKS) * len(LENGTHS)
    print(f"BABILong qa1-qa20 x {len(LENGTHS)} lengths = {cells} cells; one fresh process per figure")
    print(f"{'docs':>8} {'variant':>7} {'B/sample':>9} {'agg s':>8} {'peak MB':>9}")
    measured: dict[tuple[str, int], dict[str, float]] = {}
    for per_cell in (100, 1000):
        n = per_cell * cells
        for variant in ("before", "after"):
            if variant == "before" and per_cell == 1000 and not args.before_at_240k:
                small = measured["before", 100]
                est = {k: v * 10 if k in ("seconds", "peak_mb") else v for k, v in small.items()}
                print(
                    f"{n:>8} {variant:>7} {est['bytes']:>9,} {est['seconds']:>7.1f}* {est['peak_mb']:>8.0f}*  (* est. x10 from 24k)"
                )
                continue
            figures = in_child(variant, per_cell, memory=False) | in_child(variant, per_cell, memory=True)
            measured[variant, per_cell] = figures
            print(f"{n:>8} {variant:>7} {figures['bytes']:>9,} {figures['seconds']:>8.1f} {figures['peak_mb']:>9.0f}")
    for per_cell in (100, 1000):
        if ("before", per_cell) in measured:
            b, a = measured["before", per_cell], measured["after", per_cell]
            print(
                f"{per_cell * cells:>8} docs: bytes/sample {b['bytes'] / a['bytes']:.0f}x smaller, "
                f"aggregation {b['seconds'] / a['seconds']:.1f}x faster, peak memory {b['peak_mb'] / a['peak_mb']:.1f}x lower"
            )
    a24, a240 = measured["after", 100], measured["after", 1000]
    print(
        f"after, 240k vs 24k docs: time x{a240['seconds'] / a24['seconds']:.1f}, memory x{a240['peak_mb'] / a24['peak_mb']:.1f} (linear: x10)"
    )
    print(f"targets: <= 1024 B/sample: {a240['bytes']}; 240k docs aggregated in < 60 s: {a240['seconds']:.1f} s")


if __name__ == "__main__":
    main()

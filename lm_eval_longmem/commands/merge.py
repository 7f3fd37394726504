"""`lm-eval-longmem merge`: the shards of one sweep (one harness run per node) as one run's results.

On a cluster each node runs the same command on its own share of the docs (disjoint `--samples`
dataset indices per task) with `--log_samples`. A doc's record holds its whole payload (scores,
cells, summary item: `LongmemTask.process_results`), so the shards' records together are what one
process running every doc would have aggregated. `merge_shards`:

1. reads every shard's results file and samples files and checks that they are shards of one sweep:
   the same tasks, model, model arguments, metadata, task configs and versions (batch size, device
   and `--use_cache` may differ), every task ours and logged, no doc in two shards;
2. loads the tasks as the run did (`harness.tasks.load_tasks` with the recorded metadata: the data are
   built, or read from the cache, but no model is loaded) and checks that they hold the shards' docs
   (each record's `doc_hash`) and give back every shard's own results from its own records, so a
   merge where the package, the model config or the inputs differ from the run's stops there;
3. orders the records by doc id, sums the skip records, and hands the payloads to the harness's own
   result processing (`harness.evaluator.results_from_payloads`), which aggregates our tasks (values sorted,
   sums `math.fsum`) and groups as one run over all the docs does;
4. writes `<output_path>/<model>/results_<date>.json` and a `samples_<task>_<date>.jsonl` per task
   (every shard's records, in doc order), each file atomically, the results file last.

Docs that no shard ran or skipped are counted (`configs.<task>.longmem.merge.docs_missing`) and
said on the terminal: a partial merge is allowed, never silent. Other harness tasks are refused
(run them on one node): their metrics are not rebuilt from per-doc payloads.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lm_eval_longmem.common.cache import atomic_write, check_folder
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import evaluations
from lm_eval_longmem.common.metric_names import CONFIG_KEY
from lm_eval_longmem.common.options import distinct
from lm_eval_longmem.common.task import LongmemTask
from lm_eval_longmem.harness.evaluator import doc_hash, results_from_payloads, task_hash
from lm_eval_longmem.harness.tasks import load_tasks
from lm_eval_longmem.readers.results import Run, load_runs, skip_reasons

MAY_DIFFER = ("batch_size", "batch_sizes", "device", "use_cache")
"""Keys of a results file's `config` that may differ between shards: they change no number."""
SAME_FACTS = (
    "model_name", "max_length", "lm_eval_version", "transformers_version", "tokenizer_pad_token",
    "tokenizer_eos_token", "tokenizer_bos_token", "eot_token_id", "system_instruction_sha",
    "chat_template_sha", "fewshot_as_multiturn", "group_subtasks", "versions", "n-shot",
)  # fmt: skip
"""Top-level facts of a results file that every shard of one sweep shares."""
HARNESS_METADATA = ("version", "config_source")
"""Keys the harness adds to a task's metadata (the YAML's version, the YAML's path): not the run's."""
RUN_KEYS = ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples")
"""What the harness's result processing gives; the rest of the results file is the first shard's."""


@dataclass(frozen=True)
class Merged:
    """What `merge_shards` wrote and what the merge covers."""

    results: Path
    samples: list[Path]
    coverage: dict[str, dict[str, int]]
    """task -> {"shards", "ran", "skipped", "docs", "missing"}."""


def merge_shards(paths: Sequence[Path], output_path: Path, *, include_path: list[str] | None = None) -> Merged:
    """Merge the shard runs under `paths` (results files or folders) into one run under `output_path`
    (`include_path`: the folders of the user's own task YAMLs the shards ran with)."""
    check_folder(output_path)
    shards = load_runs(paths)
    first = shards[0]
    distinct(shards, "shard", key=lambda shard: shard.path.resolve(), shown=lambda shard: str(shard.path))
    leaves = list(first.data.get("configs") or {})
    if not leaves:
        raise UsageError(f"{first.path} holds no task: pass the results of the shards' lm_eval runs")
    for shard in shards:
        check_shard(shard, first, leaves)
    records = {task: [shard.samples(task) for shard in shards] for task in leaves}
    doc_ids = {task: disjoint_doc_ids(task, shards, records[task]) for task in leaves}

    tasks, groups = load_tasks(
        load_names(first.data, leaves),
        run_metadata(first.data, leaves),
        include_path=include_path,
        usage_error=UsageError,
    )
    if set(tasks) != set(leaves):
        raise UsageError(
            f"{first.path}: its tasks {sorted(leaves)} load here as {sorted(tasks)}; merge with the task configs that ran the shards"
        )
    skips = {name: summed_skips(name, shards) for name in tasks}
    coverage = {}
    for name, task in tasks.items():
        check_task(name, task, shards, records[name])
        for shard, shard_records in zip(shards, records[name], strict=True):
            check_reproduced(name, task, shard, shard_records)
        coverage[name] = covered(name, task, len(shards), doc_ids[name], skips[name])

    merged = {
        task: sorted((r for rs in records[task] for r in rs), key=lambda r: (r["doc_id"], r["filter"]))
        for task in leaves
    }
    raw = {}
    for name, task in tasks.items():
        task.adopt_run(skips[name], [r["cells"] for r in merged[name] if r["filter"] == merged[name][0]["filter"]])
        raw[name] = payload_columns(merged[name])
    processed = results_from_payloads(tasks, groups, raw, (first.data.get("config") or {}).get("bootstrap_iters"))
    return write_merged(shards, processed, merged, coverage, output_path)


def shard_samples(
    names: Sequence[str], metadata: dict[str, Any], nodes: int, *, include_path: list[str] | None = None
) -> list[dict[str, list[int]]]:
    """Each node's `--samples` for running `names` as `nodes` shards: node i takes docs i, i+nodes, ...

    Our doc order already balances the harness's every-N-th split (`common.order`), so these shares
    carry about equal work. The tasks are loaded as a run loads them (`metadata`: `--model_args`
    merged with `--metadata`), which builds the data into the cache the nodes can then share.
    """
    if nodes < 2:
        raise UsageError(f"--nodes {nodes}: give the number of nodes, 2 or more")
    tasks, _ = load_tasks(list(names), metadata, include_path=include_path, usage_error=UsageError)
    others = sorted(
        name for name, task in tasks.items() if not (isinstance(task, LongmemTask) and task.scored_by_cells)
    )
    if others:
        raise UsageError(f"--tasks: {', '.join(others)} cannot be merged from shards (not ours): run them on one node")
    sizes = {name: len(task.eval_docs) for name, task in tasks.items()}
    few = {name: n for name, n in sizes.items() if n < nodes}
    if few:
        name, n = next(iter(few.items()))
        raise UsageError(
            f"--nodes {nodes}: {name} has only {n} docs, so a node would run none of it; use at most {n} nodes"
        )
    return [{name: list(range(node, n, nodes)) for name, n in sizes.items()} for node in range(nodes)]


# --- checks --------------------------------------------------------------------------------------


def check_shard(shard: Run, first: Run, leaves: list[str]) -> None:
    """`shard` is a shard of `first`'s sweep, with only our tasks; one line naming both files otherwise."""
    for task in shard.data.get("configs") or {}:
        if CONFIG_KEY not in (shard.data["configs"][task] or {}):
            raise UsageError(
                f"{shard.path}: task {task} is not an lm-eval-longmem task; merge takes shards of our tasks only "
                "(run other tasks on one node)"
            )
    if shard is first:
        return
    fix = "shards of one sweep run the same command on disjoint --samples (same model, --model_args, --metadata, versions)"
    a, b = config_facts(first), config_facts(shard)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            raise UsageError(
                f"{shard.path} does not match {first.path} in {key} ({b.get(key)!r} vs {a.get(key)!r}): {fix}"
            )


def config_facts(run: Run) -> dict[str, Any]:
    """What every shard of one sweep shares: run config, model facts, task configs, doc counts."""
    data = run.data
    config = {k: v for k, v in (data.get("config") or {}).items() if k not in MAY_DIFFER}
    facts = {"config." + k: v for k, v in config.items()} | {"config.model_args": run.model_args}
    facts |= {k: data.get(k) for k in SAME_FACTS}
    for task, task_config in (data.get("configs") or {}).items():
        facts[f"configs.{task}"] = {k: v for k, v in task_config.items() if k != CONFIG_KEY}
        facts[f"n-samples.{task}.original"] = ((data.get("n-samples") or {}).get(task) or {}).get("original")
    return facts


def disjoint_doc_ids(task: str, shards: list[Run], records: list[list[dict[str, Any]]]) -> set[int]:
    """Every doc id of `task` the shards ran; a doc in two shards is an error."""
    owner: dict[tuple[Any, int], int] = {}
    for index, (shard, shard_records) in enumerate(zip(shards, records, strict=True)):
        for r in shard_records:
            if not {"doc_id", "filter", "metrics", "doc_hash"} <= set(r):
                raise UsageError(
                    f"{shard.samples_file(task)}: a record without doc_id, filter, metrics or doc_hash; pass the samples file lm_eval wrote"
                )
            key = (r["filter"], int(r["doc_id"]))
            if owner.setdefault(key, index) != index:
                raise UsageError(
                    f"doc {key[1]} of {task} is in both {shards[owner[key]].path} and {shard.path}: give every node disjoint --samples"
                )
    return {doc_id for _, doc_id in owner}


def load_names(data: dict[str, Any], leaves: list[str]) -> list[str]:
    """What the run's `--tasks` asked for: its groups and leaf tasks that no group holds, in the file's order."""
    children = {child for subtasks in (data.get("group_subtasks") or {}).values() for child in subtasks}
    names = [name for name in data.get("results") or {} if name not in children]
    return names or leaves


def run_metadata(data: dict[str, Any], leaves: list[str]) -> dict[str, Any]:
    """The run's metadata (`--model_args` merged with `--metadata`), as recorded in its task configs."""
    recorded = {key for entry in evaluations() for key in entry.recorded_metadata()}
    metadata = (data["configs"][leaves[0]] or {}).get("metadata") or {}
    return {k: v for k, v in metadata.items() if k not in HARNESS_METADATA and k not in recorded}


def check_task(name: str, task: Any, shards: list[Run], records: list[list[dict[str, Any]]]) -> None:
    """The task loaded here is ours, of the shards' version, and holds the docs they ran."""
    if not isinstance(task, LongmemTask) or not task.scored_by_cells:
        raise UsageError(f"{name} is not an lm-eval-longmem task here; merge takes shards of our tasks only")
    first = shards[0]
    if task.VERSION != (first.data.get("versions") or {}).get(name):
        raise UsageError(
            f"{name} is version {task.VERSION} here but {first.data['versions'].get(name)} in {first.path}: "
            "merge with the lm-eval-longmem version that ran the shards"
        )
    docs = task.eval_docs
    original = ((first.data.get("n-samples") or {}).get(name) or {}).get("original")
    if original is not None and original != len(docs):
        raise UsageError(
            f"{name} has {len(docs)} docs here but {original} in {first.path}: merge where the shards' model, corpora "
            "and data are, with the lm-eval-longmem version that ran them"
        )
    for shard, shard_records in zip(shards, records, strict=True):
        for r in shard_records:
            if not 0 <= r["doc_id"] < len(docs) or doc_hash(docs[r["doc_id"]]) != r["doc_hash"]:
                raise UsageError(
                    f"{shard.samples_file(name)}: doc {r['doc_id']} is not the doc this machine builds from the recorded "
                    "metadata (the inputs or the package differ): merge where the shards' model, corpora and data are"
                )


def check_reproduced(name: str, task: LongmemTask, shard: Run, records: list[dict[str, Any]]) -> None:
    """The shard's own results row comes back from its own records: aggregation here is the run's."""
    task.adopt_run(skip_reasons(shard.data, name), [r["cells"] for r in records if r["filter"] == records[0]["filter"]])
    row, _ = task.aggregate_payloads(payload_columns(records), _no_default)
    recorded = (shard.data.get("results") or {}).get(name) or {}
    for key, value in row.items():
        if not same(value, recorded.get(key, "absent")):
            raise UsageError(
                f"{shard.path}: recomputing {name} from its samples gives {key} = {value!r}, the file says "
                f"{recorded.get(key, 'nothing')!r}; merge with the lm-eval-longmem version, model config and inputs that ran the shards"
            )


def _no_default(raw: dict) -> tuple[dict, int]:
    raise AssertionError("our tasks aggregate their own payloads")


def same(a: Any, b: Any) -> bool:
    """Equal as stored; NaN equals NaN."""
    nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return nan or a == b


def covered(
    name: str, task: LongmemTask, shards: int, doc_ids: set[int], skips: dict[str, dict[str, int]]
) -> dict[str, int]:
    """Docs of the sweep run, skipped and in no shard; shards that together count more than the task has are an error."""
    skipped = sum(sum(reasons.values()) for reasons in skips.values())
    docs = len(task.eval_docs)
    missing = docs - len(doc_ids) - skipped
    if missing < 0:
        raise UsageError(
            f"{name}: the shards ran {len(doc_ids)} and skipped {skipped} docs, more than its {docs}: their --samples "
            "overlap in docs that were skipped; give every node disjoint --samples"
        )
    return {"shards": shards, "ran": len(doc_ids), "skipped": skipped, "docs": docs, "missing": missing}


def summed_skips(name: str, shards: list[Run]) -> dict[str, dict[str, int]]:
    """{cell: {reason: count}} over every shard."""
    total: dict[str, Counter[str]] = {}
    for shard in shards:
        for cell, reasons in skip_reasons(shard.data, name).items():
            total.setdefault(cell, Counter()).update(reasons)
    return {cell: dict(reasons) for cell, reasons in total.items()}


def payload_columns(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[Any]]:
    """`raw_metrics` as the harness collects it: each payload key's value per doc, per filter, in record order."""
    columns: dict[tuple[str, str], list[Any]] = {}
    for r in records:
        for key in r["metrics"]:
            columns.setdefault((key, r["filter"]), []).append(r[key])
    return columns


# --- output --------------------------------------------------------------------------------------


def write_merged(
    shards: list[Run], processed: dict[str, Any], merged: dict[str, list[dict[str, Any]]],
    coverage: dict[str, dict[str, int]], output_path: Path,
) -> Merged:  # fmt: skip
    first = shards[0]
    folder = Path(output_path) / first.path.parent.name
    if any(folder.resolve() == shard.path.parent.resolve() for shard in shards):
        raise UsageError(
            f"--output_path {output_path} would write beside a shard's results in {folder}: choose another folder"
        )
    data = dict(processed) | {k: v for k, v in first.data.items() if k not in RUN_KEYS}
    for task, config in data["configs"].items():
        facts = dict(config.get(CONFIG_KEY) or {})
        facts["merge"] = {"shards": coverage[task]["shards"], "docs_missing": coverage[task]["missing"]}
        data["configs"][task] = {k: v for k, v in first.data["configs"][task].items() if k != CONFIG_KEY} | {
            CONFIG_KEY: facts
        }
    data["task_hashes"] = {task: task_hash(records) for task, records in merged.items()}
    data["date"] = time.time()
    data["total_evaluation_time_seconds"] = str(
        sum(float(s.data.get("total_evaluation_time_seconds") or 0) for s in shards)
    )
    data["longmem_merge"] = {"shards": [str(shard.path) for shard in shards]}
    stamp = datetime.now().isoformat().replace(":", "-")
    samples = []
    for task, records in merged.items():
        path = folder / f"samples_{task}_{stamp}.jsonl"
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))  # noqa: B023 (atomic_write calls it at once)
        samples.append(path)
    results = folder / f"results_{stamp}.json"
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    atomic_write(results, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return Merged(results, samples, coverage)


def coverage_lines(merged: Merged) -> list[str]:
    """One line per task: docs run and skipped of the sweep's, and what no shard holds."""
    lines = []
    for task, c in merged.coverage.items():
        line = f"{task}: {c['ran']} docs run + {c['skipped']} skipped of {c['docs']}, from {c['shards']} shard{'s' if c['shards'] != 1 else ''}"
        if c["missing"]:
            line += f"; PARTIAL: {c['missing']} docs are in no shard (configs.{task}.{CONFIG_KEY}.merge.docs_missing)"
        lines.append(line)
    return lines

"""`lm-eval-longmem plan`: what a run will cost, before anything is run, built or downloaded.

Given a run's `--tasks`, `--model_args` and `--metadata`, `make_plan` reads the model's config and
tokenizer (nothing else: no weights, no data set) and lays out, per task and cell (a length, or
another factor of the evaluation's sweep): docs, requests, input tokens, the longest sequence, and from the
cost model (`common/cost.py`) prefill FLOPs, the KV cache of one sequence, the logits memory of the
request type, the estimated peak on the HF backend and the data phase's tokenizing. With a GPU
from `cost.GPUS` it adds an estimated GPU time at a stated utilisation, whether one sequence fits
on the HF backend, and vLLM settings that run the longest sequence.

Each evaluation counts its own rows (its registry entry's `planner`, `common.evaluations.Planner`), with
its own option parser and helpers, so the plan follows the run; nothing is built.

Every row says whether its token counts are `estimated`. The data phase is what a run tokenizes
today: the fit check counts every prompt on every run (`data_tokens`), and building data in the
model's tokenizer adds as much once (`build_tokens`; cached after).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lm_eval_longmem.common import cost
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import evaluation, evaluations
from lm_eval_longmem.common.model_info import Window, load_config, load_tokenizer, model_window

DEFAULT_UTILISATION = 0.5
"""Share of a GPU's datasheet peak dense FLOP/s a long prefill is assumed to reach. Measured: 0.54-0.56
for the body forward of a Llama-3-8B-shaped model (bf16, sdpa) on an H200 at 8k-128k tokens
(CONTRIBUTING.md); a whole request adds the LM head and the harness's own work, hence 0.5."""

BYTES_PER_TOKEN = 4
"""Bytes of English text per token, to size a local corpus without reading it (SmolLM2's tokenizer
on one Gutenberg book: 4.4)."""


@dataclass(frozen=True)
class TaskFacts:
    """What a task's YAML says that the plan needs."""

    name: str
    evaluation: str
    """The name of its evaluation (`common.evaluations`): the one whose task folder holds its YAML."""
    output_type: str
    dataset_kwargs: dict[str, Any]
    """Its YAML's `dataset_kwargs` (what it fixes of its data, e.g. a prompt's condition)."""
    max_gen_toks: int


@dataclass(frozen=True)
class Row:
    """One task's cell, as the run will hold it (counts only; costs come from `row_costs`)."""

    task: str
    output_type: str
    cell: str
    """The cell as the task names it: a length ("4096", "4k") or another factor ("LE2500")."""
    length: int
    """Tokens of the cell: its length, or for a cell not measured in tokens a doc's estimated prompt tokens."""
    docs: int
    requests: int
    forwards: int
    """Forward passes the HF backend runs (it scores a multiple-choice doc's one-token labels in one)."""
    input_tokens: int
    """Tokens of every request of the cell (prompt and answer)."""
    sequence_tokens: int
    """Tokens of the cell's longest sequence."""
    forward_positions: int
    """Positions one forward runs, on average over the cell (a prefill, for generation)."""
    head_positions: int
    """Positions of one forward where the LM head runs."""
    new_tokens: int
    """Tokens generated per forward (at most)."""
    data_tokens: int = 0
    build_tokens: int = 0
    skipped: int = 0
    estimated: bool = False
    note: str = ""


# --- the tasks a run names -----------------------------------------------------------------------


class _ConfigLoader(yaml.SafeLoader):
    """Our task YAMLs as data: a `!function` tag stays the text it names."""


_ConfigLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _read_config(path: Path) -> dict[str, Any]:
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_ConfigLoader) or {}
    if "include" in config:
        config = {**_read_config(path.parent / config.pop("include")), **config}
    return config


def our_tasks() -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """Every task and group name of ours -> (its evaluation, the configs of the tasks it runs (a group: its
    tasks)), from each evaluation's task folder."""
    configs: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry in evaluations():
        for path in sorted(entry.task_folder().rglob("*.yaml")):
            config = _read_config(path)
            configs[str(config.get("group") or config["task"])] = (entry.name, config)
    return {
        name: (owner, [configs[t][1] for t in config["task"]] if "group" in config else [config])
        for name, (owner, config) in configs.items()
    }


def resolve_tasks(names: list[str]) -> list[TaskFacts]:
    """The tasks `--tasks` runs, with the facts of each; a name that is not ours is a `UsageError`."""
    known = our_tasks()
    facts: dict[str, TaskFacts] = {}
    for name in names:
        if name not in known:
            raise UsageError(f"--tasks {name}: plan knows our tasks and groups only: {', '.join(sorted(known))}")
        owner, configs = known[name]
        for config in configs:
            facts[config["task"]] = TaskFacts(
                name=config["task"],
                evaluation=owner,
                output_type=config["output_type"],
                dataset_kwargs=dict(config.get("dataset_kwargs") or {}),
                max_gen_toks=int((config.get("generation_kwargs") or {}).get("max_gen_toks", 0)),
            )
    return list(facts.values())


# --- helpers of the evaluations' planners ---------------------------------------------------------


def corpus_text(source: str | None) -> str:
    """A text source in words, with its size where it can be told without reading it."""
    if source is None:
        return "the default corpus (PG-19's test books, hf:emozilla/pg19-test, 100 books)"
    path = Path(source).expanduser()
    if source.startswith("hf:") or not path.exists():
        return f"the corpus {source}"
    files = [path] if path.is_file() else sorted(path.rglob("*.txt"))
    size = sum(f.stat().st_size for f in files)
    tokens = size // BYTES_PER_TOKEN
    return f"the corpus {source} (~{tokens:,} tokens, ~{cost.tokenize_seconds(tokens):.0f} CPU s)"


# --- costs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A run's rows with their costs, and what they were computed for."""

    model: str
    shape: cost.ModelShape
    window: Window
    rows: list[Row]
    notes: list[str]
    gpu: cost.Gpu | None
    utilisation: float

    def costs(self, row: Row) -> dict[str, Any]:
        """The row's costs (`common.cost`), as its `--json` row has them."""
        shape = self.shape
        prefill = row.forwards * cost.forward_flops(shape, row.forward_positions, row.head_positions)
        decode = row.forwards * cost.decode_flops(shape, row.forward_positions, row.new_tokens)
        peak = cost.hf_peak(shape, row.output_type, row.sequence_tokens - row.new_tokens, new_tokens=row.new_tokens)
        out: dict[str, Any] = {
            "prefill_flops": prefill,
            "decode_flops": decode,
            "kv_cache_bytes": cost.kv_cache_bytes(shape, row.sequence_tokens),
            "logits_bytes": peak.logits,
            "peak_bytes": peak.total,
            "data_seconds": round(cost.tokenize_seconds(row.data_tokens), 1),
        }
        if self.gpu is not None:
            out["gpu"] = self.gpu.name
            out["est_seconds"] = round(cost.gpu_seconds(prefill + decode, self.gpu, shape.dtype, self.utilisation), 1)
            out["fits"] = peak.total <= cost.HF_GPU_MEMORY_SHARE * cost.gpu_bytes(self.gpu) if row.docs else None
        return out

    def json_rows(self) -> list[dict[str, Any]]:
        """The `--json` output: one object per row."""
        return [
            {
                "task": r.task,
                "cell": r.cell,
                "length": r.length,
                "docs": r.docs,
                "requests": r.requests,
                "input_tokens": r.input_tokens,
                "sequence_tokens": r.sequence_tokens,
                **self.costs(r),
                "data_tokens": r.data_tokens,
                "build_tokens": r.build_tokens,
                "skipped": r.skipped,
                "estimated": r.estimated,
                "note": r.note,
            }  # fmt: skip
            for r in self.rows
        ]

    def vllm(self, task: str) -> cost.VllmSettings | None:
        """vLLM settings for `task`'s longest sequence on the plan's GPU (None without one)."""
        rows = [r for r in self.rows if r.task == task and r.docs]
        if self.gpu is None or not rows:
            return None
        longest = max(rows, key=lambda r: r.sequence_tokens)
        return cost.vllm_settings(
            self.shape, longest.sequence_tokens, self.gpu, prompt_logprobs=longest.output_type != "generate_until"
        )


def make_plan(
    names: list[str], metadata: dict[str, Any], gpu: str | None = None, utilisation: float = DEFAULT_UTILISATION
) -> Plan:
    """The plan of a run of `names` (our tasks and groups) with `metadata` (--model_args merged with --metadata)."""
    if not 0 < utilisation <= 1:
        raise UsageError(
            f"--utilisation {utilisation}: give the share of peak FLOP/s a run reaches, in (0, 1], e.g. 0.4"
        )
    if gpu is not None and gpu not in cost.GPUS:
        raise UsageError(f"--gpu {gpu}: choose one of {', '.join(cost.GPUS)}")
    tasks = resolve_tasks(names)
    config = load_config(metadata)
    if config is None:
        raise UsageError(
            "plan reads the model's config: pass --model_args pretrained=NAME (a local folder works offline, "
            "e.g. one holding only config.json and the tokenizer's files)"
        )
    try:
        shape = cost.ModelShape.from_config(
            config, dtype=metadata.get("dtype"), attention=metadata.get("attn_implementation")
        )
    except ValueError as err:
        raise UsageError(f"--model_args pretrained={metadata.get('pretrained')}: {err}") from err
    tokenizer, window = load_tokenizer(metadata), model_window(metadata)
    rows, notes = [], []
    for task in tasks:
        planner = evaluation(task.evaluation).planner()
        if planner is None:
            raise UsageError(f"--tasks {task.name}: its evaluation, {task.evaluation}, has no rows for plan")
        found = planner(task, metadata, tokenizer, window)
        rows += found[0]
        notes += found[1]
    return Plan(
        str(metadata.get("pretrained")), shape, window, rows, notes, cost.GPUS[gpu] if gpu else None, utilisation
    )


# --- the printed plan ----------------------------------------------------------------------------


def tokens_text(n: int) -> str:
    """A token count for a table cell: exact below 100,000, else "262k" / "1.0M"."""
    if n < 100_000:
        return f"{n:,}"
    return f"{n / 1e6:.1f}M" if n >= 10**6 else f"{n / 1e3:.0f}k"


def seconds_text(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def plan_lines(plan: Plan) -> list[str]:
    """The plan for people: what it was computed for, one line per row, per-task totals and notes."""
    window = plan.window
    lines = [
        f"model: {plan.model}: {plan.shape.describe()}",
        f"window: {f'{window.tokens:,} tokens' if window.tokens else 'unknown'} ({window.source}); attention: {plan.shape.attention}"
        + (f"; positions past it: up to {window.positions:,}" if window.positions else ""),
    ]
    if plan.gpu is not None:
        gpu = plan.gpu
        peak = gpu.fp32_tflops if plan.shape.itemsize >= 4 else gpu.half_tflops
        lines += [
            f"gpu: {gpu.name}, {peak:g} TFLOP/s dense {'fp32' if plan.shape.itemsize >= 4 else 'bf16/fp16'}, {gpu.memory_gib:g} GiB ({gpu.source})",
            f"  GPU time at {plan.utilisation:.0%} of that peak; a sequence fits when its HF peak is within {cost.HF_GPU_MEMORY_SHARE:.0%} of the memory",
        ]
    header = [
        "task",
        "cell",
        "docs",
        "requests",
        "input tok",
        "longest",
        "FLOPs",
        "KV/seq",
        "logits",
        "HF peak",
        "data",
    ]
    if plan.gpu is not None:
        header += ["GPU time", "fits"]
    table = [header]
    for row in plan.rows:
        c = plan.costs(row)
        cells = [
            row.task, row.cell, f"{row.docs:,}", f"{row.requests:,}", tokens_text(row.input_tokens) + ("~" if row.estimated else ""),
            tokens_text(row.sequence_tokens), cost.flops_text(c["prefill_flops"] + c["decode_flops"]), cost.gib(c["kv_cache_bytes"]),
            cost.gib(c["logits_bytes"]), cost.gib(c["peak_bytes"]), seconds_text(c["data_seconds"]),
        ]  # fmt: skip
        if plan.gpu is not None:
            cells += [seconds_text(c["est_seconds"]), {True: "yes", False: "no", None: "-"}[c["fits"]]]
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += ["  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))) for r in table]
    for task in dict.fromkeys(row.task for row in plan.rows):
        rows = [r for r in plan.rows if r.task == task]
        costs = [plan.costs(r) for r in rows]
        total = (
            f"{task}: {sum(r.docs for r in rows):,} docs, {sum(r.requests for r in rows):,} requests, "
            f"{sum(r.input_tokens for r in rows):,} input tokens, {cost.flops_text(sum(c['prefill_flops'] + c['decode_flops'] for c in costs))}"
        )
        if plan.gpu is not None:
            total += f", ~{seconds_text(sum(c['est_seconds'] for c in costs))} on one {plan.gpu.name}"
        total += f"; data phase ~{seconds_text(sum(c['data_seconds'] for c in costs))} of CPU per run"
        skipped = sum(r.skipped for r in rows)
        lines.append(total + (f"; {skipped} docs skipped" if skipped else ""))
        settings = plan.vllm(task)
        if settings is not None and plan.gpu is not None:  # (settings come with a GPU)
            lines.append(
                f"  vLLM on one {plan.gpu.name}: max_model_len={settings.max_model_len} max_num_batched_tokens={settings.max_num_batched_tokens} "
                f"gpu_memory_utilization={settings.gpu_memory_utilization:.2f} (needs {cost.gib(settings.needed_bytes)}"
                + (
                    ""
                    if settings.fits
                    else f": does not fit one {plan.gpu.name}; shard the model with tensor_parallel_size"
                )
                + ")"
            )
    notes = plan.notes + [f"{r.task} {r.cell}: {r.note}" for r in plan.rows if r.note]
    notes.append(
        "~: estimated tokens; FLOPs: prefill and generation; KV/seq: K and V of the longest sequence; logits: our LM-head chunk "
        "(loglikelihood_accuracy) or the stock path's full-vocabulary logits; HF peak: one sequence on --model hf; "
        "data: CPU time the data phase tokenizes per run"
    )
    lines += [f"note: {note}" for note in notes]
    return lines

"""`lm-eval-longmem plan`: what a run will cost, before anything is run, built or downloaded.

Given a run's `--tasks`, `--model_args` and `--metadata`, `make_plan` reads the model's config and
tokenizer (nothing else: no weights, no data set) and lays out, per task and cell (a length, or
another value the evaluation's sweep varies): docs, requests, input tokens, the longest sequence, and from the
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

import difflib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from lm_eval_longmem.common import cost
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import evaluation, evaluations
from lm_eval_longmem.common.model_info import Window, load_config, load_tokenizer, model_window
from lm_eval_longmem.common.plan_rows import Row, TaskFacts

DEFAULT_UTILISATION = 0.5
"""Share of a GPU's datasheet peak dense FLOP/s a long prefill is assumed to reach. Measured: 0.54-0.56
for the body forward of a Llama-3-8B-shaped model (bf16, sdpa) on an H200 at 8k-128k tokens
(CONTRIBUTING.md); a whole request adds the LM head and the harness's own work, hence 0.5."""

BYTES_PER_TOKEN = 4
"""Bytes of English text per token, to size a local corpus without reading it (SmolLM2's tokenizer
on one Gutenberg book: 4.4)."""


@dataclass(frozen=True)
class RunSettings:
    """What of the planned `lm_eval` command changes the cost beyond its tasks and metadata; every other
    flag of `lm_eval run` (output paths, logging, trackers) is accepted and changes nothing."""

    model: str = "hf"
    """`--model`: hf and vllm get their peak and settings first; another model gets counts and FLOPs."""
    batch_size: str = "1"
    """`--batch_size`: N sequences at once on HF (the peak of N); `auto` probes the largest that fits."""
    limit: float | None = None
    """`--limit`: N docs per task, or a share of them below 1.0, as the harness counts it."""
    samples: dict[str, list[int]] | None = None
    """`--samples`: the docs each task runs."""
    apply_chat_template: bool = False
    """`--apply_chat_template`: prompts are rendered with the model's chat template."""
    system_instruction: str | None = None
    """`--system_instruction`: a system message before each prompt."""
    fewshot_as_multiturn: bool = False
    num_fewshot: int | None = None
    """`--num_fewshot`: not counted (our tasks' prompts are zero-shot, with any examples inside the prompt)."""

    @classmethod
    def from_args(cls, args: Any) -> RunSettings:
        """From the namespace of `lm_eval run`'s flags (`harness.cli.run_parser`)."""
        samples = getattr(args, "samples", None)
        if isinstance(samples, str):
            path = Path(samples)
            if not path.is_file():
                raise UsageError(f"--samples {samples}: neither a JSON object nor a file holding one")
            samples = json.loads(path.read_text(encoding="utf-8"))
        if samples is not None and args.limit is not None:
            raise UsageError("--limit and --samples: give one of them (lm_eval takes one)")
        return cls(
            model=args.model or "hf",
            batch_size=str(getattr(args, "batch_size", 1)),
            limit=args.limit,
            samples=samples,
            apply_chat_template=bool(getattr(args, "apply_chat_template", False)),
            system_instruction=getattr(args, "system_instruction", None),
            fewshot_as_multiturn=bool(getattr(args, "fewshot_as_multiturn", False)),
            num_fewshot=getattr(args, "num_fewshot", None),
        )

    @property
    def batch(self) -> int:
        """Sequences the HF backend holds at once for the peak: `--batch_size N`, else one."""
        return int(self.batch_size) if self.batch_size.isdigit() else 1

    def docs_taken(self, task: str, docs: int) -> int | None:
        """Docs of `task` the run takes (None: all): `--samples`' list, or `--limit` as the harness counts it."""
        if self.samples is not None:
            return None if task not in self.samples else min(docs, len(self.samples[task]))
        if self.limit is None:
            return None
        return min(docs, math.ceil(docs * self.limit) if self.limit < 1.0 else int(self.limit))


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
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UsageError(f"--tasks {name}: {hint}plan knows our tasks and groups only: {', '.join(sorted(known))}")
        owner, configs = known[name]
        for config in configs:
            facts[config["task"]] = TaskFacts(
                name=config["task"],
                evaluation=owner,
                output_type=config["output_type"],
                dataset_kwargs=dict(config.get("dataset_kwargs") or {}),
                max_gen_toks=int((config.get("generation_kwargs") or {}).get("max_gen_toks", 0)),
                description=str(config.get("description") or ""),
                gen_prefix=str(config.get("gen_prefix") or ""),
                target_delimiter=str(config.get("target_delimiter", " ")),
            )
    return list(facts.values())


# --- helpers of the evaluations' planners ---------------------------------------------------------


def corpus_tokens(source: str | None) -> int | None:
    """The estimated tokens of a local text source (`BYTES_PER_TOKEN`), told without reading it; None for a hub
    source (the default corpus included) or one not on this machine."""
    path = Path(source).expanduser() if source else None
    if path is None or source is None or source.startswith("hf:") or not path.exists():
        return None
    files = [path] if path.is_file() else sorted(path.rglob("*.txt"))
    return sum(f.stat().st_size for f in files) // BYTES_PER_TOKEN


def corpus_text(source: str | None) -> str:
    """A text source in words, with its size where it can be told without reading it."""
    if source is None:
        return "the default corpus (PG-19's test books, hf:emozilla/pg19-test, 100 books)"
    tokens = corpus_tokens(source)
    if tokens is None:
        return f"the corpus {source}"
    return f"the corpus {source} (~{tokens:,} tokens, ~{cost.tokenize_seconds(tokens):.0f} CPU s)"


SHORT_MARGIN = 1.5
"""How far a local corpus's estimated tokens must fall below what a cell needs for plan to say the run refuses the
cell: a byte count gives tokens only roughly (English books: 3.2 to 4.4 bytes per token in SmolLM2's tokenizer)."""


def corpus_shortfall(source: str | None, need: int, key: str) -> tuple[str, bool]:
    """Whether the text source `source` (of the option `key`) can fill a cell that cuts `need` tokens from it, as
    the run checks it when it builds the cell's docs: ("", False) when it holds enough or cannot be sized (a hub
    source); else what is short, and whether surely (the run refuses the cell) or only perhaps (`SHORT_MARGIN`)."""
    tokens = corpus_tokens(source)
    if tokens is None or tokens >= need:
        return "", False
    surely = tokens * SHORT_MARGIN < need
    said = f"{key}={source} holds ~{tokens:,} tokens (estimated from its size), {'fewer than' if surely else 'about'} the {need:,} this cell needs"
    return said + ("" if surely else ": the run may refuse it"), surely


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
    settings: RunSettings = RunSettings()
    cpu: bool = False
    """Whether to estimate time on this machine's CPU (`cost.cpu_flops_per_second`, measured once per process)."""
    warnings: tuple[str, ...] = ()
    """What the run's settings do that its results will not say (printed under the window)."""

    def costs(self, row: Row) -> dict[str, Any]:
        """The row's costs (`common.cost`), as its `--json` row has them."""
        shape = self.shape
        # each group's prefix once, then every forward's suffix against its cached keys: on HF; our vLLM requests
        # read no prefix cache (order-independent scores, `backends.vllm`), so there every forward is whole
        if row.groups and self.settings.model != "vllm":
            suffix = row.forward_positions - row.shared_positions
            prefill = row.groups * cost.forward_flops(
                shape, row.shared_positions, 0
            ) + row.forwards * cost.suffix_flops(shape, suffix, row.forward_positions, row.head_positions)
        else:
            prefill = row.forwards * cost.forward_flops(shape, row.forward_positions, row.head_positions)
        decode = row.forwards * cost.decode_flops(shape, row.forward_positions, row.new_tokens)
        peak = cost.hf_peak(
            shape,
            row.scoring or row.output_type,
            row.sequence_tokens - row.new_tokens,
            batch=self.settings.batch,
            new_tokens=row.new_tokens,
        )
        group_kv = cost.kv_cache_bytes(shape, row.group_kv_tokens)
        out: dict[str, Any] = {
            "prefill_flops": prefill,
            "decode_flops": decode,
            "kv_cache_bytes": cost.kv_cache_bytes(shape, row.sequence_tokens),
            "logits_bytes": peak.logits,
            "peak_bytes": peak.total + group_kv,
            "data_seconds": round(cost.tokenize_seconds(row.data_tokens), 1),
        }
        if self.gpu is not None:
            out["gpu"] = self.gpu.name
            out["est_seconds"] = round(cost.gpu_seconds(prefill + decode, self.gpu, shape.dtype, self.utilisation), 1)
            out["fits"] = peak.total <= cost.HF_GPU_MEMORY_SHARE * cost.gpu_bytes(self.gpu) if row.docs else None
        if self.cpu:
            out["cpu_seconds"] = round((prefill + decode) / cost.cpu_flops_per_second(self.cpu_dtype), 1)
        return out

    @property
    def cpu_dtype(self) -> str:
        """The dtype a CPU run computes in: the model's, where CPUs multiply it fast enough, else float32."""
        return self.shape.dtype if self.shape.itemsize >= 4 else "float32"

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
                "refused": r.refused,
                "groups": r.groups,
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


PROMPTED = ("multiple_choice", "generate_until")
"""Output types whose requests are the harness's rendered prompt (`fewshot_context`); our `loglikelihood_accuracy`
requests are token ids the task builds itself, untouched by a chat template."""


def prompt_overhead(task: TaskFacts, tokenizer: Any, settings: RunSettings) -> int:
    """Tokens that `--apply_chat_template` and `--system_instruction` add to each of `task`'s prompts: the prompt
    the harness builds and renders (`harness.models.harness_prompt`, R28) counted with and without them, for a
    doc of the task's shape (a description and a gen_prefix where its YAML has them). The planners count the
    plain prompt; this is added to every request."""
    from lm_eval_longmem.harness.models import harness_prompt

    if task.output_type not in PROMPTED or not (settings.apply_chat_template or settings.system_instruction):
        return 0
    if settings.apply_chat_template and not getattr(tokenizer, "chat_template", None):
        raise UsageError(
            f"--apply_chat_template: the model's tokenizer has no chat template ({task.name}'s prompts cannot be "
            "rendered with one, in plan or in the run); leave the flag out for a base model"
        )
    shape: dict[str, Any] = dict(
        description="You are a careful reader.\n\n" if task.description else "",
        text="Read the text below.\n\nWhat comes first?\n",
        gen_prefix="Answer:" if task.gen_prefix else "",
        target_delimiter=task.target_delimiter,
    )
    plain = harness_prompt(tokenizer, **shape)
    sent = harness_prompt(
        tokenizer,
        **shape,
        system_instruction=settings.system_instruction,
        apply_chat_template=settings.apply_chat_template,
        fewshot_as_multiturn=settings.fewshot_as_multiturn,
    )
    return len(tokenizer(sent)["input_ids"]) - len(tokenizer(plain)["input_ids"])


def with_overhead(row: Row, tokens: int) -> Row:
    """`row` with `tokens` more in every request's prompt (after any prefix its group shares)."""
    if not tokens or not row.docs:
        return row
    return replace(
        row,
        input_tokens=row.input_tokens + tokens * row.requests,
        sequence_tokens=row.sequence_tokens + tokens,
        forward_positions=row.forward_positions + tokens,
        data_tokens=row.data_tokens + tokens * row.docs,
        group_kv_tokens=row.group_kv_tokens + tokens * math.ceil(row.forwards / row.groups) if row.groups else 0,
    )


LIMIT_ORDER_TEXT = {"balanced": "one doc of every cell per round", "cheapest": "the cheapest cells first"}


def taken(rows: list[Row], count: int, order: str) -> list[Row]:
    """`rows` (one task's cells) with only the `count` docs a `--limit` run takes, in the task's limit order
    (`common.options.limit_order_option`): `cheapest` fills the cheapest cells first, `balanced` deals one
    doc of every cell per round. A cell keeps its longest sequence; its other counts scale with its docs."""
    counts = dict.fromkeys(range(len(rows)), 0)
    by_cost = sorted(range(len(rows)), key=lambda i: rows[i].forward_positions)
    left = count
    while left > 0 and any(counts[i] < rows[i].docs for i in counts):
        for i in by_cost if order == "cheapest" else reversed(by_cost):
            if left and counts[i] < rows[i].docs:
                take = min(left, rows[i].docs - counts[i]) if order == "cheapest" else 1
                counts[i], left = counts[i] + take, left - take
    return [_scaled(row, counts[i]) for i, row in enumerate(rows) if counts[i] or not row.docs]


def _scaled(row: Row, docs: int) -> Row:
    if docs == row.docs:
        return row
    share = docs / row.docs if row.docs else 0
    return replace(
        row,
        docs=docs,
        requests=round(row.requests * share),
        forwards=round(row.forwards * share),
        input_tokens=round(row.input_tokens * share),
        groups=math.ceil(row.groups * share),
    )


def model_config(metadata: dict[str, Any]) -> Any:
    """The model's config, read as the run reads it, or one line saying why it cannot be: the model named nowhere,
    a folder that is not there or has no config.json, a hub model the hub cannot give (`preflight.model_problems`,
    after the run's one short probe of the hub, `common.hub.probe`: no minute of retries when it does not answer)."""
    from lm_eval_longmem.common import hub
    from lm_eval_longmem.preflight import model_probe_url, model_problems

    name = metadata.get("pretrained") or metadata.get("model")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(
            "plan reads the model's config: pass --model_args pretrained=NAME (a local folder works offline, "
            "e.g. one holding only config.json and the tokenizer's files)"
        )
    folder = Path(name).expanduser()
    if folder.is_dir() and not (folder / "config.json").is_file():
        raise UsageError(
            f"--model_args pretrained={name}: no config.json in {folder}; plan reads the model's config.json (a folder "
            "holding only it and the tokenizer's files will do)"
        )
    if (url := model_probe_url(metadata)) is not None and not hub.unusable_reason():
        probe = hub.probe(url)
    else:
        probe = None
    if problems := model_problems(metadata, probe, weights=False):
        raise UsageError(problems[0])
    config = load_config(metadata)
    if config is None:
        raise UsageError(f"--model_args pretrained={name}: its config.json could not be read as a model's config")
    return config


def make_plan(
    names: list[str],
    metadata: dict[str, Any],
    gpu: str | None = None,
    utilisation: float = DEFAULT_UTILISATION,
    settings: RunSettings = RunSettings(),
    cpu: bool = False,
) -> Plan:
    """The plan of a run of `names` (our tasks and groups) with `metadata` (--model_args merged with --metadata)
    and the other flags of its command that change the cost (`settings`)."""
    if not 0 < utilisation <= 1:
        raise UsageError(
            f"--utilisation {utilisation}: give the share of peak FLOP/s a run reaches, in (0, 1], e.g. 0.4"
        )
    if gpu is not None and gpu not in cost.GPUS:
        raise UsageError(f"--gpu {gpu}: choose one of {', '.join(cost.GPUS)}")
    if not names:
        raise UsageError(f"--tasks names no task: give the run's tasks, e.g. --tasks {','.join(our_tasks())}")
    tasks = resolve_tasks(names)
    config = model_config(metadata)
    try:
        shape = cost.ModelShape.from_config(
            config, dtype=metadata.get("dtype"), attention=metadata.get("attn_implementation")
        )
    except ValueError as err:
        raise UsageError(f"--model_args pretrained={metadata.get('pretrained')}: {err}") from err
    tokenizer, window = load_tokenizer(metadata), model_window(metadata)
    warnings = window_warnings(window, config, tokenizer)
    rows, notes = [], []
    for task in tasks:
        planner = evaluation(task.evaluation).planner()
        if planner is None:
            raise UsageError(f"--tasks {task.name}: its evaluation, {task.evaluation}, has no rows for plan")
        found, said = planner(task, metadata, tokenizer, window)
        overhead = prompt_overhead(task, tokenizer, settings)
        found = [with_overhead(row, overhead) for row in found]
        if overhead:
            said = [*said, f"{task.name}: {overhead} tokens per prompt from the chat template and system instruction"]
        count = settings.docs_taken(task.name, sum(r.docs for r in found))
        if count is not None:
            order = str(metadata.get(f"{task.evaluation}_limit_order", "balanced"))
            notes.append(
                f"{task.name}: {count:,} of its {sum(r.docs for r in found):,} docs "
                + (
                    "(--samples)"
                    if settings.samples is not None
                    else f"(--limit, {order} order: {LIMIT_ORDER_TEXT[order]})"
                )
            )
            found = taken(found, count, order)
        rows += found
        notes += said
    return Plan(
        str(metadata.get("pretrained")),
        shape,
        window,
        rows,
        notes,
        cost.GPUS[gpu] if gpu else None,
        utilisation,
        settings,
        cpu,
        tuple(warnings),
    )


def window_warnings(window: Window, config: Any, tokenizer: Any) -> list[str]:
    """A window set past the one the model was trained with (`max_length` or `max_model_len` above what its
    config says, `harness.models.stated_window`): positions it never saw, which a row's "fits" does not tell."""
    from lm_eval_longmem.harness.models import stated_window

    trained = stated_window(config, tokenizer)
    if not window.tokens or not trained or window.tokens <= trained:
        return []
    times = window.tokens / trained
    return [
        f"{window.source} sets the window to {window.tokens:,} tokens, {times:.3g}x the {trained:,} the model's config "
        "says it was trained for: positions past that were never trained, so what runs there measures extrapolation"
    ]


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


def summed(plan: Plan, rows: list[Row]) -> str:
    """`rows` added up: docs, requests, input tokens, FLOPs, the times the plan estimates, the data phase and the
    docs skipped for their length (a task's total line, and the run's)."""
    costs = [plan.costs(r) for r in rows]
    text = (
        f"{sum(r.docs for r in rows):,} docs, {sum(r.requests for r in rows):,} requests, "
        f"{sum(r.input_tokens for r in rows):,} input tokens, {cost.flops_text(sum(c['prefill_flops'] + c['decode_flops'] for c in costs))}"
    )
    if plan.gpu is not None:
        text += f", ~{seconds_text(sum(c['est_seconds'] for c in costs))} on one {plan.gpu.name}"
    if plan.cpu:
        text += f", ~{seconds_text(sum(c['cpu_seconds'] for c in costs))} on this CPU"
    text += f"; data phase ~{seconds_text(sum(c['data_seconds'] for c in costs))} of CPU per run"
    skipped = sum(r.skipped for r in rows)
    return text + (f"; {skipped:,} docs longer than the window skipped" if skipped else "")


def plan_lines(plan: Plan) -> list[str]:
    """The plan for people: what it was computed for, one line per row, per-task totals and notes."""
    window = plan.window
    lines = [
        f"model: {plan.model} (--model {plan.settings.model}): {plan.shape.describe()}",
        f"window: {f'{window.tokens:,} tokens' if window.tokens else 'unknown'} ({window.source}); attention: {plan.shape.attention}"
        + (f"; positions past it: up to {window.positions:,}" if window.positions else ""),
    ]
    lines += [f"warning: {warning}" for warning in plan.warnings]
    lines += [f"warning: {r.task} {r.cell}: the run refuses it ({r.refused}) and stops" for r in plan.rows if r.refused]
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
        total = f"{task}: {summed(plan, [r for r in plan.rows if r.task == task])}"
        settings = plan.vllm(task)
        vllm_line = []
        if settings is not None and plan.gpu is not None:  # (settings come with a GPU)
            vllm_line.append(
                f"  vLLM on one {plan.gpu.name}: max_model_len={settings.max_model_len} max_num_batched_tokens={settings.max_num_batched_tokens} "
                f"gpu_memory_utilization={settings.gpu_memory_utilization:.2f} (needs {cost.gib(settings.needed_bytes)}"
                + (
                    ""
                    if settings.fits
                    else f": does not fit one {plan.gpu.name}; shard the model with tensor_parallel_size"
                )
                + ")"
                + (
                    f"; past the model's window of {plan.window.tokens:,} vLLM also needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
                    if plan.window.tokens and settings.max_model_len > plan.window.tokens
                    else ""
                )
            )
        lines += [*vllm_line, total] if plan.settings.model == "vllm" else [total, *vllm_line]
    if (tasks := len({row.task for row in plan.rows})) > 1:
        lines.append(f"total: {tasks} tasks, {summed(plan, plan.rows)}")
    notes = plan.notes + [f"{r.task} {r.cell}: {r.note}" for r in plan.rows if r.note]
    run = plan.settings
    if plan.cpu:
        rate = cost.cpu_flops_per_second(plan.cpu_dtype)
        notes.append(
            f"on this CPU: an estimate at its matrix-product rate in {plan.cpu_dtype}, measured now "
            f"({rate / 1e9:.0f} GFLOP/s); attention, the LM head's softmax and the harness add to it"
        )
    if run.model not in ("hf", "vllm"):
        notes.append(f"--model {run.model}: counts and FLOPs hold for any backend; memory is the HF backend's")
    if run.num_fewshot:
        notes.append(f"--num_fewshot {run.num_fewshot}: not counted; our tasks' prompts are counted zero-shot")
    if run.batch > 1:
        notes.append(f"--batch_size {run.batch}: HF peak holds {run.batch} sequences at once")
    elif run.batch_size.startswith("auto"):
        notes.append(f"--batch_size {run.batch_size}: HF peak is one sequence's; the harness batches what fits")
    notes.append(
        "~: estimated tokens; FLOPs: prefill and generation; KV/seq: K and V of the longest sequence; logits: our LM-head chunk "
        "(loglikelihood_accuracy) or the stock path's full-vocabulary logits; HF peak: on --model hf, one sequence (or --batch_size N of them); "
        "data: CPU time the data phase tokenizes per run"
    )
    lines += [f"note: {note}" for note in notes]
    return lines

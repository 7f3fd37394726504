"""`lm-eval-longmem booksort finetune`: Book-SORT's fine-tuned memory condition run end to end in one
output folder: the data and the training of both arms (`booksort/finetune.py`, steps 1-3 of its docstring), then

4. **Evaluation.** ``booksort_memoryless`` on the base model (epoch 0) and every checkpoint, through
   the harness (``peft=<checkpoint>`` in the HF backend's model arguments): ordinary results and
   samples files under ``results/<arm>/epoch-<k>/``. An evaluation is reused when its record names
   the same checkpoint digest, base model content, evaluated data content and evaluation settings.
5. **Summary.** ``booksort_finetune.json`` and ``booksort_finetune.md``: the paper's accuracy per arm
   and epoch with its interval and test against chance (as the task stored them), the mean loss on
   the book chunks (does the model remember the text?), and the epoch-matched comparison: a paired
   t-test on the per-trial correctness of the two arms' checkpoints (`common.stats.paired_test`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lm_eval_longmem.booksort.finetune import (
    ARMS,
    CHECKPOINT_RECORD,
    VERSION,
    ModelSpec,
    base_probe_loss,
    build_training_data,
    require_peft,
    split_metadata,
    train_arm,
    write_json,
)
from lm_eval_longmem.booksort.options import PREFIX as BOOKSORT_PREFIX
from lm_eval_longmem.booksort.options import BooksortOptions
from lm_eval_longmem.booksort.rim.finetune_reader import SUMMARY, TASK, render_markdown
from lm_eval_longmem.booksort.scores import ACC
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.cache import FOLDER, atomic_write, cache_key, check_target, input_digest
from lm_eval_longmem.common.model_info import default_device, load_tokenizer
from lm_eval_longmem.common.options import declared, parse_options
from lm_eval_longmem.common.stats import paired_test
from lm_eval_longmem.readers.results import Run, find_results_files, load_run

EVALUATION_VERSION = 2
"""Of what a stored evaluation holds, in its key beside the trainer's `VERSION` (which keys the checkpoints, so
they are not retrained): 2, the results record the run's condition (fine-tuned for a checkpoint)."""


@dataclass(frozen=True)
class EvalSettings:
    """How each checkpoint is evaluated: the harness's flags for one `booksort_memoryless` run."""

    model_args: dict[str, Any]
    metadata: dict[str, Any]
    """The booksort_* options (and any other harness metadata), without the fine-tuning keys."""
    device: str
    batch_size: str = "1"
    limit: int | None = None
    apply_chat_template: bool = False
    inputs: tuple[str, ...] = ()
    """Content digests of the base model's files and of every local input of the evaluated task (the
    Book-SORT build), so an evaluation is redone when one of them changed in place."""


def evaluation_inputs(spec: ModelSpec, booksort_metadata: dict[str, Any]) -> tuple[str, ...]:
    """`EvalSettings.inputs`: the base model's content and the digest of each local `booksort_*` input."""
    options = parse_options(BooksortOptions, BOOKSORT_PREFIX, booksort_metadata)
    local = [getattr(options, d.name) for d in declared(BooksortOptions, BOOKSORT_PREFIX) if d.spec.local_input]
    paths = [Path(v).expanduser() for v in local if isinstance(v, str) and Path(v).expanduser().exists()]
    return (spec.content, *(input_digest([path]) for path in paths))


def finetune_folder(path: Path) -> bool:
    """True for a folder that holds only what `run_finetune` writes (or nothing): the only kind it writes into."""
    ours = {"checkpoints", "results", SUMMARY, "booksort_finetune.md"}
    return all(entry.name in ours or entry.name.startswith(".") for entry in Path(path).iterdir())


def evaluate(
    checkpoint: Path | None, method: str, settings: EvalSettings, out: Path, say: Callable[[str], None]
) -> Run:
    """`booksort_memoryless` on the base model (`checkpoint` None) or a checkpoint; reused when already done.

    The results and samples files are the harness's own (`EvaluationTracker`) under `out`; a record
    ``eval.json`` written after them names the checkpoint digest and settings they belong to.
    """
    model_args = dict(settings.model_args)
    digest = None
    if checkpoint is not None:
        record = json.loads((checkpoint / CHECKPOINT_RECORD).read_text(encoding="utf-8"))
        digest = record["digest"]
        model_args["peft" if method == "lora" else "pretrained"] = str(checkpoint)
    key = cache_key(v=VERSION, evaluation=EVALUATION_VERSION, checkpoint=digest, settings=asdict(settings))
    done = out / "eval.json"
    try:
        record = json.loads(done.read_text(encoding="utf-8"))
        if record.get("key") == key:
            return load_run(out / record["results"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if out.exists():  # an outdated evaluation under results/ of this command's folder (checked before any work)
        shutil.rmtree(out)
    from lm_eval_longmem import task_manager
    from lm_eval_longmem.harness.evaluator import evaluate_into

    metadata = {**model_args, **settings.metadata}
    start = time.perf_counter()
    evaluate_into(
        out,
        model="hf",
        model_args=model_args,
        tasks=[TASK],
        task_manager=task_manager(
            metadata=metadata, include_defaults=False
        ),  # index only our tasks: seconds, not ~20 s
        device=settings.device,
        batch_size=settings.batch_size,
        limit=settings.limit,
        apply_chat_template=settings.apply_chat_template,
        metadata=metadata,
    )
    [found] = find_results_files(out)
    write_json(done, {"key": key, "results": found.relative_to(out).as_posix()})
    say(f"evaluated {checkpoint or 'the base model'} in {time.perf_counter() - start:.0f} s")
    return load_run(found)


def _correct_by_doc(run: Run) -> dict[int, float]:
    """Per-trial correctness from the harness's own sample records: the label with the higher
    log-likelihood against the target index (the task's rule, `BooksortTask.score`), so it does not
    depend on how our metrics are named in the samples file."""
    return {
        int(s["doc_id"]): float(int(np.argmax([float(ll) for ll, _ in s["filtered_resps"]])) == int(s["target"]))
        for s in run.samples(TASK)
    }


def arm_row(run: Run, epoch: int, record: dict[str, Any] | None, base_loss: float | None, root: Path) -> dict[str, Any]:
    """One (arm, epoch) row of the summary, from the results the task stored (`results`: relative to `root`)."""
    metrics = run.metrics(TASK)
    stats = {
        metric_names.name(ACC.name, stat=stat): metrics.get(metric_names.name(ACC.name, stat=stat))
        for stat in ("", *metric_names.STATS)
    }
    return {
        "epoch": epoch,
        **stats,
        "trials": run.n_samples(TASK),
        "train_loss": record["train_loss"] if record else None,
        "book_chunk_loss": record["book_chunk_loss"] if record else base_loss,
        "results": run.path.relative_to(root).as_posix(),
    }


def epoch_matched(book: Run, control: Run, epoch: int) -> dict[str, Any]:
    """The paper's comparison at one epoch: paired t-test of the two arms' per-trial correctness."""
    a, b = _correct_by_doc(book), _correct_by_doc(control)
    docs = sorted(a.keys() & b.keys())
    x, y = [a[d] for d in docs], [b[d] for d in docs]
    p = paired_test(x, y) if len(docs) >= 2 else None
    return {
        "epoch": epoch,
        "pairs": len(docs),
        "book_minus_control": (sum(x) - sum(y)) / len(docs) if docs else None,
        "p_value": p,
        "differs": p is not None and p < 0.05,
    }


def write_summary(summary: dict[str, Any], out: Path) -> Path:
    """`booksort_finetune.json` and `.md` in `out`, each written atomically."""
    path = out / SUMMARY
    write_json(path, summary)
    atomic_write(out / "booksort_finetune.md", lambda tmp: tmp.write_text(render_markdown(summary), encoding="utf-8"))
    return path


def run_finetune(
    model_args: dict[str, Any],
    metadata: dict[str, Any],
    output_path: Path,
    *,
    device: str | None = None,
    batch_size: str = "1",
    limit: int | None = None,
    apply_chat_template: bool = False,
    overwrite: bool = False,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Build the data, train both arms, evaluate every checkpoint and write the summary (module docstring).

    `overwrite` trains again the checkpoints made with other settings, another base model or other
    data, instead of stopping at the first one; verified checkpoints of this run are reused either way.
    """
    options, booksort_metadata = split_metadata(metadata)
    if options.method == "lora":
        require_peft()
    output_path = Path(output_path)
    # a folder of this command's own is resumed; any other is never written into
    check_target(output_path, overwrite=overwrite, kind=FOLDER, replaces=finetune_folder, resumes=True)
    spec = ModelSpec.from_model_args(model_args)
    device = device or default_device()
    output_path.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tokenizer = load_tokenizer(model_args)
    data = build_training_data(options, booksort_metadata, tokenizer)
    say(
        f"data: {len(data.book)} book chunks (of {data.chunks_available}), {len(data.instructions)} instruction "
        f"conversations ({data.instructions_skipped} longer than max_tokens left out)"
    )
    root = output_path / "checkpoints"
    mixes = {"book": data.book + data.instructions, "control": data.instructions}
    trained = {
        arm: train_arm(
            arm,
            mixes[arm],
            data.book,
            spec=spec,
            options=options,
            tokenizer=tokenizer,
            root=root,
            device=device,
            say=say,
            overwrite=overwrite,
        )
        for arm in ARMS
    }
    base_loss = base_probe_loss(spec, options, data.book, tokenizer, root, device)
    trained_s = time.perf_counter() - start
    inputs = evaluation_inputs(spec, booksort_metadata)
    settings = EvalSettings(model_args, booksort_metadata, device, str(batch_size), limit, apply_chat_template, inputs)
    base = evaluate(None, options.method, settings, output_path / "results" / "base", say)
    rows = [{"arm": "base", **arm_row(base, 0, None, base_loss, output_path)}]
    tests = []
    for epoch in range(1, options.epochs + 1):
        runs = {}
        for arm in ARMS:
            checkpoint, record = trained[arm].checkpoints[epoch - 1], trained[arm].records[epoch - 1]
            runs[arm] = evaluate(
                checkpoint, options.method, settings, output_path / "results" / arm / f"epoch-{epoch}", say
            )
            rows.append({"arm": arm, **arm_row(runs[arm], epoch, record, None, output_path)})
        tests.append(epoch_matched(runs["book"], runs["control"], epoch))
    summary = {
        "model": spec.pretrained,
        "task": TASK,
        "options": {**asdict(options), "learning_rate": options.lr},
        "booksort_metadata": {k: v for k, v in booksort_metadata.items() if k.startswith("booksort_")},
        "data": {
            "book_chunks": len(data.book),
            "book_chunks_available": data.chunks_available,
            "book_words": sum(len(c.text.split()) for c in data.chunks),
            "instructions": len(data.instructions),
            "instructions_skipped": data.instructions_skipped,
        },
        "rows": rows,
        "epoch_matched": tests,
        "seconds": {"train": round(trained_s, 1), "total": round(time.perf_counter() - start, 1)},
    }
    write_summary(summary, output_path)
    return summary

"""Book-SORT's fine-tuned (parametric) memory condition: Pink et al. (2024), sections 2.1 and 3.2.

The paper fine-tunes the model on the book text, mixed with unrelated instruction data so that it
keeps following instructions, then asks the order question *without* the excerpt (the memory-less
prompt). The control arm is the same fine-tuning without the book chunks; the two arms are
compared epoch by epoch (the paper finds no difference at any epoch). `run_finetune` does all of
it in one output folder (`rim.finetune_commands.run_finetune`); this module is the training:

1. **Data.** The book text is the text of the excerpts the selected trials use (test split;
   overlapping excerpts merged, so no word is repeated), cut into chunks of
   ``booksort_finetune_chunk_words`` words, each wrapped as a user turn asking to read a passage
   of the named book (as the reference code wraps its chunks). The instruction data come from
   `booksort.instructions`. Memory arm: chunks + instructions; control arm: the instructions.
2. **Training.** LoRA adapters (``peft``) or full fine-tuning, AdamW at a constant learning rate,
   one checkpoint per epoch under ``checkpoints/<arm>/epoch-<k>/``. Every draw is seeded (adapter
   initialisation: the same for both arms; the order of examples: per arm and epoch), and the
   learning rate does not depend on the number of epochs, so a run asked for more epochs later
   continues from the last checkpoint and gets the checkpoints a longer run would have.
3. **Resuming.** A checkpoint is written to a temporary folder and renamed into place, with a
   ``checkpoint.json`` that holds the digest of its files and the key of everything that shaped it
   (the base model's files by content, data, options). A verified checkpoint is never retrained; a
   damaged one (missing files, a digest that differs) is trained again from the one before; one
   trained with other settings, another base model (its weights changed in place included) or other
   data stops the run with one line, or is trained again with ``--overwrite``. The output folder
   holds only what this command writes; any other folder is refused before any work.

The command around the training (each checkpoint evaluated through the harness, the summary) is
`rim/finetune_commands.py`; its summary file is read back by `rim/finetune_reader.py`.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from lm_eval_longmem.booksort.data import CHECKPOINT_RECORD, add_bin_index, booksort_options, read_split, select
from lm_eval_longmem.booksort.instructions import GENERATED, Conversation, load_instructions
from lm_eval_longmem.common.cache import atomic_write, cache_key, content_digest, items_digest
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.model_info import model_digest, trust_remote_code
from lm_eval_longmem.common.options import one_of, option, parse_options, text, whole_number

PREFIX = "booksort_finetune_"
ARMS = ("book", "control")
"""The memory arm (book chunks + instructions) and the control arm (instructions only)."""
VERSION = 1
"""Bump when a change here changes what is trained or evaluated (it is part of every key)."""
INSTALL_HINT = 'the fine-tuned condition needs peft: pip install "lm-eval-longmem[finetune]"'
_ARM_SEED = {"book": 1, "control": 2}
_DEFAULT_LR = {"lora": 1e-4, "full": 5e-6}


def positive_number(value: Any) -> float:
    """A number > 0: 1e-4, "2e-5", "0.001"."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("expected a number > 0") from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise ValueError("expected a number > 0")
    return number


@dataclass(frozen=True)
class FinetuneOptions:
    """What `--metadata booksort_finetune_*` can set (the table in docs/booksort-finetune.md is checked against this)."""

    epochs: int = option(5, whole_number(1), "epochs per arm, one checkpoint each (the reference code trains 5)", "3")
    method: str = option("lora", one_of("lora", "full"), "lora (peft adapters) or full fine-tuning", "full")
    chunk_words: int = option(5000, whole_number(1), "words per book chunk (the reference code: 5,000)", "500")
    chunks: int | None = option(
        None, whole_number(1), "train on at most this many chunks, a seeded draw (default: all)", "64"
    )
    instructions: str = option(
        GENERATED,
        text,
        "instruction data: generated (offline, not about books), hf:OWNER/NAME or a .jsonl file",
        "hf:teknium/OpenHermes-2.5",
        local_input=True,
    )
    instruction_samples: int = option(
        3500, whole_number(1), "instruction conversations in both arms (the paper: 3,500)", "200"
    )
    learning_rate: float | None = option(
        None, positive_number, "AdamW learning rate, constant (default 1e-4 for lora, 5e-6 for full)", "2e-4"
    )
    batch_size: int = option(8, whole_number(1), "training examples per optimizer step", "4")
    max_tokens: int = option(
        8192,
        whole_number(16),
        "longest training example in tokens (longer chunks: error; instructions: skipped)",
        "2048",
    )
    lora_rank: int = option(16, whole_number(1), "LoRA rank r (adapters on every linear layer)", "8")
    lora_alpha: int = option(32, whole_number(1), "LoRA scaling alpha", "16")
    seed: int = option(
        0, whole_number(0), "seed of the chunk draw, instruction draw, adapter init and example order", "1"
    )

    @property
    def lr(self) -> float:
        return self.learning_rate if self.learning_rate is not None else _DEFAULT_LR[self.method]


def split_metadata(metadata: dict[str, Any]) -> tuple[FinetuneOptions, dict[str, Any]]:
    """(the fine-tuning options, the rest of the metadata for the evaluated task); both validated."""
    ours = {k: v for k, v in metadata.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in metadata.items() if not k.startswith(PREFIX)}
    options = parse_options(FinetuneOptions, PREFIX, ours)
    booksort_options(rest)  # a bad booksort_* key stops the run before any training
    return options, rest


# ---- data --------------------------------------------------------------------------------------


class Chunk(NamedTuple):
    """A piece of book text the memory arm trains on."""

    book_id: str
    title: str
    text: str


class Example(NamedTuple):
    """One tokenized training example."""

    kind: str
    """``book`` or ``instruction``."""
    ids: tuple[int, ...]
    scored_from: int
    """Tokens before this position (an instruction's prompt) carry no loss."""


class TrainingData(NamedTuple):
    chunks: list[Chunk]
    chunks_available: int
    """Chunks the excerpts give before the ``chunks`` cap."""
    book: list[Example]
    instructions: list[Example]
    instructions_skipped: int
    """Instruction conversations longer than ``max_tokens`` (left out, counted)."""


def _merged_spans(starts_ends: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for start, end in sorted(starts_ends):
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def book_chunks(
    rows: Sequence[dict[str, Any]], excerpt: Callable[[dict[str, Any]], str], chunk_words: int
) -> list[Chunk]:
    """The excerpt text of `rows`, each book's overlapping excerpts merged, cut into `chunk_words`-word chunks.

    Local builds give word offsets, so overlapping excerpts merge into spans and no word repeats;
    hub rows give only the excerpt text, so each distinct excerpt is a span of its own. Chunks are in
    book order, then text order; the last chunk of a span may be shorter.
    """
    titles: dict[str, str] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    texts: dict[str, list[str]] = {}
    for row in rows:
        book = str(row["book_id"])
        titles.setdefault(book, str(row["book_title"]))
        if "excerpt_start" in row:
            start = int(row["excerpt_start"])
            spans.setdefault(book, []).append((start, start + int(row["excerpt_length"])))
        else:
            seen = texts.setdefault(book, [])
            if excerpt(row) not in seen:
                seen.append(excerpt(row))
    chunks = []
    for book, title in titles.items():
        pieces = [
            excerpt({"book_id": book, "excerpt_start": start, "excerpt_length": end - start})
            for start, end in _merged_spans(spans.get(book, []))
        ] + texts.get(book, [])
        for piece in pieces:
            words = piece.split()
            chunks += [
                Chunk(book, title, " ".join(words[i : i + chunk_words])) for i in range(0, len(words), chunk_words)
            ]
    return chunks


def chunk_conversation(chunk: Chunk) -> Conversation:
    """How a chunk is shown in training: one user turn asking to read a passage of the named book."""
    return [{"role": "user", "content": f'Read this passage from the book "{chunk.title}" closely.\n\n{chunk.text}'}]


def _template_ids(tokenizer: Any, messages: Conversation, *, generation_prompt: bool) -> list[int]:
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def _plain_ids(tokenizer: Any, text: str, *, end: bool) -> list[int]:
    ids = list(tokenizer(text)["input_ids"])
    return ids + [tokenizer.eos_token_id] if end and tokenizer.eos_token_id is not None else ids


def tokenize(tokenizer: Any, messages: Conversation, kind: str) -> Example:
    """`messages` as token ids, through the chat template when the tokenizer has one.

    Instructions are scored on the assistant's reply only; a book chunk (a single user turn) on
    every token. Without a chat template the turns are joined by blank lines and end in EOS.
    """
    if getattr(tokenizer, "chat_template", None):
        ids = _template_ids(tokenizer, messages, generation_prompt=False)
        if kind == "book":
            return Example(kind, tuple(ids), 0)
        prompt = _template_ids(tokenizer, messages[:-1], generation_prompt=True)
        return Example(kind, tuple(ids), len(prompt) if ids[: len(prompt)] == prompt else 0)
    if kind == "book":
        return Example(kind, tuple(_plain_ids(tokenizer, messages[0]["content"], end=True)), 0)
    prompt_text = "\n\n".join(m["content"] for m in messages[:-1]) + "\n\n"
    prompt = _plain_ids(tokenizer, prompt_text, end=False)
    ids = _plain_ids(tokenizer, prompt_text + messages[-1]["content"], end=True)
    return Example(kind, tuple(ids), len(prompt) if ids[: len(prompt)] == prompt else 0)


def build_training_data(options: FinetuneOptions, booksort_metadata: dict[str, Any], tokenizer: Any) -> TrainingData:
    """Chunks of the selected test trials' excerpts and the instruction mix, tokenized (see the module docstring)."""
    source = read_split(booksort_options(booksort_metadata).data, "test")
    add_bin_index(source.rows)
    rows = select(source.rows, booksort_options(booksort_metadata))
    chunks = book_chunks(rows, source.excerpt, options.chunk_words)
    available = len(chunks)
    if options.chunks is not None and options.chunks < available:
        keep = np.sort(np.random.default_rng([options.seed, 22]).choice(available, size=options.chunks, replace=False))
        chunks = [chunks[int(i)] for i in keep]
    book = [tokenize(tokenizer, chunk_conversation(c), "book") for c in chunks]
    for chunk, example in zip(chunks, book):
        if len(example.ids) > options.max_tokens:
            raise UsageError(
                f"a {options.chunk_words}-word chunk of book {chunk.book_id} is {len(example.ids)} tokens, more than "
                f"booksort_finetune_max_tokens={options.max_tokens}: lower booksort_finetune_chunk_words or raise max_tokens"
            )
    conversations = load_instructions(options.instructions, options.instruction_samples, options.seed)
    tokenized = [tokenize(tokenizer, c, "instruction") for c in conversations]
    instructions = [e for e in tokenized if len(e.ids) <= options.max_tokens]
    if not instructions:
        raise UsageError(
            f"every instruction conversation is longer than booksort_finetune_max_tokens={options.max_tokens}: raise it"
        )
    return TrainingData(chunks, available, book, instructions, len(tokenized) - len(instructions))


def examples_digest(examples: Sequence[Example]) -> str:
    """sha256 of the examples' kinds, token ids and scored spans (the data part of a training key)."""
    return items_digest([example.kind, example.scored_from, list(example.ids)] for example in examples)


# ---- the model ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """Where the trained model comes from and how it is loaded (from `--model_args`)."""

    pretrained: str
    revision: str | None
    dtype: str
    trust_remote_code: bool
    content: str = ""
    """Digest of the base model's and tokenizer's files, weights included (`model_info.model_digest`), so a
    model folder overwritten in place is another model to every key that names this spec."""

    @classmethod
    def from_model_args(cls, model_args: dict[str, Any]) -> ModelSpec:
        pretrained = model_args.get("pretrained")
        if not isinstance(pretrained, str) or not pretrained:
            raise UsageError("booksort finetune needs the model to train: --model_args pretrained=NAME_OR_FOLDER")
        if "peft" in model_args or "delta" in model_args:
            raise UsageError("--model_args peft=/delta=: the command trains its own adapters; name the base model only")
        dtype = str(model_args.get("dtype") or "float32")
        content = cache_key(**model_digest(model_args, weights=True))
        return cls(pretrained, model_args.get("revision"), dtype, trust_remote_code(model_args), content)

    def load(self, path: str | None = None) -> Any:
        import torch
        from transformers import AutoModelForCausalLM

        dtype = "auto" if self.dtype == "auto" else getattr(torch, self.dtype, None)
        if dtype is None:
            raise UsageError(
                f"--model_args dtype={self.dtype}: not a torch dtype; e.g. dtype=float32 or dtype=bfloat16"
            )
        revision = None if path else self.revision
        return AutoModelForCausalLM.from_pretrained(
            path or self.pretrained, revision=revision, dtype=dtype, trust_remote_code=self.trust_remote_code
        )


def require_peft() -> None:
    try:
        import peft  # noqa: F401
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def _new_model(spec: ModelSpec, options: FinetuneOptions, device: str) -> Any:
    import torch

    model = spec.load()
    if options.method == "lora":
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(options.seed)  # the same adapter initialisation in both arms
        config = LoraConfig(
            r=options.lora_rank,
            lora_alpha=options.lora_alpha,
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
    return model.to(device)


def _resume_model(spec: ModelSpec, options: FinetuneOptions, checkpoint: Path, device: str) -> Any:
    if options.method == "lora":
        from peft import PeftModel

        return PeftModel.from_pretrained(spec.load(), str(checkpoint), is_trainable=True).to(device)
    return spec.load(str(checkpoint)).to(device)


def _optimizer(model: Any, options: FinetuneOptions) -> Any:
    import torch

    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=options.lr, weight_decay=0.0)


def _pad_id(tokenizer: Any) -> int:
    """Padding never carries loss or attention, so any id works: the tokenizer's pad, else its EOS."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise UsageError(
            "the tokenizer has neither a pad nor an EOS token: pass --model_args tokenizer=NAME of one that has"
        )
    return int(pad)


def _batch(examples: Sequence[Example], pad_id: int, device: str) -> dict[str, Any]:
    """Right-padded input ids, attention mask and labels (-100 on padding and unscored prompt tokens)."""
    import torch

    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example.ids)
        ids[row, :n] = torch.tensor(example.ids)
        labels[row, example.scored_from : n] = torch.tensor(example.ids[example.scored_from :])
        mask[row, :n] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def _scored_tokens(batch: dict[str, Any]) -> int:
    return int((batch["labels"][:, 1:] != -100).sum())


def train_epoch(
    model: Any,
    optimizer: Any,
    examples: Sequence[Example],
    *,
    order: np.ndarray,
    batch_size: int,
    pad_id: int,
    device: str,
) -> float:
    """One pass over `examples` in `order`; returns the token-weighted mean training loss."""
    import torch

    model.train()
    total, tokens = 0.0, 0
    for start in range(0, len(order), batch_size):
        batch = _batch([examples[int(i)] for i in order[start : start + batch_size]], pad_id, device)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        n = _scored_tokens(batch)
        total, tokens = total + loss.item() * n, tokens + n
    return total / max(tokens, 1)


def mean_loss(model: Any, examples: Sequence[Example], *, batch_size: int, pad_id: int, device: str) -> float | None:
    """Token-weighted mean loss of `model` on `examples` (no training); None when there are none."""
    import torch

    if not examples:
        return None
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = _batch(examples[start : start + batch_size], pad_id, device)
            n = _scored_tokens(batch)
            total, tokens = total + float(model(**batch).loss) * n, tokens + n
    return total / max(tokens, 1)


# ---- checkpoints -------------------------------------------------------------------------------


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8"))


def _files_digest(folder: Path, names: Sequence[str]) -> str:
    return content_digest([folder / name for name in names])


def read_checkpoint(path: Path, key: str, *, overwrite: bool = False) -> dict[str, Any] | None:
    """The record of a verified checkpoint at `path` trained under `key`; None when absent or damaged.

    A checkpoint whose record names another key was trained with other settings, another base model
    or other data: that is a `UsageError`, since the folder may hold work the user wants to keep,
    unless `overwrite` (then None: it is trained again and replaced).
    """
    if not path.is_dir():
        return None
    try:
        record = json.loads((path / CHECKPOINT_RECORD).read_text(encoding="utf-8"))
        names, digest = list(record["files"]), record["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("key") != key:
        if overwrite:
            return None
        raise UsageError(
            f"{path} was trained with other settings, base model (its files changed) or data than this run: "
            "pass --overwrite to train it again, or give another --output_path"
        )
    if not all((path / name).is_file() for name in names) or _files_digest(path, names) != digest:
        return None
    return record


def save_checkpoint(
    path: Path, model: Any, optimizer: Any, tokenizer: Any, record: dict[str, Any], method: str
) -> dict[str, Any]:
    """Write the checkpoint into a temporary sibling folder, then rename it into place (`atomic_write`)."""
    import torch

    def write(tmp: Path) -> dict[str, Any]:
        model.save_pretrained(tmp)
        if method == "full":
            tokenizer.save_pretrained(tmp)
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        names = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
        full = {**record, "files": names, "digest": _files_digest(tmp, names)}
        (tmp / CHECKPOINT_RECORD).write_text(json.dumps(full, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return full

    # under checkpoints/<arm>/, checked to be this command's folder before training: a damaged or
    # outdated checkpoint there is ours to replace
    return atomic_write(path, write, replaces=lambda _: True)


def _remove_partials(folder: Path) -> None:
    """What a killed run left of `atomic_write`'s temporary folders (hidden, ending in `.tmp`)."""
    if folder.is_dir():
        for leftover in folder.glob(".*.tmp"):
            shutil.rmtree(leftover, ignore_errors=True)


class Trained(NamedTuple):
    """One arm's checkpoints, epoch 1 first."""

    arm: str
    checkpoints: list[Path]
    records: list[dict[str, Any]]


def train_key(spec: ModelSpec, options: FinetuneOptions, arm: str, examples: Sequence[Example]) -> str:
    # the data options and max_tokens act through `examples`; epochs only add checkpoints
    data_options = {
        "epochs",
        "chunks",
        "chunk_words",
        "instructions",
        "instruction_samples",
        "max_tokens",
        "learning_rate",
    }
    if options.method == "full":
        data_options |= {"lora_rank", "lora_alpha"}
    training = {k: v for k, v in asdict(options).items() if k not in data_options}
    return cache_key(
        v=VERSION, model=asdict(spec), training=training, lr=options.lr, arm=arm, data=examples_digest(examples)
    )


def train_arm(
    arm: str,
    examples: Sequence[Example],
    probe: Sequence[Example],
    *,
    spec: ModelSpec,
    options: FinetuneOptions,
    tokenizer: Any,
    root: Path,
    device: str,
    say: Callable[[str], None],
    overwrite: bool = False,
) -> Trained:
    """Train one arm for `options.epochs`, reusing every verified checkpoint (see the module docstring).

    `probe` (the book chunks) is scored after each epoch: its mean loss is the arm's memory of the text.
    """
    import torch

    key = train_key(spec, options, arm, examples)
    folder = root / arm
    _remove_partials(folder)
    pad_id = _pad_id(tokenizer)
    model = optimizer = None
    at_epoch: int | None = None
    paths: list[Path] = []
    records: list[dict[str, Any]] = []
    for epoch in range(1, options.epochs + 1):
        path = folder / f"epoch-{epoch}"
        record = read_checkpoint(path, key, overwrite=overwrite)
        if record is None:
            if at_epoch != epoch - 1:
                if epoch == 1:
                    model = _new_model(spec, options, device)
                    optimizer = _optimizer(model, options)
                else:
                    model = _resume_model(spec, options, paths[-1], device)
                    optimizer = _optimizer(model, options)
                    optimizer.load_state_dict(torch.load(paths[-1] / "optimizer.pt", map_location=device))
            start = time.perf_counter()
            torch.manual_seed(options.seed * 1000 + epoch)
            order = np.random.default_rng([options.seed, _ARM_SEED[arm], epoch]).permutation(len(examples))
            loss = train_epoch(
                model, optimizer, examples, order=order, batch_size=options.batch_size, pad_id=pad_id, device=device
            )
            probe_loss = mean_loss(model, probe, batch_size=options.batch_size, pad_id=pad_id, device=device)
            record = save_checkpoint(
                path,
                model,
                optimizer,
                tokenizer,
                {"key": key, "arm": arm, "epoch": epoch, "train_loss": loss, "book_chunk_loss": probe_loss,
                 "examples": len(examples), "seconds": round(time.perf_counter() - start, 1)},
                options.method,
            )  # fmt: skip
            at_epoch = epoch
            say(f"{arm} arm: epoch {epoch}/{options.epochs} trained in {record['seconds']} s (loss {loss:.3f})")
        else:
            say(f"{arm} arm: epoch {epoch}/{options.epochs} verified in {path}, not retrained")
        paths.append(path)
        records.append(record)
    return Trained(arm, paths, records)


def base_probe_loss(
    spec: ModelSpec, options: FinetuneOptions, probe: Sequence[Example], tokenizer: Any, root: Path, device: str
) -> float | None:
    """The untrained model's mean loss on the book chunks (epoch 0 of both arms), cached under `root`."""
    key = cache_key(v=VERSION, model=asdict(spec), data=examples_digest(probe), batch=options.batch_size)
    path = root / "base.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("key") == key:
            return record["book_chunk_loss"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    loss = mean_loss(
        spec.load().to(device), probe, batch_size=options.batch_size, pad_id=_pad_id(tokenizer), device=device
    )
    write_json(path, {"key": key, "book_chunk_loss": loss})
    return loss


# ---- evaluation through the harness --------------------------------------------------------------

"""Plain helpers behind the fixtures, and the lm_eval CLI runner; importable as `kit` in tests.

(`tests/` is on sys.path through pytest's `pythonpath` setting.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lm_eval_longmem.common.conditions import MEMORYLESS
from lm_eval_longmem.common.run import ResultsReading

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


TINY_LLAMA_SHAPE = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)
"""The body of the tiny random Llamas the tests build (`build_tiny_llama`, `build_long_llama`): built in about a second."""


def build_tiny_llama(out_dir: Path, *, seed: int = 0, **config_overrides) -> Path:
    """Save a tiny random Llama-style model and a character-level tokenizer (BOS/EOS/PAD) as an HF folder.

    The tokenizer is a real `PreTrainedTokenizerFast` with one token per printable ASCII character
    (anything else maps to `<unk>`), so real book text tokenizes losslessly and the folder loads with
    `AutoTokenizer`/`AutoModelForCausalLM` exactly like a hub model, with no network.
    `config_overrides` go to `LlamaConfig` (e.g. another `max_position_embeddings`).
    """
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {tok: i for i, tok in enumerate(specials + chars)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        add_bos_token=True,
    )
    tokenizer.save_pretrained(out_dir)

    torch.manual_seed(seed)
    settings = dict(
        **TINY_LLAMA_SHAPE,
        vocab_size=len(vocab),
        max_position_embeddings=2048,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"],
        tie_word_embeddings=False,
    )
    config = LlamaConfig(**{**settings, **config_overrides})
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(out_dir)
    return out_dir


def build_long_llama(out_dir: Path, tokenizer_dir: Path, positions: int, *, seed: int = 0) -> Path:
    """A tiny random Llama-style model (2 layers, hidden size 64) with `positions` positions and the tokenizer of
    `tokenizer_dir` (SmolLM2's, so token counts are those of a real model), saved as an HF folder in about a second.

    Rotary positions: the backend can run any length; `max_position_embeddings` is the window it claims.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.save_pretrained(out_dir)
    torch.manual_seed(seed)
    config = LlamaConfig(
        **TINY_LLAMA_SHAPE,
        vocab_size=len(tokenizer),
        max_position_embeddings=positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(out_dir)
    return out_dir


LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": False, "bos_token_id": 1,
    "eos_token_id": 2, "torch_dtype": "bfloat16",
}  # fmt: skip
"""Llama-3.1-8B's shape (its config.json's numbers); the weights never exist."""


def build_llama3_8b_shape(out_dir: Path, tokenizer_dir: Path) -> Path:
    """A folder with only a Llama-3-8B-shaped config.json and `tokenizer_dir`'s tokenizer: what `plan` needs, offline."""
    import json
    import shutil

    out_dir.mkdir(parents=True, exist_ok=True)
    for path in tokenizer_dir.iterdir():
        if path.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(path, out_dir / path.name)
    (out_dir / "config.json").write_text(json.dumps(LLAMA3_8B))
    return out_dir


def build_guessing_model(tiny_dir: Path, out_dir: Path) -> Path:
    """The tiny model made to guess " " or "e" from the sign of one hidden unit: scores are real fractions, not all 0.

    A random tiny model almost never predicts a character of English text, so every accuracy would
    be 0 and sums in any order would agree. Here the final norm keeps one unit, whose sign depends
    on the context through the random layers, and the head maps it to " " or "e".
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    with torch.no_grad():
        model.model.norm.weight.zero_()
        model.model.norm.weight[0] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[tokenizer.convert_tokens_to_ids(" "), 0] = 3.0
        model.lm_head.weight[tokenizer.convert_tokens_to_ids("e"), 0] = -3.0
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def build_uniform_model(tiny_dir: Path, out_dir: Path) -> Path:
    """The tiny model with a zeroed head: every token equally likely whatever it reads.

    So its answers and scores are degenerate on purpose: Book-SORT's two labels tie and the first,
    "A", wins on every trial (an answer bias); every perplexity is the vocabulary size (samples that
    all agree); greedy accuracy is that of always predicting token 0.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(tiny_dir).save_pretrained(out_dir)
    return out_dir


def build_booksort(book: Path, out: Path, excerpt_lengths: str = "250") -> Path:
    """`lm-eval-longmem booksort build` of one play into `out` (20-word segments), as a user runs it."""
    subprocess.run(
        [str(Path(sys.executable).with_name("lm-eval-longmem")), "booksort", "build", "--books", str(book),
         "--output_path", str(out), "--excerpt_lengths", excerpt_lengths, "--segment_lengths", "20"],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def in_process(capsys, *args) -> tuple[int, str, str]:
    """`lm-eval-longmem ARGS` in this process: (exit status, stdout, stderr)."""
    from lm_eval_longmem import cli

    try:
        cli.main([str(a) for a in args])
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def hf_run_args(model: Path | str, tasks: str, *rest: str, **model_args: object) -> list[str]:
    """`lm_eval` arguments of a run of `tasks` with `--model hf` on the model folder `model`, on CPU, then `rest`.

    `model_args` join `pretrained=` in `--model_args` (default `dtype=float32`; `dtype=None` leaves it out).
    """
    settings = {"pretrained": model, "dtype": "float32", **model_args}
    joined = ",".join(f"{key}={value}" for key, value in settings.items() if value is not None)
    return ["--model", "hf", "--model_args", joined, "--device", "cpu", "--tasks", tasks, *rest]


def run_lm_eval(
    args: list[str], out_dir: Path, *, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run the real `lm_eval` command line in a subprocess (offline, CPU) and return the process.

    `out_dir` is passed as `--output_path` when `args` has none; use `read_results` to load
    what it wrote.
    """
    cmd = [sys.executable, "-m", "lm_eval", *args]
    if args and args[0] not in ("ls", "validate") and "--output_path" not in args:
        cmd += ["--output_path", str(out_dir)]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=out_dir, timeout=1800)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"lm_eval failed ({proc.returncode}): {' '.join(cmd)}\n--- stdout\n{proc.stdout[-4000:]}"
            f"\n--- stderr\n{proc.stderr[-8000:]}"
        )
    return proc


def read_results(out_dir: Path) -> dict:
    """The newest `results_*.json` lm_eval wrote under `out_dir`, after `check_intervals` on it."""
    files = sorted(out_dir.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    assert files, f"no results file under {out_dir}"
    results = json.loads(files[-1].read_text())
    check_intervals(results)
    return results


def check_intervals(results: dict) -> None:
    """Every interval of every task in a results dict respects its metric: `_ci_low`/`_ci_high`
    are both null (no interval: one sample) or low <= value <= high inside the metric's range, [1, inf)
    for a perplexity (`*_ppl`), [0, 1] for every other score (accuracies, shares, answer bias); a memory
    length's bootstrap bounds (read as `_ci_low`/`_ci_high` whatever the file's spelling) are ordered tokens."""
    from lm_eval_longmem.common import metric_names
    from lm_eval_longmem.readers.results import task_metrics

    for task in results.get("results") or {}:
        metrics = task_metrics(results, task)
        for key, low in metrics.items():
            parsed = metric_names.parse(key)
            if parsed is None or parsed.stat != "_ci_low":
                continue
            base = parsed._replace(stat="")
            value, high = metrics.get(str(base)), metrics.get(str(parsed._replace(stat="_ci_high")))
            if low is None or high is None:
                assert low is None and high is None, (task, key, low, high)
                continue
            if parsed.score.endswith(
                "_memory_length"
            ):  # tokens, a percentile bootstrap: ordered bounds, not around the value
                assert 0 <= low <= high, (task, str(base), low, high)
                continue
            floor, ceiling = (1.0, float("inf")) if parsed.score.endswith("_ppl") else (0.0, 1.0)
            assert floor <= low <= value <= high <= ceiling, (task, str(base), low, value, high)


def read_samples(out_dir: Path, task: str) -> list[dict]:
    """The per-sample records lm_eval wrote for `task` (needs `--log_samples`)."""
    files = sorted(out_dir.rglob(f"samples_{task}_*.jsonl"), key=lambda p: p.stat().st_mtime)
    assert files, f"no samples file for {task} under {out_dir}"
    return [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]


def babilong_simulated(books: Path, **extra) -> dict:
    """BABILong `--metadata` for fresh samples from the simulator over `books` (nothing from outside)."""
    return {
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": str(books),
        "babilong_samples": 3,
        **extra,
    }


class RecordingBar:
    """Stands in for tqdm: what each progress bar made since import was told (`RecordingBar.made`)."""

    made: list[RecordingBar] = []

    def __init__(self, total=None, unit="it", unit_scale=False, disable=False, desc=None):
        self.total, self.unit, self.unit_scale, self.desc, self.steps = total, unit, unit_scale, desc, []
        self.closed = False
        RecordingBar.made.append(self)

    def update(self, n):
        self.steps.append(n)

    def close(self):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def aggregate_logged(task, payloads: list[dict], *, positional: bool = False) -> tuple[dict, set]:
    """(results row, names `higher_is_better` gives) of our task from its docs' payloads, gathered as the harness
    does; `positional`: each summary item as the positional list that files logged before items were named."""
    from lm_eval_longmem.common.metric_names import SUMMARY_KEY

    if positional:
        payloads = [p | {SUMMARY_KEY: list(p[SUMMARY_KEY].values())} for p in payloads]
    raw = {(key, "none"): [p[key] for p in payloads] for key in payloads[0]}
    row, count = task.aggregate_payloads(raw, None)
    assert count == len(payloads)
    return row, set(task.higher_is_better())


def check_summary_schema(task, payloads: list[dict]) -> dict:
    """The task's row from named items equals the row from old positional ones, and every metric of it
    (summaries included) has a direction and no direction lacks its metric; returns the row."""
    row, directions = aggregate_logged(task, payloads)
    assert aggregate_logged(task, payloads, positional=True)[0] == row
    assert {key.split(",")[0] for key in row} == directions
    return row


class FakeHub:
    """A stand-in for the Hugging Face hub on loopback (`HF_ENDPOINT`): a threading `http.server` on 127.0.0.1 that
    counts the connections it gets. Use as a context manager; `url` is its address.

    `answer`: an HTTP status for every request (200: the hub answers; 401, 404: it refuses a model; 503: a server
    error), "close" (accept, then hang up without an answer), "silent" (accept and never answer: a hub that times
    out) or "refuse" (nothing listens at `url`: the connection is refused).
    """

    def __init__(self, answer: str | int = "close") -> None:
        import http.server
        import socket
        import threading

        self.answer = answer
        self.connections = 0
        self._release = threading.Event()
        if answer == "refuse":  # a port that was free a moment ago, with nothing listening on it now
            with socket.create_server(("127.0.0.1", 0)) as probe:
                port = probe.getsockname()[1]
            self._server = None
        else:
            fake = self

            class Handler(http.server.BaseHTTPRequestHandler):
                def handle(self) -> None:
                    fake.connections += 1
                    if fake.answer == "close":
                        return  # the server closes the connection without a word
                    if fake.answer == "silent":
                        fake._release.wait()
                        return
                    super().handle()

                def do_HEAD(self) -> None:  # noqa: N802 - http.server's spelling
                    self.send_response(int(fake.answer))
                    self.send_header("Content-Length", "0")
                    self.end_headers()

                do_GET = do_HEAD  # noqa: N815

                def log_message(self, *args: object) -> None:
                    pass

            self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._server.daemon_threads = True
            port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> FakeHub:
        import threading

        if self._server is not None:
            threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def hflm_chat_template(tokenizer):
    """A task's `chat_template` callable as `HFLM.apply_chat_template` calls the tokenizer (what a run renders)."""

    def render(history, add_generation_prompt=True):
        return tokenizer.apply_chat_template(
            history, tokenize=False, add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )  # fmt: skip

    return render


def leave_process_group() -> None:
    """End a torchrun launcher's rank: meet the other ranks (rank 0 may still be writing), then leave the group.

    Why: a gloo group left to interpreter exit now and then aborts a rank ("terminate called without an
    active exception") as its worker threads are torn down; PyTorch asks every process to leave it itself.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


class NeedleResults(ResultsReading):
    """An outside evaluation's reading of its older files: `hits@` metrics are its own and read as `acc@`; a task
    whose dataset kwargs say `blind` ran memory-less."""

    def recognises(self, metrics):
        return any(key.startswith("hits@") for key in metrics)

    def canonical(self, metrics):
        return {key.replace("hits", "acc"): value for key, value in metrics.items()}

    def condition(self, config):
        return MEMORYLESS if config.get("dataset_kwargs", {}).get("blind") else None

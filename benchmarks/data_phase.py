"""The data phase at long lengths, before (main's code path, re-created here) and after, side by side.

Every figure is measured in a fresh process (wall and CPU seconds, peak resident memory), SmolLM2's
tokenizer, the embedded plays (and the nine books of ../shared/data when present) as text:

* BABILong at 1M tokens: building one sample once the corpus's sentences are cached; the window
  fit of one cached 1M doc; the data phase's peak memory with 1 and with 4 samples; the bytes of one
  `--log_samples` record. Before: each refinement of a sample tokenizes its whole prompt, and the
  fit tokenizes it again on every run (`Background(additive=False)` takes main's path: the
  package keeps it for tokenizers whose counts do not add up); docs hold their haystack.
* The forgetting curve's tokenized corpus, big enough for L = 1M (2M tokens for S and a disjoint I):
  before, every book in one tokenizer call; after, one book per call.
* Book-SORT at 20,000-word excerpts: building it; loading its docs (before, each doc held its
  excerpt, and a `datasets.Dataset` was built from them; after, docs say where their excerpt is);
  the window fit of its trials (before, each prompt tokenized with each answer choice on every run;
  after, counted once and read by content).

    python benchmarks/data_phase.py            # everything (about 10 minutes on 2 cores)
    python benchmarks/data_phase.py --quick    # the two BABILong 1M figures after the change

The last line is a JSON object of every figure (`build_1m_sample_s`, `fit_check_1m_doc_s`, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MILLION = 1_048_576
SHARED_BOOKS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "books"
TARGETS = {"build_1m_sample_s": 2.0, "fit_check_1m_doc_s": 0.2}


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


INPUTS: dict[str, str] = {}
"""The model folder and the plays folder, found once by the parent in the user's cache and handed to every cell
(a cell may run with a cache of its own, where they are not)."""


def tokenizer() -> Any:
    from lm_eval_longmem.common.model_info import load_tokenizer

    return load_tokenizer({"pretrained": INPUTS["model"]})


def plays() -> str:
    return INPUTS["plays"]


def babilong_metadata(samples: int, seed: int = 0) -> dict[str, Any]:
    return {
        "pretrained": INPUTS["model"], "max_length": MILLION, "babilong_source": "generate",
        "babilong_facts": "simulated", "babilong_corpus": plays(), "babilong_lengths": "[1M]",
        "babilong_tasks": "qa1", "babilong_samples": samples, "babilong_seed": seed,
    }  # fmt: skip


# --- cells: each runs in its own process and prints one JSON line -------------------------------


def cell_babilong_build(mode: str, **_: Any) -> dict[str, Any]:
    """One 1M qa1 sample built from the cached sentences and counts (not read from the sample cache)."""
    from lm_eval_longmem.babilong import generate
    from lm_eval_longmem.babilong.prompts import harness_prompt_parts
    from lm_eval_longmem.babilong.simulate import simulate

    tok = tokenizer()
    with Clock() as load:
        texts = generate._corpus_texts(plays())
        background = generate._background(texts, generate.texts_digest(texts), tok, "plays")
    if mode == "before":
        background.additive = False  # main: every refinement tokenizes the whole prompt
    calls = []
    real = generate.prompt_tokens

    def counting(tokenizer: Any, prompt: str) -> int:
        calls.append(len(prompt))
        return real(tokenizer, prompt)

    generate.prompt_tokens = counting
    spec = generate.GenerationSpec(qa="qa1", length=MILLION, samples=1)
    babi, parts = simulate("qa1", 1, 0), harness_prompt_parts("qa1")
    with Clock() as build:
        (row,) = generate.generate_samples(spec, babi, background, tok, parts)
    return {
        "background_tokens": background.total_tokens, "background_load_s": load.wall, "wall_s": build.wall,
        "cpu_s": build.cpu, "whole_prompt_tokenizations": sum(n > 100_000 for n in calls), "prompt_tokens": row["prompt_tokens"],
    }  # fmt: skip


def _babilong_task(metadata: dict[str, Any]) -> Any:
    from lm_eval_longmem import task_manager

    return task_manager(metadata=metadata).load(["babilong"])["tasks"]["babilong"]


def cell_babilong_fit(mode: str, **_: Any) -> dict[str, Any]:
    """The window fit of one cached 1M doc, and the bytes of its `--log_samples` record."""
    task = _babilong_task(babilong_metadata(1))
    doc = task.eval_docs[0]
    tok = task.tokenizer
    task.fit_reason(doc)  # warm: the corpus's sentences loaded once per run
    with Clock() as fit:
        if mode == "before":  # main: render the prompt, tokenize it
            prompt = task.rendered_prompt(doc)
            fits = len(tok(prompt)["input_ids"]) + 20 <= task.window.tokens
        else:
            fits = task.fit_reason(doc) == ""
    out: dict[str, Any] = {"wall_s": fit.wall, "cpu_s": fit.cpu, "fits": fits}
    if mode == "after":
        prompt = task.rendered_prompt(doc)
        args = {"gen_args_0": {"arg_0": prompt, "arg_1": dict(task.config.generation_kwargs)}}
        after = {k: v for k, v in doc.items()}
        main_fields = ("question", "target", "qa", "length", "length_name", "sample_id", "fact_depths", "supporting",
                       "supporting_spans", "prompt_tokens", "skip_reason", "retrieved", "retrieval_recall")  # fmt: skip
        before = {"input": task.haystack(doc)} | {k: doc[k] for k in main_fields}  # main's doc: the haystack on it
        size = lambda d: len(json.dumps({"doc": d, "arguments": args}, ensure_ascii=False).encode())  # noqa: E731
        out |= {
            "log_bytes_before": size(before),
            "log_bytes_after": size(after),
            "doc_bytes_after": len(json.dumps(after)),
        }
    return out


def cell_babilong_memory(mode: str, samples: int, seed: int, **_: Any) -> dict[str, Any]:
    """The data phase of `samples` fresh 1M docs (build, dataset, window fit of each), peak memory."""
    import datasets

    from lm_eval_longmem import task_manager
    from lm_eval_longmem.babilong import generate
    from lm_eval_longmem.babilong.data import DOC_FEATURES
    from lm_eval_longmem.babilong.prompts import build_prompt

    tok = tokenizer()
    texts = generate._corpus_texts(plays())
    background = generate._background(texts, generate.texts_digest(texts), tok, "plays")
    manager = task_manager(metadata=babilong_metadata(samples, seed))  # the harness's task index, in both variants
    base = peak_mb()
    with Clock() as clock:
        if mode == "after":  # the task's own data phase: load_docs, then the fit of every doc
            task = manager.load(["babilong"])["tasks"]["babilong"]
            fits = [task.fit_reason(doc) == "" for doc in task.eval_docs]
        else:  # main: rows hold their haystack, every prompt tokenized once to build and once to fit
            from lm_eval_longmem.babilong.prompts import harness_prompt_parts
            from lm_eval_longmem.babilong.simulate import simulate

            background.additive = False
            spec = generate.GenerationSpec(qa="qa1", length=MILLION, samples=samples, seed=seed)
            rows = generate.generate_samples(
                spec, simulate("qa1", samples, seed), background, tok, harness_prompt_parts("qa1")
            )
            rows = [{"input": generate.context_of(row, background.sentences)} | row for row in rows]
            features = datasets.Features({"input": datasets.Value("string"), **DOC_FEATURES})
            dataset = datasets.Dataset.from_list(
                [{"retrieved": [], "retrieval_recall": None} | r for r in rows], features=features
            )
            fits = [
                len(tok(build_prompt("qa1", d["input"], d["question"]))["input_ids"]) + 20 <= MILLION for d in dataset
            ]
    return {
        "samples": samples,
        "wall_s": clock.wall,
        "cpu_s": clock.cpu,
        "base_mb": base,
        "peak_mb": peak_mb(),
        "fit": all(fits),
    }


def _fc_corpus(folder: Path) -> str:
    """The plays and, when present, the nine shared books: about 2.6M tokens, enough for L = 1M."""
    from lm_eval_longmem.common.corpus import load_texts

    folder.mkdir(parents=True, exist_ok=True)
    for source in [Path(plays()), SHARED_BOOKS]:
        for book in sorted(source.glob("*.txt")) if source.is_dir() else []:
            if book.name != "CC0_LICENSE.txt":
                shutil.copy(book, folder / f"{source.name}-{book.name}")
    if sum(len(t) for t in load_texts(str(folder))) < 8_000_000:  # no shared books: the plays twice
        for book in sorted(Path(plays()).glob("*.txt")):
            shutil.copy(book, folder / f"again-{book.name}")
    return str(folder)


def cell_fc_corpus(mode: str, corpus: str, **_: Any) -> dict[str, Any]:
    """Tokenizing the corpus (cold cache) and, after, reading it back (warm)."""
    import numpy as np

    from lm_eval_longmem.common.corpus import load_texts, token_stream

    tok = tokenizer()
    texts = load_texts(corpus)
    base = peak_mb()
    with Clock() as cold:
        if mode == "before":  # main: every text in one call
            ids = tok(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
            stream = np.concatenate([np.asarray(row, dtype=np.int32) for row in ids])
        else:
            stream = token_stream(texts, tok)
    out = {"tokens": int(len(stream)), "wall_s": cold.wall, "cpu_s": cold.cpu, "base_mb": base, "peak_mb": peak_mb()}
    if mode == "after":
        with Clock() as warm:
            again = token_stream(texts, tok)
        out |= {"warm_wall_s": warm.wall, "same": bool(np.array_equal(stream, again))}
    return out


def cell_booksort_build(out: str, **_: Any) -> dict[str, Any]:
    from lm_eval_longmem.booksort.build import BuildSpec, build, load_books, write_dataset

    sources = [SHARED_BOOKS] if SHARED_BOOKS.is_dir() else sorted(Path(plays()).glob("*.txt"))[:9]
    with Clock() as clock:
        books = load_books(sources)
        spec = BuildSpec(excerpt_lengths=(20000,))
        result = build(books, spec)
        write_dataset(books, result, spec, Path(out))
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    return {"books": len(books), "trials": manifest["n_trials"], "wall_s": clock.wall, "cpu_s": clock.cpu}


def cell_booksort_load(mode: str, data: str, **_: Any) -> dict[str, Any]:
    """Loading the in-context docs of both splits as `load_booksort` does, peak memory.

    Before (main): every doc holds its prompt with the excerpt in it, and a `datasets.Dataset` is built from them.
    """
    import datasets

    from lm_eval_longmem.booksort.data import SPLITS, Excerpts, booksort_options, build_docs, load_booksort, user_text

    metadata = {"booksort_data": data}
    base = peak_mb()
    with Clock() as clock:
        if mode == "before":
            excerpts = Excerpts(booksort_options(metadata))
            loaded = {}
            for split in SPLITS:
                docs = build_docs(metadata, split, "in_context")
                for doc in docs:
                    doc["prompt_user"] = user_text(doc, excerpts(doc))
                    del doc["prompt_before_excerpt"], doc["prompt_after_excerpt"]
                loaded[split] = datasets.Dataset.from_list(docs)
        else:
            loaded = load_booksort("in_context", **metadata)
    return {
        "docs": sum(len(d) for d in loaded.values()),
        "wall_s": clock.wall,
        "cpu_s": clock.cpu,
        "base_mb": base,
        "peak_mb": peak_mb(),
    }


def cell_booksort_fit(mode: str, data: str, docs: int, **_: Any) -> dict[str, Any]:
    """The window fit of the first `docs` trials (log-prob task: each prompt with each of the two choices)."""
    from lm_eval_longmem import task_manager

    metadata = {"pretrained": INPUTS["model"], "max_length": 131072, "booksort_data": data}
    with Clock() as load:
        task = task_manager(metadata=metadata).load(["booksort_in_context"])["tasks"]["booksort_in_context"]
        chosen = [task.eval_docs[i] for i in range(docs)]
    tok = task.tokenizer
    with Clock() as fit:
        if mode == "before":  # main: tokenize prompt + " A" and prompt + " B" on every run
            for doc in chosen:
                prompt = task.rendered_prompt(doc)
                max(len(tok(prompt + " " + c)["input_ids"]) for c in task.doc_to_choice(doc))
        else:
            for doc in chosen:
                task.fit_reason(doc)
            task.token_counts.save()
    return {"docs": docs, "all_docs": len(task.eval_docs), "load_s": load.wall, "wall_s": fit.wall, "cpu_s": fit.cpu}


CELLS = {
    "babilong-build": cell_babilong_build,
    "babilong-fit": cell_babilong_fit,
    "babilong-memory": cell_babilong_memory,
    "fc-corpus": cell_fc_corpus,
    "booksort-build": cell_booksort_build,
    "booksort-load": cell_booksort_load,
    "booksort-fit": cell_booksort_fit,
}


def run_cell(name: str, env: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--cell", name, "--kwargs", json.dumps(kwargs), "--inputs", json.dumps(INPUTS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(f"cell {name} {kwargs} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ratio(before: float, after: float) -> str:
    return f"{before / after:8.1f}x" if after else "      -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the BABILong 1M figures after the change")
    parser.add_argument("--booksort-docs", type=int, default=40, help="trials whose window fit is timed")
    parser.add_argument("--cell", choices=sorted(CELLS), help=argparse.SUPPRESS)
    parser.add_argument("--kwargs", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        INPUTS.update(json.loads(args.inputs))
        print(json.dumps(CELLS[args.cell](**json.loads(args.kwargs))), flush=True)
        return
    from lm_eval_longmem.common.embedded import embedded_books_dir, smollm2_dir

    INPUTS.update(model=str(smollm2_dir()), plays=str(embedded_books_dir()))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as lm_eval's CLI sets it
    print(
        f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; one fresh process per figure; SmolLM2's tokenizer"
    )
    summary: dict[str, Any] = {}

    warm = run_cell("babilong-build", mode="after")  # also splits and counts the plays once (cached)
    print(f"BABILong background: the embedded plays, {warm['background_tokens']:,} tokens (sentences cached)")
    print("\nBABILong, one 1M-token qa1 sample          wall s    cpu s  whole-prompt tokenizations")
    modes = ("after",) if args.quick else ("before", "after")
    build = {m: warm if m == "after" else run_cell("babilong-build", mode=m) for m in modes}
    for m in modes:
        print(
            f"  build ({m:6})                         {build[m]['wall_s']:9.2f} {build[m]['cpu_s']:8.2f}  {build[m]['whole_prompt_tokenizations']}"
        )
    fit = {m: run_cell("babilong-fit", mode=m) for m in modes}
    for m in modes:
        print(f"  window fit of the cached doc ({m:6})  {fit[m]['wall_s']:9.3f} {fit[m]['cpu_s']:8.3f}")
    if not args.quick:
        print(f"  before / after: build {ratio(build['before']['wall_s'], build['after']['wall_s'])}, "
              f"fit {ratio(fit['before']['wall_s'], fit['after']['wall_s'])} (wall)")  # fmt: skip
    after_fit = fit["after"]
    print(f"  --log_samples record of the doc: before {after_fit['log_bytes_before']:,} B, after {after_fit['log_bytes_after']:,} B "
          f"({after_fit['log_bytes_before'] / after_fit['log_bytes_after']:.2f}x smaller; the doc itself {after_fit['doc_bytes_after']:,} B)")  # fmt: skip
    summary |= {
        "build_1m_sample_s": build["after"]["wall_s"], "build_1m_sample_cpu_s": build["after"]["cpu_s"],
        "fit_check_1m_doc_s": after_fit["wall_s"], "fit_check_1m_doc_cpu_s": after_fit["cpu_s"],
        "log_bytes_1m_before": after_fit["log_bytes_before"], "log_bytes_1m_after": after_fit["log_bytes_after"],
    }  # fmt: skip
    if not args.quick:
        summary |= {
            "build_1m_sample_before_s": build["before"]["wall_s"],
            "fit_check_1m_doc_before_s": fit["before"]["wall_s"],
        }
        seed = int(time.time()) % 100_000  # fresh samples: none of them in the cache yet
        print("\nBABILong data phase at 1M (build, dataset, fit of every doc), peak memory of the process")
        print("  variant  samples   wall s    cpu s  base MB  peak MB  over base")
        for m in ("before", "after"):
            for n in (1, 4):
                r = run_cell("babilong-memory", mode=m, samples=n, seed=seed + (n if m == "after" else 50 + n))
                print(
                    f"  {m:7} {n:8} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} {r['base_mb']:8.0f} {r['peak_mb']:8.0f} {r['peak_mb'] - r['base_mb']:10.0f}"
                )
                summary[f"data_phase_1m_{m}_{n}_samples_peak_mb"] = r["peak_mb"]
                summary[f"data_phase_1m_{m}_{n}_samples_s"] = r["wall_s"]

        with tempfile.TemporaryDirectory() as tmp:
            corpus = _fc_corpus(Path(tmp) / "corpus")
            print("\nForgetting curve: tokenizing a corpus for L = 1M (cold cache)")
            print("  variant   tokens      wall s    cpu s  peak MB  over base")
            fc = {}
            for m in ("before", "after"):
                fc[m] = run_cell(
                    "fc-corpus", env={"LM_EVAL_LONGMEM_CACHE": str(Path(tmp) / f"cache-{m}")}, mode=m, corpus=corpus
                )
                r = fc[m]
                print(
                    f"  {m:7} {r['tokens']:10,} {r['wall_s']:9.1f} {r['cpu_s']:8.1f} {r['peak_mb']:8.0f} {r['peak_mb'] - r['base_mb']:10.0f}"
                )
            print(
                f"  after, warm (read from the cache): {fc['after']['warm_wall_s']:.2f} s; same ids: {fc['after']['same']}"
            )
            summary |= {f"fc_corpus_{m}_{k}": fc[m][k] for m in fc for k in ("wall_s", "peak_mb")} | {
                "fc_corpus_tokens": fc["after"]["tokens"]
            }

            data = str(Path(tmp) / "booksort")
            b = run_cell("booksort-build", out=data)
            trials = ", ".join(f"{n:,} {split}" for split, n in b["trials"].items())
            print(f"\nBook-SORT at 20,000-word excerpts: built from {b['books']} books ({trials} trials) in {b['wall_s']:.1f} s "
                  f"(cpu {b['cpu_s']:.1f} s; unchanged)")  # fmt: skip
            print("  loading the docs (both splits)   wall s    cpu s  base MB  peak MB  over base")
            for m in ("before", "after"):
                r = run_cell("booksort-load", mode=m, data=data)
                print(
                    f"  {m:30} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} {r['base_mb']:8.0f} {r['peak_mb']:8.0f} {r['peak_mb'] - r['base_mb']:10.0f}"
                )
                summary |= {f"booksort_load_{m}_s": r["wall_s"], f"booksort_load_{m}_peak_mb": r["peak_mb"]}
            n = args.booksort_docs
            counts_cache = {"LM_EVAL_LONGMEM_CACHE": str(Path(tmp) / "counts")}
            before = run_cell("booksort-fit", mode="before", data=data, docs=n)
            cold = run_cell("booksort-fit", env=counts_cache, mode="after", data=data, docs=n)
            warm_bs = run_cell("booksort-fit", env=counts_cache, mode="after", data=data, docs=n)
            print(f"  window fit of {n} trials (of {before['all_docs']:,})   wall s    cpu s   per trial ms")
            for label, r in (
                ("before (every run)", before),
                ("after, first run", cold),
                ("after, later runs", warm_bs),
            ):
                print(f"  {label:30} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {1000 * r['wall_s'] / n:12.1f}")
            print(
                f"  before / after (later runs): {ratio(before['wall_s'], warm_bs['wall_s'])}; loading the docs: {warm_bs['load_s']:.1f} s"
            )
            summary |= {"booksort_fit_per_trial_before_s": before["wall_s"] / n, "booksort_fit_per_trial_after_s": warm_bs["wall_s"] / n,
                        "booksort_fit_per_trial_first_run_s": cold["wall_s"] / n}  # fmt: skip

    checks = {k: summary[k] <= v for k, v in TARGETS.items()}
    print(
        "\ntargets: "
        + ", ".join(f"{k} <= {v}: {summary[k]:.3f} ({'met' if checks[k] else 'NOT met'})" for k, v in TARGETS.items())
    )
    print(json.dumps(summary | {"targets_met": all(checks.values())}))


if __name__ == "__main__":
    main()

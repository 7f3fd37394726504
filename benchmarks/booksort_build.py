"""Time of building the whole Book-SORT dataset from the nine shared books, stage by stage.

Stages, run in one process in the order `lm-eval-longmem booksort build` runs them:

    read + clean      Gutenberg header/footer, front/back matter and headings removed, split into words
    sentence starts   the regex detector on every book
    sample trials     110 excerpts x 4 pairs per book x L_E x L_S, counterbalanced
    write             books/, test.jsonl, validation.jsonl, manifest.json (atomic)

Side by side, the reason the builder does not use pysbd: sentence starts on the same words by our
rule and by pysbd (on a sample of --pysbd-words words, extrapolated per 1k words), with the ratio.

    python benchmarks/booksort_build.py [--books ../shared/data/books] [--pysbd-words 20000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from lm_eval_longmem.booksort.build import BuildSpec, build, load_books, sentence_starts, write_dataset

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=Path, default=REPO.parent / "shared" / "data" / "books")
    parser.add_argument(
        "--pysbd-words",
        type=int,
        default=20000,
        help="words (in total, spread over the books) for the pysbd comparison",
    )
    args = parser.parse_args()

    times: dict[str, float] = {}
    t0 = time.perf_counter()
    books = load_books([args.books])
    times["read + clean"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    for book in books:
        sentence_starts(book.words)
    times["sentence starts"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    result = build(books, BuildSpec())  # finds sentence starts again, so subtract the stage above
    times["sample trials"] = time.perf_counter() - t0 - times["sentence starts"]

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        write_dataset(books, result, BuildSpec(), Path(tmp) / "booksort")
        times["write"] = time.perf_counter() - t0

    total = sum(times.values())
    n_words = sum(len(b.words) for b in books)
    print(f"{len(books)} books, {n_words:,} words, {len(result.trials):,} trials")
    print(f"{'stage':<18} {'seconds':>8} {'share':>7}")
    for stage, seconds in times.items():
        print(f"{stage:<18} {seconds:>8.2f} {seconds / total:>7.1%}")
    print(f"{'total':<18} {total:>8.2f}")

    import pysbd

    per_book = max(1, args.pysbd_words // len(books))
    sample = [list(b.words[:per_book]) for b in books]
    n_sample = sum(len(s) for s in sample)
    t0 = time.perf_counter()
    for words in sample:
        sentence_starts(words)
    ours = time.perf_counter() - t0
    segmenter = pysbd.Segmenter(language="en", clean=False)
    t0 = time.perf_counter()
    for words in sample:
        segmenter.segment(" ".join(words))
    theirs = time.perf_counter() - t0
    print(f"\nsentence starts on {n_sample:,} words (same words, same process):")
    print(f"{'detector':<10} {'s / 1k words':>13} {'whole dataset (s)':>18}")
    print(f"{'regex':<10} {ours / n_sample * 1000:>13.5f} {ours / n_sample * n_words:>18.2f}")
    print(f"{'pysbd':<10} {theirs / n_sample * 1000:>13.5f} {theirs / n_sample * n_words:>18.2f}")
    print(f"pysbd / regex: {theirs / ours:.0f}x")


if __name__ == "__main__":
    main()

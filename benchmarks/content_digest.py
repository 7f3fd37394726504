"""Cost of `content_digest` (the exact cache-key fingerprint of local inputs) next to reading the same data,
and of `input_digest` (the same digest, remembered by the files' stat signature) once it is remembered.

Two inputs: the nine shared books, and a generated folder of 100 MB (ten 10 MB files of seeded
random bytes). For each, the best of --repeats runs of: a plain read of every byte, the digest, and
for the books the Book-SORT reader's own work on them (`load_books`: read + clean), side by side
with the digest / read and digest / reader ratios.

Then a model folder (`--model`, default the SmolLM2 folder the tests convert into the cache): what a
run pays for its content in cache keys. `content_digest` of every file (what `input_digest` does the
first time), `input_digest` in a new process once remembered (the memo in the cache: only `stat`),
and `model_info.model_digest` without and with the weights (the request-cache key reads the
tokenizer, config and chat-template files only; `booksort finetune` reads the weights too).

    python benchmarks/content_digest.py [--books ../shared/data/books] [--model DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lm_eval_longmem.booksort.build import load_books
from lm_eval_longmem.common import cache
from lm_eval_longmem.common.cache import content_digest, input_digest, input_files

REPO = Path(__file__).resolve().parent.parent


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def read_all(folder: Path) -> int:
    return sum(len(file.read_bytes()) for _, file in input_files(folder))


def report(label: str, folder: Path, repeats: int, reader: Callable[[], object] | None = None) -> None:
    size = read_all(folder)  # also warms the page cache, so every variant reads from memory
    t_read = best(lambda: read_all(folder), repeats)
    t_digest = best(lambda: content_digest([folder]), repeats)
    line = (
        f"{label:<22} {size / 1e6:8.1f} MB   read {t_read:7.3f} s   digest {t_digest:7.3f} s "
        f"({size / 1e6 / t_digest:6.0f} MB/s)   digest/read {t_digest / t_read:5.2f}x"
    )
    if reader is not None:
        t_reader = best(reader, repeats)
        line += f"   reader {t_reader:7.3f} s   digest/reader {t_digest / t_reader:5.2f}x"
    print(line)


def remembered(label: str, folder: Path, repeats: int) -> None:
    """Every byte (the first `input_digest`) against the remembered digest of a new process (memo file, stat only)."""
    from lm_eval_longmem.common.model_info import model_digest

    size = read_all(folder)
    t_digest = best(lambda: content_digest([folder]), repeats)
    input_digest([folder])  # remembered in the cache (the files must be older than cache.RACY_NS)

    def new_process() -> str:
        cache._INPUT_DIGESTS.clear()
        return input_digest([folder])

    t_memo = best(new_process, repeats)
    print(
        f"{label:<22} {size / 1e6:8.1f} MB   every byte {t_digest:7.3f} s   remembered {t_memo * 1e3:7.2f} ms   "
        f"remembered/every byte {t_memo / t_digest:8.5f}x"
    )
    metadata = {"pretrained": str(folder)}
    for weights in (False, True):
        times = []
        for _ in range(2):  # the first reads every byte, the second (a new process) finds it remembered
            cache._INPUT_DIGESTS.clear()
            t0 = time.perf_counter()
            model_digest(metadata, weights=weights)
            times.append(time.perf_counter() - t0)
        print(
            f"{'':<22} model_digest(weights={weights!s:<5}): first {times[0] * 1e3:8.2f} ms, remembered {times[1] * 1e3:6.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=Path, default=REPO.parent / "shared" / "data" / "books")
    parser.add_argument(
        "--model", type=Path, default=None, help="a model folder (default: the SmolLM2 the tests convert)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    report(f"books ({len(input_files(args.books))} files)", args.books, args.repeats, lambda: load_books([args.books]))
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        for k in range(10):
            (Path(tmp) / f"part{k}.bin").write_bytes(rng.bytes(10_000_000))
        report("100 MB folder", Path(tmp), args.repeats)
    model = args.model
    if model is None:
        from lm_eval_longmem.common.embedded import smollm2_dir

        model = smollm2_dir()
    with tempfile.TemporaryDirectory() as memo:
        os.environ[cache.ENV_CACHE_DIR] = memo  # a fresh memo, so the first digest really reads every byte
        remembered(f"model ({model.name})", model, args.repeats)


if __name__ == "__main__":
    main()

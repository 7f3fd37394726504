"""Cost of `content_digest` (the exact cache-key fingerprint of local inputs) next to reading the same data.

Two inputs: the nine shared books, and a generated folder of 100 MB (ten 10 MB files of seeded
random bytes). For each, the best of --repeats runs of: a plain read of every byte, the digest, and
for the books the Book-SORT reader's own work on them (`load_books`: read + clean), side by side
with the digest / read and digest / reader ratios.

    python benchmarks/content_digest.py [--books ../shared/data/books] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lm_eval_longmem.booksort.build import load_books
from lm_eval_longmem.common.cache import content_digest, input_files

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=Path, default=REPO.parent / "shared" / "data" / "books")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    report(f"books ({len(input_files(args.books))} files)", args.books, args.repeats, lambda: load_books([args.books]))
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        for k in range(10):
            (Path(tmp) / f"part{k}.bin").write_bytes(rng.bytes(10_000_000))
        report("100 MB folder", Path(tmp), args.repeats)


if __name__ == "__main__":
    main()

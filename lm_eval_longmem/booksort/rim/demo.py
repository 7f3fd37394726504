"""Book-SORT's part of `lm-eval-longmem demo`: a small build from the demo's books (its own step), its
`--metadata` and its headline sentence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lm_eval_longmem.booksort.options import HEADLINE_TASK, PREFIX
from lm_eval_longmem.booksort.rim.section import booksort_headline_task
from lm_eval_longmem.booksort.scores import ACC, CALIBRATED, PCT_A
from lm_eval_longmem.commands.demo import percent
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import DemoPart
from lm_eval_longmem.readers.results import Run

if TYPE_CHECKING:
    from lm_eval_longmem.booksort.build import BuildSpec


@dataclass(frozen=True)
class Size:
    """How much of Book-SORT a demo size runs."""

    books: int
    """Books (the first ones by file name) the build draws excerpts from."""
    excerpt_lengths: tuple[int, ...]
    """Excerpt lengths L_E in words."""
    excerpts: int
    """Excerpts per book and excerpt length (each gives one trial per distance bin, 4 in all); even."""


SIZES = {"small": Size(5, (250,), 2), "tiny": Size(1, (250,), 2)}
DATA = "booksort_data"
"""The folder under the demo's output folder that holds its build."""


def build_spec(size: Size) -> BuildSpec:
    """What the demo builds at `size`."""
    from lm_eval_longmem.booksort.build import BuildSpec

    return BuildSpec(excerpt_lengths=size.excerpt_lengths, segment_lengths=(20,), n_test=size.excerpts, n_validation=2)


def build_data(books_dir: Path, out: Path, size: Size) -> tuple[Path, int]:
    """A Book-SORT build from the first `size.books` books of `books_dir`; returns (folder, test trials)."""
    from lm_eval_longmem.booksort.build import build, load_books, write_dataset

    books = load_books([books_dir])[: size.books]
    spec = build_spec(size)
    result = build(books, spec)
    n_test = sum(t.split == "test" for t in result.trials)
    if not n_test:
        reasons = "; ".join(f"{s['book_id']}: {s['reason']}" for s in result.skipped)
        raise UsageError(
            f"no Book-SORT trial could be drawn from {books_dir} ({reasons}): pass --corpus with longer books"
        )
    return write_dataset(books, result, spec, out), n_test


class BooksortDemo(DemoPart):
    """Builds its trials from the demo's books in a step of its own, then runs on them."""

    target = DATA

    def metadata(self, size: str, books: Path, out: Path) -> dict[str, object]:
        return {f"{PREFIX}data": str(out / DATA)}

    def step(self, size: str) -> str:
        chosen = SIZES[size]
        lengths = ", ".join(map(str, chosen.excerpt_lengths))
        return f"Book-SORT data from {chosen.books} book(s), excerpts of {lengths} words"

    def build(self, size: str, books: Path, out: Path) -> str:
        folder, n_trials = build_data(books, out / DATA, SIZES[size])
        return f"{n_trials} test trials in {folder}"

    def replaces(self, path: Path) -> bool:
        from lm_eval_longmem.booksort.build import is_build

        return is_build(path)

    def kept(self, size: str, books: Path, out: Path) -> bool:
        """A build at `out/booksort_data` of the same spec from the same books (by their bytes) that reads back
        intact (`data.read_split` verifies every file's digest)."""
        import dataclasses
        import json

        from lm_eval_longmem.booksort.build import BUILDER_VERSION
        from lm_eval_longmem.booksort.data import read_split
        from lm_eval_longmem.common.cache import sha256_hex
        from lm_eval_longmem.common.text import book_files

        folder, chosen = out / DATA, SIZES[size]
        try:
            manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            sources = [book["source_sha256"] for book in manifest["books"]]
            same = (
                manifest["builder_version"] == BUILDER_VERSION
                and manifest["spec"] == json.loads(json.dumps(dataclasses.asdict(build_spec(chosen))))
                and sources == [sha256_hex(path.read_bytes()) for path in book_files(books)[: chosen.books]]
            )
            return same and bool(read_split(str(folder), "test").rows)
        except (OSError, ValueError, KeyError, TypeError):  # absent, not a build, damaged: not kept
            return False

    def sentence(self, run: Run) -> str | None:
        """The answer-bias-corrected accuracy where the run has it, else accuracy and answer bias."""
        task = booksort_headline_task(run)
        if task is None:
            return None
        rows = [t for t in (task, HEADLINE_TASK) if t in run.tasks]
        metrics = {**run.metrics(rows[-1]), **run.metrics(task)}
        trials = run.n_samples(rows[-1])
        acc = tuple(metrics.get(key) for key in metric_names.with_interval(ACC.name))
        if None in acc:
            return None
        share = metrics.get(PCT_A.name)
        calibrated = tuple(metrics.get(key) for key in metric_names.with_interval(CALIBRATED.name))
        if None not in calibrated:
            bias = f', "A" on {100 * share:.0f}% of {trials} trials' if share is not None else f", {trials} trials"
            return (
                f"Book-SORT (which of two segments came first; chance 50%): {percent(calibrated)} with the answer bias "
                f"corrected ({percent(acc)} as answered{bias})."
            )
        bias = f', answering "A" on {100 * share:.0f}% of them' if share is not None else ""
        return f"Book-SORT (which of two segments came first; chance 50%): {percent(acc)} of {trials} trials{bias}."


DEMO = BooksortDemo()

"""BABILong's part of `lm-eval-longmem demo`: its sizes, its `--metadata` (simulated facts over the demo's
first books) and its headline sentence."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from lm_eval_longmem.babilong.options import PREFIX
from lm_eval_longmem.babilong.rim import reader
from lm_eval_longmem.babilong.scores import ACC
from lm_eval_longmem.commands.demo import percent
from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.evaluations import DemoPart
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.readers.results import Run


@dataclass(frozen=True)
class Size:
    """How much of BABILong a demo size runs."""

    lengths: tuple[int, ...]
    """Lengths in tokens."""
    tasks: str
    """The bAbI tasks (`babilong_tasks`)."""
    samples: int
    """bAbI questions per task and length."""
    books: int
    """Books (the first ones by file name) the haystacks are cut from: each book is split into sentences
    once (about a CPU-second per play), and a few books give 1k-token haystacks enough variety."""


SIZES = {"small": Size((0, 1024), "qa1-qa5", 14, 4), "tiny": Size((0,), "qa1", 2, 1)}
BOOKS = "babilong_books"
"""The folder under the demo's output folder that holds the books its haystacks come from."""


def first_books(books_dir: Path, count: int, out: Path) -> Path:
    """A folder `out` holding copies of the first `count` .txt books of `books_dir` (by file name)."""
    out.mkdir(parents=True, exist_ok=True)
    chosen = sorted(books_dir.glob("*.txt"))[:count]
    for stale in set(out.glob("*.txt")) - {out / p.name for p in chosen}:
        stale.unlink()
    for path in chosen:
        shutil.copyfile(path, out / path.name)
    return out


class BabilongDemo(DemoPart):
    """Generated samples with simulated facts over the first books, copied without a step of its own."""

    target = ""

    def metadata(self, size: str, books: Path, out: Path) -> dict[str, object]:
        chosen = SIZES[size]
        return {
            f"{PREFIX}source": "generate",
            f"{PREFIX}facts": "simulated",
            f"{PREFIX}corpus": str(out / BOOKS),
            f"{PREFIX}lengths": list(chosen.lengths),
            f"{PREFIX}tasks": chosen.tasks,
            f"{PREFIX}samples": chosen.samples,
        }

    def build(self, size: str, books: Path, out: Path) -> str:
        return str(first_books(books, SIZES[size].books, out / BOOKS))

    def sentence(self, run: Run) -> str | None:
        """Accuracy over every cell, and per length, with questions per cell."""
        task = reader.babilong_task(run.data)
        cells = reader.read_cells(run.data) if task else []
        if task is None or not cells:
            return None
        metrics = run.metrics(task)
        overall = tuple(metrics.get(key) for key in metric_names.with_interval(ACC.name))
        tasks = sorted({c.qa for c in cells}, key=lambda qa: int(qa[2:]))
        per_length = "; ".join(
            f"{percent(mean)} at {format_length(length)}" for length, mean in reader.read_length_means(run.data).items()
        )
        per_cell = [int(n) for n in (run.facts(task).get("docs_per_cell") or {}).values()]
        counts = (
            f"{'-'.join(map(str, sorted(set(per_cell))))} questions per task and length"
            if per_cell
            else "questions per cell unknown"
        )
        numbers = [int(qa[2:]) for qa in tasks]
        contiguous = len(tasks) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1))
        task_text = f"{tasks[0]}-{tasks[-1]}" if contiguous else ", ".join(tasks)  # "qa1-qa5" only when all ran
        return (
            f"BABILong {task_text}: {percent(overall)} of {sum(per_cell) or run.n_samples(task)} questions answered "
            f"right ({per_length}; {counts}, authors' answer check)."
        )


DEMO = BabilongDemo()

"""The forgetting curve's part of `lm-eval-longmem demo`: its sizes, its `--metadata` and its headline sentence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lm_eval_longmem.commands.demo import span
from lm_eval_longmem.common.evaluations import DemoPart
from lm_eval_longmem.forgetting_curve.options import PREFIX
from lm_eval_longmem.forgetting_curve.rim.reader import forgetting_curve_task, stored_summary
from lm_eval_longmem.readers.results import Run


@dataclass(frozen=True)
class Size:
    """How much of the forgetting curve a demo size runs."""

    lengths: tuple[int, ...]
    """Lengths L of the copied text (tokens); each doc runs two sequences of 2L+2 tokens."""
    samples: int
    """Samples per length."""


SIZES = {"small": Size((128, 256), 14), "tiny": Size((16, 32), 2)}


class ForgettingCurveDemo(DemoPart):
    """Runs on the demo's books, no data of its own to build."""

    target = ""

    def metadata(self, size: str, books: Path, out: Path) -> dict[str, object]:
        chosen = SIZES[size]
        return {
            f"{PREFIX}corpus": str(books),
            f"{PREFIX}lengths": list(chosen.lengths),
            f"{PREFIX}samples": chosen.samples,
        }

    def sentence(self, run: Run) -> str | None:
        """What the forgetting curve says, from the stored per-length statistics and memory lengths."""
        task = forgetting_curve_task(run.data)
        if task is None:
            return None
        summary = stored_summary(run.data, task, path=run.path)
        stats = [s for s in summary.per_length if s.copy.estimate is not None]
        if not stats:
            return None
        lengths = f"{stats[0].length}-{stats[-1].length}" if len(stats) > 1 else str(stats[0].length)
        half = max(max(s.copy.high - s.copy.low, s.lm.high - s.lm.low) / 2 for s in stats)
        samples = sorted({s.n for s in stats})
        fine, coarse = summary.fine, summary.coarse
        fine_text = f">{fine.length}" if fine.censored else str(fine.length)
        coarse_text = f">{coarse.length}" if coarse.censored else str(coarse.length)
        return (
            f"{run.model} copies {span([s.copy.estimate for s in stats])} of the tokens of a {lengths}-token passage it "
            f"has just read, against {span([s.lm.estimate for s in stats])} when the passage follows unrelated text (LM "
            f"baseline); every 95% interval within {100 * half:.1f} points, {'-'.join(map(str, samples))} samples per "
            f"length. Memory lengths: fine {fine_text} tokens (copy > 99%), coarse {coarse_text} (copy beats LM by > 1 point)."
        )


DEMO = ForgettingCurveDemo()

"""`acc_corrected` against a reader's verdicts on real model outputs, split by model (issue 29).

Two tables of answers judged by hand (`verdict`: does a careful reader credit the output for the
target; `reason`/`why`: what decided it), each row naming its model, task, source file and row:

* `fixtures/corrected_judged.csv`, the **development** part: 310 answers of Command-R,
  GPT-3.5-Turbo-1106, the RAG Llama-3 runs and Gemini-3-Flash (the BABILong authors' published
  files). The rules were written against these rows (and against Phi-3-mini, Jamba and LongChat
  outputs read while writing them), so no figure is quoted from them; the test only checks that
  the corrected check still agrees with the reader wherever it changes `acc`'s verdict there.
* `fixtures/corrected_judged_heldout.csv`, the **held-out** part: models no rule was written from
  (Yi-34B-200k, ChatGLM3-6B-128k, LongAlpaca-13B, GPT-2 from `../shared/data/babilong_predictions_dev`;
  the embedded SmolLM2-135M-Instruct's own outputs, `benchmarks/babilong_smollm2_predictions.py`; and,
  since issue 33, a base SmolLM2-360M and two Mistral-7B-Instruct-v0.2 runs from
  `../shared/data/babilong_predictions_heldout`). Drawn per model with seeded `random.Random`
  (`benchmarks/babilong_heldout_draw.py`) and judged blind (the reader saw question, target and output,
  not the checks' verdicts), in three samples:

  - `changed` (seed "29-MODEL"): 40 rows per model, uniformly from the rows where `acc_corrected`
    changed `acc`'s verdict when they were drawn (all of them where there were fewer: SmolLM2-135M's
    16, SmolLM2-360M's 20; the Mistral runs answer with bare labels and have none), and for the four
    file models of the first draw 40 more each (seed "33-MODEL", from the changes not drawn before):
    **the share of changes that are wrong**;
  - `acc_fails_naming_target` (seed "29b-MODEL"): 25 rows per model, uniformly from the rows `acc`
    fails whose output names the target (the label or a form of it; qa19 a compass step; every
    yes/no answer): an answer that names neither cannot be credited by a reader, so these hold every
    answer `acc` fails wrongly. **The share of `acc`'s errors that `acc_corrected` fixes** is taken
    over the rows of this sample the reader credits;
  - `acc_fails` (seed "29-MODEL"): 30 rows per model, uniformly from every row `acc` fails (few of
    them are `acc` errors: a cross-check of the sample above).

  Rules changed after a draw may only make the reader abstain (keep `acc`'s verdict), which can only
  remove rows from the set of changes, so the `changed` rows still changing remain a uniform sample of
  it, and drawing more from the rest keeps it uniform.

The figures docs/babilong-corrected-check.md quotes are `QUOTED`; the test fails when the wrong share rises
above it or the fixed share falls below it. `python tests/babilong/test_judged.py` prints them, per model and
in all, with their 95% Wilson intervals and sizes.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lm_eval_longmem.babilong.corrected_check import check
from lm_eval_longmem.common.stats import proportion_interval

FIXTURES = Path(__file__).parent / "fixtures"
DEVELOPMENT = FIXTURES / "corrected_judged.csv"
HELD_OUT = FIXTURES / "corrected_judged_heldout.csv"

QUOTED = {"wrong_share_of_changes": (0, 353), "fixed_share_of_acc_errors": (42, 60)}
"""(count, rows) of the held-out figures the card quotes: wrong changes of all changes, fixed errors of acc's errors."""


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["check"] = check(row["task"], row["target"], row["output"], row["question"])
        row["credited"] = row["verdict"] == "correct"
    return rows


@pytest.fixture(scope="module")
def development():
    return _read(DEVELOPMENT)


@pytest.fixture(scope="module")
def held_out():
    return _read(HELD_OUT)


def wrong_share_of_changes(rows: list[dict]) -> tuple[int, int]:
    """(wrong, all) among the `changed` rows on which `acc_corrected` still differs from `acc`."""
    changes = [r for r in rows if r["sample"] == "changed" and r["check"].acc != r["check"].acc_corrected]
    return sum(r["check"].acc_corrected != r["credited"] for r in changes), len(changes)


def fixed_share_of_acc_errors(rows: list[dict]) -> tuple[int, int]:
    """(fixed, all) among the `acc_fails_naming_target` rows the reader credits (acc's errors)."""
    errors = [r for r in rows if r["sample"] == "acc_fails_naming_target" and r["credited"]]
    assert all(not r["check"].acc for r in errors)
    return sum(r["check"].acc_corrected for r in errors), len(errors)


def test_tables_are_judged_real_outputs_split_by_model(development, held_out):
    for rows in (development, held_out):
        assert all(r["verdict"] in ("correct", "wrong") and (r.get("reason") or r.get("why")) for r in rows)
        assert all(r["source"].endswith(".csv") and r["row"].isdigit() for r in rows)
    assert not {r["model"] for r in development} & {r["model"] for r in held_out}
    assert {r["sample"] for r in held_out} == {"changed", "acc_fails_naming_target", "acc_fails"}
    assert len({r["model"] for r in held_out}) >= 8 and len(held_out) >= 700


def test_held_out_wrong_share_of_changes_stays_at_most_the_quoted_figure(held_out):
    wrong, n = wrong_share_of_changes(held_out)
    quoted_wrong, quoted_n = QUOTED["wrong_share_of_changes"]
    assert n >= 300
    assert wrong / n <= quoted_wrong / quoted_n <= 0.02
    assert proportion_interval(quoted_wrong, quoted_n).high <= 0.02  # the interval the card quotes


def test_held_out_fixed_share_of_acc_errors_stays_at_least_the_quoted_figure(held_out):
    fixed, n = fixed_share_of_acc_errors(held_out)
    quoted_fixed, quoted_n = QUOTED["fixed_share_of_acc_errors"]
    assert n >= 40
    assert fixed / n >= quoted_fixed / quoted_n >= 0.40
    assert proportion_interval(quoted_fixed, quoted_n).low >= 0.40


def test_every_change_on_the_development_rows_agrees_with_the_reader(development):
    """No figure: the rules were written against these rows. A new rule that changes a verdict wrongly here fails."""
    changes = [r for r in development if r["check"].acc != r["check"].acc_corrected]
    assert len(changes) >= 60
    assert [r["output"][:60] for r in changes if r["check"].acc_corrected != r["credited"]] == []


def figures(rows: list[dict]) -> str:
    """The held-out figures as the card quotes them: per model and in all, counts, shares and 95% Wilson intervals."""

    def share(count: int, n: int) -> str:
        if not n:
            return "-"
        iv = proportion_interval(count, n)
        return f"{count}/{n} = {count / n:.1%} [{iv.low:.1%}, {iv.high:.1%}]"

    lines = [f"{'model':<30} {'rows':>5}  {'wrong of acc_corrected changes':<32} acc errors fixed"]
    for model in sorted({r["model"] for r in rows}, key=str.lower) + ["all"]:
        part = rows if model == "all" else [r for r in rows if r["model"] == model]
        name = f"all ({len({r['model'] for r in rows})} models)" if model == "all" else model
        lines.append(
            f"{name:<30} {len(part):>5}  {share(*wrong_share_of_changes(part)):<32} {share(*fixed_share_of_acc_errors(part))}"
        )
    return "\n".join(lines)


def test_the_printed_figures_are_the_quoted_ones(held_out):
    last = figures(held_out).splitlines()[-1]
    for count, n in QUOTED.values():
        assert f"{count}/{n} = " in last


if __name__ == "__main__":
    print(f"acc_corrected on the held-out judged answers ({HELD_OUT.name}), 95% Wilson intervals")
    print(figures(_read(HELD_OUT)))

"""`acc_corrected` against verdicts judged blind on real outputs, split by model (`tests/judged_answers.py`).

Four tables, by what the rules were written from:

* `fixtures/corrected_judged.csv`, **development** (310 answers of Command-R, GPT-3.5-Turbo-1106, the RAG
  Llama-3 runs, Gemini-3-Flash, with outputs inline): the rules were written against these rows and the other
  outputs of those models and of Phi-3-mini, Jamba-v0.1 and LongChat-7B. No figure is quoted from them.
* `fixtures/judged/admission.csv`: six models' rows (Yi-34B-200k, ChatGLM3-6B-128k, LongAlpaca-13B, GPT-2,
  SmolLM2-360M, Mistral-7B-Instruct-v0.2) drawn by stratum and judged blind against the rubric, on which the
  reading shapes were admitted; the rules were then corrected from their errors, so no figure is quoted
  from them either.
* `fixtures/judged/final.csv`: twelve more models' rows from the authors' repository (`authors:` sources),
  judged blind before the checks ran on them. One model, Yarn-Mistral-7b-128k, broke one shape on its first
  measurement and the rules that abstain on it were written from its rows (`RULE_SOURCES_AFTER_DRAW`): the
  figures the docs quote (`QUOTED`) are those of the other eleven.
* `fixtures/judged/generated.csv`: outputs nobody had read of the embedded SmolLM2-135M-Instruct, prompted to
  answer in sentences, explain and hedge (`fixtures/smollm2_styled/`, `benchmarks/babilong_smollm2_predictions.py`),
  judged blind after the rules were final. Earlier outputs of the same model were read while writing the rules,
  so it counts as no held-out model; its rows are what CI can always read.

A figure getting worse than quoted fails its test. Rows of `authors:` sources are read from a clone named by
`$BABILONG_REPO` and are left out without it; `python tests/judged_answers.py figures final` prints the figures.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from judged_answers import JUDGED, Judged, judged

from lm_eval_longmem.babilong.corrected import check
from lm_eval_longmem.common.stats import proportion_interval

DEVELOPMENT = Path(__file__).parent / "fixtures" / "corrected_judged.csv"
DEVELOPMENT_MODELS = {
    "command-r-v01", "gpt-3.5-turbo-1106", "rag-llama-3", "gemini-3-flash-preview",
    "Phi-3-mini-128k-instruct", "Jamba-v0.1", "longchat-7b-v1.5-32k",
}  # fmt: skip
RULE_SOURCES_AFTER_DRAW = {"Yarn-Mistral-7b-128k"}
"""Models of the final table from whose rows rules were written after it was judged (rules that only abstain)."""

QUOTED = {
    "wrong changes": (1, 316),
    "wrong changes, credited": (1, 174),
    "wrong changes, failed": (0, 142),
}
"""(wrong, judged) changes of `acc`'s verdict on the final table's held-out models, as the docs quote them."""
QUOTED_FIXED_SHARE = 0.40
"""The share of `acc`'s errors fixed, estimated for every row of the held-out models, is at least this."""


KNOWN_WRONG_CHANGES = {
    (
        "authors:94a73a3654388649c5bf37d104eb4509308a1379:babilong_evals/namespace-Pt/activation-beacon-mistral-7b/"
        "qa5_2k_instruction_no_examples_no_post_prompt_no.csv",
        812,
    )
}
"""The held-out rows whose change of `acc`'s verdict the judge found wrong when the figures were quoted (left as
they are: looking at them would make their model a source of rules)."""


@pytest.fixture(scope="module")
def final() -> tuple[list[Judged], bool]:
    """The final table's rows of held-out models that can be read here, and whether that is all of them."""
    rows, unread = judged("final")
    return [r for r in rows if r.answer.model not in RULE_SOURCES_AFTER_DRAW], not unread


def _wrong(rows: list[Judged], direction: str = "") -> tuple[int, int]:
    changes = [r for r in rows if r.change and (not direction or r.change == direction)]
    return sum(r.acc_corrected != r.credited for r in changes), len(changes)


def test_tables_are_split_by_model():
    models = {}
    for table in ("admission", "final", "generated"):
        with open(JUDGED / f"{table}.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert all(r["verdict"] in ("correct", "wrong") and r["why"] for r in rows)
        models[table] = {r["model"] for r in rows}
    assert not models["admission"] & models["final"] and not models["generated"] & models["final"]
    assert not (models["admission"] | models["final"]) & DEVELOPMENT_MODELS
    assert len(models["final"] - RULE_SOURCES_AFTER_DRAW) >= 10


def test_no_new_wrong_change_on_the_rows_read_here(final):
    """The held-out rows that can be read here (all of them with `$BABILONG_REPO`) and the generated ones: no change
    of `acc`'s verdict is wrong but those known when the figures were quoted."""
    generated, _ = judged("generated")
    rows = final[0] + generated
    assert generated, "the generated table's outputs are in the repository"
    wrong = {(r.answer.source, r.answer.row) for r in rows if r.change and r.acc_corrected != r.credited}
    assert wrong <= KNOWN_WRONG_CHANGES


@pytest.mark.parametrize(
    ("name", "direction"),
    [("wrong changes", ""), ("wrong changes, credited", "credited"), ("wrong changes, failed", "failed")],
)
def test_the_quoted_figures_are_the_measured_ones(final, name, direction):
    rows, complete = final
    if not complete:
        pytest.skip("the authors' files are not here: set BABILONG_REPO to a clone of booydar/babilong")
    assert _wrong(rows, direction) == QUOTED[name]
    wrong, n = QUOTED[name]
    assert wrong / n <= 0.02 and proportion_interval(wrong, n).high <= 0.05


def test_held_out_rows_fix_the_quoted_share_of_acc_errors(final):
    rows, complete = final
    if not complete:
        pytest.skip("the authors' files are not here: set BABILONG_REPO to a clone of booydar/babilong")
    errors = sum(r.weight for r in rows if r.acc != r.credited)
    fixed = sum(r.weight for r in rows if r.acc != r.credited and r.acc_corrected == r.credited)
    assert fixed / errors >= QUOTED_FIXED_SHARE


def test_no_change_on_the_admission_rows_is_wrong():
    """No figure: the rules were corrected from these rows; a later rule that moves one of them wrongly fails."""
    rows, _ = judged("admission")
    assert [(r.answer.source, r.answer.row) for r in rows if r.change and r.acc_corrected != r.credited] == []


def test_every_change_on_the_development_rows_agrees_with_the_reader():
    with open(DEVELOPMENT, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    changes = []
    for r in rows:
        verdict = check(r["task"], r["target"], r["output"], r["question"])
        if verdict.acc != verdict.acc_corrected:
            changes.append((r["output"][:60], verdict.acc_corrected == (r["verdict"] == "correct")))
    assert len(changes) >= 40
    assert [output for output, agrees in changes if not agrees] == []

"""`acc_corrected` against a reader's verdicts on real model outputs (issue 18).

`fixtures/corrected_judged.csv` holds 310 answers drawn (seeded, stratified by task, direction and
deciding rule; and by task and model) from the published prediction files of Gemini-3-Flash,
Command-R, GPT-3.5-Turbo-1106 and the RAG Llama-3 runs (BABILong authors, Apache-2.0): 180 of
the answers on which `acc` and `acc_corrected` disagreed and 130 that both failed. Each was judged
by hand: `verdict` is whether a careful reader credits the output, `why` says what decided it.
The table checks the rules (which come from the tasks' label sets and answer forms); it is not
the rule set. It carries its rows, so the test runs without the prediction files.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lm_eval_longmem.babilong.metrics import check

TABLE = Path(__file__).parent / "fixtures" / "corrected_judged.csv"

KNOWN_MISSES = {
    1: "a reasoning trace that states its answer only as a format draft (credited by a reader)",
    17: "a reasoning trace cut off before any answer, naming the target in a quoted fact",
    186: "'halway': a misspelling, which no rule reads",
}
"""Rows (from 0) where `acc_corrected` and the reader disagree; the card quotes them."""


@pytest.fixture(scope="module")
def judged():
    with open(TABLE, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["check"] = check(row["task"], row["target"], row["output"], row["question"])
    return rows


def test_table_is_a_stratified_sample_of_real_outputs(judged):
    assert {row["set"] for row in judged} == {"disagree", "both_fail"}
    disagree = [row for row in judged if row["set"] == "disagree"]
    assert len(disagree) >= 150
    assert {row["task"] for row in disagree} == {"qa1", "qa2", "qa4", "qa5", "qa7", "qa15"}
    assert {row["task"] for row in judged} == {f"qa{n}" for n in range(1, 21)}
    assert all(row["verdict"] in ("correct", "wrong") and row["why"] for row in judged)


def test_corrected_check_agrees_with_the_reader_but_for_the_known_misses(judged):
    misses = {i for i, row in enumerate(judged) if row["check"].acc_corrected != (row["verdict"] == "correct")}
    assert misses == set(KNOWN_MISSES)


def test_wrong_verdict_rates_are_at_most_two_percent(judged):
    """The rates the card reports: where the checks disagree, and where both fail (today's verdicts)."""
    disagree = [row for row in judged if row["check"].acc != row["check"].acc_corrected]
    both_fail = [row for row in judged if not row["check"].acc and not row["check"].acc_corrected]
    for rows in (disagree, both_fail):
        wrong = sum(row["check"].acc_corrected != (row["verdict"] == "correct") for row in rows)
        assert len(rows) >= 100 and wrong / len(rows) <= 0.02

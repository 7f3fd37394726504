"""The reference runs (`reference_runs.py`): every frozen result still holds, and references, versions
and changelogs move together.

* `test_reference_run_still_gives_its_numbers` reruns each reference (real SmolLM2; 314 CPU-seconds for
  the four with a warm data cache) and compares it with `reference_runs.compare`; the message says what
  moved and what to do.
* The pairing tests need no model: a reference made with another task version than the YAML's
  (a bump without a refresh) fails, and so does a version without a CHANGELOG.md entry.
* The comparison itself is tested on edited copies of a stored reference, so each of its rules can fail.
"""

from __future__ import annotations

import copy
import json
import math

import pytest
import reference_runs
from reference_runs import RUNS, compare, explain, load, reference_path
from tolerances import ARITHMETIC_RTOL, log_statistic_rtol, logprob_tol, perplexity_rtol

pytestmark = pytest.mark.reference


def test_every_reference_run_has_its_file_and_every_file_its_run():
    stored = sorted(p.stem for p in reference_runs.REFERENCE_DIR.glob("*.json"))
    assert stored == sorted(RUNS), (
        f"tests/reference/ holds {stored}, RUNS names {sorted(RUNS)}: refresh with `{reference_runs.REFRESH}`"
    )


@pytest.mark.parametrize("name", sorted(RUNS))
def test_reference_was_made_with_the_task_versions_of_today(name):
    """A version bumped without refreshing the reference fails here (and the rerun would too)."""
    stale = reference_runs.stale_versions(name, load(name))
    assert not stale, "\n".join(stale)


def test_every_task_version_has_a_changelog_line():
    """A version bumped without an entry for it in CHANGELOG.md fails here."""
    problems = reference_runs.missing_changelog_lines()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_reference_results_are_numbers_and_facts_live_in_the_configs(name):
    """What a real run writes (as of the last refresh, which the rerun below checks): every value under
    `results` a finite number or null; skips and docs per cell in `configs.<task>.longmem`."""
    reference = load(name)
    for task, stored in reference["tasks"].items():
        for key, value in stored["metrics"].items():
            assert value is None or (isinstance(value, (int, float)) and math.isfinite(value)), (task, key, value)
        assert {"skip_reasons", "docs_per_cell"} <= set(stored["longmem"]), task
        assert stored["docs"] and all(doc["scores"] for doc in stored["docs"]), task
    if name in (
        "shared_books",
        "embedded_books",
    ):  # the forgetting curve's L = 256 needs 514 positions > max_tokens 300
        assert reference["tasks"]["forgetting_curve"]["longmem"]["skip_reasons"], name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_reference_run_still_gives_its_numbers(name, smollm2_dir, request, tmp_path):
    run = RUNS[name]
    if run.books == "shared":
        request.getfixturevalue("shared_data")  # skips cleanly without ../shared
    else:
        request.getfixturevalue("embedded_books_dir")
    stored = load(name)
    new = reference_runs.execute(run, smollm2_dir, tmp_path)
    assert new["versions"] == stored["versions"] or not reference_runs.stale_versions(name, stored)
    diff = compare(stored, new)
    assert not diff, explain(name, stored, diff)
    if diff.ties:
        print(f"{name}: tolerated as argmax near-ties: {'; '.join(diff.ties)}")


# --- the comparison's rules, on edited copies of a stored reference ------------------------------


@pytest.fixture(scope="module")
def stored():
    return load("embedded_books")


def edited(reference, task, change):
    new = copy.deepcopy(reference)
    change(new["tasks"][task])
    return new


def test_a_reference_equals_itself(stored):
    assert not compare(stored, copy.deepcopy(stored))


def test_moved_inputs_outputs_scores_and_metrics_are_each_caught(stored):
    def inputs(task):
        task["docs"][0]["inputs"] = "0" * 16

    def metric(task):
        key = next(k for k, v in task["metrics"].items() if isinstance(v, float))
        task["metrics"][key] += 1e-3

    def score(task):
        doc = task["docs"][1]
        key = next(iter(doc["scores"]))
        doc["scores"][key] = 1 - doc["scores"][key] if doc["scores"][key] in (0, 1) else doc["scores"][key] + 0.01

    def skips(task):
        task["longmem"] = {**task["longmem"], "skip_reasons": {"9999": {"too long": 1}}}

    for change, words in (
        (inputs, "other inputs"),
        (metric, "metrics moved"),
        (score, "from the same outputs"),
        (skips, "skips"),
    ):
        diff = compare(stored, edited(stored, "forgetting_curve", change))
        assert list(diff.moved) == ["forgetting_curve"] and words in " ".join(diff.moved["forgetting_curve"]), (
            words,
            diff,
        )


def test_the_recorded_evaluation_is_accepted_when_the_reference_predates_it_and_compared_once_stored(stored):
    def label(name):
        return lambda task: task["longmem"].update(evaluation=name)

    before = edited(stored, "forgetting_curve", lambda task: task["longmem"].pop("evaluation", None))
    assert not compare(before, edited(before, "forgetting_curve", label("forgetting_curve")))
    recorded = edited(stored, "forgetting_curve", label("forgetting_curve"))
    assert "forgetting_curve" in compare(recorded, edited(recorded, "forgetting_curve", label("booksort"))).moved


def before_issue_27(longmem):
    """A reference's facts as recorded before tasks recorded their evaluation: no `evaluation`, a retrieval setting stored as the condition."""
    setting = longmem.pop("retrieval", None)
    longmem.pop("evaluation", None)
    if setting:
        longmem["condition"] = setting


def test_a_retrieval_setting_stored_as_the_condition_compares_as_the_condition_and_setting_of_today():
    retrieval = edited(load("embedded_books_retrieval"), "babilong", lambda task: before_issue_27(task["longmem"]))
    assert retrieval["tasks"]["babilong"]["longmem"]["condition"] == "chunks-128 top-3 bm25"

    def today(task):
        task["longmem"].update(condition="retrieval", retrieval="chunks-128 top-3 bm25")

    assert not compare(retrieval, edited(retrieval, "babilong", today))
    for moved in ({"condition": "in-context"}, {"retrieval": "sentences top-5 bm25"}):
        changed = edited(retrieval, "babilong", lambda task, moved=moved: (today(task), task["longmem"].update(moved)))
        assert "babilong" in compare(retrieval, changed).moved, moved


def test_a_condition_is_accepted_when_the_reference_predates_it_and_compared_once_stored(stored):
    stored = edited(
        stored, "booksort_memoryless", lambda task: [task["longmem"].pop(k) for k in ("evaluation", "condition")]
    )
    labelled = edited(stored, "booksort_memoryless", lambda task: task["longmem"].update(condition="memory-less"))
    assert not compare(stored, labelled)
    relabelled = edited(labelled, "booksort_memoryless", lambda task: task["longmem"].update(condition="in-context"))
    assert "booksort_memoryless" in compare(labelled, relabelled).moved


def test_floating_point_noise_passes_and_one_near_tie_is_tolerated(stored):
    def noise(task):
        for doc in task["docs"]:
            doc["outputs"] = [[bits, logprob + 0.9 * logprob_tol(len(bits))] for bits, logprob in doc["outputs"]]

    assert not compare(stored, edited(stored, "forgetting_curve", noise))

    def too_much(task):
        bits, logprob = task["docs"][0]["outputs"][0]
        task["docs"][0]["outputs"][0] = [bits, logprob + 1.1 * logprob_tol(len(bits))]

    assert "model outputs" in " ".join(
        compare(stored, edited(stored, "forgetting_curve", too_much)).moved["forgetting_curve"]
    )

    def flip(position):
        def change(task):
            bits, logprob = task["docs"][position]["outputs"][0]
            task["docs"][position]["outputs"][0] = [("1" if bits[0] == "0" else "0") + bits[1:], logprob]
            key = next(k for k in task["metrics"] if k.startswith("copy_acc@"))
            task["metrics"][key] += 0.01  # a cell's mean follows the flip

        return change

    one = compare(stored, edited(stored, "forgetting_curve", flip(0)))
    assert not one and len(one.ties) == 1 and "forgetting_curve doc" in one.ties[0]
    two = edited(edited(stored, "forgetting_curve", flip(0)), "forgetting_curve", flip(1))
    assert "forgetting_curve" in compare(stored, two).moved  # a second flip is not a near-tie


def test_a_booksort_choice_flips_as_a_near_tie_only_where_its_log_likelihoods_were_within_tolerance(stored):
    def tie_at(doc):
        def change(task):
            tokens = reference_runs.scored_tokens(task["docs"][doc], "multiple_choice")
            task["docs"][doc]["outputs"] = [-1.0, -1.0 - logprob_tol(tokens[0])]
            task["docs"][doc]["scores"]["acc"] = 1 - task["docs"][doc]["scores"]["acc"]

        return change

    tied = edited(stored, "booksort_in_context", tie_at(0))
    again = edited(
        tied,
        "booksort_in_context",
        lambda task: task["docs"][0]["scores"].__setitem__("acc", 1 - task["docs"][0]["scores"]["acc"]),
    )
    diff = compare(tied, again)  # the same log-likelihoods, the other choice: a tie
    assert not diff and len(diff.ties) == 1
    scored = edited(
        stored,
        "booksort_in_context",
        lambda task: task["docs"][0]["scores"].__setitem__("acc", 1 - task["docs"][0]["scores"]["acc"]),
    )
    assert "from the same outputs" in " ".join(compare(stored, scored).moved["booksort_in_context"])  # a decided choice


def test_a_decided_booksort_choice_that_flips_is_not_a_near_tie(stored):
    task = stored["tasks"]["booksort_in_context"]
    decided = next(i for i, d in enumerate(task["docs"]) if abs(d["outputs"][0] - d["outputs"][1]) > 0.01)

    def swap(task):
        task["docs"][decided]["outputs"] = task["docs"][decided]["outputs"][::-1]

    assert "booksort_in_context" in compare(stored, edited(stored, "booksort_in_context", swap)).moved


def test_added_metrics_ask_for_a_refresh_without_a_version_bump(stored):
    diff = compare(stored, edited(stored, "babilong", lambda task: task["metrics"].__setitem__("abstained,none", 0.0)))
    assert not diff.moved and diff.added == {"babilong": ["abstained,none"]}
    assert "Refresh the reference to record them: `python tests/reference_runs.py embedded_books`" in explain(
        "embedded_books", stored, diff
    )


def test_the_message_for_numbers_moved_without_a_version_bump_says_what_to_do(stored):
    diff = compare(stored, edited(stored, "babilong", lambda task: task["metrics"].__setitem__("acc,none", -1.0)))
    message = explain("embedded_books", stored, diff)
    version = stored["versions"]["babilong"]
    assert f"babilong {version} in task_configs/babilong/babilong.yaml" in message
    for words in (
        "bump `metadata: version`",
        "changelog",
        "python tests/reference_runs.py embedded_books",
        "acc,none: ",
    ):
        assert words in message, words


def test_a_stale_version_names_the_refresh_command(stored, monkeypatch):
    versions = reference_runs.task_versions()
    bumped = {**versions, "babilong": (versions["babilong"][0] + 0.1, versions["babilong"][1])}
    monkeypatch.setattr(reference_runs, "task_versions", lambda: bumped)
    (line,) = reference_runs.stale_versions("embedded_books", stored)
    assert "babilong is version" in line and "python tests/reference_runs.py embedded_books" in line


def test_a_version_without_a_changelog_line_is_named(monkeypatch):
    versions = reference_runs.task_versions()
    monkeypatch.setattr(
        reference_runs,
        "task_versions",
        lambda: {**versions, "forgetting_curve": (99.9, versions["forgetting_curve"][1])},
    )
    (line,) = reference_runs.missing_changelog_lines()
    assert "forgetting_curve is version 99.9" in line and "CHANGELOG.md" in line and "## forgetting_curve" in line


def test_task_versions_are_read_from_the_yamls_and_their_includes():
    versions = {task: version for task, (version, _) in reference_runs.task_versions().items()}
    assert set(versions) >= {"forgetting_curve", "booksort", "booksort_in_context", "booksort_memoryless", "babilong"}
    assert versions["booksort_in_context"] == versions["booksort_memoryless"]  # from _booksort_common_yaml
    for name in RUNS:
        assert set(json.loads(reference_path(name).read_text())["versions"]) <= set(versions)


def scale(factor):
    """A relative change of `factor` times a tolerance, as a multiplier."""
    return lambda rtol: 1 + factor * rtol


def test_a_perplexity_moves_within_what_its_log_probabilities_allow_and_no_further(stored):
    """A doc's perplexity may move by `perplexity_rtol` (its log by LOGPROB_TOL); its accuracies not at all."""

    def ppl(factor):
        return lambda task: task["docs"][1]["scores"].__setitem__(
            "lm_ppl", task["docs"][1]["scores"]["lm_ppl"] * factor
        )

    assert not compare(stored, edited(stored, "forgetting_curve", ppl(scale(0.9)(perplexity_rtol()))))
    moved = compare(stored, edited(stored, "forgetting_curve", ppl(scale(1.1)(perplexity_rtol())))).moved
    assert "from the same outputs" in " ".join(moved["forgetting_curve"])
    acc = lambda task: task["docs"][1]["scores"].__setitem__("lm_acc", task["docs"][1]["scores"]["lm_acc"] + 1e-9)  # noqa: E731
    assert "forgetting_curve" in compare(stored, edited(stored, "forgetting_curve", acc)).moved


def test_a_perplexity_cells_statistics_move_within_their_derived_tolerance_and_no_further(stored):
    """A cell's geometric mean moves by what one log-probability tolerance allows; an interval bound by that times
    1 + t / sqrt(k - 1) for the cell's k docs; a count's interval not at all (up to arithmetic)."""
    task = stored["tasks"]["forgetting_curve"]
    cell = next(iter(task["longmem"]["docs_per_cell"]))
    docs = task["longmem"]["docs_per_cell"][cell]
    for key, rtol in (
        (f"lm_ppl@{cell},none", log_statistic_rtol(docs, bound=False)),
        (f"lm_ppl@{cell}_ci_high,none", log_statistic_rtol(docs, bound=True)),
        (f"copy_acc@{cell}_ci_low,none", ARITHMETIC_RTOL),
    ):
        assert reference_runs.tolerance(key, task, frozenset({"copy_ppl", "lm_ppl"})) == rtol, key

        def change(factor, key=key):
            return lambda t: t["metrics"].__setitem__(key, t["metrics"][key] * factor)

        assert not compare(stored, edited(stored, "forgetting_curve", change(scale(0.9)(rtol)))), key
        assert "metrics moved" in " ".join(
            compare(stored, edited(stored, "forgetting_curve", change(scale(1.1)(rtol)))).moved["forgetting_curve"]
        ), key
    assert log_statistic_rtol(2, bound=True) > 13 * log_statistic_rtol(2, bound=False)  # t = 12.7 for two docs

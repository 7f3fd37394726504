"""`--cache_requests` must never reuse requests built for other `--metadata`, another doc selection or config."""

import json
import logging
import math
import os
import shutil
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import pytest
from kit import hf_run_args, read_samples, run_lm_eval
from lm_eval import evaluator_utils
from lm_eval.tasks import TaskManager
from transformers import AutoConfig

from lm_eval_longmem.babilong.task import BabilongTask
from lm_eval_longmem.backends.request_type import compact_ids
from lm_eval_longmem.common import cost, stats
from lm_eval_longmem.common.metric_names import ScoreSpec, cell
from lm_eval_longmem.common.model_info import Window
from lm_eval_longmem.common.task import LongmemTask, item_record, read_item
from lm_eval_longmem.forgetting_curve.task import ForgettingCurveTask
from lm_eval_longmem.paths import task_configs_dir

FIXTURES = Path(__file__).parent / "fixtures"


def _run(tiny_llama_dir, out_dir, cache_dir, word):
    out_dir.mkdir(parents=True, exist_ok=True)
    run_lm_eval(
        hf_run_args(
            tiny_llama_dir,
            "longmem_test_metadata_echo",
            "--include_path",
            str(FIXTURES),
            "--cache_requests",
            "true",
            "--metadata",
            f"echo_word={word}",
            "--log_samples",
        ),
        out_dir,
        env={"LM_HARNESS_CACHE_PATH": str(cache_dir)},
    )
    (sample,) = read_samples(out_dir, "longmem_test_metadata_echo")
    return sample["arguments"]


@pytest.mark.slow
def test_changed_metadata_is_not_served_from_the_request_cache(tiny_llama_dir, tmp_path):
    cache = tmp_path / "harness-cache"
    first = _run(tiny_llama_dir, tmp_path / "a", cache, "apple")
    again = _run(tiny_llama_dir, tmp_path / "b", cache, "apple")
    other = _run(tiny_llama_dir, tmp_path / "c", cache, "pear")
    assert "apple" in str(first) and str(again) == str(first)
    assert "pear" in str(other) and "apple" not in str(other)
    assert len(list(cache.glob("requests-longmem_test_metadata_echo*"))) == 2  # one per metadata


def _numbered(tiny_llama_dir, out_dir, cache_dir, *selection):
    out_dir.mkdir(parents=True, exist_ok=True)
    run_lm_eval(
        hf_run_args(
            tiny_llama_dir,
            "longmem_test_numbered",
            "--include_path",
            str(FIXTURES),
            "--cache_requests",
            "true",
            "--log_samples",
            *selection,
            max_length=64,
        ),
        out_dir,
        env={"LM_HARNESS_CACHE_PATH": str(cache_dir)},
    )
    return [(s["doc"]["number"], s["arguments"]["gen_args_0"]["arg_0"], s["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"])
            for s in read_samples(out_dir, "longmem_test_numbered")]  # fmt: skip


@pytest.mark.slow
def test_doc_selection_and_config_key_the_request_cache(tiny_llama_dir, tmp_path):
    """`--samples` then `--limit` on one cache scored docs 0 and 1 with the requests of docs 3 and 4 (defect 1); a changed `--gen_kwargs` was served the old requests too."""
    cache = tmp_path / "harness-cache"
    chosen = _numbered(tiny_llama_dir, tmp_path / "a", cache, "--samples", '{"longmem_test_numbered": [3, 4]}')
    first = _numbered(tiny_llama_dir, tmp_path / "b", cache, "--limit", "2")
    longer = _numbered(tiny_llama_dir, tmp_path / "c", cache, "--limit", "2", "--gen_kwargs", "max_gen_toks=5")
    assert chosen == [("3", "The number is 3.", 2), ("4", "The number is 4.", 2)]
    assert first == [("0", "The number is 0.", 2), ("1", "The number is 1.", 2)]
    assert longer == [("0", "The number is 0.", 5), ("1", "The number is 1.", 5)]
    assert len(list(cache.glob("requests-longmem_test_numbered*"))) == 3  # one entry per selection and config


# ---- per-doc payload and aggregation (a payload independent of the run's cells) -------------


QAS = [f"qa{n}" for n in range(1, 21)]
LENGTHS = [0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]


class ToyItem(NamedTuple):
    qa: str
    acc: float


class Toy(LongmemTask):
    """A task of ours without data or model: a 0/1 score, a share of 7 units and a perplexity per doc,
    and a run score (the share above the run's median share)."""

    SCORES = (
        ScoreSpec("acc"),
        ScoreSpec("share", "share", units="units"),
        ScoreSpec("ppl", "perplexity", higher_is_better=False),
    )

    def doc_cells(self, doc):
        return (cell(doc["qa"], doc["length"]),)

    def score(self, doc, results):
        return {"acc": results[0], "share": results[1], "units": 7, "ppl": results[2]}

    def run_score_specs(self):
        return (ScoreSpec("above_median"),)

    def run_scores(self, columns):
        median = sorted(columns["share"])[len(columns["share"]) // 2]
        return {"above_median": [float(v > median) for v in columns["share"]]}

    ITEM = ToyItem

    def summary_item(self, doc, scores):
        return ToyItem(doc["qa"], scores["acc"])

    def summarize(self, items):
        return {"acc_all": math.fsum(item.acc for item in items) / len(items)}

    def summary_directions(self):
        return {"acc_all": True}


def toy(cells):
    task = Toy.__new__(Toy)  # aggregation reads only cells, skips and the class's declarations
    task.cells, task.skips, task.docs_per_cell = list(cells), {"qa9_0": {"too long": 2}}, {}
    return task


def toy_docs(n):
    return [
        ({"qa": QAS[i % 20], "length": LENGTHS[(i // 20) % 12]}, [float(i % 3 == 0), (i % 7) / 7, 1.0 + (i % 11) / 2])
        for i in range(n)
    ]


def gathered(task, docs, world_size):
    """`raw_metrics` as `evaluator.evaluate` leaves it on rank 0 (R11): each rank takes every N-th doc,
    appends each payload key's value in doc order, and rank 0 chains every key's lists in rank order."""
    ranks = []
    for rank in range(world_size):
        raw = defaultdict(list)
        for doc, results in docs[rank::world_size]:
            for key, value in task.process_results(doc, results).items():
                raw[key, "none"].append(value)
        ranks.append(raw)
    return {key: [v for raw in ranks for v in raw[key]] for key in ranks[0]}


def test_payload_is_the_docs_own_scores_and_cell_whatever_the_sweep():
    task = toy(cell(qa, length) for qa in QAS for length in LENGTHS)  # 240 cells
    doc, results = toy_docs(1)[0]
    payload = task.process_results(doc, results)
    assert payload == {
        "acc": 1.0,
        "share": 0.0,
        "units": 7,
        "ppl": 1.0,
        "cells": ["qa1_0"],
        "summary": {"qa": "qa1", "acc": 1.0},
    }
    logged = json.dumps(payload) + json.dumps(list(payload))  # what --log_samples writes for the metrics
    assert len(logged.encode()) <= 1024


def test_per_cell_metrics_are_computed_at_aggregation(caplog):
    docs = toy_docs(480)
    task = toy(cell(qa, length) for qa in QAS for length in LENGTHS)
    with caplog.at_level(logging.WARNING):
        row, count = evaluator_utils._compute_task_aggregations(task, gathered(task, docs, 1), 100000)  # our hook
    assert count == 480 and "not scored on the same number" not in caplog.text
    assert all(value is None or isinstance(value, (int, float)) for value in row.values())  # numbers only
    assert not any("_stderr" in key for key in row)
    values = sorted(r[0] for d, r in docs if (d["qa"], d["length"]) == ("qa2", 1024))
    wilson = stats.proportion_interval(round(sum(values)), len(values))
    assert (row["acc@qa2_1024,none"], row["acc@qa2_1024_ci_low,none"], row["acc@qa2_1024_ci_high,none"]) == wilson
    shares = sorted(r[1] for d, r in docs if (d["qa"], d["length"]) == ("qa2", 1024))
    assert row["share@qa2_1024_ci_low,none"] == stats.share_interval(shares, [7] * len(shares)).low
    ppl = sorted(r[2] for d, r in docs if (d["qa"], d["length"]) == ("qa2", 1024))
    assert (
        row["ppl@qa2_1024,none"],
        row["ppl@qa2_1024_ci_low,none"],
        row["ppl@qa2_1024_ci_high,none"],
    ) == stats.log_mean_interval(ppl)
    median = sorted(r[1] for _, r in docs)[240]
    above = [float(r[1] > median) for d, r in docs if (d["qa"], d["length"]) == ("qa2", 1024)]
    assert row["above_median@qa2_1024,none"] == sum(above) / len(above)  # a run score, per cell like the others
    assert row["acc_all,none"] == sum(r[0] for _, r in docs) / 480 and row["skipped,none"] == 2
    assert {key.split(",")[0] for key in row} == set(task.higher_is_better())  # a direction for every metric
    assert task.docs_per_cell["qa2_1024"] == 2 and task.result_facts()["skip_reasons"] == {"qa9_0": {"too long": 2}}
    assert not {"evaluation", "condition"} & set(
        task.result_facts()
    )  # a task class no entry of common/evaluations.py names


def test_a_summary_item_is_logged_by_its_field_names_and_old_positional_items_still_read():
    item = ToyItem("qa1", 1.0)
    assert item_record(item) == {"qa": "qa1", "acc": 1.0} and read_item(ToyItem, item_record(item)) == item
    assert read_item(ToyItem, ["qa1", 1.0]) == item  # what files logged before the items were named hold
    for bad in ({"qa": "qa1", "acc": 1.0, "extra": 0}, {"qa": "qa1"}, ["qa1", 1.0, 2], "qa1"):
        with pytest.raises(ValueError, match=r"is not a ToyItem \('qa', 'acc'\)"):
            read_item(ToyItem, bad)


def test_two_ranks_give_the_numbers_of_one_process_bit_for_bit():
    """Every doc returns the same keys, so rank 0's keys lose nothing; sorted cells and fsum make the
    numbers independent of the order the ranks' docs arrive in. A cell only rank 1 saw is kept."""
    docs = toy_docs(23 * 20) + [
        ({"qa": "qa5", "length": 7}, [1.0, 0.5, 1.5])
    ]  # the last doc: rank 1 of 2, its own cell
    task = toy([cell(qa, length) for qa in QAS for length in LENGTHS] + ["qa5_7"])
    one = evaluator_utils._compute_task_aggregations(task, gathered(task, docs, 1), 0)
    for world_size in (2, 3):
        assert evaluator_utils._compute_task_aggregations(task, gathered(task, docs, world_size), 0) == one
    assert one[0]["acc@qa5_7,none"] == 1.0
    assert (
        one[0]["share@qa5_7_ci_low,none"] is None and one[0]["ppl@qa5_7_ci_high,none"] is None
    )  # one doc: no interval, null


# ---- the cost line before the first request ----------------------------------------


def _load(name: str, include: Path, metadata: dict) -> LongmemTask:
    manager = TaskManager(include_path=str(include), include_defaults=False, metadata=metadata)
    return manager.load([name])["tasks"][name]


def test_cost_line_reads_the_counts_of_the_fit_check(tiny_llama_dir, monkeypatch, caplog):
    task = _load("longmem_test_numbered", FIXTURES, {"pretrained": str(tiny_llama_dir), "max_length": 64})
    counted = []
    real = LongmemTask.answer_tokens
    monkeypatch.setattr(
        LongmemTask, "answer_tokens", lambda self, doc, prompt: counted.append(prompt) or real(self, doc, prompt)
    )
    with caplog.at_level(logging.INFO, logger="lm_eval"):
        task.build_all_requests(limit=3, rank=0, world_size=1)
    # "The number is N." is 16 characters, plus BOS, plus max_gen_toks=2: 19 tokens per doc
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("longmem_test_numbered: 3 docs")]
    assert line.startswith(
        "longmem_test_numbered: 3 docs, 3 generate_until requests, 57 input tokens; longest sequence 19 tokens, "
    )
    shape = cost.ModelShape.from_config(AutoConfig.from_pretrained(tiny_llama_dir))
    assert (
        f"estimated peak {cost.gib(cost.hf_peak(shape, 'generate_until', 19).total)} per sequence on the HF backend"
        in line
    )
    assert len(counted) == 3, "each doc's prompt tokenized once, by the fit check; the cost line reads its count"


def test_cost_line_counts_token_ids_exactly_and_says_the_rank_share(tiny_llama_dir, caplog):
    metadata = {"pretrained": str(tiny_llama_dir), "forgetting_curve_lengths": "[16,40]", "forgetting_curve_samples": 2,
                "forgetting_curve_copy_source": "random", "forgetting_curve_prefix_source": "random"}  # fmt: skip
    task = _load("forgetting_curve", task_configs_dir(), metadata)
    with caplog.at_level(logging.INFO, logger="lm_eval"):
        task.build_all_requests(rank=0, world_size=2)
    (line,) = [r.getMessage() for r in caplog.records if " docs, " in r.getMessage()]
    # rank 0 of 2 holds 2 of the 4 docs; each doc is a copy and an LM sequence of 2L + 2 tokens
    mine = {int(inst.doc["length"]) for inst in task.instances}
    tokens = sum(2 * (2 * L + 2) for L in (int(inst.doc["length"]) for inst in task.instances[::2]))
    assert len(task.instances) == 4 and mine
    assert line.startswith(
        f"forgetting_curve: 2 docs, 4 loglikelihood_accuracy requests, {tokens:,} input tokens (rank 0's share; 2 ranks); "
    )
    assert f"longest sequence {2 * max(mine) + 2} tokens" in line


# ---- the request-cache key covers every input by content, changed in place included ----------


def request_key(cls, metadata):
    """The task's inputs fingerprint (what `build_all_requests` hands the harness's request cache), data unbuilt."""
    task = cls.__new__(cls)
    task._config = SimpleNamespace(metadata=dict(metadata))
    task.__dict__["window"] = Window(2048, None, "hf", "a test window")
    return task.inputs_fingerprint()


def _edit(path):
    """Change one byte of `path` in place: same name, same size, same modification time."""
    stat, data = path.stat(), bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize(
    "changed,moves",
    [("tokenizer.json", True), ("tokenizer_config.json", True), ("config.json", True), ("model.safetensors", False),
     ("corpus", True), ("retriever", True)],
)  # fmt: skip
def test_each_input_changed_in_place_changes_the_request_key(changed, moves, tiny_llama_dir, tmp_path):
    """Tokenizer, chat template and config files, a corpus and a retriever folder, each edited in place, give
    new requests; the weights do not shape a request, so they are not read for its key."""
    model = shutil.copytree(tiny_llama_dir, tmp_path / "model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Some text of the corpus. " * 40)
    retriever = tmp_path / "retriever"
    retriever.mkdir()
    (retriever / "model.safetensors").write_bytes(bytes(range(256)) * 8)
    curve = {"pretrained": str(model), "forgetting_curve_corpus": str(corpus)}
    babilong = {"pretrained": str(model), "babilong_retrieval": "sentences", "babilong_retriever": str(retriever)}
    before = request_key(ForgettingCurveTask, curve), request_key(BabilongTask, babilong)
    target = {"corpus": corpus, "retriever": retriever / "model.safetensors"}.get(changed, model / changed)
    _edit(target)
    after = request_key(ForgettingCurveTask, curve), request_key(BabilongTask, babilong)
    if changed == "corpus":
        assert after[0] != before[0] and after[1] == before[1]
    elif changed == "retriever":
        assert after[1] != before[1] and after[0] == before[0]
    else:
        assert (after != before) == moves and (after[0] != before[0]) == (after[1] != before[1])


@pytest.mark.slow
def test_a_tokenizer_edited_in_place_is_not_served_the_cached_requests(tiny_llama_dir, embedded_books_dir, tmp_path):
    """Defect 3a as reported: `--cache_requests`, then the model folder's tokenizer.json edited in place: the
    second run's requests are the new tokenizer's token ids (they were the old ones, 4 of 4)."""
    from lm_eval_longmem import task_manager

    model = shutil.copytree(tiny_llama_dir, tmp_path / "model")
    book = embedded_books_dir / "macbeth.txt"
    metadata = {
        "forgetting_curve_corpus": str(book),
        "forgetting_curve_lengths": "[16,32]",
        "forgetting_curve_samples": 2,
    }

    def run(name):
        out = tmp_path / name
        out.mkdir()
        run_lm_eval(
            hf_run_args(model, "forgetting_curve", "--cache_requests", "true", "--log_samples", "--metadata",
                json.dumps(metadata)),
            out, env={"LM_HARNESS_CACHE_PATH": str(tmp_path / "requests"), "LM_EVAL_LONGMEM_CACHE": str(tmp_path / "data")},
        )  # fmt: skip
        return {r["doc_id"]: r["arguments"] for r in read_samples(out, "forgetting_curve")}

    first = run("first")
    spec = json.loads((model / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab["e"], vocab["t"] = vocab["t"], vocab["e"]  # the same size, other ids for two common letters
    (model / "tokenizer.json").write_text(json.dumps(spec))
    second = run("second")
    task = task_manager(metadata={"pretrained": str(model), **metadata}, include_defaults=False).load(
        ["forgetting_curve"]
    )["tasks"]["forgetting_curve"]
    expected = {}
    for doc_id, doc in enumerate(task.eval_docs):
        ids = lambda array: compact_ids([int(t) for t in array])  # noqa: E731 (as the task logs a token-id list)
        pairs = [(ids(context), ids(continuation)) for context, continuation in task.accuracy_requests(doc)]
        expected[doc_id] = {
            f"gen_args_{i}": {"arg_0": c, "arg_1": t, "arg_2": {"beyond_max_length": True}}
            for i, (c, t) in enumerate(pairs)
        }
    assert second == expected and all(second[d] != first[d] for d in first)


# --- which docs `--limit N` takes: `<prefix>limit_order` ------------------------------------------


def _limit_order_task(task_name, metadata):
    """One of our tasks loaded as a run loads it (our task folder only: faster)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_longmem.paths import task_configs_dir

    tm = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata)
    return tm.load([task_name])["tasks"][task_name]


def _limit_order_inputs(tiny_llama_dir, embedded_books_dir, tmp_path):
    from kit import babilong_simulated, build_booksort

    macbeth = embedded_books_dir / "macbeth.txt"
    model = {"pretrained": str(tiny_llama_dir), "max_length": 8192}
    return {
        "forgetting_curve": (
            model
            | {
                "forgetting_curve_corpus": str(macbeth),
                "forgetting_curve_lengths": "16,64,32",
                "forgetting_curve_samples": 2,
            },
            "forgetting_curve_",
        ),  # fmt: skip
        "booksort_in_context": (
            model | {"booksort_data": str(build_booksort(macbeth, tmp_path / "bs", "250,500"))},
            "booksort_",
        ),
        "babilong": (
            model | babilong_simulated(macbeth, babilong_lengths="[0k,2k]", babilong_tasks="qa1", babilong_samples=2),
            "babilong_",
        ),
    }


@pytest.mark.slow
@pytest.mark.parametrize("task_name", ["forgetting_curve", "booksort_in_context", "babilong"])
def test_limit_takes_the_cheapest_docs_first_only_when_asked(
    task_name, tiny_llama_dir, embedded_books_dir, tmp_path, monkeypatch
):
    """The default order (rounds over every cell, most expensive first in each) makes
    `--limit 1` run the longest input; `<prefix>limit_order=cheapest` runs the cheapest docs first. Either
    way the docs, their indices and what the harness gathers per doc are the same."""
    from lm_eval_longmem.harness import models

    monkeypatch.setattr(models, "_live", None)  # a model an earlier test created in this process has another window
    metadata, prefix = _limit_order_inputs(tiny_llama_dir, embedded_books_dir, tmp_path)[task_name]
    balanced = _limit_order_task(task_name, metadata)
    cheapest = _limit_order_task(task_name, metadata | {f"{prefix}limit_order": "cheapest"})
    docs = list(balanced.eval_docs)
    assert list(cheapest.eval_docs) == docs  # the dataset does not move
    work = [balanced.doc_work(doc) for doc in docs]
    assert len(set(work)) > 1, work  # the inputs have docs of different cost
    assert balanced.doc_order == list(range(len(docs)))
    assert work[0] == max(work)  # the default: the first doc (what --limit 1 runs) is the most expensive
    assert cheapest.doc_order == sorted(range(len(docs)), key=lambda i: (work[i], i))
    for task in (balanced, cheapest):
        task.build_all_requests(limit=2, rank=0, world_size=1, tokenizer_name="t")
    taken = [i for i, _ in cheapest.doc_iterator(limit=2)]
    assert taken == cheapest.doc_order[:2] and [work[i] for i in taken] == sorted(work)[:2]
    assert {i for i, _ in balanced.doc_iterator(limit=2)} == {0, 1}
    assert sorted(i for i, _ in cheapest.doc_iterator()) == list(range(len(docs)))  # no --limit: every doc


def test_limit_order_is_one_declared_key_per_evaluation():
    from lm_eval_longmem.babilong.options import BabilongOptions
    from lm_eval_longmem.booksort.options import BooksortOptions
    from lm_eval_longmem.common.errors import UsageError
    from lm_eval_longmem.common.options import LIMIT_ORDERS, declared, parse_options
    from lm_eval_longmem.forgetting_curve.options import SweepOptions

    for cls, prefix in (
        (SweepOptions, "forgetting_curve_"),
        (BooksortOptions, "booksort_"),
        (BabilongOptions, "babilong_"),
    ):
        (spec,) = [d for d in declared(cls, prefix) if d.name == "limit_order"]
        assert spec.default == "balanced" and LIMIT_ORDERS == ("balanced", "cheapest")
        assert parse_options(cls, prefix, {f"{prefix}limit_order": "Cheapest"}).limit_order == "cheapest"
        with pytest.raises(UsageError, match=f"{prefix}limit_order='shortest'"):
            parse_options(cls, prefix, {f"{prefix}limit_order": "shortest"})


def test_a_task_that_takes_a_harness_name_says_so_once_when_built(monkeypatch):
    """Our `babilong` takes the harness's group name on purpose (`Evaluation.replaces_harness`): building it says so
    in one INFO line, once per process, naming where the harness's group went; other tasks say nothing."""
    from lm_eval_longmem.common import task as task_module

    monkeypatch.setattr(task_module, "_said", set())
    lines: list[tuple[int, str]] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: lines.append((record.levelno, record.getMessage()))  # type: ignore[method-assign]
    task_module.log.addHandler(handler)
    level = task_module.log.level
    task_module.log.setLevel(logging.INFO)
    try:
        for evaluation, name in [("babilong", "babilong"), ("babilong", "babilong"), ("booksort", "booksort"),
                                 ("babilong", "babilong_retrieval"), ("ruler", "niah")]:  # fmt: skip
            task_module.say_taken_name(evaluation, name)
    finally:
        task_module.log.removeHandler(handler)
        task_module.log.setLevel(level)
    assert lines == [
        (
            logging.INFO,
            "'babilong' is lm-eval-longmem's babilong evaluation while the plugin is active; the harness's own "
            "'babilong' runs as 'babilong_harness' meanwhile (LM_EVAL_LONGMEM_AUTOLOAD=0 gives it its name back)",
        )
    ]

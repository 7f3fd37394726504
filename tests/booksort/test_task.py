"""The Book-SORT tasks in the harness: names, prompts with/without chat template, scoring, skips, metrics."""

from __future__ import annotations

import json
from pathlib import Path

import lm_eval
import pytest
from kit import check_summary_schema, hf_run_args, read_results, read_samples, run_lm_eval
from scipy import stats

from lm_eval_longmem.booksort.data import Excerpts, booksort_options, user_text
from lm_eval_longmem.booksort.prompts import VARIANTS, get_variant, render
from lm_eval_longmem.booksort.task import BooksortTask, Trial, binomial_p_above_chance, calibrated_correct, parse_label
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.stats import proportion_interval
from lm_eval_longmem.common.task import cell_interval, read_item
from lm_eval_longmem.paths import task_configs_dir
from lm_eval_longmem.readers.results import skip_reasons

LOGPROB_TOLERANCE = 1e-4
"""fp32 rounding between two code paths over the same tokens (`tests/backends/conftest.py` states why)."""

OUR_TASKS = {"booksort_in_context", "booksort_memoryless", "booksort_in_context_gen"}


def _task_manager(metadata=None):
    """Our tasks only (the harness's own are not indexed: faster)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_longmem.paths import task_configs_dir

    return TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata or {})


def _load(task_name: str, metadata: dict) -> BooksortTask:
    task = _task_manager(metadata).load([task_name])["tasks"][task_name]
    assert isinstance(task, BooksortTask)
    return task


@pytest.mark.slow
def test_task_index_is_exact_and_names_are_new():
    from lm_eval.tasks import TaskManager

    manager = TaskManager()  # the start-up hook adds task_configs/ to the harness's own tasks
    index = manager.task_index
    folder = str(task_configs_dir() / "booksort")

    def names_under(path: str) -> set[str]:
        return {name for name, entry in index.items() if str(getattr(entry, "yaml_path", None) or "").startswith(path)}

    ours = names_under(folder)
    assert ours == OUR_TASKS | {"booksort"}
    assert "booksort" in manager.all_groups
    harness = names_under(str(Path(lm_eval.__file__).parent / "tasks"))
    assert "babilong_qa1" in harness  # the filter does see the built-in tasks
    assert not ours & harness


def test_group_holds_only_the_in_context_task():
    import yaml

    group = yaml.safe_load((task_configs_dir() / "booksort" / "booksort.yaml").read_text())
    assert group["group"] == "booksort" and group["task"] == ["booksort_in_context"]
    assert group["aggregate_metric_list"] == [{"metric": "acc", "aggregation": "mean", "weight_by_size": False}]


@pytest.mark.parametrize(
    "generated,label",
    [
        (" A", "A"),
        (" B.", "B"),
        ("B", "B"),
        (" Segment A comes first", "A"),
        ("  A) is first", "A"),
        (" a", None),  # lower case is not a label
        (" AB", None),
        (" Both", None),
        (" Answer: A", None),  # anything before the label is not allowed
        ("", None),
        (" B2", None),
    ],
)
def test_parse_label_is_strict(generated, label):
    assert parse_label(generated) == label


def test_cell_intervals_and_chance_test():
    items = [1.0] * 15 + [0.0] * 5
    ci = stats.binomtest(15, 20).proportion_ci(method="wilson")
    spec, answered_a = BooksortTask.score_specs()
    assert (
        spec.family == answered_a.family == "binary"
    )  # a trial is right or wrong, answered "A" or not: Wilson intervals per cell
    assert (spec.name, spec.higher_is_better, answered_a.name, answered_a.higher_is_better) == (
        "acc",
        True,
        "pct_A",
        None,
    )
    interval = cell_interval(items, spec)[1:]
    assert interval == pytest.approx((ci.low, ci.high))
    assert binomial_p_above_chance(items) == pytest.approx(stats.binomtest(15, 20, 0.5, alternative="greater").pvalue)
    assert binomial_p_above_chance(items) < 0.05 < binomial_p_above_chance([1.0] * 12 + [0.0] * 8)


def test_every_variant_renders_both_conditions():
    for name, variant in VARIANTS.items():
        full = render(variant, title="T", excerpt="EXCERPT", first="S1", second="S2", condition="in_context")
        bare = render(variant, title="T", excerpt="EXCERPT", first="S1", second="S2", condition="memoryless")
        assert "EXCERPT" in full.user and "EXCERPT" not in bare.user, name
        assert full.user.index("Segment A: S1") < full.user.index("Segment B: S2"), name
        assert full.answer_prefix.endswith("Segment") and full.user.endswith("\n"), name
    with pytest.raises(ValueError, match="choose one of"):
        get_variant("nope")


class _ChatLM:
    """The two pieces of HFLM that prompt rendering uses, on a real tokenizer (no model weights)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def apply_chat_template(self, chat_history, add_generation_prompt=True):  # same call as HFLM's
        return self.tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )


@pytest.fixture(scope="module")
def smollm2_task(smollm2_dir, built_dir):
    from transformers import AutoTokenizer

    meta = {
        "pretrained": str(smollm2_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_books": "comedy_of_errors",
    }
    return _load("booksort_in_context", meta), AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("system_instruction", [None, "Be brief."])
def test_prompt_rendering_and_one_token_labels(smollm2_task, chat, system_instruction):
    """The final prompt ends in the answer prefix (inside the assistant turn under a chat template),
    keeps our system prompt and the user's --system_instruction, and each label is one token after it."""
    task, tokenizer = smollm2_task
    doc = task.test_docs()[0]
    ctx = task.fewshot_context(
        doc,
        num_fewshot=0,
        system_instruction=system_instruction,
        apply_chat_template=chat,
        chat_template=_ChatLM(tokenizer).apply_chat_template if chat else None,
        gen_prefix=task.doc_to_prefix(doc),
    )
    requests = task.construct_requests(
        doc=doc, ctx=ctx, metadata=("booksort_in_context", 0, 1), apply_chat_template=chat
    )
    assert [r.arguments[1] for r in requests] == [" A", " B"]
    assert doc["prompt_system"].strip() in ctx and task.doc_to_text(doc) in ctx and task.excerpts(doc) in ctx
    assert (system_instruction or "") in ctx
    if chat:
        assert ctx.endswith("<|im_start|>assistant\nAnswer: Segment") and ctx.startswith("<|im_start|>system\n")
    else:
        assert ctx.startswith((f"{system_instruction}\n\n" if system_instruction else "") + doc["prompt_system"])
        assert ctx.endswith("?\nAnswer: Segment")
    context_ids = tokenizer(ctx, add_special_tokens=False)["input_ids"]
    for request in requests:
        whole = tokenizer(ctx + request.arguments[1], add_special_tokens=False)["input_ids"]
        assert whole[: len(context_ids)] == context_ids and len(whole) == len(context_ids) + 1


@pytest.mark.slow
def test_our_protocol_scores_as_the_stock_path(tiny_llama_dir, built_dir):
    """Our protocol's label requests go out as `loglikelihood_accuracy` with the harness's string pairs: same
    log-likelihoods as the harness's `loglikelihood` (within `LOGPROB_TOLERANCE`), same is_greedy, and the logged
    `resps`/`filtered_resps` keep the stock shape, one `[logprob, is_greedy]` per label."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from lm_eval_longmem.backends.request_type import OUTPUT_TYPE

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", batch_size=2)
    meta = {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
    }
    out = lm_eval.simple_evaluate(
        model=lm, tasks=["booksort_in_context"], task_manager=_task_manager(meta), limit=6, log_samples=True
    )
    samples = out["samples"]["booksort_in_context"]
    assert len(samples) == 6
    pairs = [tuple(args) for s in samples for args in s["arguments"]]
    stock = lm.loglikelihood([Instance("loglikelihood", {}, pair, 0) for pair in pairs], disable_tqdm=True)
    ours = [resp[0] for s in samples for resp in s["resps"]]
    assert all(len(s["resps"]) == 2 and len(s["filtered_resps"]) == 2 for s in samples)
    assert all(len(r) == 2 and isinstance(r[0], float) and isinstance(r[1], bool) for r in ours)
    assert [r[1] for r in ours] == [greedy for _, greedy in stock]
    assert max(abs(r[0] - ll) for r, (ll, _) in zip(ours, stock, strict=True)) <= LOGPROB_TOLERANCE
    assert [s["filtered_resps"] for s in samples] == [[resp[0] for resp in s["resps"]] for s in samples]
    task = _load("booksort_in_context", meta)
    doc = task.test_docs()[0]
    requests = task.construct_requests(doc, task.doc_to_text(doc))
    assert {r.request_type for r in requests} == {OUTPUT_TYPE} and task.OUTPUT_TYPE == "multiple_choice"


def _plain_prompt_tokens(doc, tokenizer, excerpts) -> int:
    ctx = doc["prompt_system"] + user_text(doc, excerpts(doc)) + doc["prompt_answer"] + " A"
    return len(tokenizer(ctx)["input_ids"])


def _window_meta(tiny_llama_dir, built_dir, **extra) -> dict:
    """One condition of one play: 100 test trials whose in-context prompts are 1.5-2k characters."""
    return {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
        "booksort_books": "hamlet",
        **extra,
    }


def _prompt_tokens(meta: dict, tiny_llama_dir, n: int) -> list[int]:
    """Tokens of prompt + label of the dataset's first `n` in-context trials (what must fit the window)."""
    from transformers import AutoTokenizer

    from lm_eval_longmem.booksort.data import build_docs

    tokenizer, excerpts = AutoTokenizer.from_pretrained(tiny_llama_dir), Excerpts(booksort_options(meta))
    return [_plain_prompt_tokens(doc, tokenizer, excerpts) for doc in build_docs(meta, "test", "in_context")[:n]]


@pytest.mark.slow
def test_trials_longer_than_the_window_are_skipped_and_counted(tiny_llama_dir, built_dir):
    import lm_eval
    from transformers import AutoTokenizer

    from lm_eval_longmem.booksort.data import build_docs

    meta = _window_meta(tiny_llama_dir, built_dir)
    tokenizer, excerpts = AutoTokenizer.from_pretrained(tiny_llama_dir), Excerpts(booksort_options(meta))
    docs = build_docs(meta, "test", "in_context")
    window = sorted(_plain_prompt_tokens(doc, tokenizer, excerpts) for doc in docs[:6])[
        3
    ]  # two of the first six do not fit
    meta["max_length"] = window
    fits, skipped = [], 0
    for doc in docs:
        if len(fits) == 5:
            break
        if _plain_prompt_tokens(doc, tokenizer, excerpts) <= window:
            fits.append(doc["trial_id"])
        else:
            skipped += 1
    assert skipped > 0

    out = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_llama_dir},device=cpu,max_length={window}",
        tasks=["booksort_in_context"],
        task_manager=_task_manager(meta),
        limit=5,
        log_samples=True,
    )
    row = out["results"]["booksort_in_context"]
    assert row["skipped,none"] == skipped
    reasons = skip_reasons(out, "booksort_in_context")
    ((reason, count),) = reasons["LE250"].items()
    assert count == skipped and f"exceed the window ({window} tokens" in reason
    assert set(reasons) == {"LE250"}
    assert [s["doc"]["trial_id"] for s in out["samples"]["booksort_in_context"]] == fits
    for sample in out["samples"]["booksort_in_context"]:
        ctx, cont = sample["arguments"][0]
        assert len(tokenizer(ctx + cont)["input_ids"]) <= window  # nothing was left-truncated by the harness

    with pytest.raises(UsageError, match=r"no doc fits the model .*exceed the window \(300 tokens.*max_length"):
        lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={tiny_llama_dir},device=cpu,max_length=300",
            tasks=["booksort_in_context"],
            task_manager=_task_manager({**meta, "max_length": 300}),
            limit=2,
        )


@pytest.mark.slow
def test_samples_are_dataset_rows_even_after_a_skipped_row(tiny_llama_dir, built_dir):
    """`--samples` indices named rows of the dataset left after unfit trials were
    dropped, so a skipped row before them shifted every index to a later trial."""
    import lm_eval

    from lm_eval_longmem.booksort.data import build_docs

    meta = _window_meta(tiny_llama_dir, built_dir)
    tokens = _prompt_tokens(meta, tiny_llama_dir, 40)
    rows = [doc["trial_id"] for doc in build_docs(meta, "test", "in_context")]
    # the first pair of neighbours that both fit a window some earlier row exceeds
    first = next(i for i in range(1, 39) if max(tokens[i], tokens[i + 1]) < max(tokens[:i]))
    for chosen in ([first, first + 1], [0, 1]):
        window = max(tokens[i] for i in chosen)  # the chosen rows fit; with [first, ...] an earlier row does not
        out = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={tiny_llama_dir},device=cpu,max_length={window}",
            tasks=["booksort_in_context"],
            task_manager=_task_manager(meta | {"max_length": window}),
            samples={"booksort_in_context": chosen},
            log_samples=True,
        )
        logged = [s["doc"]["trial_id"] for s in out["samples"]["booksort_in_context"]]
        assert logged == [rows[i] for i in chosen]
        assert out["results"]["booksort_in_context"]["skipped,none"] == 0  # only the chosen rows are considered


@pytest.mark.slow
def test_request_cache_serves_any_later_limit(tiny_llama_dir, built_dir, tmp_path):
    """With `--cache_requests`, `--limit 2` then `--limit 6` crashed ("argmax of an
    empty sequence"): the task had cached requests of its trimmed dataset. Through the real command
    line, on one harness cache, with a window that skips some of the first trials."""
    from lm_eval_longmem.booksort.data import build_docs

    meta = _window_meta(tiny_llama_dir, built_dir, booksort_distance_bins="0")  # 100 trials
    tokens = _prompt_tokens(meta, tiny_llama_dir, 100)
    assert len(tokens) == 100
    window = sorted(tokens[:6])[3]  # two of the first six do not fit
    fitting = [i for i, n in enumerate(tokens) if n <= window]
    assert fitting[:6] != list(range(6)) and len(fitting) < 100  # some of the first six are skipped
    rows = [doc["trial_id"] for doc in build_docs(meta, "test", "in_context")]
    cache = tmp_path / "harness-cache"
    cache.mkdir()
    for limit in (2, 6, None):
        out = tmp_path / f"limit-{limit}"
        out.mkdir()
        run_lm_eval(
            hf_run_args(
                tiny_llama_dir,
                "booksort_in_context",
                "--metadata",
                json.dumps({k: v for k, v in meta.items() if k.startswith("booksort_")}),
                "--cache_requests",
                "true",
                "--batch_size",
                "4",
                "--log_samples",
                *(["--limit", str(limit)] if limit else []),
                max_length=window,
                dtype=None,
            ),
            out,
            env={"LM_HARNESS_CACHE_PATH": str(cache)},
        )
        assert any(cache.iterdir())  # the requests were cached (first run) and served (later runs)
        expected = fitting[:limit] if limit else fitting
        samples = read_samples(out, "booksort_in_context")
        assert sorted(s["doc"]["trial_id"] for s in samples) == sorted(rows[i] for i in expected)
        data = read_results(out)
        row = data["results"]["booksort_in_context"]
        # --limit counts trials that run; the unfit trials before the last of them are skipped and counted
        considered = expected[-1] + 1 if limit else len(tokens)
        assert row["skipped,none"] == considered - len(expected)
        assert row["skipped,none"] > 0 or limit == 2
        reasons = skip_reasons(data, "booksort_in_context")
        assert set(reasons) == ({"LE250"} if row["skipped,none"] else set())
        assert sum(sum(counts.values()) for counts in reasons.values()) == row["skipped,none"]


def test_generation_task_counts_invalid_answers(tiny_llama_dir, built_dir):
    meta = {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
    }
    task = _load("booksort_in_context_gen", meta)
    task.build_all_requests(limit=2)  # decides the run's cells (and skips) as the harness would
    doc = task.test_docs()[0]
    gold = "AB"[doc["label"]]
    right = task.process_results(doc, [f" {gold}. It is first."])
    wrong = task.process_results(doc, [" The first one"])
    cell = f"LE{doc['excerpt_length']}"
    a = float(gold == "A")  # the right answer is "A" or "B"; the invalid one is not "A"
    assert (
        right["acc"] == 1.0
        and right["summary"] == Trial("250x20", 1.0, 0.0, a, None, doc["label"])._asdict()
        and cell in right["cells"]
    )
    assert wrong["acc"] == 0.0 and wrong["summary"] == Trial("250x20", 0.0, 1.0, 0.0, None, doc["label"])._asdict()
    assert right["pct_A"] == a and wrong["pct_A"] == 0.0
    raw = {(key, "none"): [right[key], wrong[key], right[key]] for key in right}  # two right, one invalid
    row, count = task.aggregate_payloads(raw, harness_default=None)
    assert count == 3 and row["invalid,none"] == 1.0 and row[f"acc@{cell},none"] == pytest.approx(2 / 3)
    assert row["acc,none"] == pytest.approx(2 / 3)  # one L_E x L_S condition: the paper's mean is the plain share
    assert row[f"acc@{cell}_p_above_chance,none"] == pytest.approx(0.5)  # exact binomial: 2 of 3 at chance 0.5
    # Answer bias: pooled and per cell, Wilson intervals, no test against chance (neither side is better).
    assert row["pct_A,none"] == pytest.approx(2 * a / 3) == pytest.approx(row[f"pct_A@{cell},none"])
    low, high = proportion_interval(round(2 * a), 3)[1:]
    assert (row["pct_A_ci_low,none"], row["pct_A_ci_high,none"]) == pytest.approx((low, high))
    assert (row[f"pct_A@{cell}_ci_low,none"], row[f"pct_A@{cell}_ci_high,none"]) == pytest.approx((low, high))
    assert f"pct_A@{cell}_p_above_chance,none" not in row
    better = task.higher_is_better()
    assert better["pct_A"] is None and better[f"pct_A@{cell}"] is None and better[f"acc@{cell}"] is True
    assert not any(key.startswith("acc_calibrated") for key in row)  # no log-odds to calibrate when generating


def test_answer_bias_on_the_log_prob_task(tiny_llama_dir, built_dir):
    """`pct_A` counts the trials whose "A" log-probability is the higher, whatever the gold label."""
    meta = {"pretrained": str(tiny_llama_dir), "booksort_data": str(built_dir), "booksort_excerpt_lengths": 250,
            "booksort_segment_lengths": 20}  # fmt: skip
    task = _load("booksort_in_context", meta)
    task.build_all_requests(limit=4)
    docs = [task.test_docs()[i] for i in range(4)]
    picks_a = [(-0.1, False), (-2.0, False)]  # log P(" A") > log P(" B")
    payloads = [task.process_results(doc, picks_a) for doc in docs]
    assert [p["pct_A"] for p in payloads] == [1.0] * 4
    assert [p["acc"] for p in payloads] == [float(doc["label"] == 0) for doc in docs]
    raw = {(key, "none"): [p[key] for p in payloads] for key in payloads[0]}
    row, _ = task.aggregate_payloads(raw, harness_default=None)
    assert row["pct_A,none"] == 1.0 and row["acc,none"] == pytest.approx(sum(doc["label"] == 0 for doc in docs) / 4)


def test_calibrated_accuracy_on_the_log_prob_task(tiny_llama_dir, built_dir):
    """`acc_calibrated` comes from every trial's log-odds at aggregation, per cell and as the paper's mean,
    and does not depend on the order in which the trials arrive."""
    meta = {"pretrained": str(tiny_llama_dir), "booksort_data": str(built_dir), "booksort_excerpt_lengths": 250,
            "booksort_segment_lengths": 20}  # fmt: skip
    task = _load("booksort_in_context", meta)
    task.build_all_requests(limit=8)
    docs = [task.test_docs()[i] for i in range(8)]
    # always "A", but more surely when the gold answer is "A": the order is in the log-odds, not in the answer
    results = [[(-0.1 - 0.05 * k, False), (-2.0, False)] if doc["label"] == 0 else [(-0.6 - 0.05 * k, False), (-2.0, False)]
               for k, doc in enumerate(docs)]  # fmt: skip
    payloads = [task.process_results(doc, r) for doc, r in zip(docs, results)]
    assert all(p["pct_A"] == 1.0 for p in payloads) and payloads[0]["summary"]["log_odds"] == pytest.approx(1.9)
    raw = {(key, "none"): [p[key] for p in payloads] for key in payloads[0]}
    row, _ = task.aggregate_payloads(raw, harness_default=None)
    right = calibrated_correct([read_item(Trial, p["summary"]) for p in payloads])
    cell = f"LE{docs[0]['excerpt_length']}"
    assert row[f"acc_calibrated@{cell},none"] == pytest.approx(sum(right) / 8)
    assert row["acc_calibrated,none"] == pytest.approx(sum(right) / 8)  # one condition: the paper's mean is the share
    low, high = proportion_interval(round(sum(right)), 8)[1:]
    assert (row[f"acc_calibrated@{cell}_ci_low,none"], row[f"acc_calibrated@{cell}_ci_high,none"]) == pytest.approx(
        (low, high)
    )
    assert row[f"acc_calibrated@{cell}_p_above_chance,none"] == pytest.approx(binomial_p_above_chance(right))
    assert row["acc_calibrated_p_above_chance,none"] == pytest.approx(binomial_p_above_chance(right))
    better = task.higher_is_better()
    assert better["acc_calibrated"] is True and better[f"acc_calibrated@{cell}"] is True
    assert better["acc_calibrated_p_above_chance"] is False
    reversed_raw = {key: values[::-1] for key, values in raw.items()}
    assert task.aggregate_payloads(reversed_raw, harness_default=None)[0] == row


@pytest.mark.parametrize("values", [[1.0], [0.0], [1.0, 0.0], [1.0] * 4, [0.0] * 4, [1.0, 1.0, 1.0, 0.0]], ids=str)
def test_every_score_of_the_task_on_degenerate_trials(values):
    """A right-or-wrong score (acc, pct_A, acc_calibrated) gets a Wilson interval from one trial on,
    inside [0, 1] and never of zero width, whether the trials agree or not."""
    for spec in (*BooksortTask.score_specs(), BooksortTask.CALIBRATED):
        assert spec.family == "binary"
        iv = cell_interval(values, spec)
        assert 0.0 <= iv.low <= iv.estimate <= iv.high <= 1.0 and iv.low < iv.high, (spec.name, iv)
        assert (iv.low, iv.high) == pytest.approx(proportion_interval(round(sum(values)), len(values))[1:])


@pytest.mark.parametrize("output_type", ["multiple_choice", "generate_until"])
def test_summaries_are_named_items_and_old_logged_items_give_the_same_row(output_type):
    """`summarize` over `Trial`s: the row from named records equals the one from positional lists (old logs)."""
    task = BooksortTask.__new__(BooksortTask)  # aggregation reads only cells, skips, output type and declarations
    docs = [{"excerpt_length": le, "segment_length": 20, "distance_bin_idx": k % 2, "book_idx": 7, "label": k % 2}
            for le in (250, 1000) for k in range(6)]  # fmt: skip
    task.skips, task.docs_per_cell, task.OUTPUT_TYPE = {}, {}, output_type
    task.cells = list(dict.fromkeys(c for doc in docs for c in task.doc_cells(doc)))
    if output_type == "multiple_choice":
        results = [[(-0.2 - 0.1 * k, False), (-1.0 + 0.05 * k, False)] for k in range(len(docs))]
    else:
        results = [[" A"], [" B"], [" neither"]] * 4
    row = check_summary_schema(task, [task.process_results(doc, r) for doc, r in zip(docs, results)])
    assert ("acc_calibrated,none" in row) == (output_type == "multiple_choice") and ("invalid,none" in row) != (
        output_type == "multiple_choice"
    )
    assert row["acc@LE250_bin1,none"] is not None and row["acc,none"] is not None

"""`lm-eval-longmem plan`: counts that agree with the data the run builds, costs from the cost model, offline."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kit import build_llama3_8b_shape, hflm_chat_template, in_process
from transformers import AutoConfig

from lm_eval_longmem import plan as plan_module
from lm_eval_longmem.common import cost
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.plan import make_plan, plan_lines, resolve_tasks

pytestmark = pytest.mark.usefixtures("no_live_model")


@pytest.fixture(scope="module")
def llama3_dir(tiny_llama_dir, tmp_path_factory) -> Path:
    """A folder with only a Llama-3-8B-shaped config.json and a tokenizer: what `plan` needs, offline."""
    return build_llama3_8b_shape(tmp_path_factory.mktemp("llama3-8b-shape"), tiny_llama_dir)


def test_tasks_and_groups_resolve_to_their_yaml_facts():
    facts = {
        t.name: t
        for t in resolve_tasks(
            ["forgetting_curve", "booksort", "booksort_memoryless", "booksort_in_context_gen", "babilong"]
        )
    }
    assert list(facts) == [
        "forgetting_curve",
        "booksort_in_context",
        "booksort_memoryless",
        "booksort_in_context_gen",
        "babilong",
    ]
    assert (
        facts["forgetting_curve"].output_type == "loglikelihood_accuracy"
        and facts["forgetting_curve"].evaluation == "forgetting_curve"
    )
    assert (facts["booksort_memoryless"].output_type, facts["booksort_memoryless"].dataset_kwargs["condition"]) == (
        "multiple_choice",
        "memoryless",
    )
    assert (facts["booksort_in_context_gen"].output_type, facts["booksort_in_context_gen"].max_gen_toks) == (
        "generate_until",
        8,
    )
    assert (facts["babilong"].output_type, facts["babilong"].max_gen_toks) == ("generate_until", 20)
    with pytest.raises(UsageError, match="--tasks hellaswag: plan knows our tasks and groups only"):
        resolve_tasks(["hellaswag"])


def test_plan_of_a_weightless_llama3_8b_folder(llama3_dir):
    plan = make_plan(
        ["forgetting_curve", "babilong"],
        {"pretrained": str(llama3_dir), "forgetting_curve_points": 2, "babilong_lengths": "[128k]"},
        gpu="h100",
    )
    assert plan.shape.parameters == pytest.approx(8.03e9, rel=0.005) and plan.window.tokens == 131072
    rows = {(r.task, r.cell): plan.costs(r) | {"row": r} for r in plan.rows}
    longest = rows["forgetting_curve", "131072"]
    assert longest["row"].sequence_tokens == 262_146
    assert longest["kv_cache_bytes"] == 262_146 * 128 * 2**10  # Llama-3-8B in bf16: 128 KiB of K and V per token
    assert (
        longest["fits"]
        and longest["peak_bytes"] < 0.9 * 80 * 2**30
        and longest["est_seconds"] > rows["forgetting_curve", "65536"]["est_seconds"] * 3
    )
    text = "\n".join(plan_lines(plan))
    assert "8.03B parameters" in text and "vLLM on one h100: max_model_len=262147" in text
    # a max_model_len past the window says what vLLM then needs
    assert "past the model's window of 131,072 vLLM also needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in text


@pytest.mark.slow
def test_cli_json_rows_and_errors(llama3_dir, tiny_llama_dir):
    exe = str(Path(sys.executable).with_name("lm-eval-longmem"))
    out = subprocess.run(
        [exe, "plan", "--tasks", "forgetting_curve", "--model_args", f"pretrained={llama3_dir}", "--metadata",
         "forgetting_curve_lengths=[4k,8k]", "forgetting_curve_samples=2", "--gpu", "a100", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = json.loads(out.stdout)
    assert [(r["task"], r["length"], r["docs"], r["input_tokens"]) for r in rows] == [
        ("forgetting_curve", 4096, 2, 4 * 8194),
        ("forgetting_curve", 8192, 2, 4 * 16386),
    ]
    assert all({"prefill_flops", "kv_cache_bytes", "peak_bytes", "est_seconds", "fits"} <= set(r) for r in rows)
    shape = cost.ModelShape.from_config(AutoConfig.from_pretrained(llama3_dir))
    assert rows[0]["prefill_flops"] == 4 * cost.forward_flops(shape, 8193, 2048)
    bad = subprocess.run(
        [exe, "plan", "--tasks", "nope", "--model_args", f"pretrained={tiny_llama_dir}"], capture_output=True, text=True
    )
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "lm-eval-longmem: error: --tasks nope: plan knows our tasks and groups only: "
        + ", ".join(sorted(plan_module.our_tasks()))
    ]


# --- `plan` takes the user's own lm_eval command ------------------------------------------------------


def offline_words(words: list[str], local: dict[str, str]) -> list[str]:
    """A documented command's arguments with what needs the hub or the user's files made local: `pretrained=`'s
    model (a Llama-3 name: the weightless 8B shape; any other: the embedded SmolLM2), the books' variables, the
    Book-SORT data folders, a shard's `--samples` and the node number."""
    out = []
    for word in words:
        word = re.sub(
            r"pretrained=([^,\s]+)", lambda m: "pretrained=" + local["llama3" if "Llama-3" in m[1] else "smollm2"], word
        )
        word = word.replace("$BOOKS", local["books"]).replace("$PLAYS", local["books"]).replace("$i", "0")
        word = re.sub(r"booksort_data=(?!hub\b|hf:)[^\s,]+", f"booksort_data={local['booksort']}", word)
        word = re.sub(r'("booksort_data": )"(?!hub"|hf:)[^"]*"', lambda m: f'{m[1]}"{local["booksort"]}"', word)
        out.append(local["samples"] if word == "SUBSTITUTION" else word)
    return out


def documented_lm_eval_commands() -> list[tuple[str, list[str]]]:
    """Every fenced `lm_eval` command of the documents (README.md, docs/, the cards, ...: `test_docs.DOCUMENTS`)
    that is whole (not elided with `...`)."""
    from test_docs import DOCUMENTS, _name, command_lines

    return [
        (f"{_name(path)}#{block}", words[1:])
        for path in DOCUMENTS
        for block, words in command_lines(path)
        if words[0] == "lm_eval" and "..." not in words
    ]


def test_the_documents_hold_lm_eval_commands_to_plan():
    found = documented_lm_eval_commands()
    assert sum(name.startswith("README.md") for name, _ in found) >= 2 and len(found) >= 8


@pytest.mark.slow
def test_plan_takes_every_documented_lm_eval_command(smollm2_dir, embedded_books_dir, tiny_llama_dir, tmp_path,
                                                     monkeypatch, capsys):  # fmt: skip
    """`lm-eval-longmem plan` followed by any fenced `lm_eval` command of the documents
    (minus `lm_eval`) prints the plan, offline: hub models and the user's folders are made local first."""
    from kit import build_booksort

    from lm_eval_longmem.cli import main

    local = {
        "smollm2": str(smollm2_dir),
        "llama3": str(
            build_llama3_8b_shape(tmp_path / "llama3", smollm2_dir)
        ),  # an instruct tokenizer: a chat template
        "books": str(embedded_books_dir),
        "booksort": str(build_booksort(embedded_books_dir / "hamlet.txt", tmp_path / "bs", "250,1000")),
        "samples": json.dumps({"forgetting_curve": [0, 1], "booksort_in_context": [0, 1, 2], "babilong": [0]}),
    }
    monkeypatch.chdir(tmp_path)
    from lm_eval_longmem.plan import our_tasks

    problems = []
    for name, words in documented_lm_eval_commands():
        if not set(words[words.index("--tasks") + 1].split(",")) <= set(our_tasks()):
            continue  # another package's evaluation (CONTRIBUTING's worked example): planned by its own tests
        args = ["plan", *offline_words(words, local)]
        try:
            main(args)
        except SystemExit as exit:
            problems.append(f"{name}: `{' '.join(args)}` exited {exit.code}: {capsys.readouterr().err.strip()[-500:]}")
            continue
        out = capsys.readouterr().out
        tasks = words[words.index("--tasks") + 1].split(",")
        if not out.startswith("model: ") or not all(f"\n{t}" in out for t in tasks):
            problems.append(f"{name}: `{' '.join(args)}` printed no row of {tasks}:\n{out[-800:]}")
    assert not problems, "\n".join(problems)


def test_mistyped_tasks_and_flags_are_one_line_with_the_closest_name(llama3_dir, capsys):
    """Plan's mistakes are one line with the closest name, with the one error prefix."""
    from lm_eval_longmem.cli import main

    command = ["plan", "--model", "hf", "--model_args", f"pretrained={llama3_dir}"]
    with pytest.raises(SystemExit) as exit:
        main([*command, "--tasks", "forgeting_curve"])
    assert exit.value.code == 1 and capsys.readouterr().err.splitlines() == [
        "lm-eval-longmem: error: --tasks forgeting_curve: did you mean forgetting_curve? plan knows our tasks and "
        "groups only: " + ", ".join(sorted(plan_module.our_tasks()))
    ]
    with pytest.raises(SystemExit) as exit:
        main([*command, "--tasks", "forgetting_curve", "--batchsize", "2"])
    err = capsys.readouterr().err.splitlines()
    assert exit.value.code == 2 and len(err) == 1
    assert err[0].startswith(
        "lm-eval-longmem: error: plan: unrecognized arguments: --batchsize (did you mean --batch_size?)"
    )


def test_the_run_flags_that_change_the_cost_change_the_plan(llama3_dir):
    """--limit takes docs in the task's limit order, --batch_size N holds N sequences, --model
    vllm puts the vLLM settings first; flags that change nothing (output paths) are accepted."""
    from lm_eval_longmem.cli import build_parser
    from lm_eval_longmem.plan import RunSettings

    def planned(*flags: str) -> plan_module.Plan:
        args = build_parser().parse_args(
            ["plan", "--model_args", f"pretrained={llama3_dir}", "--tasks", "forgetting_curve", "--metadata",
             "forgetting_curve_lengths=[4k,8k,16k]", "forgetting_curve_samples=4", "--output_path", "x/", "--log_samples",
             "--gpu", "h100", *flags]
        )  # fmt: skip
        return make_plan(
            args.tasks, {**args.model_args, **args.metadata}, gpu="h100", settings=RunSettings.from_args(args)
        )

    whole = planned()
    assert [r.docs for r in whole.rows] == [4, 4, 4]
    assert [r.docs for r in planned("--limit", "5").rows] == [1, 2, 2]  # balanced: the longest cells lead each round
    cheapest = planned("--limit", "5", "--metadata", "forgetting_curve_limit_order=cheapest")
    assert [(r.cell, r.docs) for r in cheapest.rows] == [("4096", 4), ("8192", 1)]
    assert sum(r.docs for r in planned("--limit", "0.5").rows) == 6
    batched = planned("--batch_size", "4")
    weights = whole.shape.weights_bytes
    assert batched.costs(batched.rows[-1])["peak_bytes"] - weights > 3 * (
        whole.costs(whole.rows[-1])["peak_bytes"] - weights
    )
    assert whole.costs(whole.rows[0])["prefill_flops"] == batched.costs(batched.rows[0])["prefill_flops"]
    lines = plan_lines(planned("--model", "vllm"))
    total = next(i for i, line in enumerate(lines) if line.startswith("forgetting_curve: "))
    assert lines[total - 1].startswith("  vLLM on one h100") and not lines[total + 1].startswith("  vLLM")


def test_cpu_estimate_from_this_machines_measured_matmul_rate(llama3_dir):
    """`--cpu` gives hours on this CPU from its matrix-product rate, measured once per process."""
    rate = cost.cpu_flops_per_second("float32")
    assert 1e8 < rate < 1e14 and cost.cpu_flops_per_second("float32") == rate  # measured once, then cached
    plan = make_plan(
        ["forgetting_curve"], {"pretrained": str(llama3_dir), "forgetting_curve_lengths": "[4k]"}, cpu=True
    )
    row = plan.costs(plan.rows[0])
    assert plan.cpu_dtype == "float32"  # a bf16 model runs its CPU products in float32
    assert row["cpu_seconds"] == round((row["prefill_flops"] + row["decode_flops"]) / rate, 1)
    text = "\n".join(plan_lines(plan))
    assert "on this CPU;" in text and f"float32, measured now ({rate / 1e9:.0f} GFLOP/s)" in text


@pytest.mark.slow
@pytest.mark.parametrize("name", ["booksort_in_context", "babilong"])
def test_with_the_chat_template_plan_counts_the_demos_run_within_two_percent(name, smollm2_dir, embedded_books_dir,
                                                                          tmp_path):  # fmt: skip
    """With the demo's settings (its small size, SmolLM2, the chat template as the demo applies
    it), plan's input tokens are within 2% of the run's own count, the cost line's (the issue: Book-SORT 40,320
    against 47,000, BABILong 87,906 against 101,453)."""
    from lm_eval.tasks import TaskManager
    from transformers import AutoTokenizer

    from lm_eval_longmem.common.evaluations import evaluation
    from lm_eval_longmem.paths import task_configs_dir
    from lm_eval_longmem.plan import RunSettings

    part = evaluation(name.split("_")[0]).demo()
    part.build("small", embedded_books_dir, tmp_path)
    metadata = {"pretrained": str(smollm2_dir), **part.metadata("small", embedded_books_dir, tmp_path)}
    settings = RunSettings(apply_chat_template=True, fewshot_as_multiturn=True)
    planned = sum(r.input_tokens for r in make_plan([name], metadata, settings=settings).rows)

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)

    hflm_chat = hflm_chat_template(tokenizer)

    task = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata).load([name])[
        "tasks"
    ][name]
    task.build_all_requests(
        apply_chat_template=True, fewshot_as_multiturn=True, chat_template=hflm_chat, rank=0, world_size=1,
        tokenizer_name="smollm2",
    )  # fmt: skip
    run = sum(task.request_tokens(instance) for instance in task.instances)
    assert planned == pytest.approx(run, rel=0.02)


def test_a_system_instruction_adds_to_prompted_tasks_only(llama3_dir):
    """`--system_instruction` adds its tokens to every prompt the harness renders (Book-SORT's), not to the
    forgetting curve's token-id requests; `--num_fewshot` is said not to be counted."""
    from lm_eval_longmem.plan import RunSettings

    metadata = {"pretrained": str(llama3_dir), "forgetting_curve_lengths": "[4k]", "booksort_excerpt_lengths": "[250]"}
    names = ["forgetting_curve", "booksort_in_context"]
    plain = make_plan(names, metadata)
    told = make_plan(names, metadata, settings=RunSettings(system_instruction="Answer with one letter.", num_fewshot=2))
    (fc0, bs0), (fc1, bs1) = plain.rows, told.rows
    assert fc1 == fc0
    extra = bs1.sequence_tokens - bs0.sequence_tokens
    assert (
        0 < extra <= len("Answer with one letter.") + 4 and bs1.input_tokens == bs0.input_tokens + extra * bs0.requests
    )
    lines = plan_lines(told)
    assert (
        f"note: booksort_in_context: {extra} tokens per prompt from the chat template and system instruction" in lines
    )
    assert "note: --num_fewshot 2: not counted; our tasks' prompts are counted zero-shot" in lines


# --- what plan says of the model, the tasks and the data before the run would ---------------------------------------


def plan_cli(capsys, *args) -> tuple[int, str, str]:
    """`lm-eval-longmem plan ARGS` in this process: (exit status, stdout, stderr)."""
    return in_process(capsys, "plan", *args)


@pytest.fixture
def hub_at(monkeypatch, tmp_path):
    """No offline variable, an empty Hugging Face cache, and the hub at a given address (a stand-in on loopback); what
    the probe's `go_offline` changes is restored afterwards."""
    import datasets.config
    from huggingface_hub import constants

    from lm_eval_longmem.common import hub

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(hub, "_unreachable", "")
    return lambda url: monkeypatch.setattr(constants, "ENDPOINT", url)


def test_a_hub_model_with_the_hub_unreachable_is_one_probe_and_the_true_reason(hub_at, capsys):
    """`plan` with a hub model id and no network retried for 80 s, then said "pass --model_args pretrained=NAME"
    (it was passed): one short probe, no retry, and the line says what is wrong."""
    from kit import FakeHub

    with FakeHub("close") as fake:
        hub_at(fake.url)
        status, out, err = plan_cli(
            capsys, "--tasks", "forgetting_curve", "--model_args", "pretrained=some-org/some-model"
        )
    assert fake.connections == 1 and (status, out) == (1, "")
    assert err.splitlines()[-1] == (
        f"lm-eval-longmem: error: --model_args pretrained=some-org/some-model: not in the local Hugging Face cache, and "
        f"the hub at {fake.url} is unreachable; download it once online (`hf download some-org/some-model`), or pass a "
        "model folder (e.g. $(lm-eval-longmem embedded model), the embedded SmolLM2-135M-Instruct)"
    )


def test_a_gated_hub_model_is_named_as_the_hub_answered(hub_at, capsys):
    from kit import FakeHub

    with FakeHub(401) as fake:
        hub_at(fake.url)
        status, _, err = plan_cli(capsys, "--tasks", "forgetting_curve", "--model_args", "pretrained=some-org/gated")
    assert status == 1 and fake.connections == 1
    assert err.splitlines() == [
        f"lm-eval-longmem: error: --model_args pretrained=some-org/gated: the hub at {fake.url} answered HTTP 401 for "
        "its config.json: check the name; for a gated or private model, accept its terms on the hub and log in "
        "(`hf auth login`)"
    ]


def test_a_model_folder_that_is_not_there_or_has_no_config_is_said_so(tmp_path, capsys):
    missing = tmp_path / "no-such-model"
    status, _, err = plan_cli(capsys, "--tasks", "forgetting_curve", "--model_args", f"pretrained={missing}")
    assert status == 1 and err.splitlines() == [
        f"lm-eval-longmem: error: --model_args pretrained={missing}: no such folder; pass a model folder (e.g. "
        "$(lm-eval-longmem embedded model), the embedded SmolLM2-135M-Instruct) or a hub id"
    ]
    missing.mkdir()
    status, _, err = plan_cli(capsys, "--tasks", "forgetting_curve", "--model_args", f"pretrained={missing}")
    assert status == 1 and err == (
        f"lm-eval-longmem: error: --model_args pretrained={missing}: no config.json in {missing}; plan reads the "
        "model's config.json (a folder holding only it and the tokenizer's files will do)\n"
    )


@pytest.mark.parametrize("tasks", ["", " , "])
def test_tasks_that_name_nothing_are_an_error(tasks, llama3_dir, capsys):
    """`plan --tasks ""` exited 0 with an empty plan."""
    status, out, err = plan_cli(capsys, "--tasks", tasks, "--model_args", f"pretrained={llama3_dir}")
    assert (status, out) == (1, "")
    assert err == (
        "lm-eval-longmem: error: --tasks names no task: plan needs the run's tasks, e.g. --tasks "
        "forgetting_curve,booksort,babilong\n"
    )


def test_a_length_the_corpus_cannot_fill_is_planned_as_the_runs_refusal(tiny_llama_dir, tmp_path, capsys):
    """A length the corpus cannot fill was planned as a normal row, and the run then refused it."""
    book = tmp_path / "book.txt"
    book.write_text("Some words of a short book. " * 143, encoding="utf-8")  # 4,004 bytes: ~1,001 tokens
    status, out, _ = plan_cli(
        capsys, "--tasks", "forgetting_curve", "--model_args", f"pretrained={tiny_llama_dir}", "--metadata",
        f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[128,512,1024]", "forgetting_curve_samples=2",
    )  # fmt: skip
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith("forgetting_curve ")}
    assert status == 0 and rows["128"][2] == "2" and rows["512"][2] == "2" and rows["1024"][2] == "0"
    assert (
        f"warning: forgetting_curve 1024: the run refuses it (forgetting_curve_corpus={book} holds ~1,001 tokens "
        "(estimated from its size), fewer than the 2,048 this cell needs) and stops"
    ) in out.splitlines()
    assert (
        f"note: forgetting_curve 512: forgetting_curve_corpus={book} holds ~1,001 tokens (estimated from its size), "
        "about the 1,024 this cell needs: the run may refuse it"
    ) in out.splitlines()
    assert "forgetting_curve: 4 docs, 8 requests" in out


def test_a_window_past_the_trained_one_is_a_warning_and_tasks_add_up_to_a_total(tiny_llama_dir, capsys):
    """`max_length=131072` on a model whose config says 8,192 was planned as "fits" without a word; several tasks
    had no grand total; the gated `memari/booksort` was not said to need accepted access."""
    status, out, _ = plan_cli(
        capsys, "--tasks", "forgetting_curve,booksort_in_context", "--model_args",
        f"pretrained={tiny_llama_dir},max_length=32768", "--metadata", "forgetting_curve_lengths=[1k,2k]",
        "forgetting_curve_samples=2", "booksort_excerpt_lengths=[250]", "booksort_books=[69087]",
    )  # fmt: skip
    lines = out.splitlines()
    assert status == 0 and lines[2] == (
        "warning: the max_length model argument sets the window to 32,768 tokens, 16x the 2,048 the model's config says "
        "it was trained for: positions past that were never trained, so what runs there measures extrapolation"
    )
    totals = [line for line in lines if re.match(r"(forgetting_curve|booksort_in_context): [\d,]+ docs", line)]
    docs = [int(re.search(r": ([\d,]+) docs", line)[1].replace(",", "")) for line in totals]
    requests = [int(re.search(r", ([\d,]+) requests", line)[1].replace(",", "")) for line in totals]
    assert len(totals) == 2 and lines.count(next(line for line in lines if line.startswith("total: "))) == 1
    assert next(line for line in lines if line.startswith("total: ")).startswith(
        f"total: 2 tasks, {sum(docs):,} docs, {sum(requests):,} requests, "
    )
    assert (
        "note: booksort_in_context: memari/booksort is gated: before the run, accept its terms at "
        "https://huggingface.co/datasets/memari/booksort and log in (`hf auth login` or HF_TOKEN), or build the trials "
        "locally (`lm-eval-longmem booksort build`, then --metadata booksort_data=DIR)"
    ) in lines

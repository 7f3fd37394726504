"""`lm-eval-longmem demo`: one real lm_eval run on the embedded books, then figures and report."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import subprocess
import sys

import pytest
from kit import read_results, read_samples, run_lm_eval

from lm_eval_longmem.commands.demo import SIZES, demo_parts, demo_tasks, harness_metadata, run_harness
from lm_eval_longmem.common.evaluations import evaluation, names

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")
RUNNABLE_TASKS = ",".join(names())


def run_demo_cli(args, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([CLI, "demo", *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1200)


def test_every_evaluation_has_a_demo_part_and_only_booksort_a_step_of_its_own(tmp_path):
    assert demo_tasks() == names()
    parts = demo_parts(names())
    assert parts == [evaluation(name).demo() for name in names()]
    assert [name for name, part in zip(names(), parts) if part.step("small")] == ["booksort"]
    assert [name for name, part in zip(names(), parts) if part.target] == ["booksort"]
    for size in SIZES:  # each part's keys, under its own prefix, and only the parts asked for
        metadata = harness_metadata(names(), size, tmp_path / "books", tmp_path)
        assert {key.split("_")[0] for key in metadata} <= {name.split("_")[0] for name in names()}
    assert set(harness_metadata(("booksort",), "tiny", tmp_path, tmp_path)) == {"booksort_data"}


@pytest.mark.slow
def test_the_demo_writes_what_lm_eval_writes(tiny_llama_dir, embedded_books_dir, tmp_path, monkeypatch):
    """The demo calls the harness through its Python API; its files are those of `lm_eval ... --log_samples`."""
    import lm_eval.utils

    lm_eval_logger = logging.getLogger("lm_eval")  # the demo sets up lm_eval's logging as its CLI does: undo it after
    for name in ("propagate", "handlers", "level"):
        monkeypatch.setattr(lm_eval_logger, name, copy.copy(getattr(lm_eval_logger, name)))
    monkeypatch.setattr(lm_eval.utils, "_LOGGING_CONFIGURED", lm_eval.utils._LOGGING_CONFIGURED)
    model_args = {"pretrained": str(tiny_llama_dir), "dtype": "float32"}
    metadata = {"forgetting_curve_corpus": str(embedded_books_dir / "macbeth.txt"), "forgetting_curve_lengths": [16, 32],
                "forgetting_curve_samples": 1}  # fmt: skip
    results_file = run_harness(model="hf", model_args=model_args, tasks=("forgetting_curve",), metadata=metadata,
                               output=tmp_path / "api", device="cpu", batch_size="1")  # fmt: skip
    (tmp_path / "cli").mkdir()
    run_lm_eval(["--model", "hf", "--model_args", json.dumps(model_args), "--tasks", "forgetting_curve", "--device", "cpu",
                 "--batch_size", "1", "--metadata", json.dumps(metadata), "--log_samples"], tmp_path / "cli")  # fmt: skip

    def layout(root):  # every file, its date stamp left out
        return sorted(str(p.relative_to(root).parent / p.name.rsplit("_", 1)[0]) for p in root.rglob("*.json*"))

    assert (
        layout(tmp_path / "api")
        == layout(tmp_path / "cli")
        == [f"{results_file.parent.name}/results", f"{results_file.parent.name}/samples_forgetting_curve"]
    )
    api, cli = read_results(tmp_path / "api"), read_results(tmp_path / "cli")
    assert set(api) == set(cli)
    for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
        assert api[key] == cli[key], key
    assert api["config"]["model_args"] == cli["config"]["model_args"] == model_args
    assert read_samples(tmp_path / "api", "forgetting_curve") == read_samples(tmp_path / "cli", "forgetting_curve")


@pytest.mark.slow
def test_books_too_short_for_booksort_are_one_clear_error(tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    (books / "note.txt").write_text("A short note of a few words. It ends here.\n")
    proc = run_demo_cli(["--output_path", str(tmp_path / "out"), "--corpus", str(books), "--model_args", "pretrained=unused",
                         "--tasks", "booksort"], tmp_path)  # fmt: skip
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("lm-eval-longmem: error: no Book-SORT trial can be built") and "note (10 words)" in last
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_unknown_task_is_refused_before_anything_runs(tmp_path):
    proc = run_demo_cli(
        ["--output_path", str(tmp_path / "out"), "--tasks", "booksort,bbabilong", "--model_args", "pretrained=x"],
        tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "lm-eval-longmem: error: --tasks bbabilong: the demo has no such part; did you mean babilong? "
        f"(choose among {','.join(names())})"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_demo_end_to_end_on_a_tiny_model(tiny_llama_dir, embedded_books_dir, tmp_path):
    out = tmp_path / "demo"
    proc = run_demo_cli(["--output_path", str(out), "--size", "tiny", "--tasks", RUNNABLE_TASKS, "--device", "cpu",
                         "--model_args", f"pretrained={tiny_llama_dir},dtype=float32"], tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    steps = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert steps == ["[1/5] model", "[2/5] books", "[3/5] Book-SORT data from 1 book(s), excerpts of 250 words",
                     "[4/5] lm_eval: forgetting_curve, booksort, babilong on cpu, without a chat template (progress bars below)",
                     "[5/5] figures and report"]  # fmt: skip
    results = read_results(out / "results")["results"]
    assert {"copy_acc@16,none", "lm_acc@32,none", "fine_memory_length,none"} <= set(results["forgetting_curve"])
    assert 0.0 <= results["booksort_in_context"]["acc@LE250,none"] <= 1.0
    assert 0.0 <= results["babilong"]["acc,none"] <= 1.0 and "acc@qa1_0,none" in results["babilong"]
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    assert "| model | acc | answered A |" in (out / "report.md").read_text()  # Book-SORT's answer bias beside accuracy
    assert {"forgetting_curve_overlay.png", "booksort.png"} <= {p.name for p in (out / "figures").iterdir()}
    assert any(p.name.startswith("babilong") for p in (out / "figures").iterdir())
    assert f"report:  {out / 'report.html'}" in proc.stdout
    fc, booksort, babilong = proc.stdout.splitlines()[-3:]  # the headline, one sentence per evaluation, with its n
    assert (
        fc.startswith(f"{tiny_llama_dir.name} copies ") and "-32-token passage" in fc and "2 samples per length" in fc
    )
    assert babilong.startswith("BABILong qa1: ") and "of 2 questions" in babilong and "at 0k" in babilong
    assert (
        booksort.startswith("Book-SORT (which of two segments came first; chance 50%): ") and " of 8 trials" in booksort
    )


INTERRUPT_AFTER = """
import lm_eval.api.model

_add_partial, _stored = lm_eval.api.model.CacheHook.add_partial, []


def add_partial(self, attr, req, res):  # Ctrl-C right after the run's {n}th answer is stored
    _add_partial(self, attr, req, res)
    _stored.append(attr)
    if len(_stored) == {n}:
        raise KeyboardInterrupt


lm_eval.api.model.CacheHook.add_partial = add_partial
"""


@pytest.mark.slow
def test_an_interrupted_demo_resumes_from_what_it_kept(tiny_llama_dir, tmp_path):
    """`lm-eval-longmem demo` interrupted and run again said `--output_path demo/booksort_data exists` (an inner
    folder), and nothing resumed. Here a tiny demo is interrupted (Ctrl-C, as a `sitecustomize` raises it) after 10
    answers; the same command again keeps the build and those answers, scores the rest, and gives the results an
    uninterrupted demo gives."""
    command = ["--size", "tiny", "--device", "cpu", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32"]
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(INTERRUPT_AFTER.replace("{n}", "10"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = tmp_path / "demo"
    stopped = subprocess.run([CLI, "demo", "--output_path", str(out), *command], capture_output=True, text=True,
                             cwd=tmp_path, env={**env, "PYTHONPATH": str(hook)}, timeout=1200)  # fmt: skip
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    assert stopped.stderr.splitlines()[-1] == "lm-eval-longmem: error: interrupted"
    assert (
        f"interrupted: the answers scored so far are kept in {out / 'request_cache'}; run the same command"
        in stopped.stdout
    )
    assert not list(out.glob("results/*/results_*.json")) and not (out / "report.html").exists()

    resumed = run_demo_cli(["--output_path", str(out), *command], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"done in 0 s: kept {out / 'booksort_data'}: an earlier demo built it with these settings" in resumed.stdout
    assert (
        f"resuming: answers an earlier demo scored with this model are read from {out / 'request_cache'}"
        in resumed.stdout
    )
    cached = re.search(r"loglikelihood_accuracy: (\d+) cached responses, (\d+) to compute", resumed.stderr)
    assert cached and 0 < int(cached[1]) <= 10 and int(cached[2]) > 0, resumed.stderr[-3000:]

    fresh = run_demo_cli(["--output_path", str(tmp_path / "fresh"), *command], tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert read_results(out / "results")["results"] == read_results(tmp_path / "fresh" / "results")["results"]


@pytest.mark.slow
def test_a_demo_folder_built_with_other_settings_is_named_with_the_demos_output_path(tiny_llama_dir, tmp_path):
    out = tmp_path / "demo"
    (out / "booksort_data").mkdir(parents=True)
    (out / "booksort_data" / "manifest.json").write_text('{"builder_version": 0}')
    proc = run_demo_cli(["--output_path", str(out), "--size", "tiny", "--model_args", f"pretrained={tiny_llama_dir}"],
                        tmp_path)  # fmt: skip
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        f"lm-eval-longmem: error: --output_path {out}: {out / 'booksort_data'} holds data an earlier demo built with "
        "other settings (--size, --corpus) or a damaged copy: pass --overwrite to build it again, or choose another "
        "--output_path"
    ]


@pytest.mark.slow
def test_demo_on_the_embedded_smollm2(smollm2_dir, embedded_books_dir, tmp_path):
    out = tmp_path / "demo"
    proc = run_demo_cli(
        ["--output_path", str(out), "--size", "tiny", "--tasks", RUNNABLE_TASKS, "--device", "cpu"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"pretrained={smollm2_dir}" in proc.stdout
    assert "on cpu, with the model's chat template (progress bars below)" in proc.stdout  # an instruct model
    assert "appears to be an instruct or chat variant but chat template is not applied" not in proc.stderr
    fc = read_results(out / "results")["results"]["forgetting_curve"]
    assert fc["copy_acc@32,none"] > fc["lm_acc@32,none"]  # SmolLM2 copies a repeated passage of Shakespeare
    md = (out / "report.md").read_text()
    assert "| SmolLM2-135M-Instruct |" in md
    share = read_results(out / "results")["results"]["booksort_in_context"]["pct_A,none"]
    assert "| model | acc | answered A |" in md
    assert ("**Answer bias: SmolLM2-135M-Instruct answers" in md) == (
        share in (0.0, 1.0)
    )  # the demo's model: "A" on every trial


def _results_file(tmp_path, booksort_extra=None):
    """A results file as the demo's run writes it, with round numbers (two lengths, two BABILong cells, Book-SORT)."""
    fc = {"alias": "forgetting_curve", "fine_memory_length,none": 0, "fine_memory_censored,none": 0,
          "coarse_memory_length,none": 512, "coarse_memory_censored,none": 1}  # fmt: skip
    for L, cp, lm in ((256, 0.97, 0.35), (512, 0.96, 0.37)):
        fc |= {f"copy_acc@{L},none": cp, f"copy_acc@{L}_ci_low,none": cp - 0.01, f"copy_acc@{L}_ci_high,none": cp + 0.01,
               f"lm_acc@{L},none": lm, f"lm_acc@{L}_ci_low,none": lm - 0.04, f"lm_acc@{L}_ci_high,none": lm + 0.045}  # fmt: skip
    babilong = {"alias": "babilong", "acc,none": 0.4, "acc_ci_low,none": 0.33, "acc_ci_high,none": 0.48}
    for cell, value in (("0", 0.5), ("1024", 0.3)):
        babilong |= {f"acc@{cell},none": value, f"acc@{cell}_ci_low,none": value - 0.1, f"acc@{cell}_ci_high,none": value + 0.1,
                     f"acc@qa1_{cell},none": value, f"acc@qa1_{cell}_ci_low,none": 0.1, f"acc@qa1_{cell}_ci_high,none": 0.9}  # fmt: skip
    booksort = {"alias": "booksort_in_context", "acc,none": 0.59375, "acc_ci_low,none": 0.4712, "acc_ci_high,none": 0.7058,
                "acc@LE250,none": 0.59375, "pct_A,none": 0.75, **(booksort_extra or {})}  # fmt: skip
    data = {
        "results": {
            "forgetting_curve": fc,
            "babilong": babilong,
            "booksort": {"alias": "booksort", "acc,none": 0.59375},
            "booksort_in_context": booksort,
        },  # fmt: skip
        "group_subtasks": {"booksort": ["booksort_in_context"]},
        "configs": {
            "forgetting_curve": {"longmem": {"docs_per_cell": {"256": 16, "512": 16}}},
            "babilong": {"longmem": {"docs_per_cell": {"qa1_0": 15, "qa1_1024": 15}}},
        },  # fmt: skip
        "n-samples": {"booksort_in_context": {"original": 64, "effective": 64}},
        "config": {"model": "hf", "model_args": "pretrained=/models/SmolLM2-135M-Instruct"},
    }
    path = tmp_path / "results_2026-01-01T00-00-00.000001.json"
    path.write_text(json.dumps(data))
    return path


def test_the_headline_is_sentences_with_intervals_and_their_n(tmp_path):
    from lm_eval_longmem.commands.demo import headline_sentences
    from lm_eval_longmem.readers.results import load_run

    fc, booksort, babilong = headline_sentences(load_run(_results_file(tmp_path)))
    assert fc == (
        "SmolLM2-135M-Instruct copies 96.0-97.0% of the tokens of a 256-512-token passage it has just read, against "
        "35.0-37.0% when the passage follows unrelated text (LM baseline); every 95% interval within 4.5 points of its "
        "estimate, 16 samples per length. Memory lengths: fine below the shortest length tested (256 tokens) "
        "(copy > 99%), coarse >512 tokens (copy beats LM by > 1 point)."
    )
    assert babilong == (
        "BABILong qa1: 40.0% [33.0, 48.0] of 30 questions answered right (50.0% [40.0, 60.0] at 0k; 30.0% [20.0, 40.0] "
        "at 1k; 15 questions per task and length, authors' answer check)."
    )
    assert (
        booksort
        == 'Book-SORT (which of two segments came first; chance 50%): 59.4% [47.1, 70.6] of 64 trials, answering "A" on 75% of them.'
    )


def test_the_booksort_headline_is_the_bias_corrected_accuracy_when_the_run_has_it(tmp_path):
    from lm_eval_longmem.commands.demo import headline_sentences
    from lm_eval_longmem.readers.results import load_run

    extra = {"acc_calibrated,none": 0.625, "acc_calibrated_ci_low,none": 0.5, "acc_calibrated_ci_high,none": 0.74}
    booksort = headline_sentences(load_run(_results_file(tmp_path, extra)))[1]
    assert booksort == (
        "Book-SORT (which of two segments came first; chance 50%): 62.5% [50.0, 74.0] with the answer bias corrected "
        '(59.4% [47.1, 70.6] as answered, "A" on 75% of 64 trials).'
    )


def test_the_chat_template_is_applied_when_the_tokenizer_has_one(tiny_llama_dir, tmp_path):
    import shutil

    from lm_eval_longmem.commands.demo import has_chat_template

    assert not has_chat_template({"pretrained": str(tiny_llama_dir)})
    chat = shutil.copytree(tiny_llama_dir, tmp_path / "tiny-chat")
    config = json.loads((chat / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (chat / "tokenizer_config.json").write_text(json.dumps(config))
    assert has_chat_template({"pretrained": str(chat)})
    assert not has_chat_template({"pretrained": str(tmp_path / "no-such-model")})  # the harness's check reports it


def _fc_results_file(tmp_path, rows, n=16):
    """A results file of the forgetting curve alone: rows of (length, copy, lm, half-width or None for n=1)."""
    fc = {"alias": "forgetting_curve"}
    for L, cp, lm, half in rows:
        fc |= {f"copy_acc@{L},none": cp, f"lm_acc@{L},none": lm}
        if half is not None:  # an asymmetric interval, as Wilson's: the upper end the farther
            fc |= {f"copy_acc@{L}_ci_low,none": cp - half / 2, f"copy_acc@{L}_ci_high,none": min(1.0, cp + half),
                   f"lm_acc@{L}_ci_low,none": lm - half / 2, f"lm_acc@{L}_ci_high,none": lm + half}  # fmt: skip
    data = {
        "results": {"forgetting_curve": fc},
        "configs": {"forgetting_curve": {"longmem": {"docs_per_cell": {str(L): n for L, *_ in rows}}}},
        "config": {"model": "hf", "model_args": "pretrained=/models/M"},
    }
    path = tmp_path / "results_2026-01-01T00-00-00.000001.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("rows", "n", "words"),
    [
        # all below the threshold: no "fine 0 tokens", the shortest length tested instead
        ([(128, 0.985, 0.3, 0.02), (256, 0.97, 0.3, 0.02)], 16,
         ["fine below the shortest length tested (128 tokens)", "coarse >256 tokens", "within 2.0 points"]),
        # censored: the sweep stopped, not the memory
        ([(128, 0.995, 0.3, 0.004), (256, 0.996, 0.3, 0.004)], 16, ["fine >256 tokens", "coarse >256 tokens"]),
        # a memory length inside the sweep
        ([(128, 0.995, 0.3, 0.004), (256, 0.9, 0.3, 0.03), (512, 0.2, 0.3, 0.03)], 16,
         ["fine 128 tokens", "coarse 256 tokens", "128-512-token passage", "within 3.0 points"]),
        # one length
        ([(64, 0.5, 0.3, 0.05)], 16, ["of a 64-token passage", "fine below the shortest length tested (64 tokens)"]),
        # one sample per length: no interval to bound anything
        ([(64, 0.5, 0.3, None), (128, 0.4, 0.3, None)], 1, ["no 95% intervals (one sample per length), 1 samples"]),
    ],
    ids=["all-below", "censored", "inside", "one-length", "one-sample"],
)  # fmt: skip
def test_the_forgetting_curve_sentence_says_no_more_than_the_numbers(rows, n, words, tmp_path):
    """The sentence's words are generated from the numbers, for each edge case; the interval
    bound it names holds for both ends of every interval (not a half-width)."""
    from lm_eval_longmem.commands.demo import headline_sentences
    from lm_eval_longmem.readers.results import load_run

    (sentence,) = headline_sentences(load_run(_fc_results_file(tmp_path, rows, n)), ("forgetting_curve",))
    for needle in words:
        assert needle in sentence, (needle, sentence)
    assert " 0 tokens" not in sentence and "[" not in sentence
    if "within " in sentence:
        bound = float(sentence.split("within ")[1].split(" points")[0]) / 100
        ends = [abs(end - value) for _, cp, lm, half in rows for value in (cp, lm)
                for end in (value - half / 2, min(1.0, value + half) if value == cp else value + half)]  # fmt: skip
        assert max(ends) <= bound + 1e-12 and bound - max(ends) < 0.001


def test_demo_help_names_every_default(capsys):
    """`demo --help` did not name its default size."""
    from lm_eval_longmem import cli

    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "or tiny (tests) (default: small)" in text
    assert text.count("(default") >= 9  # output folder, model, model args, corpus, tasks, size, device, batch, template


def test_the_babilong_sentence_names_the_tasks_that_ran_and_no_interval_it_lacks(tmp_path):
    """ "qa1-qa5" only when every task between ran; a mean without an interval says so."""
    from lm_eval_longmem.commands.demo import headline_sentences
    from lm_eval_longmem.readers.results import load_run

    path = _results_file(tmp_path)
    data = json.loads(path.read_text())
    row = data["results"]["babilong"]
    row |= {"acc@qa5_0,none": 0.2, "acc@qa5_0_ci_low,none": 0.1, "acc@qa5_0_ci_high,none": 0.4}
    row |= {"acc_ci_low,none": None, "acc_ci_high,none": None}
    path.write_text(json.dumps(data))
    (babilong,) = headline_sentences(load_run(path), ("babilong",))
    assert babilong.startswith("BABILong qa1, qa5: 40.0% (no interval) of 30 questions"), babilong

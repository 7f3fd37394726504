"""`lm-eval-longmem booksort finetune` (`booksort/rim/finetune_commands.py`): resumable training, evaluation
through the harness, the summary (`finetune_reader.py`), its figure (`finetune_figures.py`) and the report's section.

The plumbing runs on the tiny random model (character tokenizer, no chat template) over one short
play; one `slow` test runs the real SmolLM2 with its chat template.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lm_eval_longmem.booksort.build import BuildSpec, build, load_books, write_dataset
from lm_eval_longmem.booksort.rim import finetune_commands as command
from lm_eval_longmem.booksort.rim import finetune_reader as reader
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.readers.results import load_run


def test_command_without_peft_stops_with_one_line_before_any_work(monkeypatch, capsys, tmp_path):
    from lm_eval_longmem.cli import main

    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(SystemExit) as exit_:
        main(["booksort", "finetune", "--model_args", "pretrained=any/model", "--metadata", "booksort_data=anything",
              "--output_path", str(tmp_path / "out")])  # fmt: skip
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_.value.code == 1 and len(lines) == 1
    assert 'pip install "lm-eval-longmem[finetune]"' in lines[0]
    assert not (tmp_path / "out").exists()


# --- the whole command on the tiny model -----------------------------------------------------------------


@pytest.fixture(scope="module")
def one_play(book_files, tmp_path_factory) -> Path:
    """One short play (The Comedy of Errors), 250-word excerpts and 20-word segments: 400 test trials."""
    books = load_books([book_files[2]])
    spec = BuildSpec(excerpt_lengths=(250,), segment_lengths=(20,))
    return write_dataset(books, build(books, spec), spec, tmp_path_factory.mktemp("one_play") / "data")


def tiny_metadata(data: Path, **extra) -> dict:
    return {
        "booksort_data": str(data),
        "booksort_distance_bins": "[0,3]",
        "booksort_finetune_epochs": 2,
        "booksort_finetune_chunk_words": 60,
        "booksort_finetune_chunks": 6,
        "booksort_finetune_instruction_samples": 6,
        "booksort_finetune_batch_size": 4,
        "booksort_finetune_learning_rate": 3e-3,
        **extra,
    }


def _run(model, data, out, said, **extra):
    return command.run_finetune(
        {"pretrained": str(model), "dtype": "float32"},
        tiny_metadata(data, **extra),
        out,
        device="cpu",
        limit=12,
        say=said.append,
    )


@pytest.fixture(scope="module")
def first_run(tiny_llama_dir, one_play, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft")
    said: list[str] = []
    return out, _run(tiny_llama_dir, one_play, out, said), said


@pytest.mark.slow
def test_every_checkpoint_of_both_arms_is_evaluated_through_the_harness(first_run):
    out, summary, said = first_run
    assert [(r["arm"], r["epoch"]) for r in summary["rows"]] == [
        ("base", 0),
        ("book", 1),
        ("control", 1),
        ("book", 2),
        ("control", 2),
    ]
    for row in summary["rows"]:
        run = load_run(out / row["results"])  # an ordinary lm_eval results file, named relative to the output folder
        assert reader.summary_of(run.path) == out / reader.SUMMARY
        assert run.n_samples(reader.TASK) == row["trials"] == 12
        assert 0.0 <= row["acc_ci_low"] <= row["acc"] <= row["acc_ci_high"] <= 1.0
        peft = run.model_args.get("peft")
        assert (
            (peft is None) if row["arm"] == "base" else peft.endswith(f"checkpoints/{row['arm']}/epoch-{row['epoch']}")
        )
        assert run.condition(reader.TASK) == ("memory-less" if row["arm"] == "base" else "fine-tuned")
    assert [t["epoch"] for t in summary["epoch_matched"]] == [1, 2]
    assert all(t["pairs"] == 12 and 0.0 <= t["p_value"] <= 1.0 for t in summary["epoch_matched"])
    assert summary["data"]["book_chunks"] == 6 and summary["data"]["instructions"] == 6
    assert json.loads((out / reader.SUMMARY).read_text()) == json.loads(json.dumps(summary))
    assert "| 2 |" in (out / "booksort_finetune.md").read_text()
    assert sum("trained in" in line for line in said) == 4


@pytest.mark.slow
def test_only_the_book_arm_learns_the_book_text(first_run):
    """The memory arm's loss on the chunks falls below the control arm's, which never saw them."""
    _, summary, _ = first_run
    loss = {(r["arm"], r["epoch"]): r["book_chunk_loss"] for r in summary["rows"]}
    assert loss[("book", 2)] < loss[("book", 1)] < loss[("base", 0)]
    assert loss[("book", 2)] < loss[("control", 2)] - 0.05


@pytest.mark.slow
def test_a_rerun_retrains_nothing_and_reuses_every_evaluation(first_run, tiny_llama_dir, one_play):
    out, summary, _ = first_run
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and "checkpoints" in p.parts}
    said: list[str] = []
    again = _run(tiny_llama_dir, one_play, out, said)
    assert not any("trained in" in line or line.startswith("evaluated") for line in said), said
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert [r["results"] for r in again["rows"]] == [r["results"] for r in summary["rows"]]


@pytest.mark.slow
def test_a_damaged_checkpoint_is_retrained_to_the_same_weights_and_half_written_ones_are_dropped(
    first_run, tiny_llama_dir, one_play
):
    """Resuming from epoch 1 gives the epoch-2 weights the uninterrupted run wrote."""
    from safetensors.torch import load, load_file

    out, _, _ = first_run
    epoch2 = out / "checkpoints" / "control" / "epoch-2"
    weights = epoch2 / "adapter_model.safetensors"
    before = load(weights.read_bytes())  # a copy: load_file maps the file, which is cut below
    weights.write_bytes(weights.read_bytes()[:-7])  # a cut-off copy
    partial = out / "checkpoints" / "book" / ".epoch-3.x1.tmp"  # what a killed `atomic_write` leaves
    partial.mkdir()
    said: list[str] = []
    _run(tiny_llama_dir, one_play, out, said)
    assert [line.split(" in ")[0] for line in said if "trained in" in line] == ["control arm: epoch 2/2 trained"]
    after = load_file(weights)
    assert before.keys() == after.keys()
    assert all(torch_allclose(before[k], after[k]) for k in before)
    assert not partial.exists()
    evaluated = [line for line in said if line.startswith("evaluated")]
    # identical bytes keep the digest and so the evaluation; otherwise only the retrained checkpoint is evaluated again
    assert len(evaluated) <= 1 and all(line.startswith(f"evaluated {epoch2} ") for line in evaluated)


def torch_allclose(a, b) -> bool:
    import torch

    return bool(torch.allclose(a, b, rtol=0.0, atol=1e-6))


@pytest.mark.slow
def test_more_epochs_continue_from_the_last_checkpoint(first_run, tiny_llama_dir, one_play):
    out, _, _ = first_run
    said: list[str] = []
    summary = _run(tiny_llama_dir, one_play, out, said, booksort_finetune_epochs=3)
    assert [line.split(" in ")[0] for line in said if "trained in" in line] == [
        "book arm: epoch 3/3 trained",
        "control arm: epoch 3/3 trained",
    ]
    assert [t["epoch"] for t in summary["epoch_matched"]] == [1, 2, 3]


@pytest.mark.slow
def test_other_settings_in_the_same_folder_are_refused(first_run, tiny_llama_dir, one_play):
    out, _, _ = first_run
    with pytest.raises(UsageError, match="trained with other settings"):
        _run(tiny_llama_dir, one_play, out, [], booksort_finetune_lora_rank=4)


@pytest.mark.slow
def test_a_base_model_changed_in_place_is_refused_and_retrained_with_overwrite(tiny_llama_dir, one_play, tmp_path):
    """The base model folder overwritten with other weights, the same command again said
    "verified, not retrained" for both arms and kept every evaluation of the old model."""
    import shutil

    from kit import build_tiny_llama

    model = shutil.copytree(tiny_llama_dir, tmp_path / "model")
    out = tmp_path / "ft"
    first = _run(model, one_play, out, [], booksort_finetune_epochs=1)
    other = build_tiny_llama(tmp_path / "other", seed=1)
    shutil.copyfile(other / "model.safetensors", model / "model.safetensors")  # same name and size, other weights
    with pytest.raises(
        UsageError,
        match=r"epoch-1 was trained with other settings, base model \(its files changed\) or data .*pass --overwrite",
    ):
        _run(model, one_play, out, [], booksort_finetune_epochs=1)
    said: list[str] = []
    again = command.run_finetune(
        {"pretrained": str(model), "dtype": "float32"}, tiny_metadata(one_play, booksort_finetune_epochs=1), out,
        device="cpu", limit=12, say=said.append, overwrite=True,
    )  # fmt: skip
    assert [line.split(" in ")[0] for line in said if "trained in" in line] == [
        "book arm: epoch 1/1 trained",
        "control arm: epoch 1/1 trained",
    ]
    assert any(line.startswith("evaluated the base model") for line in said)  # epoch 0 is the new model too
    loss = lambda summary: [r["book_chunk_loss"] for r in summary["rows"] if r["arm"] == "base"]  # noqa: E731
    assert loss(again) != loss(first)


@pytest.mark.slow
def test_full_fine_tuning_evaluates_the_saved_model(tiny_llama_dir, one_play, tmp_path):
    said: list[str] = []
    summary = _run(
        tiny_llama_dir, one_play, tmp_path, said, booksort_finetune_method="full", booksort_finetune_epochs=1
    )
    book = next(r for r in summary["rows"] if r["arm"] == "book")
    run = load_run(tmp_path / book["results"])
    assert run.model_args["pretrained"].endswith("checkpoints/book/epoch-1") and "peft" not in run.model_args
    assert run.condition(reader.TASK) == "fine-tuned"  # a fully fine-tuned checkpoint is the model itself
    assert (tmp_path / "checkpoints" / "book" / "epoch-1" / "tokenizer_config.json").is_file()


# --- the real model ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_one_play_end_to_end(smollm2_dir, one_play, tmp_path):
    """SmolLM2-135M-Instruct with its chat template: both arms, one epoch, through the command line's function."""
    summary = command.run_finetune(
        {"pretrained": str(smollm2_dir), "dtype": "float32"},
        {"booksort_data": str(one_play), "booksort_finetune_epochs": 1, "booksort_finetune_chunk_words": 60,
         "booksort_finetune_chunks": 4, "booksort_finetune_instruction_samples": 4, "booksort_finetune_batch_size": 4},
        tmp_path, device="cpu", limit=8, apply_chat_template=True, say=lambda line: None,
    )  # fmt: skip
    loss = {(r["arm"], r["epoch"]): r["book_chunk_loss"] for r in summary["rows"]}
    assert loss[("book", 1)] < loss[("base", 0)]  # it has begun to learn the text
    assert loss[("book", 1)] < loss[("control", 1)]
    assert all(r["trials"] == 8 for r in summary["rows"])
    test = summary["epoch_matched"][0]
    assert test["pairs"] == 8 and 0.0 <= test["p_value"] <= 1.0


# --- the summary as the report reads it ---------------------------------------------------------------------


@pytest.mark.slow
def test_summary_reader_names_a_damaged_file(first_run, tmp_path):
    out, _, _ = first_run
    assert reader.read_summary(out / reader.SUMMARY) == json.loads((out / reader.SUMMARY).read_text())
    bad = tmp_path / reader.SUMMARY
    bad.write_text('{"model": "m", "rows": [{"arm": "book"}], "epoch_matched": []}')
    with pytest.raises(UsageError, match="not a summary of `lm-eval-longmem booksort finetune`"):
        reader.read_summary(bad)
    other = tmp_path / "copy" / "elsewhere" / "results_x.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    (tmp_path / "copy" / reader.SUMMARY).write_text((out / reader.SUMMARY).read_text())
    assert reader.summary_of(other) is None  # a summary above it that does not name it


@pytest.mark.slow
def test_figure_draws_both_arms_by_epoch(first_run):
    from lm_eval_longmem.booksort.rim.finetune_figures import figure

    out, _, _ = first_run
    summary = reader.read_summary(out / reader.SUMMARY)
    acc_ax, loss_ax = figure(summary).axes
    lines = {line.get_label(): list(line.get_xdata()) for line in acc_ax.get_lines()}
    epochs = list(range(summary["options"]["epochs"] + 1))
    assert lines["with book chunks"] == epochs and lines["control (instructions only)"] == epochs
    assert [line.get_label() for line in loss_ax.get_lines()] == ["with book chunks", "control (instructions only)"]


@pytest.mark.slow
def test_report_shows_the_run_in_its_own_section(first_run, tmp_path):
    """`lm-eval-longmem report FOLDER` on a finetune output: one section with the table and figure,
    and the checkpoints are not listed as separate models in the other sections."""
    from lm_eval_longmem.readers.results import load_runs
    from lm_eval_longmem.report import headline_lines, write_report

    out, _, _ = first_run
    runs = load_runs([out])
    summary = reader.read_summary(out / reader.SUMMARY)
    assert len(runs) == len(summary["rows"])
    written = write_report(runs, tmp_path)
    text = written.markdown.read_text()
    assert (
        "## Book-SORT fine-tuned memory" in text and "## Book-SORT\n" not in text and "## Headline numbers" not in text
    )
    for row in reader.summary_table(summary):
        assert "| " + " | ".join(row) + " |" in text
    assert reader.verdict(summary) in text
    assert any(p.name.startswith("booksort_finetune_") and p.suffix == ".png" for p in written.figures)
    assert headline_lines(runs) == []

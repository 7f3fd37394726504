"""`lm-eval-longmem booksort build` and `select-prompt` through the real command parser."""

from __future__ import annotations

import json

import pytest

from lm_eval_longmem.cli import build_parser


def test_build_command(book_files, tmp_path, capsys):
    hamlet, _, comedy_of_errors = book_files
    args = build_parser().parse_args(
        [
            "booksort",
            "build",
            "--books",
            str(comedy_of_errors),
            str(hamlet),
            "--output_path",
            str(tmp_path / "data"),
            "--excerpt_lengths",
            "250,20000",
            "--segment_lengths",
            "50",
        ]
    )
    args.func(args)
    out = capsys.readouterr().out
    assert "2 books, 1200 test and 120 validation trials" in out  # too short for 20k-word excerpts
    assert "skipped book comedy_of_errors at L_E=20000, L_S=50" in out
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["n_trials"] == {"test": 1200, "validation": 120}
    assert manifest["spec"]["excerpt_lengths"] == [250, 20000]


@pytest.mark.slow
def test_select_prompt_scores_each_variant_on_validation(tiny_llama_dir, built_dir, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    from lm_eval_longmem.booksort.rim.commands import score_variants
    from lm_eval_longmem.harness import models

    # an earlier model of the same name with a wider window (as another test or run leaves it) must not
    # decide the fit checks for the lm handed in: its requests beyond 2048 tokens are skipped, not refused
    stale = models.LiveBackend(kind="hf", max_length=100_000, pretrained=str(tiny_llama_dir))
    monkeypatch.setattr(models, "_live", stale)

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", batch_size=1)
    meta = {
        "pretrained": str(tiny_llama_dir),
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": 250,
        "booksort_segment_lengths": 20,
        "booksort_books": "comedy_of_errors",
        "booksort_distance_bins": 0,
    }
    scores = score_variants(lm, meta, ["default", "brief"])
    assert [s.variant for s in scores] == ["default", "brief"]
    # 10 validation excerpts x 1 bin (the test split would hold 100); any beyond the tiny model's 2k window is skipped
    assert all(s.n + s.skipped == 10 and s.n > 0 and 0.0 <= s.acc <= 1.0 for s in scores)
    assert any(s.skipped for s in scores)  # some prompts are longer than the window: the check above is not idle
    assert models.live_backend() == stale  # the record is restored afterwards


@pytest.mark.slow
def test_select_prompt_as_the_card_writes_it_runs_on_cpu_and_keeps_an_existing_file(
    tiny_llama_dir, built_dir, tmp_path
):
    """Without `--device` on a machine without CUDA it failed (HFLM's "cuda"
    default); `--output_path keep.json` silently replaced the file, and a folder failed after scoring."""
    import os
    import subprocess
    import sys

    cli = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")
    keep = tmp_path / "keep.json"

    def select(*extra):
        return subprocess.run(
            [cli, "booksort", "select-prompt", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32",
             "--metadata", f"booksort_data={built_dir}", "booksort_excerpt_lengths=250", "booksort_segment_lengths=20",
             "booksort_distance_bins=0", "--variants", "default", "--limit", "2", "--output_path", str(keep), *extra],
            capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"}, timeout=600,
        )  # fmt: skip

    proc = select()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(keep.read_text())["best"] == "default" and "best: default" in proc.stdout
    keep.write_text("my notes")
    proc = select()
    assert proc.returncode == 1 and "variant" not in proc.stdout  # refused before any variant was scored
    assert proc.stderr.strip().splitlines()[-1] == (
        f"lm-eval-longmem: error: --output_path {keep} exists: pass --overwrite to replace it, or choose another --output_path"
    )
    assert keep.read_text() == "my notes"


def test_a_repeated_excerpt_length_is_refused_before_anything_is_written(book_files, tmp_path, capsys):
    """`booksort build --excerpt_lengths 250,250` wrote every trial twice (and a run counted each twice)."""
    from lm_eval_longmem.cli import main

    out = tmp_path / "data"
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "booksort",
                "build",
                "--books",
                str(book_files[0]),
                "--output_path",
                str(out),
                "--excerpt_lengths",
                "250,250",
            ]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].endswith("error: argument --excerpt_lengths: 250 is given twice: name each length once")
    assert not out.exists()


@pytest.mark.parametrize("given", ["the same file", "its folder too"])
def test_a_book_given_twice_is_refused(book_files, tmp_path, capsys, given):
    from lm_eval_longmem.cli import main

    hamlet = book_files[0]
    books = [str(hamlet), str(hamlet) if given == "the same file" else str(hamlet.parent)]
    out = tmp_path / "data"
    with pytest.raises(SystemExit, match="1"):
        main(["booksort", "build", "--books", *books, "--output_path", str(out), "--excerpt_lengths", "250"])
    err = capsys.readouterr().err
    assert err == f"lm-eval-longmem: error: {hamlet} is given twice: name each book once\n"
    assert not out.exists()


def test_a_build_written_with_a_repeated_length_is_refused_when_read(books, tmp_path):
    """A build written before repeats were refused holds every trial of the repeated length twice: a run says so."""
    from lm_eval_longmem.booksort.build import BuildSpec, build, write_dataset
    from lm_eval_longmem.booksort.data import read_split
    from lm_eval_longmem.common.errors import UsageError

    with pytest.raises(UsageError, match="^excerpt_lengths: 250 is given twice: name each length once$"):
        BuildSpec(excerpt_lengths=(250, 250))
    spec = BuildSpec(excerpt_lengths=(250,), segment_lengths=(50,))
    object.__setattr__(spec, "excerpt_lengths", (250, 250))  # as the builder took it before
    result = build(books[:1], spec)
    out = write_dataset(books[:1], result, spec, tmp_path / "old_build")
    ids = [trial.trial_id for trial in result.trials]
    assert len(ids) == 2 * len(set(ids))  # every trial twice
    with pytest.raises(
        UsageError,
        match=r"manifest\.json lists the excerpt length 250 twice, so its trials were written twice: rebuild",
    ):
        read_split(str(out), "test")

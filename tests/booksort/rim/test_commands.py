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
    """Issue 28, defects 6 and 7: without `--device` on a machine without CUDA it failed (HFLM's "cuda"
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

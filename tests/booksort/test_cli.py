"""`lm-eval-longmem booksort build` and `select-prompt` through the real command parser."""

from __future__ import annotations

import json

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


def test_select_prompt_scores_each_variant_on_validation(tiny_llama_dir, built_dir):
    from lm_eval.models.huggingface import HFLM

    from lm_eval_longmem.booksort.cli import score_variants

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

"""BABILong's part of `lm-eval-longmem demo`."""

from __future__ import annotations

from lm_eval_longmem.babilong.rim.demo import SIZES, first_books
from lm_eval_longmem.commands.demo import harness_metadata


def test_babilong_runs_on_simulated_facts_over_the_embedded_books(tmp_path):
    metadata = harness_metadata(("babilong",), "small", tmp_path / "books", tmp_path)
    assert metadata == {
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": str(tmp_path / "babilong_books"),
        "babilong_lengths": [0, 1024],  # tokens, as every length up to the display edge
        "babilong_tasks": "qa1-qa5",
        "babilong_samples": SIZES["small"].samples,
    }


def test_the_haystack_books_are_the_first_ones_by_name_and_stale_ones_go(tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    for name in ("c.txt", "a.txt", "b.txt"):
        (books / name).write_text(name)
    out = tmp_path / "out"
    out.mkdir()
    (out / "z.txt").write_text("from an earlier demo")
    assert first_books(books, 2, out) == out
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt"]

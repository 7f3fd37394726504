"""Book-SORT's part of `lm-eval-longmem demo`: a small build from the demo's books."""

from __future__ import annotations

import json

from lm_eval_longmem.booksort.rim.demo import SIZES, build_data


def test_booksort_builds_from_the_embedded_plays(embedded_books_dir, tmp_path):
    size = SIZES["small"]
    folder, n_test = build_data(embedded_books_dir, tmp_path / "bs", size)
    assert n_test == size.books * len(size.excerpt_lengths) * size.excerpts * 4
    manifest = json.loads((folder / "manifest.json").read_text())
    titles = [b["title"] for b in manifest["books"]]
    assert len(titles) == size.books and titles[:2] == ["All's Well That Ends Well", "Antony and Cleopatra"]
    trial = json.loads((folder / "test.jsonl").read_text().splitlines()[0])
    assert trial["excerpt_length"] == 250 and trial["segment_1"] != trial["segment_2"]

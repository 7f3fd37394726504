"""Loading Book-SORT for the harness: local builds, condition filters, interleaving, hub errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lm_eval_longmem.booksort.build import BuildSpec, build, write_dataset
from lm_eval_longmem.booksort.data import Excerpts, booksort_options, build_docs, load_booksort, read_split, user_text
from lm_eval_longmem.common.errors import UsageError


def test_built_dir_materialises_excerpts(built_dir, books):
    source = read_split(str(built_dir), "test")
    words = {b.book_id: b.words for b in books}
    for row in source.rows[::997]:
        text = source.excerpt(row)
        assert text.split() == list(
            words[row["book_id"]][row["excerpt_start"] : row["excerpt_start"] + row["excerpt_length"]]
        )
        assert row["segment_1"] in text and row["segment_2"] in text
        assert text.split()[row["seg1_pos"] : row["seg1_pos"] + row["segment_length"]] == row["segment_1"].split()


def test_condition_filters(built_dir):
    meta = {
        "booksort_data": str(built_dir),
        "booksort_excerpt_lengths": "250,1000",
        "booksort_segment_lengths": [50],
        "booksort_books": "hamlet,1",  # a file stem and a book_idx (macbeth)
        "booksort_distance_bins": "[0, 3]",
    }
    docs = build_docs(meta, "test", "in_context")
    assert len(docs) == 2 * 1 * 2 * 100 * 2
    assert {d["excerpt_length"] for d in docs} == {250, 1000}
    assert {d["segment_length"] for d in docs} == {50}
    assert {d["book_idx"] for d in docs} == {0, 1}
    assert {d["distance_bin_idx"] for d in docs} == {0, 3}
    assert sum(d["label"] == 0 for d in docs) * 2 == len(docs)  # counterbalance survives filtering


def test_docs_interleave_conditions_for_limit(built_dir):
    docs = build_docs({"booksort_data": str(built_dir)}, "validation", "memoryless")
    first_round = (1 * 5 + 2 * 4) * 2 * 4  # one trial of every (excerpt, segment, book, bin) cell
    cell = lambda d: (d["excerpt_length"], d["segment_length"], d["book_idx"], d["distance_bin_idx"])  # noqa: E731
    assert len({cell(d) for d in docs[:first_round]}) == first_round
    assert len({d["trial_id"] for d in docs}) == len(docs) == (1 * 5 + 2 * 4) * 2 * 10 * 4


def test_prompt_in_docs_per_condition(built_dir):
    meta = {"booksort_data": str(built_dir), "booksort_excerpt_lengths": 250, "booksort_books": "comedy_of_errors"}
    in_context = load_booksort("in_context", **meta)["test"][0]
    memoryless = load_booksort("memoryless", **meta)["test"][0]
    assert in_context["trial_id"] == memoryless["trial_id"]
    excerpts = Excerpts(booksort_options(meta))
    excerpt = excerpts(in_context)
    assert len(excerpt.split()) == 250 and excerpts(memoryless) == ""
    assert excerpt not in json.dumps(in_context)  # the doc says where its excerpt is; it does not hold it
    user, alone = user_text(in_context, excerpt), user_text(memoryless, "")
    assert "The Comedy of Errors" in user and "The Comedy of Errors" not in alone
    assert len(user.split()) > 250 > len(alone.split())
    assert user.index(excerpt) == len(in_context["prompt_before_excerpt"])
    shown_first = in_context["segment_1"] if in_context["present_seg1_first"] else in_context["segment_2"]
    assert f"Segment A: {shown_first}" in user and user.endswith("\n\n" + alone)
    assert in_context["label"] == (0 if in_context["present_seg1_first"] else 1)
    assert in_context["prompt_answer"] == "Answer: Segment"


@pytest.mark.parametrize(
    "meta,match",
    [
        (
            {"booksort_excerpt_lengths": "1k"},
            r"^--metadata booksort_excerpt_lengths='1k': expected a whole number.*; e\.g\. booksort_excerpt_lengths=",
        ),
        (
            {"booksort_distance_bins": "4"},
            r"^--metadata booksort_distance_bins='4': .*from 0 to 3; e\.g\. booksort_distance_bins=\[0,3\]",
        ),
        (
            {"booksort_prompt": "fancy"},
            r"^--metadata booksort_prompt='fancy': expected one of default.*; e\.g\. booksort_prompt=default",
        ),
        ({"booksort_excerpt_lengths": "300"}, r"excerpt lengths \[250, 1000, 2500, 10000, 20000\]"),
        ({"booksort_books": "12345"}, r"books \[0, 1, 2\]"),
        ({"booksort_data": "/nonexistent/dir"}, r"^--metadata booksort_data='/nonexistent/dir' .*booksort build"),
        # defect 5: a misspelled key was ignored and the defaults ran
        (
            {"booksort_excerpt_length": 250},
            r"^--metadata booksort_excerpt_length: no such option; did you mean booksort_excerpt_lengths\?",
        ),
        ({"booksort_book": "hamlet"}, r"did you mean booksort_books\?"),
    ],
)
def test_bad_options_name_the_fix(built_dir, meta, match):
    with pytest.raises(UsageError, match=match):
        build_docs({"booksort_data": str(built_dir), **meta}, "test", "in_context")


def test_hub_offline_error_names_local_build():
    # conftest sets HF_DATASETS_OFFLINE=1: the gated hub dataset cannot be reached
    with pytest.raises(UsageError, match="memari/booksort.*gated.*lm-eval-longmem booksort build"):
        read_split("hub", "test")


def test_option_parsing():
    assert booksort_options({}).excerpt_lengths is None and booksort_options({}).data == "hub"
    options = booksort_options({"booksort_excerpt_lengths": "[250, 2500]", "booksort_books": 69087})
    assert options.excerpt_lengths == (250, 2500) and options.books == ("69087",)
    assert booksort_options({"booksort_distance_bins": "0,3", "booksort_prompt": "DEFAULT"}).distance_bins == (0, 3)


def test_hub_layout_gives_the_same_docs_as_the_local_build(built_dir, tmp_path):
    """A copy in the hub's layout (parquet, inline excerpt_text, no local-only columns) read via
    `hf:` takes the real `datasets.load_dataset` path and yields the same prompts and bins."""
    import datasets

    hub_columns = [
        "book_idx",
        "excerpt_idx",
        "segment_idx",
        "excerpt_text",
        "excerpt_length",
        "segment_1",
        "segment_2",
        "segment_length",
        "seg1_pos",
        "seg2_pos",
        "present_seg1_first",
        "distance_bin",
        "excerpt_pos",
        "book_title",
        "num_words",
    ]
    for split in ("test", "validation"):
        source = read_split(str(built_dir), split)
        rows = [
            dict(r, excerpt_text=source.excerpt(r))
            for r in source.rows
            if r["book_id"] == "comedy_of_errors" and r["excerpt_length"] == 250
        ]
        datasets.Dataset.from_list([{k: r[k] for k in hub_columns} for r in rows]).to_parquet(
            tmp_path / "hub" / f"{split}.parquet"
        )
    # the hub names a book by its number only: book_idx 2 is comedy_of_errors here
    meta = {"booksort_excerpt_lengths": 250, "booksort_books": "2", "booksort_distance_bins": "1,2"}
    local = build_docs({"booksort_data": str(built_dir), **meta}, "test", "in_context")
    hub = build_docs({"booksort_data": f"hf:{tmp_path / 'hub'}", **meta}, "test", "in_context")
    assert len(hub) == len(local) == 2 * 2 * 100
    local_text = Excerpts(booksort_options({"booksort_data": str(built_dir)}))
    hub_text = Excerpts(booksort_options({"booksort_data": f"hf:{tmp_path / 'hub'}"}))
    for a, b in zip(local, hub, strict=True):
        assert (user_text(a, local_text(a)), a["label"], a["distance_bin_idx"]) == (
            user_text(b, hub_text(b)),
            b["label"],
            b["distance_bin_idx"],
        )
        assert "excerpt_text" not in b and len(local_text(a).split()) == 250
        assert b["trial_id"] == a["trial_id"].replace("comedy_of_errors", "2", 1)  # rebuilt from the hub columns


# --- a local build is validated against its manifest (defect 8) --------------------------------


@pytest.fixture(scope="module")
def small_build(books, tmp_path_factory) -> Path:
    """One book at one condition: 400 test and 40 validation trials."""
    spec = BuildSpec(excerpt_lengths=(250,), segment_lengths=(20,))
    return write_dataset(books[:1], build(books[:1], spec), spec, tmp_path_factory.mktemp("small") / "data")


@pytest.fixture
def copy(small_build, tmp_path) -> Path:
    return Path(shutil.copytree(small_build, tmp_path / "data"))


def test_intact_build_reads_every_trial(copy):
    assert len(read_split(str(copy), "test").rows) == 400 and len(read_split(str(copy), "validation").rows) == 40


def test_truncated_split_is_refused(copy):
    lines = (copy / "test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (copy / "test.jsonl").write_text("".join(lines[:150]), encoding="utf-8")  # cut at a line end
    with pytest.raises(UsageError, match=r"test\.jsonl holds 150 trials but manifest\.json says 400.*booksort build"):
        read_split(str(copy), "test")
    (copy / "test.jsonl").write_text("".join(lines)[:5000], encoding="utf-8")  # cut inside a line
    with pytest.raises(UsageError, match=r"test\.jsonl, line \d+: not a JSON trial.*booksort build --books"):
        build_docs({"booksort_data": str(copy)}, "test", "in_context")


def test_corrupt_line_names_file_and_line(copy):
    lines = (copy / "validation.jsonl").read_text(encoding="utf-8").split("\n")
    lines[6] = lines[6][:-1]  # a closing brace lost
    (copy / "validation.jsonl").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(UsageError, match=r"validation\.jsonl, line 7: not a JSON trial"):
        read_split(str(copy), "validation")
    lines[6] = "[1, 2]"
    (copy / "validation.jsonl").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(UsageError, match=r"validation\.jsonl, line 7: the trial lacks"):
        read_split(str(copy), "validation")


def test_edited_files_are_caught_by_their_digest(copy):
    text = (copy / "test.jsonl").read_text(encoding="utf-8")
    (copy / "test.jsonl").write_text(text.replace('"present_seg1_first": 1', '"present_seg1_first": 0', 1))
    with pytest.raises(UsageError, match=r"test\.jsonl differs from the file the build wrote"):
        read_split(str(copy), "test")
    (book,) = (copy / "books").iterdir()
    book.write_text(book.read_text(encoding="utf-8").replace(" the ", " teh ", 1), encoding="utf-8")
    with pytest.raises(UsageError, match=rf"books/{book.stem}\.txt differs"):
        read_split(str(copy), "validation")


def _edit_manifest(root: Path, edit) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    edit(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "edit,match",
    [
        (
            lambda m: m.update(builder_version=99),
            r"says builder_version 99, but this lm-eval-longmem reads Book-SORT builds of version 1",
        ),
        (lambda m: m.pop("builder_version"), r"says builder_version None"),
        (lambda m: m.pop("sha256"), r"lacks the sha256 of books/.*cannot be verified"),
        (lambda m: m["sha256"].pop("test.jsonl"), r"lacks the sha256 of test\.jsonl \("),
    ],
)
def test_unverifiable_builds_are_refused(copy, edit, match):
    """Another builder's trials, or a build whose files cannot be checked, must not be scored."""
    _edit_manifest(copy, edit)
    text = (copy / "test.jsonl").read_text(encoding="utf-8")  # and a flipped answer the digest would have caught
    (copy / "test.jsonl").write_text(text.replace('"present_seg1_first": 1', '"present_seg1_first": 0', 1))
    with pytest.raises(UsageError, match=match + r".*lm-eval-longmem booksort build --books BOOKS_DIR --output_path"):
        build_docs({"booksort_data": str(copy)}, "test", "in_context")


@pytest.mark.parametrize(
    "manifest,match",
    [
        ('{"books": [', r"manifest\.json is not valid JSON \(.*line 1"),
        ('{"books": []}', r"manifest\.json lacks the books or per-split trial counts"),
        ("[]", r"manifest\.json lacks"),
    ],
)
def test_corrupt_manifest_names_the_file(copy, manifest, match):
    (copy / "manifest.json").write_text(manifest)
    with pytest.raises(UsageError, match=match + r".*lm-eval-longmem booksort build"):
        read_split(str(copy), "test")


def test_missing_manifest_names_the_folder(copy):
    (copy / "manifest.json").unlink()
    with pytest.raises(UsageError, match="no manifest.json"):
        read_split(str(copy), "test")


def test_missing_split_file_names_the_file(copy):
    (copy / "test.jsonl").unlink()
    with pytest.raises(UsageError, match=r"test\.jsonl: cannot read"):
        read_split(str(copy), "test")


def test_text_columns_are_large_strings(built_dir):
    """A build from many books holds more prompt text than Arrow's `string` can address (2 GB): the 42 embedded
    plays give 146,400 test trials, about 5 GB, and `datasets` failed with an offset overflow (found
    running README's offline main job). Text columns are `large_string`; the docs are the ones `build_docs` gives."""
    meta = {"booksort_data": str(built_dir), "booksort_excerpt_lengths": 250}
    loaded = load_booksort("in_context", **meta)["test"]
    assert (
        loaded.features["prompt_before_excerpt"].dtype == "large_string"
        and loaded.features["book_id"].dtype == "large_string"
    )
    assert loaded.features["excerpt_length"].dtype == "int64"
    assert loaded.to_list() == build_docs(meta, "test", "in_context")

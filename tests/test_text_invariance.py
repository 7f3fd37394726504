"""The same book with CRLF or LF line ends, with or without a byte-order mark, gives the
same docs and the same results in all three evaluations (every local text is read by `common.text`).

The variants are written in a temporary folder from the shared books as shipped (CRLF, byte-order
mark, Gutenberg banners, the CC0 licence beside them) and from an embedded play (LF, no mark).
Docs are compared exactly through each evaluation's own data hook (SmolLM2's tokenizer, in which a
"\\r" is a token of its own); results of a tiny-model run through the `lm_eval` command exactly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from kit import build_booksort, build_guessing_model, hf_run_args, read_results, read_samples, run_lm_eval

from lm_eval_longmem.babilong.data import load_docs
from lm_eval_longmem.booksort.build import BuildSpec, build, load_books
from lm_eval_longmem.booksort.data import load_booksort
from lm_eval_longmem.forgetting_curve.data import build_dataset, corpus_stream, sweep_options

BOM = b"\xef\xbb\xbf"
VARIANTS = {
    "lf": lambda raw: raw.removeprefix(BOM).replace(b"\r\n", b"\n"),
    "lf+bom": lambda raw: BOM + raw.removeprefix(BOM).replace(b"\r\n", b"\n"),
    "crlf": lambda raw: raw.removeprefix(BOM).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "crlf+bom": lambda raw: BOM + raw.removeprefix(BOM).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "cr": lambda raw: raw.removeprefix(BOM).replace(b"\r\n", b"\n").replace(b"\n", b"\r"),
}
SHARED_BOOKS = ("72578-0.txt", "73017-0.txt")
"""The two smallest of the nine (CRLF with a byte-order mark as shipped), with the CC0 licence beside them."""
PLAY = "macbeth.txt"


def write_variants(files: list[Path], root: Path, extra: tuple[Path, ...] = ()) -> dict[str, Path]:
    """One folder per variant (plus the files as they are, "shipped") holding `files` so transformed, and `extra` as is."""
    folders = {}
    for name, transform in {"shipped": lambda raw: raw, **VARIANTS}.items():
        folder = root / name
        folder.mkdir(parents=True)
        for path in files:
            (folder / path.name).write_bytes(transform(path.read_bytes()))
        for path in extra:
            shutil.copy(path, folder / path.name)
        folders[name] = folder
    return folders


@pytest.fixture(scope="module", params=["shared", "embedded"])
def variants(request, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp(f"variants-{request.param}")
    if request.param == "shared":
        books = request.getfixturevalue("shared_data") / "books"
        folders = write_variants([books / name for name in SHARED_BOOKS], root, (books / "CC0_LICENSE.txt",))
        assert b"\r\n" in (folders["shipped"] / SHARED_BOOKS[0]).read_bytes()  # the test means something
    else:
        folders = write_variants([request.getfixturevalue("embedded_books_dir") / PLAY], root)
    return folders


def metadata(model: Path, books: Path, booksort_data: Path | None = None) -> dict:
    meta = {
        "pretrained": str(model),
        "forgetting_curve_corpus": str(books),
        "forgetting_curve_lengths": "[16,64,256]",
        "forgetting_curve_samples": 3,
        "babilong_source": "generate",
        "babilong_facts": "simulated",
        "babilong_corpus": str(books),
        "babilong_lengths": "0k,1k",
        "babilong_tasks": "qa1",
        "babilong_samples": 2,
    }
    if booksort_data is not None:
        meta["booksort_data"] = str(booksort_data)
    return meta


@pytest.mark.slow
def test_every_variant_gives_the_same_docs(variants, smollm2_dir, tmp_path):
    docs = {}
    for name, folder in variants.items():
        meta = metadata(smollm2_dir, folder)
        books = load_books([folder])
        trials = build(books, BuildSpec(excerpt_lengths=(250,), segment_lengths=(20,)))
        data = build_booksort(folder, tmp_path / name / "booksort")
        meta["booksort_data"] = str(data)
        docs[name] = {
            "forgetting_curve stream": corpus_stream(sweep_options(meta), meta).tolist(),
            "forgetting_curve": build_dataset(**meta)["test"].to_list(),
            "booksort books": [(b.book_id, b.title, b.words) for b in books],
            "booksort trials": trials,
            "booksort_in_context": load_booksort("in_context", **meta)["test"].to_list(),
            "booksort_memoryless": load_booksort("memoryless", **meta)["test"].to_list(),
            "babilong": load_docs(**meta)["test"].to_list(),
        }
    shipped = docs.pop("shipped")
    stream = np.asarray(shipped["forgetting_curve stream"])
    assert stream.size > 10_000 and shipped["booksort_in_context"] and shipped["babilong"]
    for name, got in docs.items():
        for what, value in shipped.items():
            assert got[what] == value, f"{name}: {what} differs from the shipped file's"


@pytest.fixture(scope="module")
def guessing_model(tiny_llama_dir, tmp_path_factory):
    """The tiny model guessing " " or "e" (`kit.build_guessing_model`): scores are real fractions, not all 0."""
    return build_guessing_model(tiny_llama_dir, tmp_path_factory.mktemp("guessing-model"))


@pytest.mark.slow
def test_crlf_with_a_byte_order_mark_and_lf_without_give_the_same_results(variants, guessing_model, tmp_path):
    """A tiny-model run of all three evaluations on the CRLF + mark folder and on the LF one: every metric and logged sample equal."""
    runs = {}
    for name in ("crlf+bom", "lf"):
        out = tmp_path / name
        out.mkdir()
        data = build_booksort(variants[name], out / "booksort")
        meta = {k: v for k, v in metadata(guessing_model, variants[name], data).items() if k != "pretrained"}
        run_lm_eval(
            hf_run_args(guessing_model, "forgetting_curve,booksort_in_context,booksort_memoryless,babilong",
                "--limit", "8", "--batch_size", "2", "--log_samples", "--metadata", json.dumps(meta)),
            out, env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")},
        )  # fmt: skip
        runs[name] = out
    a, b = read_results(runs["crlf+bom"]), read_results(runs["lf"])
    assert a["results"] == b["results"]
    assert any(isinstance(v, float) and 0 < v < 1 for row in a["results"].values() for v in row.values())
    for task in ("forgetting_curve", "booksort_in_context", "booksort_memoryless", "babilong"):
        keep = ("doc_id", "doc", "arguments", "filtered_resps", "metrics")
        first = [
            {k: s[k] for k in keep} | {m: s[m] for m in s["metrics"]} for s in read_samples(runs["crlf+bom"], task)
        ]
        second = [{k: s[k] for k in keep} | {m: s[m] for m in s["metrics"]} for s in read_samples(runs["lf"], task)]
        assert first and first == second, task

"""One BABILong length followed from `--metadata` text to the strings a person reads.

`babilong_lengths=[0k,1k]` is parsed once, by `common.lengths`, into token counts; the options, the
docs, the metric names (`acc@qa1_1024`), the results readers and the report's rows all carry the
`int` 1024, and only the display edge (text report, report table, heatmap axis, plan) turns it into
"1k", through `common.lengths.format_length`. The results file keeps what it always stored.
"""

from __future__ import annotations

import pytest
from kit import babilong_simulated as simulated
from kit import read_results, read_samples, run_lm_eval

from lm_eval_longmem.babilong.data import babilong_options, selected_lengths
from lm_eval_longmem.babilong.rim import figures as babilong_plot
from lm_eval_longmem.babilong.rim import section as babilong_section
from lm_eval_longmem.babilong.rim.reader import (
    format_report,
    read_cells,
    read_effective_context,
    read_length_means,
)
from lm_eval_longmem.common.lengths import format_length
from lm_eval_longmem.plan import make_plan
from lm_eval_longmem.readers.results import load_run
from lm_eval_longmem.report.blocks import Table

WINDOW = 2100
"""The tiny model's tokenizer has one token per character: a 1k sample (about 1,000 prompt tokens) fits."""


def metadata(tiny_llama_dir, books) -> dict:
    """`--metadata` as the command line hands it over: the lengths are the text "[0k,1k]"."""
    return {"pretrained": str(tiny_llama_dir), "max_length": WINDOW} | simulated(
        books, babilong_lengths="[0k,1k]", babilong_tasks="qa1", babilong_samples=2
    )


def test_the_option_text_becomes_token_counts_once(tiny_llama_dir, books):
    options = babilong_options(metadata(tiny_llama_dir, books))
    assert options.lengths == (0, 1024)
    assert selected_lengths(options, WINDOW) == (0, 1024)
    rows = make_plan(["babilong"], metadata(tiny_llama_dir, books)).rows
    assert [(r.length, r.cell) for r in rows] == [(0, "0k"), (1024, "1k")]  # the plan shows the int's display name


@pytest.mark.slow
def test_a_length_is_an_int_from_metadata_text_to_the_reports_1k(tiny_llama_dir, books, tmp_path):
    given = metadata(tiny_llama_dir, books)
    text_args = [f"{key}={value}" for key, value in given.items() if key.startswith("babilong_")]
    assert "babilong_lengths=[0k,1k]" in text_args  # what a person types after --metadata
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32,max_length={WINDOW}",
         "--tasks", "babilong", "--device", "cpu", "--batch_size", "4", "--log_samples", "--metadata", *text_args],
        tmp_path,
        env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    results = read_results(tmp_path)
    # the docs: the token count, and the authors' name the hub rows and logged samples have always carried
    docs = [s["doc"] for s in read_samples(tmp_path, "babilong")]
    assert sorted({(d["length"], d["length_name"]) for d in docs}) == [(0, "0k"), (1024, "1k")]
    # the metric names: tokens, never "1k"
    metrics = results["results"]["babilong"]
    assert {"acc@qa1_1024,none", "acc@1024,none", "acc@qa1_0,none"} <= set(metrics)
    assert not any("1k" in key for key in metrics)
    # no second spelling stored beside them (older files' `length_names`, which no reader read)
    assert "length_names" not in results["configs"]["babilong"]["longmem"]

    # read back from the file: ints all the way
    (path,) = tmp_path.rglob("results_*.json")
    run = load_run(path)
    assert [(c.qa, c.length) for c in read_cells(run.data)] == [("qa1", 0), ("qa1", 1024)]
    assert list(read_length_means(run.data)) == [0, 1024]
    assert all(v is None or isinstance(v, int) for v in read_effective_context(run.data).values())

    # the display edge: "1k", from the one formatter
    assert format_length(1024) == "1k"
    text = format_report(run.data).splitlines()
    assert text[1].split() == ["task", "0k", "1k"]
    assert any(line.split(":")[0].strip() == "1k" for line in text)  # the mean over tasks per length
    (section,) = babilong_section.SECTION.sections([run], ["tiny"])
    table = next(block for block in section.blocks if isinstance(block, Table))
    assert table.header[2:4] == ["acc@0k", "acc@1k"]
    figure = babilong_plot.figure(run.data, "tiny")
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["0k", "1k"]

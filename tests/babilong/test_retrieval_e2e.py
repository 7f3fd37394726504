"""The retrieval condition through the real `lm_eval` CLI (tiny model), and `report` with both conditions."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kit import babilong_simulated, read_results, read_samples, run_lm_eval
from tolerances import ARITHMETIC_RTOL

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")


@pytest.fixture(scope="module")
def two_runs(tiny_llama_dir, books, tmp_path_factory):
    """The same tiny model on the same simulated docs (qa1, qa2 at 0k and 2k), in-context and with RAG-S."""
    root = tmp_path_factory.mktemp("conditions")
    env = {"LM_EVAL_LONGMEM_CACHE": str(root / "cache"), "OMP_NUM_THREADS": "1"}
    metadata = babilong_simulated(books, babilong_lengths="[0k,2k]", babilong_tasks="qa1,qa2", babilong_samples=2)
    outs = {}
    for name, extra in (("in-context", {}), ("rag-s", {"babilong_retrieval": "sentences", "babilong_retrieval_k": 3})):
        out = root / name
        out.mkdir()
        run_lm_eval(
            ["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32,max_length=2100",
             "--tasks", "babilong", "--device", "cpu", "--batch_size", "4", "--log_samples",
             "--metadata", json.dumps(metadata | extra)],
            out,
            env=env,
        )  # fmt: skip
        outs[name] = out
    return outs


@pytest.mark.slow
def test_retrieval_run_scores_recall_per_cell_and_length(two_runs):
    results = read_results(two_runs["rag-s"])
    metrics = results["results"]["babilong"]
    facts = results["configs"]["babilong"]["longmem"]
    assert (facts["condition"], facts["retrieval"]) == ("retrieval", "sentences top-3 bm25")
    samples = read_samples(two_runs["rag-s"], "babilong")
    for qa in ("qa1", "qa2"):
        docs = [s["doc"] for s in samples if s["doc"]["qa"] == qa and s["doc"]["length_name"] == "0k"]
        expected = sum(d["retrieval_recall"] for d in docs) / len(docs)
        assert metrics[f"retrieval_recall@{qa}_0,none"] == pytest.approx(expected, rel=ARITHMETIC_RTOL)
        low, high = metrics[f"retrieval_recall@{qa}_0_ci_low,none"], metrics[f"retrieval_recall@{qa}_0_ci_high,none"]
        assert low <= expected <= high
    assert 0.0 <= metrics["retrieval_recall@0,none"] <= 1.0
    for sample in samples:  # the prompt holds the retrieved pieces, not the haystack
        prompt = sample["arguments"]["gen_args_0"]["arg_0"]
        context = prompt.split("<context>\n", 1)[1].split("\n</context>", 1)[0]
        assert context == " ".join(sample["doc"]["retrieved"])
    in_context = read_results(two_runs["in-context"])
    assert in_context["configs"]["babilong"]["longmem"]["condition"] == "in-context"
    assert "retrieval" not in in_context["configs"]["babilong"]["longmem"]
    assert not any(key.startswith("retrieval_recall") for key in in_context["results"]["babilong"])


@pytest.mark.slow
def test_report_puts_both_conditions_side_by_side(two_runs, tmp_path):
    reference = tmp_path / "rag-reference"
    reference.mkdir()
    rows = "".join(
        f"{i},kitchen, The most recent location of Mary is {'kitchen' if i % 2 else 'garden'}.,0,Where is Mary?\n"
        for i in range(4)
    )
    (reference / "qa1_0k_instruction_yes_examples_yes_post_prompt_yes.csv").write_text(
        ",target,output,result,question\n" + rows
    )
    out = tmp_path / "report"
    proc = subprocess.run(
        [CLI, "report", str(two_runs["in-context"]), str(two_runs["rag-s"]), "--output_path", str(out), "--babilong_reference", str(reference)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    markdown = (out / "report.md").read_text()
    section = markdown.split("BABILong conditions", 1)[1]
    assert "| in-context |" in section and "| sentences top-3 bm25 |" in section
    assert "Retrieval recall" in section and "rag-reference (authors' predictions)" in section
    assert "| 50.0 [" in section  # the reference's qa1 0k: 2 of 4 answers right
    assert (out / "figures" / "babilong_conditions.png").stat().st_size > 0


@pytest.mark.slow
def test_a_missing_reference_folder_is_one_line(two_runs, tmp_path):
    proc = subprocess.run(
        [CLI, "report", str(two_runs["rag-s"]), "--output_path", str(tmp_path / "r"), "--babilong_reference", str(tmp_path / "none")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1 and proc.stderr.strip().count("\n") == 0 and "--babilong_reference" in proc.stderr

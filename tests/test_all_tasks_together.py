"""The user's command: our three tasks in one `lm_eval` run, next to another harness task, on the real SmolLM2."""

import re
from pathlib import Path

import pytest
from kit import build_booksort, hf_run_args, read_results, run_lm_eval
from tqdm import tqdm

ECHO_TASK_DIR = Path(__file__).parent / "common" / "fixtures"


@pytest.mark.slow
def test_forgetting_curve_booksort_babilong_and_another_task_in_one_run(smollm2_dir, embedded_books_dir, tmp_path):
    book = embedded_books_dir / "macbeth.txt"
    booksort_data = build_booksort(book, tmp_path / "booksort_data")
    out = tmp_path / "out"
    out.mkdir()
    proc = run_lm_eval(
        hf_run_args(smollm2_dir, "forgetting_curve,booksort,babilong,longmem_test_metadata_echo", "--include_path",
            str(ECHO_TASK_DIR), "--limit", "2", "--batch_size", "2", "--metadata", f"forgetting_curve_corpus={book}",
            "forgetting_curve_lengths=[32,64]", "forgetting_curve_samples=1", f"booksort_data={booksort_data}",
            "babilong_source=generate", "babilong_facts=simulated", f"babilong_corpus={book}",
            "babilong_lengths=[0k]", "babilong_tasks=[qa1]", "babilong_samples=2"),
        out,
        env={"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    results = read_results(out)["results"]
    fc = results["forgetting_curve"]
    assert fc["copy_acc@32,none"] > fc["lm_acc@32,none"]  # SmolLM2 copies a repeated passage
    assert "coarse_memory_length,none" in fc and "fine_memory_length,none" in fc
    assert 0.0 <= results["booksort"]["acc,none"] <= 1.0
    assert {"acc,none", "acc@qa1_0,none", "acc_corrected@qa1_0,none"} <= set(results["babilong"])  # lengths in tokens
    assert "acc,none" in results["longmem_test_metadata_echo"]
    # The bar of the forgetting curve's and Book-SORT's requests (one call of the request type) names each task's
    # input tokens as its cost line does; it counted them together, unnamed, beside cost lines per task.
    cost = dict(re.findall(r"(\w+): \d+ docs, \d+ \w+ requests, ([\d,]+) input tokens", proc.stderr))
    label = re.search(r"Running loglikelihood_accuracy requests, input tokens of ([^:]+):", proc.stderr)[1]
    shares = dict(share.rsplit(" ", 1) for share in label.split(" + "))
    assert {"forgetting_curve", "booksort_in_context"} <= set(shares) and shares == {
        task: cost.get(task) for task in shares
    }
    total = sum(int(n.replace(",", "")) for n in shares.values())
    shown = tqdm.format_sizeof(total)  # the bar's total, as it prints it
    assert re.search(rf"{re.escape(label)}: 100%\|[^|]*\| {shown}/{shown} ", proc.stderr)

"""The `lm-eval-longmem` console script: `run` takes lm_eval's flags and always knows our tasks."""

import os
import subprocess
import sys

from kit import read_results

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")


def test_run_reaches_our_tasks_with_the_hook_switched_off(tiny_llama_dir, shared_data, tmp_path):
    books = shared_data / "books" / "73017-0.txt"  # the smallest book is enough for two short lengths
    proc = subprocess.run(
        [CLI, "run", "--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32",
         "--device", "cpu", "--tasks", "forgetting_curve", "--limit", "2", "--output_path", str(tmp_path),
         "--metadata", f"forgetting_curve_corpus={books}", "forgetting_curve_lengths=[16,32]",
         "forgetting_curve_samples=1"],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "LM_EVAL_LONGMEM_AUTOLOAD": "0", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = read_results(tmp_path)["results"]["forgetting_curve"]
    assert {"copy_acc@16,none", "lm_acc@32,none"} <= set(results), sorted(results)


def test_run_without_flags_shows_lm_evals_run_help():
    out = subprocess.run([CLI, "run"], capture_output=True, text=True).stdout
    assert "--model_args" in out and "--tasks" in out

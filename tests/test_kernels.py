"""The `kernels` mark goes to exactly the tests that compare floats from a model run within a model tolerance
(`tests/kernels.py`), which `.ci/run` reruns under a reduced CPU kernel set; and `.ci/run` logs each stage's time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

from kernels import TESTS, TOLERANCES, compares_model_floats, uses_a_model_tolerance
from kit import REPO_ROOT


def test_what_derives_from_the_per_token_tolerance_is_a_model_tolerance():
    assert all(uses_a_model_tolerance(TOLERANCES, name) for name in ("logprob_tol", "near_tie", "metric_rtol"))
    assert not any(uses_a_model_tolerance(TOLERANCES, name) for name in ("ARITHMETIC_RTOL", "close", "LEVEL"))
    assert uses_a_model_tolerance(TESTS / "backends" / "conftest.py", "assert_same_answers")


def test_a_test_is_marked_through_its_helpers_and_imports_and_only_then(tmp_path):
    module = tmp_path / "test_example.py"
    module.write_text(
        "from tolerances import ARITHMETIC_RTOL, logprob_tol\n"
        "from reference_runs import compare\n"
        "def helper(a, b):\n    return abs(a - b) <= logprob_tol(3)\n"
        "def test_through_a_helper():\n    assert helper(1.0, 1.0)\n"
        "def test_through_an_imported_comparison():\n    compare\n"
        "def test_exact():\n    assert abs(1 - 1) <= ARITHMETIC_RTOL\n"
        "class TestGroup:\n    def test_method(self):\n        helper(0, 0)\n",
        encoding="utf-8",
    )
    assert uses_a_model_tolerance(module, "test_through_a_helper")
    assert uses_a_model_tolerance(module, "test_through_an_imported_comparison")
    assert uses_a_model_tolerance(module, "TestGroup.test_method")
    assert not uses_a_model_tolerance(module, "test_exact")


def test_the_reference_reruns_are_marked_and_a_test_of_exact_numbers_is_not():
    import test_reference_runs
    from common import test_stats

    rerun = SimpleNamespace(function=test_reference_runs.test_reference_run_still_gives_its_numbers, cls=None)
    assert compares_model_floats(rerun)
    exact = next(getattr(test_stats, name) for name in dir(test_stats) if name.startswith("test_"))
    assert not compares_model_floats(SimpleNamespace(function=exact, cls=None))


def test_ci_logs_each_stage_s_time_and_keeps_its_status(tmp_path):
    """The `stage` helper of `.ci/run`, taken from the script itself, run on a passing and a failing command."""
    script = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    helper = script[script.index("stage() {") : script.index("\n}\n", script.index("stage() {")) + 3]
    runner = tmp_path / "stages.sh"
    runner.write_text(f"set -euo pipefail\n{helper}\nstage first true\nstage second false || echo status $?\n")
    done = subprocess.run(["bash", str(runner)], capture_output=True, text=True, env=dict(os.environ), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["stage first: 0 s", "stage second: 0 s", "status 1"]
    assert Path(REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").count("stage ") >= 6

"""Adding an evaluation is one folder and one line: a toy evaluation, a package of its own laid out as
CONTRIBUTING.md's recipe builds one (`tests/fixtures/toy_evaluation`: the folder `toy_eval/`, the entry point in its
`pyproject.toml` and its own `tests/`), installed as a user installs a package, shows in the registry, `plan`,
`report`, `plot` and `demo`, with no module of lm-eval-longmem edited: everything here is written under `tmp_path`.

The quick tests install it as pip would (its files and a `.dist-info` with the entry point read from its
`pyproject.toml`), in this process; the slow one installs it with pip and runs the toy's own tests, which run it
through `lm_eval --tasks toy` and every command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from kit import REPO_ROOT

from lm_eval_longmem import cli, preflight
from lm_eval_longmem.common import evaluations as registry
from lm_eval_longmem.common.evaluations import BUILTIN, ENTRY_POINT_GROUP, evaluation, names
from lm_eval_longmem.plan import make_plan

TOY = REPO_ROOT / "tests" / "fixtures" / "toy_evaluation"


def entry_point_lines() -> list[str]:
    """The toy package's one line of registration, as its `pyproject.toml` declares it."""
    project = tomllib.loads((TOY / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [f"{name} = {target}" for name, target in project["entry-points"][ENTRY_POINT_GROUP].items()]


def install_by_hand(site: Path) -> Path:
    """What `pip install` leaves for the toy package: its folder, and a `.dist-info` holding the entry point."""
    shutil.copytree(TOY / "toy_eval", site / "toy_eval")
    info = site / "toy_eval-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-eval\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n" + "\n".join(entry_point_lines()) + "\n")
    return site


def _forget_the_toy() -> None:
    registry.evaluations.cache_clear()
    preflight.our_task_names.cache_clear()
    for module in [m for m in sys.modules if m == "toy_eval" or m.startswith("toy_eval.")]:
        del sys.modules[module]


@pytest.fixture
def toy_installed(tmp_path, monkeypatch):
    """The toy package on `sys.path`, the registry read afresh (and forgotten again after the test)."""
    site = install_by_hand(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    _forget_the_toy()
    yield site
    _forget_the_toy()


def toy_results_file(folder: Path) -> Path:
    """A results file as a run of the toy task writes it (the slow test makes a real one)."""
    row = {"alias": "toy", "acc,none": 0.75, "acc_ci_low,none": 0.3, "acc_ci_high,none": 0.95, "skipped,none": 0}
    for length, value in ((8, 1.0), (16, 0.5)):
        row |= {f"acc@{length},none": value, f"acc@{length}_ci_low,none": 0.2, f"acc@{length}_ci_high,none": 1.0}
    data = {
        "results": {"toy": row},
        "configs": {"toy": {"task": "toy", "longmem": {"evaluation": "toy", "condition": "in-context",
                                                        "docs_per_cell": {"8": 2, "16": 2}}}},
        "versions": {"toy": 1.0},
        "n-samples": {"toy": {"original": 4, "effective": 4}},
        "config": {"model": "hf", "model_args": "pretrained=/models/toy-model"},
    }  # fmt: skip
    folder.mkdir(parents=True)
    path = folder / "results_2026-01-01T00-00-00.000001.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_toy_is_registered_by_the_one_line_of_its_package(toy_installed):
    assert entry_point_lines() == ["toy = toy_eval.rim:EVALUATION"]
    assert names() == (*BUILTIN, "toy")
    entry = evaluation("toy")
    assert entry.title == "Toy" and entry.task_folder() == toy_installed / "toy_eval" / "task_configs"
    assert preflight.our_task_names()["toy"] == ("toy", entry.task_folder().resolve())


def test_plan_counts_the_toy_s_rows(toy_installed, tiny_llama_dir):
    plan = make_plan(["toy"], {"pretrained": str(tiny_llama_dir)})
    assert [(row.task, row.cell, row.docs, row.requests) for row in plan.rows] == [
        ("toy", "8", 2, 4),
        ("toy", "16", 2, 4),
    ]
    assert "toy: two docs per length" in plan.notes


def test_report_and_plot_show_the_toy(toy_installed, tmp_path, capsys):
    results = toy_results_file(tmp_path / "run")
    cli.main(["report", str(results), "--output_path", str(tmp_path / "report")])
    headline = capsys.readouterr().out.splitlines()[-1]
    assert headline.startswith("  toy-model: ") and headline.endswith(", toy acc 75.0 [30.0, 95.0]%")
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "| toy acc (%) |" in markdown and "\n## Toy\n" in markdown
    assert "| toy-model | 100.0 [20.0, 100.0] | 50.0 [20.0, 100.0] |" in markdown
    cli.main(["plot", str(results), "--output_path", str(tmp_path / "figure"), "--formats", "png"])
    assert (tmp_path / "figure_toy.png").is_file()


def demo_tasks_help() -> str:
    """The help of `lm-eval-longmem demo --tasks`: the evaluations it offers."""
    parser = cli.build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return next(str(a.help) for a in commands.choices["demo"]._actions if "--tasks" in a.option_strings)


def test_demo_offers_only_the_evaluations_with_a_demo_part(toy_installed, monkeypatch):
    assert "toy" in demo_tasks_help()
    monkeypatch.setattr(type(evaluation("toy")), "demo", lambda self: None)
    offered = demo_tasks_help()
    assert "toy" not in offered and all(name in offered for name in BUILTIN)


@pytest.mark.slow
def test_the_toy_s_own_tests_pass_once_it_is_installed(tmp_path):
    """Installed with pip from its folder, the toy's own tests (`lm_eval --tasks toy` on the embedded model, then
    `report`, `plot`, `plan` and `demo`) pass, run as its author runs them: pytest in the package's folder."""
    site, toy = tmp_path / "site", tmp_path / "toy_evaluation"
    shutil.copytree(TOY, toy)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(site), str(toy)], check=True, capture_output=True, timeout=600)  # fmt: skip
    shutil.rmtree(toy / "toy_eval")  # the tests use the installed package, not the source folder
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(site), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=toy, env=env, capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0 and "5 passed" in done.stdout, done.stdout[-6000:] + done.stderr[-2000:]

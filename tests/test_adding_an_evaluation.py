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
from kit import REPO_ROOT, hf_run_args, read_results, run_lm_eval

from lm_eval_longmem import cli, preflight
from lm_eval_longmem.common import evaluations as registry
from lm_eval_longmem.common.evaluations import BUILTIN, ENTRY_POINT_GROUP, evaluation, names
from lm_eval_longmem.plan import make_plan

TOY = REPO_ROOT / "tests" / "fixtures" / "toy_evaluation"
CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")


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
    registry.registered.cache_clear()
    preflight.our_task_names.cache_clear()
    for module in [m for m in sys.modules if m.split(".")[0] in ("toy_eval", "broken_evals")]:
        del sys.modules[module]


@pytest.fixture
def toy_installed(tmp_path, monkeypatch):
    """The toy package on `sys.path`, the registry read afresh (and forgotten again after the test)."""
    site = install_by_hand(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    _forget_the_toy()
    yield site
    _forget_the_toy()


BROKEN = REPO_ROOT / "tests" / "fixtures" / "broken_evaluations"
BROKEN_POINTS = {
    "broken-import": "cannot = broken_evals.cannot_import:EVALUATION",
    "missing-attribute": "missing = broken_evals.shapes:NO_SUCH_NAME",
    "wrong-shape": "half = broken_evals.shapes:HALF",
    "taken-name": "booksort = broken_evals.shapes:BOOKSORT",
    "misnamed": "misnamed = broken_evals.shapes:MISNAMED",
}
"""Five packages, each registering an evaluation broken in one way (`tests/fixtures/broken_evaluations`): its module
fails to import, the attribute is missing, it is no evaluation, its name is one of ours, it is named otherwise."""

BROKEN_WHY = {
    "broken-import": "cannot be loaded (ModuleNotFoundError: No module named 'lm_eval_longmem_test_no_such_module'); "
    "fix or uninstall that package",
    "missing-attribute": "cannot be loaded (AttributeError: module 'broken_evals.shapes' has no attribute "
    "'NO_SUCH_NAME'); fix or uninstall that package",
    "wrong-shape": "gives a Half, not an lm-eval-longmem evaluation (it lacks ",
    "taken-name": "takes the name of lm-eval-longmem's booksort; choose another name",
    "misnamed": "names the evaluation 'not_misnamed'; name the entry point not_misnamed",
}


def install_packages(site: Path, points: dict[str, str]) -> Path:
    """What `pip install` leaves for packages (distribution -> its one entry-point line) of the broken fixtures."""
    if not (site / "broken_evals").exists():
        shutil.copytree(BROKEN / "broken_evals", site / "broken_evals")
    for dist, line in points.items():
        info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{line}\n", encoding="utf-8")
    return site


def left_out_line(dist: str, line: str) -> str:
    """How the warning that leaves out a package's entry point begins."""
    return f"lm-eval-longmem: left out the entry point {line} of {dist} 0.1 ({ENTRY_POINT_GROUP}): it "


COMMAND_LINE_POINTS = {
    "loud-commands": "loud = broken_evals.shapes:LOUD",
    "taken-flag": "taken_flag = broken_evals.shapes:TAKEN_FLAG",
}
"""Two packages whose evaluations load, and whose part of the command line raises: `add_commands` after adding its
command, `add_report_arguments` after adding a flag of its own, at a flag `report` already has."""

COMMAND_LINE_WHY = {
    "loud-commands": "its add_commands raised RuntimeError: the commands module forgot its flags",
    "taken-flag": "its add_report_arguments raised ArgumentError: argument --output_path: conflicting option string: "
    "--output_path",
}


def left_off_line(dist: str) -> str:
    """The one warning line that leaves a package's evaluation off the command line."""
    line = COMMAND_LINE_POINTS[dist]
    name = line.split(" = ")[0]
    return (
        f"lm-eval-longmem: left out the commands and report flags of evaluation {name} (entry point {line} of {dist} "
        f"0.1 ({ENTRY_POINT_GROUP})): {COMMAND_LINE_WHY[dist]}; fix or uninstall that package"
    )


def test_an_evaluation_whose_commands_or_report_flags_raise_is_one_line_and_left_off_the_command_line(
    toy_installed, registry_warnings, tmp_path, capsys
):
    """`--help` and every command still work; each such evaluation's commands and flags are left out, nothing it
    added halfway stays, and it is still an evaluation (`report` shows it)."""
    install_packages(toy_installed, COMMAND_LINE_POINTS)
    assert names() == (*BUILTIN, "loud", "taken_flag", "toy") and registry_warnings == []
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    commands = capsys.readouterr().out.split("positional arguments:")[1].split("options:")[0]
    assert "babilong" in commands and "loud" not in commands
    assert sorted(registry_warnings) == [left_off_line(dist) for dist in sorted(COMMAND_LINE_POINTS)]
    with pytest.raises(SystemExit) as done:
        cli.main(["report", "--help"])
    flags = capsys.readouterr().out
    assert "--babilong_reference" in flags and "--taken_flag_reference" not in flags
    with pytest.raises(SystemExit) as done:
        cli.main(["loud"])
    assert done.value.code == 2 and "invalid choice: 'loud'" in capsys.readouterr().err
    cli.main(["report", str(toy_results_file(tmp_path / "run")), "--output_path", str(tmp_path / "report")])
    assert "| toy acc (%) |" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert len(registry_warnings) == 2  # said once per process


def test_five_broken_packages_are_one_warning_line_each_and_the_toy_still_registers(
    toy_installed, registry_warnings, tmp_path
):
    install_packages(toy_installed, BROKEN_POINTS)
    assert names() == (*BUILTIN, "toy")
    assert len(registry_warnings) == 5 and not any("\n" in line for line in registry_warnings)
    for (dist, line), said in zip(sorted(BROKEN_POINTS.items(), key=lambda kv: kv[1]), registry_warnings):
        assert said.startswith(left_out_line(dist, line) + BROKEN_WHY[dist]), said
    assert names() == (*BUILTIN, "toy") and len(registry_warnings) == 5  # loaded once: said once


@pytest.mark.slow
@pytest.mark.parametrize("declared", [False, True])
def test_an_evaluation_that_takes_a_harness_task_s_name_is_left_out_unless_it_says_so(
    toy_installed, registry_warnings, declared
):
    """A package's `passkey` task (the harness's own `passkey` is LIBRA's) is left out of the index with one line, and
    the harness's `passkey` stays; declared in `replaces_harness`, it takes the name. The toy is indexed either way."""
    import lm_eval.tasks as harness_tasks

    from lm_eval_longmem.harness.tasks import new_task_manager

    target = "PASSKEY_ON_PURPOSE" if declared else "PASSKEY"
    install_packages(toy_installed, {"passkey-eval": f"passkey = broken_evals.shapes:{target}"})
    assert names() == (*BUILTIN, "passkey", "toy") and registry_warnings == []
    registry.refused_folders([])  # nothing to refuse without an index
    manager = new_task_manager()
    passkey = Path(manager.task_index["passkey"].yaml_path).resolve()
    assert passkey.is_relative_to(toy_installed if declared else Path(harness_tasks.__file__).parent)
    assert "toy" in manager.task_index
    if declared:
        assert registry_warnings == [] and "passkey" in names()
        return
    [line] = registry_warnings
    assert line.startswith(left_out_line("passkey-eval", "passkey = broken_evals.shapes:PASSKEY").removesuffix("it "))
    assert "its task 'passkey' (" in line and "has the name of the harness's (" in line
    assert line.endswith(
        "; rename it, or list it in its evaluation's replaces_harness to take the harness's place on purpose"
    )
    assert names() == (*BUILTIN, "toy")
    new_task_manager()  # once left out, not indexed (nor said) again
    assert len(registry_warnings) == 1


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


def test_an_unknown_toy_key_is_one_line_that_needs_no_card(toy_installed):
    """The toy has no card: the line gives the closest key's meaning and an example, or every key and the class
    declaring them, which any evaluation has."""
    from toy_eval.task import load_docs

    from lm_eval_longmem.common.errors import UsageError

    with pytest.raises(UsageError) as caught:
        load_docs(toy_lenghts="8")
    assert str(caught.value) == (
        "--metadata toy_lenghts: no such option; did you mean toy_lengths? (list lengths (words) to test; "
        "e.g. toy_lengths=8,16)"
    )
    with pytest.raises(UsageError) as caught:
        load_docs(toy_colour="red")
    assert str(caught.value) == (
        "--metadata toy_colour: no such option; valid keys: toy_lengths, toy_limit_order (each with its meaning in "
        "toy_eval.options.ToyOptions)"
    )
    assert "card" not in str(caught.value)


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


@pytest.mark.slow
def test_broken_packages_break_no_command(tiny_llama_dir, embedded_books_dir, tmp_path):
    """With the five broken packages, one that takes the harness's `passkey` unasked and two whose part of the command
    line raises installed beside the toy: `lm-eval-longmem --help`, `plan`, `report`, `lm_eval --tasks
    forgetting_curve` and a plain harness task all work, each process saying each broken package in one warning line
    (the `passkey` one where the harness's task index is built: not in `plan`, which reads our YAMLs; the last two
    where `lm-eval-longmem`'s command line is), with no traceback."""
    site = install_packages(
        install_by_hand(tmp_path / "site"),
        BROKEN_POINTS | {"passkey-eval": "passkey = broken_evals.shapes:PASSKEY"} | COMMAND_LINE_POINTS,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(site), os.environ.get("PYTHONPATH", "")])}
    passkey = left_out_line("passkey-eval", "passkey = broken_evals.shapes:PASSKEY").removesuffix("it ")

    def said(proc: subprocess.CompletedProcess, *, index: bool, command_line: bool = False) -> None:
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert "Traceback" not in proc.stderr
        for dist, line in BROKEN_POINTS.items():
            assert proc.stderr.count(left_out_line(dist, line) + BROKEN_WHY[dist]) == 1, (dist, proc.stderr[-4000:])
        assert proc.stderr.count(passkey) == (1 if index else 0), proc.stderr[-4000:]
        for dist in COMMAND_LINE_POINTS:
            assert proc.stderr.count(left_off_line(dist)) == (1 if command_line else 0), (dist, proc.stderr[-4000:])

    def command(*args: str, index: bool) -> str:
        proc = subprocess.run([CLI, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        said(proc, index=index, command_line=True)
        return proc.stdout

    assert "plan" in command("--help", index=False)
    plan = command("plan", "--tasks", "toy,forgetting_curve", "--model_args", f"pretrained={tiny_llama_dir}",
                   "--metadata", f"forgetting_curve_corpus={embedded_books_dir / 'macbeth.txt'}", index=False)  # fmt: skip
    assert "note: toy: two docs per length" in plan
    command("report", str(toy_results_file(tmp_path / "run")), "--output_path", str(tmp_path / "report"), index=False)
    assert "| toy acc (%) |" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")

    book = embedded_books_dir / "macbeth.txt"
    (tmp_path / "ours").mkdir()
    (tmp_path / "plain").mkdir()
    ours = run_lm_eval(
        hf_run_args(tiny_llama_dir, "forgetting_curve", "--limit", "1", "--batch_size", "1", "--metadata",
            f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[32,64]", "forgetting_curve_samples=1",
            dtype=None),
        tmp_path / "ours", env=env | {"LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")}, check=False,
    )  # fmt: skip
    said(ours, index=True)
    assert "forgetting_curve" in read_results(tmp_path / "ours")["results"]
    plain = run_lm_eval(
        ["--model", "dummy", "--tasks", "longmem_test_plain_choice", "--include_path",
         str(REPO_ROOT / "tests" / "fixtures" / "plain_task")],
        tmp_path / "plain", env=env, check=False,
    )  # fmt: skip
    said(plain, index=True)
    assert "acc,none" in read_results(tmp_path / "plain")["results"]["longmem_test_plain_choice"]


@pytest.mark.slow
def test_the_paths_module_lists_every_evaluation_s_folder(tmp_path):
    """The route with the start-up hook off: `python -m lm_eval_longmem.paths` prints our folder, then the toy's; two
    folders are more than lm_eval's --include_path takes, which it says on stderr (with the command that runs all)."""
    site = install_by_hand(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(site), os.environ.get("PYTHONPATH", "")]),
           "LM_EVAL_LONGMEM_AUTOLOAD": "0"}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "lm_eval_longmem.paths"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, check=True)  # fmt: skip
    from lm_eval_longmem.paths import task_configs_dir

    assert proc.stdout.splitlines() == [str(task_configs_dir()), str(site / "toy_eval" / "task_configs")]
    [line] = proc.stderr.splitlines()
    assert "lm_eval's --include_path takes one" in line and "lm-eval-longmem run" in line

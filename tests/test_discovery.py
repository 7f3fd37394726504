"""Task discovery, three ways, through the real `lm_eval` command line; and the start-up hook's manners."""

import json
import os
import subprocess
import sys

import pytest
from kit import REPO_ROOT, run_lm_eval

from lm_eval_longmem.paths import task_configs_dir

OURS = ("forgetting_curve", "booksort", "babilong")
OFF = {"LM_EVAL_LONGMEM_AUTOLOAD": "0"}


def _python(code: str, env: dict | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **(env or {})}
    )
    return proc.stdout


def _listing(tmp_path, *extra, env=None) -> dict[str, str]:
    """{name: yaml path} of every group and task in `lm_eval ls tasks`."""
    out = run_lm_eval(["ls", "tasks", *extra], tmp_path, env=env).stdout
    rows = [line.strip().strip("|").split("|") for line in out.splitlines() if line.startswith("|")]
    return {cells[0].strip(): cells[1].strip() for cells in rows if len(cells) >= 2}


@pytest.mark.slow
def test_lm_eval_lists_our_tasks_with_no_flags(tmp_path):
    groups = _listing(tmp_path)
    for name in OURS:
        assert name in groups, f"{name} missing from `lm_eval ls tasks`"
        assert f"task_configs/{name}/" in groups[name], f"{name} resolves to {groups[name]}, not to our YAML"


@pytest.mark.slow
def test_switch_off_hides_them_and_include_path_brings_them_back(tmp_path):
    off = _listing(tmp_path, env=OFF)
    assert "forgetting_curve" not in off and "booksort" not in off
    assert "lm_eval/tasks/babilong" in off["babilong"]  # the harness's own group is back
    explicit = _listing(tmp_path, "--include_path", str(task_configs_dir()), env=OFF)
    for name in OURS:
        assert f"task_configs/{name}/" in explicit[name]


@pytest.mark.slow
def test_paths_module_prints_the_include_path():
    printed = _python("import runpy; runpy.run_module('lm_eval_longmem.paths', run_name='__main__')").strip()
    assert printed == str(task_configs_dir()) and (task_configs_dir() / "booksort").is_dir()


@pytest.mark.slow
def test_python_api_task_manager_knows_our_tasks_without_the_hook():
    code = (
        "import json, lm_eval_longmem\n"
        "tm = lm_eval_longmem.task_manager()\n"
        "print(json.dumps({n: str(tm._index[n].yaml_path) for n in ('forgetting_curve','booksort','babilong')}))"
    )
    paths = json.loads(_python(code, env=OFF))
    for name in OURS:
        assert f"task_configs/{name}/" in paths[name]


@pytest.mark.slow
def test_hook_imports_nothing_heavy_at_start_up_and_can_be_switched_off():
    code = (
        "import sys\n"
        "heavy = [m for m in ('lm_eval', 'torch', 'transformers', 'typing', 'pathlib', 'lm_eval_longmem') if m in sys.modules]\n"
        "armed = any(type(f).__name__ == 'LmEvalLongmemHook' for f in sys.meta_path)\n"
        "import json; print(json.dumps({'heavy': heavy, 'armed': armed}))"
    )
    on = json.loads(_python(code))
    off = json.loads(_python(code, env=OFF))
    assert on == {"heavy": [], "armed": True}
    assert off == {"heavy": [], "armed": False}


@pytest.mark.slow
def test_our_names_collide_with_no_builtin_except_the_babilong_group():
    code = (
        "import json\n"
        "from lm_eval.tasks import TaskManager\n"
        "from lm_eval_longmem.paths import task_configs_dir\n"
        "builtin = set(TaskManager().all_tasks)\n"
        "ours = TaskManager(include_path=str(task_configs_dir()), include_defaults=False)\n"
        "print(json.dumps({'clash': sorted(builtin & set(ours.all_tasks)), 'groups': ours.all_groups, 'n': len(ours.all_tasks)}))"
    )
    found = json.loads(_python(code, env=OFF).strip().splitlines()[-1])
    from lm_eval_longmem.common.evaluations import evaluations

    declared = sorted(name for entry in evaluations() for name in entry.replaces_harness)
    assert found["clash"] == declared == ["babilong"], "only babilong may replace a built-in name, and says so"
    assert "booksort" in found["groups"] and found["n"] > 3


@pytest.mark.slow
def test_console_script_help_lists_our_commands():
    out = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for command in ("run", "plot"):
        assert command in out


@pytest.mark.skipif(not (REPO_ROOT / "pyproject.toml").exists(), reason="needs the source checkout")
@pytest.mark.slow
def test_wheel_ships_task_configs_and_the_hook(tmp_path):
    """A non-editable install: the wheel carries the YAMLs inside the package and the .pth at the root."""
    import zipfile

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO_ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("lm_eval_longmem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "lm_eval_longmem.pth" in names
    for name in OURS:
        assert any(n.startswith(f"lm_eval_longmem/task_configs/{name}/") and n.endswith(".yaml") for n in names)
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = (
        f"import site; site.addsitedir({str(target)!r});"
        "from lm_eval_longmem.paths import task_configs_dir; print(task_configs_dir())"
    )
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"
    }  # only the extracted wheel, not a checkout on the path
    printed = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path, env=env
    ).stdout
    assert printed.strip() == str(target / "lm_eval_longmem" / "task_configs")

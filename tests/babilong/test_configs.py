"""The generated task configs: in sync with the generator, loadable by the harness, no name clashes."""

from __future__ import annotations

from pathlib import Path

from lm_eval_longmem.babilong.configs import task_configs, write_task_configs
from lm_eval_longmem.babilong.data import ALL_TASKS, STANDARD_LENGTHS
from lm_eval_longmem.paths import task_configs_dir

COMMITTED = task_configs_dir() / "babilong"
EXPECTED_TASKS = {f"babilong_{qa}_{length}" for qa in ALL_TASKS for length in STANDARD_LENGTHS}
EXPECTED_GROUPS = {"babilong"} | {f"babilong_{length}" for length in STANDARD_LENGTHS}


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != "README.md" and p.is_file()}


def test_committed_yamls_are_in_sync_with_the_generator(tmp_path):
    write_task_configs(tmp_path)
    assert _snapshot(tmp_path) == _snapshot(COMMITTED), "run: python -m lm_eval_longmem.babilong.configs"
    assert set(_snapshot(tmp_path)) == set(task_configs())


def _index(folder: Path) -> dict:
    """The harness's own index of one folder (what a TaskManager builds from it)."""
    from lm_eval.tasks._index import TaskIndex

    return TaskIndex().build([folder])


def test_task_index_is_exact():
    from lm_eval.tasks._index import Kind

    index = _index(COMMITTED)
    assert {n for n, e in index.items() if e.kind in (Kind.TASK, Kind.PY_TASK)} == EXPECTED_TASKS
    assert {n for n, e in index.items() if e.kind == Kind.GROUP} == EXPECTED_GROUPS
    assert set(index) == EXPECTED_TASKS | EXPECTED_GROUPS  # no tags, nothing else


def test_only_the_top_group_replaces_a_built_in_name():
    import lm_eval.tasks

    builtin_names = set(_index(Path(lm_eval.tasks.__file__).parent))
    ours = EXPECTED_TASKS | EXPECTED_GROUPS
    assert ours & builtin_names == {"babilong"}
    assert {"babilong_qa1", "babilong_longctx"} <= builtin_names  # the built-ins we must not shadow exist

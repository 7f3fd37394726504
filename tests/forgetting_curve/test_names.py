"""The harness indexes exactly our one task from our folder, and no built-in task bears its name."""

from pathlib import Path

import lm_eval.tasks
from lm_eval.tasks import TaskManager

from lm_eval_longmem.paths import task_configs_dir

FOLDER = task_configs_dir() / "forgetting_curve"


def test_task_index_is_exact():
    index = TaskManager(include_path=str(task_configs_dir()), include_defaults=False).task_index
    ours = {name: entry for name, entry in index.items() if FOLDER in entry.yaml_path.parents}
    assert set(ours) == {"forgetting_curve"} and ours["forgetting_curve"].kind.name in ("TASK", "PY_TASK")


def test_no_builtin_name_collides():
    # Every built-in task, group and tag name is spelled in a YAML under lm_eval/tasks: if none
    # mentions ours, the harness's index cannot hold it (cheaper than indexing 10k YAMLs).
    builtin = Path(lm_eval.tasks.__file__).parent
    hits = [p for p in builtin.rglob("*.yaml") if "forgetting_curve" in p.read_text(errors="replace")]
    hits += [p for p in builtin.rglob("*") if "forgetting_curve" in p.name]
    assert not hits

"""`lm_eval_longmem.harness.install`, the one point where lm-eval-longmem changes lm_eval, and the start-up hook
that calls it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kit import REPO_ROOT, hf_run_args

# ---------------------------------------------------------------- the start-up hook


@pytest.mark.slow
def test_pth_hook_is_idempotent():
    """The `.pth` line run twice (e.g. the file processed twice) arms one finder, not two."""
    line = (REPO_ROOT / "lm_eval_longmem.pth").read_text()
    assert len(line.strip().splitlines()) == 1
    code = (
        f"import sys\nline = {line.strip()!r}\nexec(line); exec(line)\n"
        "print(sum(type(f).__name__ == 'LmEvalLongmemHook' for f in sys.meta_path))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LM_EVAL_LONGMEM_AUTOLOAD"}
    counts = [
        subprocess.run(
            [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env={**env, **extra}
        ).stdout.strip()
        for extra in ({}, {"LM_EVAL_LONGMEM_AUTOLOAD": "off"})
    ]
    assert counts == ["1", "0"]


@pytest.mark.slow
def test_hook_activates_the_harness_patches_on_first_import():
    code = (
        "import json, sys\n"
        "import lm_eval.tasks.manager as m, lm_eval.api.model as model\n"
        "print(json.dumps({'tm': getattr(m.TaskManager.__init__, '_lm_eval_longmem', False),"
        " 'lm': getattr(model.LM.create_from_arg_string.__func__, '_lm_eval_longmem', False),"
        " 'hook': getattr(sys.excepthook, '_lm_eval_longmem', False),"
        " 'armed': any(type(f).__name__ == 'LmEvalLongmemHook' for f in sys.meta_path)}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LM_EVAL_LONGMEM_AUTOLOAD"}
    on = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    )
    off = json.loads(
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**env, "LM_EVAL_LONGMEM_AUTOLOAD": "0"},
        ).stdout
    )
    assert on == {"tm": True, "lm": True, "hook": True, "armed": False}  # the finder retired itself
    assert off == {"tm": False, "lm": False, "hook": False, "armed": False}


# ---------------------------------------------------------------- the one install point


def _fresh_python(code: str) -> dict:
    """What `code` prints as JSON, run in a fresh interpreter with the start-up hook off (nothing installed)."""
    env = {**os.environ, "LM_EVAL_LONGMEM_AUTOLOAD": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


STATE = """
def state():
    import sys
    import lm_eval.api.model as model, lm_eval.api.task as task, lm_eval.evaluator_utils as evaluator_utils
    import lm_eval.tasks.manager as manager
    mark = lambda f: bool(getattr(f, "_lm_eval_longmem", False))
    hflm = sys.modules.get("lm_eval.models.huggingface")
    return {
        "aggregation": mark(evaluator_utils._compute_task_aggregations),
        "factories": mark(model.LM.create_from_arg_string.__func__),
        "usage_error": mark(sys.excepthook),
        "task_index": mark(manager.TaskManager.__init__),
        "output_type": "loglikelihood_accuracy" in task.ALL_OUTPUT_TYPES,
        "caching_lm": mark(model.CachingLM.__getattr__),
        "hf_method": hflm is not None and hasattr(hflm.HFLM, "loglikelihood_accuracy"),
        "probe_cap": hflm is not None and mark(hflm.HFLM._detect_batch_size),
    }
"""


@pytest.mark.slow
def test_install_changes_only_what_it_is_handed_and_twice_is_once():
    """`harness.install`: the aggregation hook and the LM factories always; the usage-error hook, the request type,
    the batch-probe cap and our task index only when handed; a second call changes nothing."""
    code = STATE + (
        "import json\n"
        "from dataclasses import replace\n"
        "from lm_eval_longmem.backends import plugin\n"
        "from lm_eval_longmem.common.errors import UsageError\n"
        "from lm_eval_longmem.harness import Plugin, install\n"
        "import lm_eval.api.model as model, lm_eval.tasks.manager as manager\n"
        "states = [state()]\n"
        "install(Plugin())\n"
        "states.append(state())\n"
        "full = replace(plugin(), usage_error=UsageError)\n"
        "install(full, index_our_tasks=True)\n"
        "installed = (sys.excepthook, manager.TaskManager.__init__, model.CachingLM.__getattr__)\n"
        "install(full, index_our_tasks=True)\n"
        "again = (sys.excepthook, manager.TaskManager.__init__, model.CachingLM.__getattr__) == installed\n"
        "print(json.dumps({'states': states + [state()], 'again': again}))\n"
    )
    result = _fresh_python("import sys\n" + code)
    nothing = dict.fromkeys(result["states"][0], False)
    assert result["states"][0] == nothing  # the hook off: lm_eval as it ships
    assert result["states"][1] == nothing | {"aggregation": True, "factories": True}
    assert result["states"][2] == dict.fromkeys(nothing, True)
    assert result["again"]


@pytest.mark.slow
def test_importing_our_modules_changes_nothing_in_lm_eval():
    """No module of ours patches lm_eval when imported (the task modules did); building a task does."""
    code = STATE + (
        "import json\n"
        "import lm_eval_longmem.backends.task, lm_eval_longmem.booksort.task, lm_eval_longmem.babilong.task\n"
        "import lm_eval_longmem.forgetting_curve.task, lm_eval_longmem.cli, lm_eval_longmem.commands.merge\n"
        "imported = state()\n"
        "import datasets\n"
        "from lm_eval_longmem.backends.task import LoglikelihoodAccuracyTask\n"
        "LoglikelihoodAccuracyTask(config={'task': 'unit', 'test_split': 'test', 'doc_to_text': '{{q}}', 'doc_to_target': '{{a}}',\n"
        "    'custom_dataset': lambda **kw: {'test': datasets.Dataset.from_list([{'q': 'Hello', 'a': ' world'}])}})\n"
        "print(json.dumps({'imported': imported, 'built': state()}))\n"
    )
    result = _fresh_python(code)
    assert not any(result["imported"].values()), result["imported"]
    assert result["built"] == dict.fromkeys(result["built"], True) | {"usage_error": False, "task_index": False}


@pytest.mark.slow
def test_our_tasks_run_from_include_path_with_the_hook_off(tiny_llama_dir, embedded_books_dir, tmp_path):
    """`lm_eval run --include_path <our task folder>` with the start-up hook off: nothing activated the plugin, so
    building our tasks installs what they need (the request type of forgetting_curve, the aggregation of both)."""
    from kit import read_results, run_lm_eval

    from lm_eval_longmem.paths import task_configs_dir

    book = embedded_books_dir / "macbeth.txt"
    proc = run_lm_eval(
        hf_run_args(tiny_llama_dir, "forgetting_curve,babilong", "--include_path", str(task_configs_dir()), "--limit",
            "2", "--metadata", f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[16,32]",
            "forgetting_curve_samples=1", "babilong_source=generate", "babilong_facts=simulated",
            f"babilong_corpus={book}", "babilong_lengths=[0k]", "babilong_tasks=[qa1]", "babilong_samples=2"),
        tmp_path, env={"LM_EVAL_LONGMEM_AUTOLOAD": "0"},
    )  # fmt: skip
    assert "overrides existing task" in proc.stderr  # the hook is off: the harness warns that ours replace its babilong
    results = read_results(tmp_path)["results"]
    assert {"copy_acc@16,none", "lm_acc@32,none"} <= set(results["forgetting_curve"]), sorted(
        results["forgetting_curve"]
    )
    assert {"acc@qa1_0,none", "acc_corrected@qa1_0,none"} <= set(results["babilong"]), sorted(results["babilong"])

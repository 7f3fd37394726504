"""Where our task YAMLs live; `python -m lm_eval_longmem.paths` prints the folders to index.

The YAMLs are kept in `task_configs/` at the repository root and shipped inside the wheel as
`lm_eval_longmem/task_configs/`, so both an installed wheel and an editable/source checkout
resolve here.

`python -m lm_eval_longmem.paths` (the route with the start-up hook off) prints the task folder of every
registered evaluation, one per line: ours first, then those of other packages' evaluations
(`common.evaluations.task_folders`). lm_eval's `--include_path` takes one folder (0.4.13 does not split a
list), so `--include_path "$(python -m lm_eval_longmem.paths)"` serves while ours are the only evaluations;
with others installed it says so on stderr, and `lm-eval-longmem run` (lm_eval's flags, every registered
evaluation indexed) or `TaskManager(include_path=[...])` with the printed folders runs them all. That command
is `paths/__main__.py`, above the registry it reads; this module, below everything, imports nothing of ours.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def task_configs_dir() -> Path:
    """The directory to give lm_eval as `--include_path` (wheel layout first, then a checkout)."""
    for candidate in (_PACKAGE_DIR / "task_configs", _PACKAGE_DIR.parent / "task_configs"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"lm-eval-longmem's task_configs/ is missing next to {_PACKAGE_DIR}: reinstall the package "
        "(`pip install lm-eval-longmem` or `pip install -e .` from a checkout)"
    )

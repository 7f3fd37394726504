"""Where our task YAMLs live; `python -m lm_eval_longmem.paths` prints the directory.

The YAMLs are kept in `task_configs/` at the repository root and shipped inside the wheel as
`lm_eval_longmem/task_configs/`, so both an installed wheel and an editable/source checkout
resolve here.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def task_configs_dir() -> Path:
    """The directory to give lm_eval as `--include_path` (wheel layout first, then a checkout)."""
    for candidate in (_PACKAGE_DIR / "task_configs", _PACKAGE_DIR.parent / "task_configs"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"lm-eval-longmem's task_configs/ is missing next to {_PACKAGE_DIR}: reinstall the package "
        "(`pip install lm-eval-longmem` or `pip install -e .` from a checkout)"
    )


if __name__ == "__main__":
    print(task_configs_dir())

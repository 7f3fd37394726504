"""What a run checks before the harness loads its model: every input of our tasks, reported at once.

The harness creates the model first and loads the tasks after it, so a task whose data cannot be read
(a hub dataset offline or gated, a folder that does not exist) used to stop the run only after the
model had loaded, and only for the first such task: three tasks with hub-only data took three runs to
find out. `check_run` is called by the harness hook (`harness.evaluator.install_before_model`, R17) just before
`simple_evaluate` creates the model, for the `lm_eval` CLI and the Python API alike. For every task of
ours in the run it parses the options and checks each data source the way the data builder will read
it (each evaluation's `Evaluation.source_problems`), and it checks that a hub model is there when the hub
is offline. Every problem found goes into one `UsageError`: one line per problem, each naming the option
and the local alternative (the embedded plays, a local build or generated data, a local model folder).
Runs without our tasks are not touched.

Nothing here is imported until a run asks for one of our tasks.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import evaluation as evaluation_entry
from lm_eval_longmem.common.evaluations import evaluations

_NAME_LINE = re.compile(r"^(?:task|group):\s*([A-Za-z0-9_]+)\s*$", re.MULTILINE)


@lru_cache(maxsize=1)
def our_task_names() -> dict[str, tuple[str, Path]]:
    """Every task and group name our YAMLs declare -> (its evaluation, that evaluation's task folder)."""
    names = {}
    for entry in evaluations():
        folder = entry.task_folder().resolve()
        for path in sorted(folder.rglob("*.yaml")):
            for name in _NAME_LINE.findall(path.read_text(encoding="utf-8")):
                names[name] = (entry.name, folder)
    return names


def requested_evaluations(run: Any) -> list[str]:
    """Our evaluations among the run's tasks, in the order asked (a name another include path took over is not ours)."""
    found: dict[str, None] = {}
    for name in run.tasks:
        ours = our_task_names().get(name) if isinstance(name, str) else None
        yaml = run.task_yaml(name) if ours else None
        if ours and (yaml is None or yaml.resolve().is_relative_to(ours[1])):
            found[ours[0]] = None
    return list(found)


def model_problems(metadata: dict[str, Any]) -> list[str]:
    """`pretrained` that cannot be loaded: a path that does not exist, or a hub model the offline hub cannot give."""
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    from lm_eval_longmem.common.embedded import MODEL_HINT

    name = metadata.get("pretrained")
    if not isinstance(name, str) or not name.strip() or Path(name).expanduser().exists():
        return []
    try:
        cached = try_to_load_from_cache(name, "config.json", revision=metadata.get("revision"))
    except HFValidationError:  # not a hub id, so a local path, and it does not exist
        return [f"--model_args pretrained={name}: no such folder; pass a model folder ({MODEL_HINT}) or a hub id"]
    if constants.is_offline_mode() and not isinstance(cached, str):
        return [
            f"--model_args pretrained={name}: not in the local Hugging Face cache, and the hub is offline "
            f"(HF_HUB_OFFLINE); download it once online (`hf download {name}`), or pass a model folder ({MODEL_HINT})"
        ]
    return []


def run_problems(run: Any) -> list[str]:
    """Every problem `check_run` reports for `run` (empty when it has none of our tasks, or none at all)."""
    evaluations = requested_evaluations(run)
    if not evaluations:
        return []
    problems = model_problems(run.metadata)
    for evaluation in evaluations:
        try:
            problems += evaluation_entry(evaluation).source_problems(run.metadata)
        except UsageError as err:  # a bad option (its message names the key): reported with the rest
            problems.append(str(err))
    return problems


def check_run(run: Any) -> None:
    """Raise one `UsageError` naming every problem of `run` (see the module docstring); None when there is none."""
    problems = run_problems(run)
    if len(problems) == 1:
        raise UsageError(f"{problems[0]} (checked before loading the model)")
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise UsageError(
            f"{len(problems)} inputs of this run cannot be used (checked before loading the model; nothing ran):\n{lines}"
        )

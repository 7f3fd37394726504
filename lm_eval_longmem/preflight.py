"""What a run checks before the harness loads its model: every input of our tasks, reported at once.

The harness creates the model first and loads the tasks after it, so a task whose data cannot be read
(a hub dataset offline or gated, a folder that does not exist) used to stop the run only after the
model had loaded, and only for the first such task: three tasks with hub-only data took three runs to
find out. `check_run` is called by the harness hook (`harness.evaluator.install_before_model`, R17) just before
`simple_evaluate` creates the model, for the `lm_eval` CLI and the Python API alike. For every task of
ours in the run it parses the options and checks each data source the way the data builder will read
it (each evaluation's `Evaluation.source_problems`), and it checks the model (its config and weights, and
the tokenizer, loaded once). Unless an offline variable is set, one short probe of the hub comes first
(`common.hub`): a hub that does not answer is treated as offline for the rest of the process, so the check
names a hub model or dataset missing from the local cache whether the hub is offline by variable or simply
unreachable, without huggingface_hub's minute of retries, and nothing after a passed check waits on the
network. Every problem found goes into one `UsageError`: one line per problem, each naming the option
and the local alternative (the embedded plays, a local build or generated data, a local model folder).
Runs without our tasks are not touched.

Nothing here is imported until a run asks for one of our tasks.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from lm_eval_longmem.common import hub
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.evaluations import evaluation as evaluation_entry
from lm_eval_longmem.common.evaluations import evaluations
from lm_eval_longmem.common.hub import Probe

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


def model_problems(metadata: dict[str, Any], probe: Probe | None = None, *, weights: bool = True) -> list[str]:
    """What keeps the model (`pretrained`: config and weights; `weights=False`: its config only, as `plan` reads it)
    and its tokenizer (`tokenizer`, else `pretrained`) from loading: a folder that is not there or lacks files, a
    hub model the unusable hub cannot give (offline by variable, or unreachable: `common.hub`), or one the hub
    refused at `probe` (its config.json). The tokenizer is loaded (once per process: the data builders reuse it)
    when its files are there."""
    from lm_eval_longmem.common.model_info import load_tokenizer

    problems = []
    pretrained, tokenizer = _named(metadata, "pretrained"), _named(metadata, "tokenizer")
    revision = metadata.get("revision")
    if pretrained and (why := _source_problem(pretrained, revision, probe, weights=weights)):
        problems.append(f"--model_args pretrained={pretrained}: {why}")
    if tokenizer and tokenizer != pretrained and (why := _source_problem(tokenizer, revision, None, weights=False)):
        problems.append(f"tokenizer={tokenizer}: {why}")
    if not problems and (pretrained or tokenizer):
        try:
            load_tokenizer(metadata)
        except UsageError as err:
            problems.append(str(err))
    return problems


def _named(metadata: dict[str, Any], key: str) -> str:
    value = metadata.get(key)
    return value.strip() if isinstance(value, str) else ""


def _hub_id(name: str) -> bool:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def model_probe_url(metadata: dict[str, Any]) -> str | None:
    """The URL the one hub probe asks for: the config.json of a hub model named by `pretrained`, else None (the
    hub's address), so the probe that tells whether the hub answers also tells whether it has the model."""
    from urllib.parse import quote

    name = _named(metadata, "pretrained")
    if not name or Path(name).expanduser().exists() or not _hub_id(name):
        return None
    return f"{hub.endpoint()}/{name}/resolve/{quote(metadata.get('revision') or 'main', safe='')}/config.json"


def _source_problem(name: str, revision: str | None, probe: Probe | None, *, weights: bool) -> str:
    from lm_eval_longmem.common.embedded import MODEL_HINT
    from lm_eval_longmem.common.model_info import model_folder

    path = Path(name).expanduser()
    if path.exists():
        return _missing_files(path) if weights else ""
    if not _hub_id(name):
        return f"no such folder; pass a model folder ({MODEL_HINT}) or a hub id"
    fix = f"download it once online (`hf download {name}`), or pass a model folder ({MODEL_HINT})"
    if reason := hub.unusable_reason():
        folder = model_folder(name, revision)
        if folder is None:
            return f"not in the local Hugging Face cache, and {reason}; {fix}"
        if weights and (missing := _missing_files(folder)):
            return f"only partly in the local Hugging Face cache ({missing}), and {reason}; {fix}"
        return ""
    if probe is not None and probe.url == model_probe_url({"pretrained": name, "revision": revision}):
        if probe.status in (401, 403, 404):
            return (
                f"the hub at {hub.endpoint()} answered HTTP {probe.status} for its config.json: check the name; "
                "for a gated or private model, accept its terms on the hub and log in (`hf auth login`)"
            )
    return ""


def _missing_files(folder: Path) -> str:
    """What a model folder lacks for the backend to load it: its config.json or its weights ("" when complete)."""
    import json

    from lm_eval_longmem.common.model_info import WEIGHT_SUFFIXES

    if folder.is_file():  # a single-file model (GGUF): the backend reads it as it is
        return ""
    if not (folder / "config.json").is_file():
        return f"no config.json in {folder}"
    for index in sorted(folder.glob("*.index.json")):
        shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
        if absent := sorted(shard for shard in shards if not (folder / shard).is_file()):
            return f"{len(absent)} of the {len(shards)} weight files {index.name} lists are not in {folder}"
        return ""
    if not any(file.is_file() and file.name.endswith(WEIGHT_SUFFIXES) for file in folder.iterdir()):
        return f"no weight files in {folder}"
    return ""


def run_problems(run: Any) -> list[str]:
    """Every problem `check_run` reports for `run` (empty when it has none of our tasks, or none at all).

    Unless an offline variable is set, one short probe of the hub comes first (`common.hub.probe`): when the
    hub does not answer, the process goes offline, so the model and every data source are checked against
    the local cache at once (no retries), and the run after a passed check never waits on the network."""
    evaluations = requested_evaluations(run)
    if not evaluations:
        return []
    problems = doc_problems(run)
    probe = None if hub.unusable_reason() else hub.probe(model_probe_url(run.metadata))
    problems += model_problems(run.metadata, probe)
    for evaluation in evaluations:
        try:
            problems += evaluation_entry(evaluation).source_problems(run.metadata)
        except UsageError as err:  # a bad option (its message names the key): reported with the rest
            problems.append(str(err))
    return problems


def doc_problems(run: Any) -> list[str]:
    """A `--limit` or `--samples` that leaves one of our tasks no doc (the harness would stop after the model loaded,
    in a traceback: `task.build_requests() did not find any docs!`)."""
    from lm_eval_longmem.common.flags import shown

    ours = [name for name in run.tasks if isinstance(name, str) and name in our_task_names()]
    if run.limit is not None and run.limit <= 0:
        return [
            f"--limit {shown(run.limit)} runs no doc of {', '.join(ours)}: give a number of docs per task (1 or more), "
            "a share of them (above 0, below 1.0), or no --limit for every doc"
        ]
    empty = [name for name in ours if run.samples is not None and run.samples.get(name) == []]
    return [f"--samples gives {name} no doc: list its doc ids, or leave the task out of --samples" for name in empty]


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

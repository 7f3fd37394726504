"""The registry of evaluations: what an evaluation gives the generic commands (`typing.Protocol`s), and
where the entries come from.

Generic code (the console script, `report`, `plot`, `plan`, `demo`, `merge`, the run's checks before the
model loads, the results readers) reaches an evaluation only through its entry, an `Evaluation`:
`evaluations()` lists them, `evaluation(name)` finds one. An evaluation is one package: its core
(options, data, task, ...) and its rim, `<package>.rim`, whose `EVALUATION` is the entry. The entry's
members import the rim's modules only when called, so loading the registry costs a few small imports.

Where entries come from:

* ours: `BUILTIN`, each `lm_eval_longmem.<name>.rim:EVALUATION`. They are written here rather than as
  entry points in our own `pyproject.toml`, so that a source checkout (`PYTHONPATH`, or an editable
  install made before an evaluation was added) sees every one without reinstalling;
* anyone else's: the entry-point group `lm_eval_longmem.evaluations` (`ENTRY_POINT_GROUP`), one line in
  the package's `pyproject.toml`, named after the evaluation::

      [project.entry-points."lm_eval_longmem.evaluations"]
      toy = "toy_eval.rim:EVALUATION"

  Another package cannot break the host: an entry point that fails (its module does not import, it names
  no attribute or no `Evaluation`, it is named otherwise than its evaluation, or its name is taken by ours or
  by another package's) is left out with one warning line naming its distribution and entry point, and
  everything else works. So is an evaluation whose task or group name is one the harness (or another
  evaluation) already has, when the harness's task index meets it (`refused_folders`), unless it lists that
  name in `Evaluation.replaces_harness`: taking a harness name is said, never silent. An evaluation whose
  `add_commands` or `add_report_arguments` raises loses its part of `lm-eval-longmem`'s command line, said in
  one warning line (`leave_off_command_line`); the rest of the command line, and its other parts, work.

A task of ours records its evaluation's `name` in the results file (`configs.<task>.longmem.evaluation`,
`LongmemTask.EVALUATION`); readers take it from there (`readers.results.evaluation_of`, which asks each entry's
`results_reading` to recognise a file written before tasks recorded it). `ResultsReading` is defined below the
registry, in `common.run` (whose readers apply it), and handed on here.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.run import ResultsReading

if TYPE_CHECKING:  # the generic types an evaluation's members take and give (plain classes below the registry)
    import argparse

    from lm_eval_longmem.common.document import Section
    from lm_eval_longmem.common.model_info import Window
    from lm_eval_longmem.common.plan_rows import Row, TaskFacts
    from lm_eval_longmem.common.run import Run

BUILTIN: tuple[str, ...] = ("forgetting_curve", "booksort", "babilong")
"""Our evaluations, in the order commands, figures and the headline table list them (each `lm_eval_longmem.<name>.rim`)."""

ENTRY_POINT_GROUP = "lm_eval_longmem.evaluations"
"""The entry-point group through which another package registers an evaluation (listed after ours, by name)."""

log = logging.getLogger(f"lm_eval.{__name__}")


@dataclass(frozen=True)
class Headline:
    """The one number a leaderboard reads for an evaluation (every one is higher-is-better): a metric of its
    headline task (its report section's `headline_cells` say which task that is)."""

    metric: str
    """The metric's name in that task's results row."""
    meaning: str
    """What it measures, in a few words (the report's headline section)."""


class ReportSection(Protocol):
    """An evaluation's part of `lm-eval-longmem report` (`report/`). Subclass it to take the defaults of the
    optional members."""

    position: int
    """Where its sections stand among the evaluations' sections (lowest first)."""
    headline_header: Sequence[str]
    """Its columns of the headline table."""
    scores: Sequence[metric_names.ScoreSpec] = ()
    """Its tasks' per-doc scores (as in `LongmemTask.SCORES`): the report refuses a run in which one has a value its
    family cannot have (`report.impossible_values`: a proportion outside [0, 1], a perplexity below 1)."""

    def headline_cells(self, run: Run) -> list[str]:
        """Its cells of `run`'s row of the headline table (one per column of `headline_header`)."""
        ...

    def headline_line(self, cells: list[str]) -> str:
        """Those cells as a terminal line says them (`report.headline_lines`)."""
        ...

    def sections(self, runs: Sequence[Run], labels: Sequence[str]) -> list[Section]:
        """Its sections for the runs (models) `runs`, labelled `labels`; none when no run has its tasks."""
        ...

    def headline_notes(self, run: Run) -> str:
        """What a terminal line adds after `run`'s headline numbers."""
        return ""

    def headline_flags(self, runs: Sequence[Run], labels: Sequence[str]) -> list[str]:
        """Paragraphs under the headline table."""
        return []

    def cell_label(self, run: Run, cell: str) -> str:
        """How the report names a cell of one of its tasks (a skip reason's, a cell no doc ran at)."""
        return cell

    def is_auxiliary(self, run: Run) -> bool:
        """True for a run shown only in its own closing section, not as a model of the report."""
        return False

    def closing_sections(self, runs: Sequence[Run], labels: Sequence[str]) -> list[Section]:
        """Sections after the other harness tasks, over every run (auxiliary ones included)."""
        return []

    def configured(self, options: Mapping[str, Any]) -> ReportSection:
        """This section with its inputs from `report`'s options (its flags, `Evaluation.add_report_arguments`,
        by their `dest`); itself when it takes none."""
        return self


@runtime_checkable
class Plotter(Protocol):
    """An evaluation's figure for `lm-eval-longmem plot` (a module with these two functions will do)."""

    def can_plot(self, results: Any) -> bool:
        """Whether the parsed results file `results` (an lm_eval results dict, or another format the
        evaluation reads) holds what its figure draws."""
        ...

    def plot(self, results: Any, out_prefix: Path, formats: tuple[str, ...]) -> list[Path]:
        """Draw it as `<out_prefix>_<evaluation>.<format>` for every format; the files written."""
        ...


class Planner(Protocol):
    """An evaluation's rows of `lm-eval-longmem plan` (a function with this signature will do)."""

    def __call__(
        self, task: TaskFacts, metadata: dict[str, Any], tokenizer: Any, window: Window
    ) -> tuple[list[Row], list[str]]:
        """`task`'s rows (one per cell) under `metadata`, counted with the model's `tokenizer` and `window`,
        and notes for the foot of the plan."""
        ...


class DemoPart(Protocol):
    """What `lm-eval-longmem demo` does for an evaluation. Each member gets the demo's size (one of
    `commands.demo.SIZES`), and the folder of books and the demo's output folder where it needs them."""

    target: str
    """The folder under the output folder that `build` replaces ("": none), checked before any step."""

    def metadata(self, size: str, books: Path, out: Path) -> dict[str, object]:
        """Its keys of the `--metadata` of the demo's lm_eval run."""
        ...

    def sentence(self, run: Run) -> str | None:
        """Its headline as a sentence a researcher can quote (numbers with 95% intervals and their n), or
        None when the run does not have it."""
        ...

    def step(self, size: str) -> str | None:
        """The line of the step `build` is; None when `build` runs without a step of its own."""
        return None

    def build(self, size: str, books: Path, out: Path) -> str:
        """Make its data under `out` before the run; what its step's closing line says."""
        return ""

    def replaces(self, path: Path) -> bool:
        """Whether the folder at `target` is one `build` may replace (with `--overwrite`)."""
        return False

    def kept(self, size: str, books: Path, out: Path) -> bool:
        """Whether `target` already holds, intact, what `build` would make now (an earlier demo's, with the same
        settings): the demo then keeps it without `--overwrite` and skips `build`."""
        return False


@runtime_checkable
class Evaluation(Protocol):
    """One evaluation: what generic code needs of it. Subclass it to take the defaults of the optional
    members (each says what its default means)."""

    name: str
    """Its entry point's name, what its tasks record as their `evaluation`, and the prefix of its `--metadata`
    keys (`<name>_`); ours also name their package, group task and `lm-eval-longmem <name>` command (spelt
    with `-`), which another package's need not."""
    title: str
    """How prose names it (its paper's spelling, capitals and hyphens included)."""
    headline: Headline
    replaces_harness: Mapping[str, str] = {}
    """The harness's task or group names its tasks take on purpose -> the name under which the harness's own stays
    reachable while the plugin is active ("" when none), documented in its card. A run that builds such a task
    says so in one line. An evaluation of another package whose task or group name is the harness's and is not
    listed here is left out (`refused_folders`). Default: it takes none."""

    def task_folder(self) -> Path:
        """The folder of its task YAMLs, indexed by the harness with ours (`lm_eval --tasks`)."""
        ...

    def report(self) -> ReportSection:
        """Its part of the report."""
        ...

    def source_problems(self, metadata: dict[str, Any]) -> list[str]:
        """Every problem with the data sources `metadata` names, checked before the model loads
        (`preflight.py`); a bad option raises its `UsageError`."""
        return []

    def recorded_metadata(self) -> tuple[str, ...]:
        """Keys its tasks add to the results' config metadata (facts of the run, not options: `merge`
        leaves them out when it loads the tasks again from that metadata)."""
        return ()

    def add_commands(self, subparsers: argparse._SubParsersAction) -> None:
        """Add its `lm-eval-longmem` subcommands (none by default)."""
        return None

    def add_report_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add its flags of `lm-eval-longmem report` (read back by `ReportSection.configured`; none by default)."""
        return None

    def plotter(self) -> Plotter | None:
        """Its figure for `lm-eval-longmem plot`; None: it has none."""
        return None

    def planner(self) -> Planner | None:
        """Its rows of `lm-eval-longmem plan`; None: `plan` refuses its tasks."""
        return None

    def demo(self) -> DemoPart | None:
        """Its part of `lm-eval-longmem demo`; None: the demo does not run it."""
        return None

    def results_reading(self) -> ResultsReading | None:
        """How readers read its results files beyond the grammar; None: every task recorded its evaluation and
        condition, and its metric names are the grammar's."""
        return None


_MEMBERS = tuple(
    sorted({*Evaluation.__annotations__, *(k for k, v in vars(Evaluation).items() if callable(v) and k[0] != "_")})
)
"""What `isinstance(x, Evaluation)` asks of an entry (named in the line that leaves one out)."""


@dataclass
class Registry:
    """Every evaluation loaded, and what became of the other packages' ones."""

    entries: tuple[Evaluation, ...]
    """Ours, then those of other packages that loaded, by name."""
    origins: dict[str, str]
    """Another package's evaluation name -> its entry point and distribution, as the warnings name it."""
    left_out: dict[str, str]
    """Another package's evaluation name -> why it was left out after it loaded (`refused_folders`)."""
    off_command_line: dict[str, str] = field(default_factory=dict)
    """An evaluation's name -> why its commands and `report` flags are left out (`leave_off_command_line`)."""


def _origin(point: Any) -> str:
    """How a warning names an entry point: its line and its distribution."""
    dist = getattr(point, "dist", None)
    package = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"entry point {point.name} = {point.value} of {package} ({ENTRY_POINT_GROUP})"


def _loaded(point: Any) -> tuple[Evaluation | None, str]:
    """The evaluation an entry point names, or None and why it is left out (with the fix)."""
    try:
        found = point.load()
        if not isinstance(found, Evaluation):
            missing = [m for m in _MEMBERS if not hasattr(found, m)]
            return None, (
                f"gives a {type(found).__name__}, not an lm-eval-longmem evaluation (it lacks "
                f"{', '.join(missing) or 'members of common.evaluations.Evaluation'}); point it at the rim's EVALUATION"
            )
        if found.name != point.name:
            return None, f"names the evaluation {found.name!r}; name the entry point {found.name}"
        if not Path(found.task_folder()).is_dir():
            return None, f"gives no folder of task YAMLs (task_folder() is {found.task_folder()}); fix that package"
    except Exception as err:  # noqa: BLE001 - whatever someone else's package raises is one line, never ours to raise
        return None, f"cannot be loaded ({_said(err)}); fix or uninstall that package"
    return found, ""


def _said(err: BaseException) -> str:
    """An exception as a warning line quotes it: its type and its message's first line."""
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"


@lru_cache(maxsize=1)
def registered() -> Registry:
    """Ours (`BUILTIN`), then every entry point of `ENTRY_POINT_GROUP` that loads as an evaluation, by name. Each
    one left out is one warning line; a name that two packages register, or one of ours, is left out."""
    found = [importlib.import_module(f"lm_eval_longmem.{name}.rim").EVALUATION for name in BUILTIN]
    points = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.name, _origin(p)))
    claimed = [point.name for point in points]
    origins: dict[str, str] = {}
    for point in points:
        if point.name in BUILTIN:
            entry, why = None, f"takes the name of lm-eval-longmem's {point.name}; choose another name"
        elif claimed.count(point.name) > 1:
            entry, why = None, f"another package registers {point.name!r} too; uninstall one of them"
        else:
            entry, why = _loaded(point)
        if entry is None:
            log.warning("lm-eval-longmem: left out the %s: it %s", _origin(point), why)
            continue
        origins[entry.name] = _origin(point)
        found.append(entry)
    return Registry(tuple(found), origins, {})


def evaluations() -> tuple[Evaluation, ...]:
    """Every evaluation (`registered`), less those left out since they loaded (`refused_folders`)."""
    registry = registered()
    return tuple(entry for entry in registry.entries if entry.name not in registry.left_out)


def refused_folders(overrides: Sequence[Any]) -> list[Path]:
    """The task folders of other packages' evaluations to leave out of the harness's task index, each said in one
    warning line: those holding a task or group whose name the index already had (`overrides`, each with `name`,
    `ours`: the YAML of ours, `theirs`: the YAML it replaced, `builtin`: whether that was the harness's), unless
    it was the harness's and the evaluation lists it in `replaces_harness`. Ours are never left out (the one
    name they take is declared, and `tests/test_discovery.py` checks it is the only one)."""
    registry = registered()
    refused = []
    for entry in evaluations():
        if entry.name not in registry.origins:
            continue
        folder = Path(entry.task_folder()).resolve()
        allowed = entry.replaces_harness
        clash = next(
            (o for o in overrides if o.ours.is_relative_to(folder) and not (o.builtin and o.name in allowed)), None
        )
        if clash is None:
            continue
        whose = "the harness's" if clash.builtin else "another evaluation's"
        registry.left_out[entry.name] = (
            f"its task {clash.name!r} ({clash.ours}) has the name of {whose} ({clash.theirs})"
        )
        fix = ", or list it in its evaluation's replaces_harness to take the harness's place on purpose"
        log.warning(
            "lm-eval-longmem: left out the %s: %s; rename it%s",
            registry.origins[entry.name],
            registry.left_out[entry.name],
            fix if clash.builtin else "",
        )
        refused.append(folder)
    return refused


def leave_off_command_line(name: str, member: str, err: BaseException) -> None:
    """Leave the commands and `report` flags of evaluation `name` out of `lm-eval-longmem`'s command line, its
    `member` (`add_commands` or `add_report_arguments`) having raised `err`: one warning line naming it (and its
    entry point and distribution), once per process."""
    registry = registered()
    if name in registry.off_command_line:
        return
    registry.off_command_line[name] = f"its {member} raised {_said(err)}"
    origin = registry.origins.get(name)
    whose = f"evaluation {name} ({origin})" if origin else f"lm-eval-longmem's evaluation {name}"
    fix = "fix or uninstall that package" if origin else "please report this"
    log.warning(
        "lm-eval-longmem: left out the commands and report flags of %s: %s; %s",
        whose,
        registry.off_command_line[name],
        fix,
    )


def on_command_line() -> tuple[Evaluation, ...]:
    """The evaluations whose commands and `report` flags `lm-eval-longmem` has (`leave_off_command_line`)."""
    left_off = registered().off_command_line
    return tuple(entry for entry in evaluations() if entry.name not in left_off)


def task_folders() -> list[Path]:
    """The folders of every evaluation's task YAMLs, for the harness to index (`harness.Plugin.task_folders`):
    ours as one folder (`paths.task_configs_dir()`, which holds each of ours), then each other one's."""
    from lm_eval_longmem.paths import task_configs_dir

    ours = task_configs_dir().resolve()
    others = [folder for entry in evaluations() if not (folder := entry.task_folder().resolve()).is_relative_to(ours)]
    return [ours, *others]


def names() -> tuple[str, ...]:
    """Every evaluation's name, in the registry's order."""
    return tuple(entry.name for entry in evaluations())


def evaluation(name: str) -> Evaluation:
    """The entry called `name`; a KeyError naming the known ones otherwise."""
    for entry in evaluations():
        if entry.name == name:
            return entry
    raise KeyError(f"{name!r} is not an evaluation of lm-eval-longmem; known: {', '.join(names())}")

"""The package's shape, read with `ast` (nothing is imported): imports go one way, loggers sit under lm_eval's.

Two import graphs, both built from every `import` statement of the package that runs, function-level ones
included (a lazy import is still a dependency; one under `if TYPE_CHECKING:` only annotates, and never runs):
- modules: `lm_eval_longmem.common.task` -> `lm_eval_longmem.harness.tasks`, ...; no cycle allowed;
- parts: each top-level module or subpackage (`harness`, `common`, `backends`, `babilong`, `cli`, ...), an
  evaluation's rim (`babilong.rim`) a part of its own; no cycle allowed either, and every part imports only
  parts of layers below its own (`LAYERS`, the layering CONTRIBUTING.md states): an evaluation's core never
  imports its rim, `readers/`, `plots/`, `report/` or `commands/`, nor another evaluation; nothing imports a
  rim but the rim itself (generic code reaches it through the registry, `common/evaluations.py`).
An evaluation's name is spelt only in its own package and the registry's list of names (`BUILTIN`): generic
modules never name one (`test_generic_modules_name_no_evaluation`).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from kit import REPO_ROOT

from lm_eval_longmem.common.evaluations import BUILTIN, evaluation

PACKAGE = "lm_eval_longmem"
RIMS = tuple(f"{name}.rim" for name in BUILTIN)

LAYERS: tuple[tuple[str, ...], ...] = (
    ("paths",),
    ("harness",),
    ("common",),
    ("backends",),
    BUILTIN,  # the evaluations' cores: each imports none of the others
    ("preflight",),  # the run's checks before the model loads
    ("plan",),  # reads the model as those checks do
    ("__init__", "_autoload", "readers"),  # the Python API and start-up hook; the reader of results files
    ("plots",),
    ("report",),
    ("commands",),
    ("cli", "paths.__main__"),  # the command lines
    RIMS,  # each evaluation's rim: its own core and the generic bases below; never another rim
)
"""Every part of the package, bottom layer first; a part imports only its own part and parts of lower layers."""


def parsed(path: Path) -> ast.Module:
    """The syntax tree of the file at `path`, parsed once per content (the tests read every module many times)."""
    return _parse(path.read_text(encoding="utf-8"))


@functools.cache
def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def package_modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package's name maps to its `__init__.py`)."""
    modules = {}
    for path in sorted((REPO_ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _ours(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that `name` (a module or a name inside one) belongs to, if any."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of ours that the module `name` (file `path`) imports anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = parsed(path)
    annotations_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found |= {module for target in targets if (module := _ours(target, modules))}
    return found - {name}


def part(module: str) -> str:
    """`lm_eval_longmem.common.task` -> `common`; `lm_eval_longmem.harness` -> `harness`; the package -> `__init__`;
    an evaluation's rim, `lm_eval_longmem.babilong.rim.section` -> `babilong.rim`; a part's command line
    (`python -m`), `lm_eval_longmem.paths.__main__` -> `paths.__main__`."""
    rest = module.split(".")[1:]
    if len(rest) >= 2 and rest[1] in ("rim", "__main__"):
        return f"{rest[0]}.{rest[1]}"
    return rest[0] if rest else "__init__"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def module_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def part_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        graph.setdefault(part(module), set()).update(part(t) for t in targets if part(t) != part(module))
    return graph


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_import_reader_sees_every_form(tmp_path):
    modules = {"pkg": tmp_path / "__init__.py", "pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py",
               "pkg.sub": tmp_path / "sub" / "__init__.py", "pkg.sub.c": tmp_path / "sub" / "c.py"}  # fmt: skip
    source = tmp_path / "sub" / "c.py"
    source.parent.mkdir()
    source.write_text(
        "import os\nimport pkg.a\nfrom pkg import b\nfrom . import other\nfrom .. import a\n"
        "def f():\n    from pkg.sub import name\nif TYPE_CHECKING:\n    from pkg import sub\n"
    )
    assert imported_modules("pkg.sub.c", source, modules) == {"pkg.a", "pkg.b", "pkg.sub"}
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n")
    assert imported_modules("pkg.sub.c", source, modules) == set()  # an annotation never runs


def test_no_import_cycle_among_modules():
    assert find_cycle(module_graph()) is None


def test_no_import_cycle_among_the_package_parts():
    graph = part_graph()
    assert {"harness", "common", "backends", "readers", "plots", "report", "commands", "cli", *RIMS} <= set(graph)
    assert find_cycle(graph) is None


def layer_violations(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of a part by a part of the same or a lower layer ("babilong -> readers"), and every part no layer holds."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    found = [f"{part} is in no layer of LAYERS" for part in sorted(graph) if part not in rank]
    found += [f"{part} -> {target}" for part, targets in sorted(graph.items()) for target in sorted(targets)
              if part in rank and target in rank and rank[target] >= rank[part]]  # fmt: skip
    return found


def test_the_layer_check_finds_upward_and_sideways_imports():
    layers = (("common",), ("a", "b"), ("readers",))
    assert layer_violations({"common": set(), "a": {"common"}, "readers": {"a", "common"}}, layers) == []
    assert layer_violations({"a": {"readers"}, "b": {"a"}, "new": set()}, layers) == [
        "new is in no layer of LAYERS",
        "a -> readers",
        "b -> a",
    ]


def test_every_part_imports_only_layers_below_its_own():
    """An evaluation's core never imports its rim, `readers/`, `plots/`, `report/` or `commands/` (nor another
    evaluation); readers never import figures or the report; no part imports a rim but the rim itself."""
    assert layer_violations(part_graph(), LAYERS) == []


def test_a_rim_imports_its_own_core_and_no_other_evaluation():
    """`babilong.rim` may import `babilong` and the generic bases, never `booksort` (core or rim)."""
    graph = part_graph()
    found = [f"{rim} -> {target}" for rim in RIMS for target in sorted(graph.get(rim, ()))
             if target.split(".")[0] in BUILTIN and target.split(".")[0] != rim.split(".")[0]]  # fmt: skip
    assert found == []


def test_only_the_registry_reaches_a_rim_and_only_by_name():
    """No module outside an evaluation's package names a rim's module in an import; the registry loads
    `lm_eval_longmem.<name>.rim` by the names of `BUILTIN` (and entry points), never by an import statement."""
    found = [f"{module} -> {target}" for module, targets in module_graph().items() for target in sorted(targets)
             if part(target) in RIMS and part(module).split(".")[0] != part(target).split(".")[0]]  # fmt: skip
    assert found == []


REGISTRY = f"{PACKAGE}.common.evaluations"

GENERIC_PARTS = ("__init__", "_autoload", "paths", "preflight", "plan", "readers", "plots", "report", "commands", "cli")
"""The parts that iterate the registry: they spell no evaluation's name anywhere, prose and help texts included."""

SHARED_PARTS = ("common", "backends", "harness")
"""The shared core below the evaluations: it holds no evaluation's name in its code (a docstring may cite one as an
example of what a piece serves); the registry's list of names is the one exception (`NAME_HOLDERS`)."""

NAME_HOLDERS = {
    REGISTRY: "the registry: `BUILTIN`",
}
"""The modules outside an evaluation's package that may spell an evaluation's name in code, and why."""


def spellings(name: str) -> re.Pattern[str]:
    """Every way code or prose spells evaluation `name`: as named (`booksort`, any case), with `-` or a space for
    `_` (`forgetting-curve`), and its title (`Book-SORT`); inside an identifier too (`babilong_rows`)."""
    words = {name, name.replace("_", "-"), name.replace("_", " "), evaluation(name).title}
    return re.compile("|".join(re.escape(word) for word in sorted(words, key=len, reverse=True)), re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the strings that document rather than run: a module's, class's or function's docstring, and a
    string statement after an assignment (an attribute's docstring)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}  # fmt: skip


def code_spellings(tree: ast.AST, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """(line, text) of every identifier, attribute, import or string of `tree`'s code (docstrings and comments
    aside) that spells `pattern`."""
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = node.name
        elif isinstance(node, ast.alias):
            text = node.asname or node.name
        else:
            continue
        if pattern.search(text):
            found.append((getattr(node, "lineno", 0), text))
    return found


def test_the_spellings_cover_names_titles_and_identifiers():
    pattern = spellings("forgetting_curve")
    assert all(
        pattern.search(t)
        for t in ("forgetting_curve_rows", "forgetting-curve summarize", "FORGETTING_CURVE_DEMO", "Forgetting curve")
    )
    assert spellings("booksort").search("the Book-SORT section") and not spellings("booksort").search("books sorted")
    tree = ast.parse(
        '"""Doc: babilong."""\n# babilong\nx = "babilong_lengths"\ndef babilong_rows():\n    "doc babilong"\n'
    )
    assert sorted(text for _, text in code_spellings(tree, spellings("babilong"))) == [
        "babilong_lengths",
        "babilong_rows",
    ]


def test_generic_modules_name_no_evaluation():
    """No generic module (`GENERIC_PARTS`) dispatches on, describes or helps one evaluation: its name, its prefixed
    options (`babilong_*`), a function of its own (`*_rows`, `*_sentence`) or its title appear nowhere in the file,
    docstrings and help texts included. What they need of an evaluation they ask its registry entry."""
    patterns = {name: spellings(name) for name in BUILTIN}
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {name}: {line.strip()[:100]}"
        for module, path in package_modules().items()
        if part(module) in GENERIC_PARTS
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        for name, pattern in patterns.items()
        if pattern.search(line)
    ]
    assert found == [], "\n".join(found)


def test_the_shared_core_and_other_evaluations_name_an_evaluation_in_no_code():
    """Code of the shared core (`SHARED_PARTS`) names no evaluation, and an evaluation's package names no other
    one: no dispatch on a name, no option of another evaluation, no function named after one."""
    patterns = {name: spellings(name) for name in BUILTIN}
    found = []
    for module, path in package_modules().items():
        owner = part(module).split(".")[0]
        if module in NAME_HOLDERS or not (owner in SHARED_PARTS or owner in BUILTIN):
            continue
        tree = parsed(path)
        for name, pattern in patterns.items():
            if name != owner:
                found += [
                    f"{path.relative_to(REPO_ROOT)}:{line}: {text!r}" for line, text in code_spellings(tree, pattern)
                ]
    assert found == [], "\n".join(found)


SINGLE_EVALUATION_CONCEPTS = re.compile(
    r"memoryless|memory_length|memory_censored|claimed_length|effective_context|\bFACTORS\b|\bfactor(_value)?\b"
)
"""What one evaluation alone means, spelt the way its code spells it: a prompt condition's YAML value, a whole-run
summary's name, the factors of its cells. Each is built and read in its evaluation's package (`<name>/scores.py`)."""


def test_the_shared_core_and_generic_modules_hold_no_single_evaluations_concept():
    """No code of the shared core or of a generic module builds, parses or dispatches on what only one evaluation
    means (`SINGLE_EVALUATION_CONCEPTS`): those reach generic code through the registry (`Evaluation.results_reading`
    for the readers), never by name."""
    found = []
    for module, path in package_modules().items():
        if module in NAME_HOLDERS or part(module).split(".")[0] not in (*SHARED_PARTS, *GENERIC_PARTS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(REPO_ROOT)}:{line}: {text!r}"
            for line, text in code_spellings(tree, SINGLE_EVALUATION_CONCEPTS)
        ]
    assert found == [], "\n".join(found)


def test_the_concept_check_finds_what_it_looks_for():
    tree = ast.parse(
        '"""memory_length in a docstring."""\nx = metric_names.factor("LE", 1)\ny = "fine_memory_length"\n'
    )
    assert sorted(text for _, text in code_spellings(tree, SINGLE_EVALUATION_CONCEPTS)) == [
        "factor",
        "fine_memory_length",
    ]
    assert not SINGLE_EVALUATION_CONCEPTS.search("default_factory") and not SINGLE_EVALUATION_CONCEPTS.search(
        "MEMORYLESS"
    )


def test_the_registry_imports_only_the_shared_core():
    """It loads the rims by name (`importlib`), so it sits in `common/` without importing upward."""
    assert {part(target) for target in module_graph()[REGISTRY]} <= {"common", "paths"}


def test_harness_is_the_bottom_layer():
    """Every touch of lm_eval's internals is in the `harness/` package; it imports nothing of ours but `paths`."""
    assert part_graph()["harness"] <= {"paths"}


def module_level_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of every call a module makes when imported: in its top-level statements, outside functions,
    classes and `if __name__ == "__main__":`."""
    found = []
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If) and "__name__" in ast.unparse(statement.test):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                found.append((node.lineno, ast.unparse(node.func).rpartition(".")[2]))
    return found


def test_the_import_call_reader_sees_calls_at_import_only():
    source = (
        "import x\nx.install()\nA = patch_it(1)\ndef f():\n    install()\nif __name__ == '__main__':\n    install()\n"
    )
    assert module_level_calls(ast.parse(source)) == [(2, "install"), (3, "patch_it")]


def test_nothing_patches_lm_eval_at_import():
    """lm_eval is changed at one explicit point, `harness.install`: no module of ours installs or patches
    anything when it is imported, so importing one (a task module, for a YAML's `!function`) changes nothing."""
    offences = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {name}()"
        for path in package_modules().values()
        for line, name in module_level_calls(parsed(path))
        if name.startswith(("install", "patch", "teach", "activate"))
    ]
    assert offences == []


@pytest.mark.parametrize("module, path", sorted(package_modules().items()))
def test_every_logger_is_under_the_harness_logger(module, path):
    """`logging.getLogger(f"lm_eval.{__name__}")` (or another `lm_eval.` name): `--verbosity`/`LMEVAL_LOG_LEVEL`
    and the harness's format then apply to our lines as to its own."""
    tree = parsed(path)
    constants = {  # module-level NAME = "text", for getLogger(NAME)
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger":
            (arg,) = node.args
            arg = constants.get(arg.id, arg) if isinstance(arg, ast.Name) else arg
            first = arg.values[0] if isinstance(arg, ast.JoinedStr) else arg
            text = first.value if isinstance(first, ast.Constant) else ""
            assert str(text).startswith("lm_eval."), (
                f'{path.name}:{node.lineno}: log under lm_eval\'s logger, e.g. logging.getLogger(f"lm_eval.{{__name__}}")'
            )


# --- every lm_eval internal behind the harness/ package (a package by concern) ---

HARNESS = "harness"
"""The part (`part()`) that holds every lm_eval internal: the `harness/` package, all its modules."""
PUBLIC_ENTRY_POINTS = {"lm_eval.simple_evaluate", "lm_eval.evaluator.simple_evaluate", "lm_eval.__main__.cli_evaluate"}
"""What any module may call of lm_eval besides the task and model classes (its documented Python API and CLI)."""
CLASS_MODULES = ("lm_eval.api.task", "lm_eval.api.instance", "lm_eval.api.registry")
"""Modules whose classes (and, for the registry, `register_*` decorators) any module may use."""


def allowed_lm_eval_name(dotted: str) -> bool:
    """Whether a module outside the `harness/` package may name `dotted` (`lm_eval.api.task.ConfigurableTask`, ...)."""
    import importlib
    import inspect

    if dotted in PUBLIC_ENTRY_POINTS or dotted in CLASS_MODULES:  # a module's attributes are checked where used
        return True
    module, _, name = dotted.rpartition(".")
    if module not in CLASS_MODULES:
        return False
    value = getattr(importlib.import_module(module), name, None)
    return inspect.isclass(value) or (module == "lm_eval.api.registry" and name.startswith("register_"))


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks: annotations that never run, so no reliance."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return inside


def lm_eval_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every lm_eval module or attribute a module's code names at run time: what it
    imports (`from lm_eval.x import y` -> `lm_eval.x.y`, `import lm_eval.x` -> `lm_eval.x`) and every longest
    attribute chain on a name `import` bound to lm_eval or one of its modules (`lm_eval.simple_evaluate`)."""
    skip = _type_checking_only(tree)
    modules: dict[str, str] = {}  # local name -> the lm_eval module an `import` bound it to
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "lm_eval":
                    if alias.name != "lm_eval":  # a bare `import lm_eval` names nothing until an attribute is used
                        found.append((node.lineno, alias.name))
                    modules[alias.asname or "lm_eval"] = alias.name if alias.asname else "lm_eval"
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "lm_eval":
            for alias in node.names:
                found.append((node.lineno, f"{node.module}.{alias.name}"))
                if f"{node.module}.{alias.name}" in CLASS_MODULES:  # `from lm_eval.api import registry`
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inner or not isinstance(node, ast.Attribute):
            continue
        chain, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            chain.insert(0, root.attr)
            root = root.value
        if isinstance(root, ast.Name) and root.id in modules:
            found.append((node.lineno, ".".join([modules[root.id], *chain])))
    return found


def test_the_lm_eval_reader_sees_every_form():
    source = (
        "from typing import TYPE_CHECKING\nimport lm_eval\nimport lm_eval.tasks.manager\nfrom lm_eval import utils\n"
        "from lm_eval.api.task import ConfigurableTask\nfrom lm_eval.models.utils import Collator as C\n"
        "import lm_eval.api.registry as reg\nfrom lm_eval.api import instance\n"
        "if TYPE_CHECKING:\n    from lm_eval.models.huggingface import HFLM\n"
        "def f():\n    lm_eval.simple_evaluate()\n    lm_eval.api.registry.get_model('hf')\n    reg.register_model\n"
        "    utils.create_iterator\n    x.lm_eval.y\n    instance.Instance\n"
    )
    names = sorted(name for _, name in lm_eval_names(ast.parse(source)))
    assert names == [
        "lm_eval.api.instance", "lm_eval.api.instance.Instance", "lm_eval.api.registry", "lm_eval.api.registry.get_model", "lm_eval.api.registry.register_model", "lm_eval.api.task.ConfigurableTask",
        "lm_eval.models.utils.Collator", "lm_eval.simple_evaluate", "lm_eval.tasks.manager", "lm_eval.utils",
    ]  # fmt: skip
    assert [n for n in names if not allowed_lm_eval_name(n)] == [
        "lm_eval.api.registry.get_model", "lm_eval.models.utils.Collator", "lm_eval.tasks.manager", "lm_eval.utils"
    ]  # fmt: skip


def test_lm_eval_is_reached_only_through_harness():
    """Outside the `harness/` package, a module names of lm_eval only the task, instance and registry classes (and
    the registry's `register_*` decorators) and the public `simple_evaluate`/`cli_evaluate`; everything else it
    needs of lm_eval is a function of a `harness/` module, whose reliance is numbered and tested (its R-list).
    Imports under `if TYPE_CHECKING:` are free: they only annotate, and never run."""
    offences = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {name}"
        for module, path in package_modules().items()
        if part(module) != HARNESS
        for line, name in lm_eval_names(parsed(path))
        if not allowed_lm_eval_name(name)
    ]
    assert not offences, (
        "reach lm_eval through a function of the harness/ package (with its reliance and test):\n" + "\n".join(offences)
    )


def lm_eval_private_attributes() -> set[str]:
    """The private attribute and method names (`_x`) of the harness's task and model classes, read from their source."""
    import importlib.util

    root = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0])
    names: set[str] = set()
    for source in (
        "api/task.py",
        "api/model.py",
        "api/instance.py",
        "models/huggingface.py",
        "models/vllm_causallms.py",
    ):
        for klass in ast.walk(parsed(root / source)):
            if not isinstance(klass, ast.ClassDef):
                continue
            for node in ast.walk(klass):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_private_attribute_of_the_harness_classes_outside_harness():
    """Our task and backend code runs as methods of lm_eval's classes (ConfigurableTask, HFLM, VLLM): a private
    attribute of theirs read or set anywhere but the `harness/` package is a reliance no test names (and one of ours
    with such a name would silently replace theirs)."""
    private = lm_eval_private_attributes()
    assert {
        "_encode_pair",
        "_metric_fn_list",
        "_model_generate",
        "_detect_batch_size",
    } <= private  # the reader reads them
    offences = [
        f"{path.relative_to(REPO_ROOT)}:{node.lineno}: .{node.attr}"
        for module, path in package_modules().items()
        if part(module) != HARNESS
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Attribute) and node.attr in private
    ]
    assert not offences, "reach lm_eval's private attributes through a function of the harness/ package:\n" + "\n".join(
        offences
    )

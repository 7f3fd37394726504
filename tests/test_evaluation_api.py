"""`docs/evaluation-api.md` is the API an outside evaluation relies on, so every name it lists is checked here.

Each fenced `python` block of the page whose first line is `# lm_eval_longmem.<module>` is a stub of that
module. For every name in it: the module has it; a function or method has the parameters (names, kinds,
defaults) and annotations shown; a class has the bases, decorators (dataclass, frozen), attributes (with
their annotations and defaults) and members shown, and a dataclass's fields are exactly the ones listed, in
order; a constant has the value shown. A member of a `Protocol` whose stub body is `...` is required (its body
in the code is `...` too); any other stub body is the member's default and must be the code's body.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import re
import sys
import textwrap
import typing
from types import ModuleType
from typing import Any

import pytest
from kit import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "evaluation-api.md"
STUB_BLOCK = re.compile(r"^```python\n# (lm_eval_longmem[\w.]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def stub_blocks(text: str) -> list[tuple[str, ast.Module]]:
    """(module name, parsed stub) of every stub block of `text`."""
    return [(module, ast.parse(body)) for module, body in STUB_BLOCK.findall(text)]


def _expression(text: str) -> str:
    """`text` (an annotation or a default as source) in ast's canonical spelling."""
    return ast.unparse(ast.parse(text, mode="eval"))


def _annotation(value: Any) -> str | None:
    """A real annotation as source text (our modules keep them as strings: `from __future__ import annotations`)."""
    if value is inspect.Parameter.empty or value is inspect.Signature.empty:
        return None
    if isinstance(value, typing.ForwardRef):
        value = value.__forward_arg__
    return _expression(value) if isinstance(value, str) else getattr(value, "__name__", repr(value))


KINDS = {
    "posonlyargs": inspect.Parameter.POSITIONAL_ONLY,
    "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "kwonlyargs": inspect.Parameter.KEYWORD_ONLY,
}


def stub_parameters(node: ast.FunctionDef) -> list[tuple[str, Any, str | None, str | None]]:
    """(name, kind, annotation, default) of each parameter of a stub function, as `real_parameters` gives them."""
    a = node.args
    out = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults):
        kind = KINDS["posonlyargs"] if arg in a.posonlyargs else KINDS["args"]
        out.append((arg.arg, kind, arg.annotation, default))
    if a.vararg:
        out.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, a.vararg.annotation, None))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, KINDS["kwonlyargs"], arg.annotation, default))
    if a.kwarg:
        out.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, a.kwarg.annotation, None))
    return [
        (name, kind, ast.unparse(note) if note is not None else None, ast.unparse(default) if default else None)
        for name, kind, note, default in out
    ]


def real_parameters(function: Any, shown: list) -> list[tuple[str, Any, str | None, str | None]]:
    """The same of a real function; an annotation the stub leaves out is left out here too."""
    params = inspect.signature(function).parameters.values()
    noted = {name for name, _, note, _ in shown if note is not None}
    return [
        (
            p.name,
            p.kind,
            _annotation(p.annotation) if p.name in noted else None,
            None if p.default is inspect.Parameter.empty else _expression(repr(p.default)),
        )
        for p in params
    ]


def _body(node: ast.FunctionDef) -> str:
    """A function's body without its docstring, as source."""
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return "\n".join(ast.unparse(statement) for statement in body) or "..."


def _real_function(owner: Any, name: str, decorators: set[str]) -> tuple[Any, list[str]]:
    """The plain function behind `owner.name` (a method unwrapped from its decorator), and problems found."""
    raw = inspect.getattr_static(owner, name) if isinstance(owner, type) else getattr(owner, name)
    problems = []
    wrappers = {
        "classmethod": classmethod,
        "staticmethod": staticmethod,
        "property": property,
        "cached_property": functools.cached_property,
    }
    for decorator, kind in wrappers.items():
        if (decorator in decorators) != isinstance(raw, kind):
            problems.append(f"{name}: is {'not ' if decorator in decorators else ''}a {decorator} in the code")
    if isinstance(raw, (classmethod, staticmethod)):
        raw = raw.__func__
    elif isinstance(raw, property):
        raw = raw.fget
    elif isinstance(raw, functools.cached_property):
        raw = raw.func
    return raw, problems


def check_function(owner: Any, node: ast.FunctionDef, where: str, protocol: bool = False) -> list[str]:
    if not hasattr(owner, node.name):
        return [f"{where}.{node.name}: no such name"]
    decorators = {ast.unparse(d) for d in node.decorator_list}
    function, problems = _real_function(owner, node.name, decorators)
    problems = [f"{where}.{p}" for p in problems]
    shown = stub_parameters(node)
    real = real_parameters(function, shown)
    if shown != real:
        problems.append(f"{where}.{node.name}: the page shows {shown}, the code has {real}")
    if node.returns is not None:
        returns = _annotation(inspect.signature(function).return_annotation)
        if ast.unparse(node.returns) != returns:
            problems.append(
                f"{where}.{node.name}: returns {ast.unparse(node.returns)} on the page, {returns} in the code"
            )
    stub_body = _body(node)
    if protocol or stub_body != "...":
        source = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
        assert isinstance(source, (ast.FunctionDef, ast.AsyncFunctionDef))
        if _body(source) != stub_body:
            what = "required" if stub_body == "..." else f"optional with default `{stub_body}`"
            problems.append(f"{where}.{node.name}: the page says {what}; the code's body is `{_body(source)}`")
    return problems


def _same_value(real: Any, shown: ast.expr) -> bool:
    try:
        return real == ast.literal_eval(shown)
    except ValueError:
        return _expression(repr(real)) == ast.unparse(shown)


def check_class(module: ModuleType, node: ast.ClassDef, where: str) -> list[str]:
    cls = getattr(module, node.name, None)
    if not isinstance(cls, type):
        return [f"{where}: no such class"]
    problems = []
    protocol = bool(getattr(cls, "_is_protocol", False))
    for base in node.bases:
        named = ast.unparse(base)
        holds = (
            protocol if named == "Protocol"
            else issubclass(cls, tuple) and hasattr(cls, "_fields") if named == "NamedTuple"
            else getattr(sys.modules[cls.__module__], named, getattr(module, named, None)) in cls.__mro__
        )  # fmt: skip
        if not holds:
            problems.append(f"{where}: does not derive from {named}")
    decorators = [ast.unparse(d) for d in node.decorator_list]
    if any(d.startswith("dataclass") for d in decorators):
        if not dataclasses.is_dataclass(cls):
            problems.append(f"{where}: not a dataclass")
        elif cls.__dataclass_params__.frozen != any("frozen=True" in d for d in decorators):  # type: ignore[attr-defined]
            problems.append(f"{where}: frozen is {cls.__dataclass_params__.frozen} in the code")  # type: ignore[attr-defined]
        else:
            listed = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            real = [f.name for f in dataclasses.fields(cls)]
            if listed != real:
                problems.append(f"{where}: the page lists the fields {listed}, the code has {real}")
    notes = {}
    for klass in reversed(cls.__mro__):
        notes.update(getattr(klass, "__annotations__", {}))
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            name = statement.target.id
            if name not in notes:
                problems.append(f"{where}.{name}: not an annotated attribute in the code")
                continue
            if _annotation(notes[name]) != ast.unparse(statement.annotation):
                problems.append(
                    f"{where}.{name}: {ast.unparse(statement.annotation)} on the page, {notes[name]} in the code"
                )
            if statement.value is not None:
                field = (
                    next((f for f in dataclasses.fields(cls) if f.name == name), None)
                    if dataclasses.is_dataclass(cls)
                    else None
                )
                if field is not None and field.default_factory is not dataclasses.MISSING:
                    same = ast.unparse(statement.value) == f"field(default_factory={field.default_factory.__name__})"
                else:
                    same = _same_value(field.default if field is not None else getattr(cls, name), statement.value)
                if not same:
                    problems.append(
                        f"{where}.{name}: default {ast.unparse(statement.value)} on the page, not in the code"
                    )
        elif isinstance(statement, ast.FunctionDef):
            problems += check_function(cls, statement, where, protocol)
    return problems


def check_stub(module_name: str, stub: ast.Module) -> tuple[list[str], int]:
    """Problems of one stub block against its module, and how many names it checked."""
    module = importlib.import_module(module_name)
    problems, checked = [], 0
    for statement in stub.body:
        if isinstance(statement, ast.ClassDef):
            problems += check_class(module, statement, f"{module_name}.{statement.name}")
        elif isinstance(statement, ast.FunctionDef):
            problems += check_function(module, statement, module_name)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
            assert isinstance(target, ast.Name)
            if not hasattr(module, target.id):
                problems.append(f"{module_name}.{target.id}: no such name")
            elif statement.value is not None and not _same_value(getattr(module, target.id), statement.value):
                problems.append(
                    f"{module_name}.{target.id}: {ast.unparse(statement.value)} on the page, {getattr(module, target.id)!r} in the code"
                )
        else:
            problems.append(
                f"{module_name}: a stub holds only classes, functions and constants: {ast.unparse(statement)[:60]}"
            )
            continue
        checked += 1
    return problems, checked


def test_every_name_the_page_lists_is_importable_with_its_documented_signature():
    blocks = stub_blocks(PAGE.read_text(encoding="utf-8"))
    problems, checked = [], 0
    for module, stub in blocks:
        found, count = check_stub(module, stub)
        problems += found
        checked += count
    assert not problems, "\n".join(problems)
    assert len(blocks) >= 10 and checked >= 80, (len(blocks), checked)


def test_the_page_documents_every_member_of_the_entry_and_its_parts():
    """No member of the registry's Protocols is left out of the page (a new one must be documented)."""
    from lm_eval_longmem.common import evaluations

    stubs = {
        node.name: {
            s.name if isinstance(s, ast.FunctionDef) else s.target.id
            for s in node.body
            if isinstance(s, (ast.FunctionDef, ast.AnnAssign))
        }  # type: ignore[union-attr]
        for module, stub in stub_blocks(PAGE.read_text(encoding="utf-8"))
        if module == evaluations.__name__
        for node in stub.body
        if isinstance(node, ast.ClassDef)
    }
    for name in ("Evaluation", "ReportSection", "Plotter", "Planner", "DemoPart", "ResultsReading"):
        protocol = getattr(evaluations, name)
        members = (
            set(typing.get_protocol_members(protocol))
            if hasattr(typing, "get_protocol_members")
            else {m for m in vars(protocol) if not m.startswith("_") or m == "__call__"}
            | set(getattr(protocol, "__annotations__", {}))
        )
        assert stubs.get(name) == members, (name, members ^ stubs.get(name, set()))


@pytest.mark.parametrize(
    "stub, fault",
    [
        ("def cell(*parts: str) -> str: ...", "the page shows"),
        ("def name(score: str, *parts: str | int, stat: str = 'x') -> str: ...", "the page shows"),
        ("def cell(*parts: str | int) -> int: ...", "returns"),
        ("def nothing_here() -> None: ...", "no such name"),
        ("@dataclass(frozen=True)\nclass ScoreSpec:\n    name: str\n    family: Family = 'binary'", "fields"),
        ("CI_LOW = '_low'", "on the page"),
    ],
)
def test_the_check_catches_a_wrong_stub(stub, fault):
    problems, _ = check_stub("lm_eval_longmem.common.metric_names", ast.parse(stub))
    assert any(fault in p for p in problems), problems


def test_the_check_catches_a_wrong_default_of_a_protocol_member():
    wrong = "class Evaluation(Protocol):\n    def plotter(self) -> Plotter | None: ...\n    def report(self) -> ReportSection:\n        return None"
    problems, _ = check_stub("lm_eval_longmem.common.evaluations", ast.parse(wrong))
    assert len(problems) == 2 and all("the page says" in p for p in problems), problems

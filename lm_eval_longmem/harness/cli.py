"""lm_eval's command line as ours meets it: a usage error printed as one line at the top of the interpreter,
`--debug`, and the `--model_args`/`--metadata` flags our subcommands parse as `lm_eval run` parses them (R9, R12).

`install_usage_error_hook` is installed by `harness.install`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from lm_eval_longmem.harness.marks import MARK

DEBUG_ENV = "LM_EVAL_LONGMEM_DEBUG"


# ---------------------------------------------------------------- usage errors (R9)


def install_usage_error_hook(usage_error: type[BaseException]) -> None:
    """Make an uncaught `usage_error` (the package's `UsageError`) print one line and exit 1 instead of
    a traceback (idempotent).

    The error may also be the `__cause__`/`__context__` of what reached the top (the harness may
    wrap it). With `--debug` in the command line or `LM_EVAL_LONGMEM_DEBUG=1` the previous hook
    shows the full traceback; every other exception goes to the previous hook unchanged.
    """
    if getattr(sys.excepthook, MARK, False):
        return
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        usage = find_usage_error(exc, usage_error)
        if usage is None or debug_requested():
            previous(exc_type, exc, tb)
            return
        # Python exits with status 1 after an uncaught exception; only the printing changes.
        print(f"lm-eval-longmem: error: {usage}", file=sys.stderr)

    setattr(excepthook, MARK, True)
    excepthook.__wrapped__ = previous  # type: ignore[attr-defined]
    sys.excepthook = excepthook


def find_usage_error(exc: BaseException | None, usage_error: type[BaseException]) -> BaseException | None:
    """`exc` or the first exception in its cause/context chain that is a `usage_error`."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, usage_error):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def debug_requested() -> bool:
    return "--debug" in sys.argv or os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


# ---------------------------------------------------------------- --model_args / --metadata (R12)


def dict_flag_action() -> type:
    """The argparse action of lm_eval's `--model_args`/`--metadata` (`k=v,k2=v2` words or a JSON object -> dict)."""
    from lm_eval._cli.utils import MergeDictAction

    return MergeDictAction

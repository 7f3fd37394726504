"""lm_eval's command line as ours meets it: a usage error, or a harness error a flag caused (R26), printed as one
line at the top of the interpreter, `--debug`, the `--model_args`/`--metadata` flags our subcommands parse as
`lm_eval run` parses them, and the whole flag set of `lm_eval run` for `plan` (R9, R12, R27).

`install_usage_error_hook` is installed by `harness.install`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, cast

from lm_eval_longmem.harness.marks import MARK

DEBUG_ENV = "LM_EVAL_LONGMEM_DEBUG"


# ---------------------------------------------------------------- usage errors (R9)


def install_usage_error_hook(usage_error: type[BaseException]) -> None:
    """Make an uncaught `usage_error` (the package's `UsageError`), or a harness error `harness_error_line`
    reads, print one line and exit 1 instead of a traceback (idempotent).

    The error may also be the `__cause__`/`__context__` of what reached the top (the harness may
    wrap it). With `--debug` in the command line or `LM_EVAL_LONGMEM_DEBUG=1` the previous hook
    shows the full traceback; every other exception goes to the previous hook unchanged.
    """
    if getattr(sys.excepthook, MARK, False):
        return
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        if debug_requested():
            previous(exc_type, exc, tb)
            return
        usage = find_usage_error(exc, usage_error)
        line = str(usage) if usage is not None else harness_error_line(exc)
        if line is None:
            previous(exc_type, exc, tb)
            return
        # Python exits with status 1 after an uncaught exception; only the printing changes.
        print(f"lm-eval-longmem: error: {line}", file=sys.stderr)

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


def harness_error_line(exc: BaseException | None, argv: list[str] | None = None) -> str | None:
    """The one line for a harness error that a flag of the command line `argv` (default `sys.argv`) caused, naming
    the closest valid value; None for any other error.

    Today those are `--tasks` names the harness's index does not hold (R26), matched against the index of
    `--include_path` (if given) and ours and lm_eval's folders, which takes the few seconds an index takes, and a
    `--model` name its registry does not hold (R24).
    """
    from lm_eval_longmem.harness.models import unknown_model
    from lm_eval_longmem.harness.tasks import new_task_manager, tasks_not_found, unknown_tasks

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:  # the harness may have wrapped it
        names = tasks_not_found(exc)
        if names:
            include_path = flag_value(sys.argv if argv is None else argv, "--include_path")
            try:
                known = new_task_manager(include_path=include_path).all_tasks
            except Exception:  # an index that cannot be built again: the line without a closest name
                known = []
            return unknown_tasks(names, known)
        model = unknown_model(exc)
        if model is not None:
            return model
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in a command line (`--flag VALUE` or `--flag=VALUE`; the last one wins, as argparse's)."""
    value = None
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


def debug_requested() -> bool:
    return "--debug" in sys.argv or os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


# ---------------------------------------------------------------- --model_args / --metadata (R12)


def dict_flag_action() -> type:
    """The argparse action of lm_eval's `--model_args`/`--metadata` (`k=v,k2=v2` words or a JSON object -> dict)."""
    from lm_eval._cli.utils import MergeDictAction

    return MergeDictAction


# ---------------------------------------------------------------- every flag of `lm_eval run` (R27)


def run_parser() -> argparse.ArgumentParser:
    """The parser of `lm_eval run`: every flag, spelled and typed as the harness takes it (for `parents=`)."""
    from lm_eval._cli.run import Run

    holder = argparse.ArgumentParser(add_help=False)
    command = Run.create(holder.add_subparsers())
    return cast(argparse.ArgumentParser, command._parser)

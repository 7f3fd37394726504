"""The one exception type for mistakes in what a user gave us."""

from __future__ import annotations

import sys


class UsageError(ValueError):
    """A bad option, value or input file, reported as one line without a traceback.

    The message names the key or file at fault and says how to fix it, for example
    ``needle_lengths: '3k' is not a length of the data set; use one of 0k, 1k, 2k, ...``.
    Inside `lm_eval` (plugin active) and `lm-eval-longmem`, an uncaught UsageError prints
    ``lm-eval-longmem: error: <message>`` and exits with status 1; `--debug` or
    `LM_EVAL_LONGMEM_DEBUG=1` shows the traceback instead (see `lm_eval_longmem.harness.cli`).
    It subclasses ValueError so callers that already catch ValueError keep working.
    """


def report_error(err: BaseException | str) -> None:
    """Print a user error as the one line the command line shows (no traceback)."""
    print(f"lm-eval-longmem: error: {err}", file=sys.stderr)

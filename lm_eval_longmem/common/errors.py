"""The one exception type for user mistakes."""


class UsageError(ValueError):
    """A user mistake: one line naming the key or file and the fix."""


def report_error(err: BaseException) -> None:
    """Print a user error as the one line the command line shows (no traceback)."""
    import sys

    print(f"lm-eval-longmem: error: {err}", file=sys.stderr)

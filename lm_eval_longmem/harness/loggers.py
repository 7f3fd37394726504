"""lm_eval's logging and sample loggers as ours meet them: the harness's log set-up, and the `metric_list` the
W&B and Trackio loggers read from every logged sample (R10, R15).
"""

from __future__ import annotations

from typing import Any

# ---------------------------------------------------------------- logging (R10)


def setup_logging() -> None:
    """What `lm_eval`'s command line does first: its handler and format on the `lm_eval` logger, at
    `LMEVAL_LOG_LEVEL` (default INFO). For callers of its Python API that print like the CLI (the demo)."""
    from lm_eval.utils import setup_logging as lm_eval_setup_logging

    lm_eval_setup_logging()


# ---------------------------------------------------------------- sample loggers (R15)


def logged_metric_list(scores: list[tuple[str, bool | None]]) -> list[dict[str, Any]]:
    """The `metric_list` a task's config dump gives when each of its logged samples holds `scores`
    ((name, higher_is_better) pairs): what the W&B logger reads from every sample (R15)."""
    return [{"metric": name, "aggregation": "mean", "higher_is_better": better} for name, better in scores]

"""Reading `--metadata` options: the harness hands every task one flat dict of strings and literals."""

from __future__ import annotations

from typing import Any


def option(metadata: dict[str, Any] | None, key: str, default: Any = None) -> Any:
    """`metadata[key]`, or `default` when it is absent or given empty (`--metadata key=`)."""
    value = (metadata or {}).get(key)
    return default if value is None or value == "" else value


def parse_flag(value: Any, key: str) -> bool:
    """A boolean `--metadata` value: true/false, yes/no, on/off, 1/0 (any case); anything else is an error."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"--metadata {key}={value!r}: use true or false")

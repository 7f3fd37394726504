"""One parser for length specs and one formatter for showing a length, used by every evaluation.

A length is a token count, an `int`, from option parsing (`parse_length`, `parse_lengths`, called by
`common.options.length`/`lengths` and the evaluations' option types) through data, metric names
(`acc@qa1_4096`) and results readers, to the edge where a person reads it: report tables, figure
axes, CLI text and error lines, which all call `format_length` and nothing else. Specs are ints or
strings with an optional binary suffix, as long-context data sets name them: "4k" = 4096,
"1M" = 1048576, "512" = 512. Lists arrive from the command line as "1k,4k", "[512, 1024]" or a real
list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}
_SPEC = re.compile(r"^\s*(\d+)\s*([kKmM]?)\s*$")


def parse_length(spec: str | int) -> int:
    """Token count of one length spec: 4096, "4096", "4k" -> 4096; "1M" -> 1048576; "0k" -> 0."""
    if isinstance(spec, bool):
        raise ValueError(f"unknown length spec {spec!r}: use a token count like 4096 or 4k")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"length {spec} is negative: use a token count like 4096 or 4k")
        return spec
    match = _SPEC.match(str(spec))
    if not match:
        raise ValueError(
            f"unknown length spec {spec!r}: use a token count (4096) or a count with a k/M suffix "
            "(4k = 4096 tokens, 1M = 1048576)"
        )
    return int(match.group(1)) * _SUFFIX[match.group(2).lower()]


def parse_lengths(spec: str | int | Sequence[str | int]) -> list[int]:
    """A list of lengths from "1k,4k", "[512, 1024]", "[0k,4k]", 2048 or [1024, "4k"], in the order given (an option
    refuses a repeated length: `common.options.lengths`)."""
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith(("[", "(")):
            if not text.endswith(("]", ")")):
                raise ValueError(f"unknown length list {spec!r}: write e.g. 1k,4k or [1024, 4096]")
            # `--metadata key=[0k,4k]` arrives as the string "[0k,4k]" (not a Python literal).
            text = text[1:-1]
        spec = [part.strip().strip("'\"") for part in text.split(",") if part.strip()]
    elif isinstance(spec, int):
        spec = [spec]
    lengths = [parse_length(item) for item in spec]
    if not lengths:
        raise ValueError("empty length list: give at least one length, e.g. 4k")
    return lengths


def format_length(n: int) -> str:
    """A token count as people read it, the inverse of `parse_length`: 4096 -> "4k", 1048576 -> "1M", 1000 -> "1000".

    0 is "0k", the length without background text; data sets that name their lengths this way (hub configs,
    prediction files) are read and shown in one spelling.
    """
    if n == 0:
        return "0k"
    if n >= 1024**2 and n % 1024**2 == 0:
        return f"{n // 1024**2}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)

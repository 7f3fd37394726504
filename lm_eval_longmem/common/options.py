"""`--metadata` options, declared once per evaluation and parsed once per run.

The harness hands every task (and its `custom_dataset` hook) one flat dict: `--model_args` merged
with `--metadata`, values as strings or JSON literals. Each evaluation declares its keys as one
frozen dataclass (`<evaluation>/options.py`) whose fields are made with `option()`: name,
default, parser (type and allowed range), one-line meaning and an example. `parse_options` turns
the metadata into that dataclass; the data builder and the task both call it and get the same
object (memoised per metadata), so nothing is parsed twice and the task cards' option tables are
checked against the declaration (`tests/test_docs.py`).

Every error is a `UsageError` whose one line names the key, what was wrong and a valid example; a
key with the evaluation's prefix that is not declared is an error naming the closest valid key with its
meaning and an example (or every valid key, and the class that declares them): what any evaluation has,
whether or not it has a card.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import lru_cache
from typing import Any, TypeVar

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.lengths import format_length, parse_length, parse_lengths

T = TypeVar("T")
_SPEC = "lm_eval_longmem"


@dataclass(frozen=True)
class OptionSpec:
    """What `option()` records about one key."""

    parse: Callable[[Any], Any]
    """Text or literal -> value; raises ValueError with what was expected."""
    help: str
    """One-line meaning (the task card's table shows it)."""
    example: str
    """A valid value, shown in every error about this key."""
    local_input: bool = False
    """The value may name a local file or folder whose content goes into cache keys."""


def option(default: Any, parse: Callable[[Any], Any], help: str, example: str, *, local_input: bool = False) -> Any:
    """A dataclass field that declares one `--metadata` key (the field name without the prefix)."""
    return field(default=default, metadata={_SPEC: OptionSpec(parse, help, example, local_input)})


@dataclass(frozen=True)
class Declared:
    """One declared key, for documentation and checks."""

    key: str
    name: str
    default: Any
    spec: OptionSpec


def declared(cls: type, prefix: str) -> list[Declared]:
    """Every key `cls` declares, in declaration order."""
    out = []
    for f in fields(cls):
        spec = f.metadata.get(_SPEC)
        if spec is not None:
            out.append(Declared(prefix + f.name, f.name, _default(f), spec))
    return out


def _default(f: Field) -> Any:
    return None if f.default is MISSING else f.default


def _shown(value: Any) -> str:
    """A value as the user wrote it: the harness types `-3` as the float -3.0, shown here as -3 again."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _given(value: Any) -> bool:
    return value is not None and value != ""


def parse_options(cls: type[T], prefix: str, metadata: dict[str, Any] | None) -> T:
    """`cls` filled from the `prefix*` keys of `metadata` (absent or empty keys take their default).

    Memoised on the metadata's content, so every caller in a run gets the same object.
    """
    return _parse_cached(cls, prefix, _freeze(metadata or {}))  # type: ignore[arg-type]  # classes hash; mypy's Hashable check of type[T] is too strict


def _freeze(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, sort_keys=True, default=str)


@lru_cache(maxsize=64)
def _parse_cached(cls: type, prefix: str, frozen: str) -> Any:
    metadata = json.loads(frozen)
    keys = declared(cls, prefix)
    known = {d.key for d in keys}
    for key in sorted(metadata):
        if key.startswith(prefix) and key not in known:
            raise UsageError(f"--metadata {key}: no such option; {_closest(key, prefix, keys, cls)}")
    values = {}
    for d in keys:
        raw = metadata.get(d.key)
        if not _given(raw):
            values[d.name] = d.default
            continue
        try:
            values[d.name] = d.spec.parse(raw)
        except (ValueError, TypeError) as err:
            raise UsageError(f"--metadata {d.key}={_shown(raw)}: {err}; e.g. {d.key}={d.spec.example}") from None
    return cls(**values)


def _closest(key: str, prefix: str, keys: list[Declared], cls: type) -> str:
    """What the error for the undeclared `key` offers: the closest declared key (compared past the `prefix` they
    share), with its meaning and an example; or every declared key, and where they are declared with their meanings."""
    close = difflib.get_close_matches(key.removeprefix(prefix), sorted(d.name for d in keys), n=1, cutoff=0.6)
    if close:
        d = next(d for d in keys if d.name == close[0])
        return f"did you mean {d.key}? ({d.spec.help}; e.g. {d.key}={d.spec.example})"
    listed = ", ".join(sorted(d.key for d in keys))
    return f"valid keys: {listed} (each with its meaning in {cls.__module__}.{cls.__qualname__})"


LIMIT_ORDERS = ("balanced", "cheapest")
"""Values of every evaluation's `<prefix>limit_order` key (`limit_order_option`)."""


def limit_order_option() -> Any:
    """The `<prefix>limit_order` key, the same in every evaluation: the order in which the run takes
    the docs, and so which docs `--limit N` runs.

    `balanced` (default) is the dataset's own order (`common.order`): rounds that hold one doc of every
    cell, each round led by its most expensive doc so data-parallel ranks get equal work; `--limit N`
    then covers every cell but starts with the longest inputs. `cheapest` takes the docs by their
    estimated work (the same estimate the balanced order uses), cheapest first: `--limit N` runs
    the N cheapest docs that fit, for a smoke test. The docs themselves, their indices and every
    score are the same in both orders; only which ones a `--limit` runs differs.
    """
    return option(
        "balanced",
        one_of(*LIMIT_ORDERS),
        "order of the docs, so which ones --limit N runs: balanced (rounds covering every cell, most expensive "
        "first) or cheapest (estimated work, cheapest first: for smoke tests)",
        "cheapest",
    )


# --- parsers: each raises ValueError saying what it expected -------------------------------------


def whole_number(minimum: int = 0, maximum: int | None = None) -> Callable[[Any], int]:
    """A whole number in [minimum, maximum]; "3" and 3 are accepted, 3.5, "3k" and True are not."""

    expected = f"expected a whole number {f'>= {minimum}' if maximum is None else f'from {minimum} to {maximum}'}"

    def parse(value: Any) -> int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(expected)
        text = str(int(value)) if isinstance(value, (int, float)) else str(value).strip()
        if not text.lstrip("-").isdigit():
            raise ValueError(expected)
        number = int(text)
        if number < minimum or (maximum is not None and number > maximum):
            raise ValueError(expected)
        return number

    return parse


def fraction_band(value: Any) -> tuple[float, float]:
    """A band of fractions "0-0.25", "0.25,0.5" or [0, 0.25] with 0 <= low < high <= 1."""
    import re

    parts = value if isinstance(value, (list, tuple)) else re.split(r"\s*[-,:]\s*", str(value).strip("[]() "))
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise ValueError("expected a band of two fractions of the context") from None
    if not 0.0 <= low < high <= 1.0:
        raise ValueError("expected 0 <= low < high <= 1")
    return low, high


def flag(value: Any) -> bool:
    """true/false, yes/no, on/off, 1/0 (any case)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ValueError("expected true or false")


def one_of(*choices: str) -> Callable[[Any], str]:
    """One of `choices` (case-insensitive); the value is returned lower-cased."""

    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def text(value: Any) -> str:
    """Any non-empty text."""
    return str(value).strip()


def length(value: Any) -> int:
    """One token count: 4096, "4k", "1M"."""
    return parse_length(value)


def lengths(value: Any) -> tuple[int, ...]:
    """A list of distinct token counts: "1k,4k", "[1024, 4096]" or a list."""
    return tuple(distinct(parse_lengths(value), "length", shown=format_length))


def words(value: Any) -> tuple[int, ...]:
    """A list of distinct whole word counts: "250,1000", "[250, 1000]" or a list (no k suffix)."""
    return tuple(distinct([whole_number(1)(item) for item in items(value)], "length"))


def distinct(
    values: Sequence[T], thing: str, *, key: Callable[[T], Hashable] | None = None, shown: Callable[[T], str] = str
) -> Sequence[T]:
    """`values` as given when no two have the same `key` (default: the value); else a `UsageError` (a ValueError)
    "X is given twice: name each <thing> once".

    Every list a user gives (a `--metadata` list, a comma-separated flag, files on the command line) names each
    value once: a repeated value would be built, run or counted twice (copies that narrow an interval), or, where
    the list is a set, merged without a word over what is usually a typo."""
    seen: set[Hashable] = set()
    for value in values:
        identity = value if key is None else key(value)
        if identity in seen:
            raise UsageError(f"{shown(value)} is given twice: name each {thing} once")
        seen.add(identity)
    return values


def items(value: Any) -> list[Any]:
    """A list from a real list, "a,b" or "[a, b]" (quotes around items are dropped)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (int, float)):
        return [value]
    body = str(value).strip()
    if body.startswith(("[", "(")) and body.endswith(("]", ")")):
        body = body[1:-1]
    return [part.strip().strip("'\"") for part in body.split(",") if part.strip().strip("'\"")]


def parse_flag(value: Any, key: str) -> bool:
    """A boolean model argument (e.g. `trust_remote_code`), with the key in the error."""
    try:
        return flag(value)
    except ValueError:
        raise UsageError(f"--model_args {key}={value!r}: expected true or false") from None

"""Command-line flags spelled as lm_eval spells them, for every `lm-eval-longmem` subcommand.

One spelling per concept: `--output_path` for where a command writes, underscores between words,
`--model_args`/`--metadata` parsed exactly as `lm_eval run` parses them (`k=v,k2=v2`, several such
words, or one JSON object). A former spelling keeps working and prints one line naming the new one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lm_eval_longmem import harness


def add_flag(parser: argparse.ArgumentParser, flag: str, *former: str, **kwargs: Any) -> argparse.Action:
    """`parser.add_argument(flag, **kwargs)`; each `former` spelling is still accepted, with a deprecation notice.

    The spellings form a mutually exclusive group, so `required=True` is met by any one of them
    (and giving two is an error).
    """
    if not former:
        return parser.add_argument(flag, **kwargs)
    group = parser.add_mutually_exclusive_group(required=kwargs.pop("required", False))
    action = group.add_argument(flag, **kwargs)
    for old in former:
        group.add_argument(
            old, dest=action.dest, nargs=action.nargs, const=action.const, type=action.type, metavar=action.metavar,
            default=argparse.SUPPRESS, help=argparse.SUPPRESS, action=_Former, new=flag,
        )  # fmt: skip
    return action


def add_dict_flag(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> argparse.Action:
    """`--model_args` or `--metadata`, a dict, taken as the harness takes it (`k=v,k2=v2` or a JSON object)."""
    return parser.add_argument(flag, nargs="+", action=harness.dict_flag_action(), metavar="<k=v or JSON>", **kwargs)


def args_string(values: dict[str, Any]) -> str:
    """`k=v,k2=v2`, how the harness prints model arguments."""
    return ",".join(f"{key}={value}" for key, value in values.items())


class _Former(argparse.Action):
    """A former spelling of `new`: stores into the same place and says, once per use, what to write instead."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)

"""Command-line flags spelled as lm_eval spells them, for every `lm-eval-longmem` subcommand.

One spelling per concept: `--output_path` for where a command writes (with `--overwrite` beside it,
`add_output_flags`), underscores between words, `--model_args`/`--metadata` parsed exactly as
`lm_eval run` parses them (`k=v,k2=v2`, several such words, or one JSON object). A former spelling
keeps working and prints one line naming the new one. Every numeric flag is declared with its type
and range (`number`), like a `--metadata` option: a value outside it is one line naming the flag
and the range (argparse's usage error, exit status 2). An evaluation's own commands, `lm-eval-longmem <name>
COMMAND`, are one group (`command_group`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lm_eval_longmem.harness.cli import dict_flag_action


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
            old, dest=action.dest, nargs=action.nargs, const=action.const, type=action.type, metavar=action.metavar,  # type: ignore[arg-type]  # argparse takes type=None (its default); typeshed does not
            default=argparse.SUPPRESS, help=argparse.SUPPRESS, action=_Former, new=flag,
        )  # fmt: skip
    return action


def add_dict_flag(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> argparse.Action:
    """`--model_args` or `--metadata`, a dict, taken as the harness takes it (`k=v,k2=v2` or a JSON object)."""
    return parser.add_argument(flag, nargs="+", action=dict_flag_action(), metavar="<k=v or JSON>", **kwargs)


def args_string(values: dict[str, Any]) -> str:
    """`k=v,k2=v2`, how the harness prints model arguments."""
    return ",".join(f"{key}={value}" for key, value in values.items())


class _Former(argparse.Action):
    """A former spelling of `new`: stores into the same place and says, once per use, what to write instead."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog}: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_output_flags(parser: argparse.ArgumentParser, *former: str, what: str, **kwargs: Any) -> argparse.Action:
    """`--output_path` (with its `former` spellings) and `--overwrite`, as every command that writes takes them.

    `what` says what is written there. The command checks the target before any work
    (`common.cache.check_target`): an existing file (or folder of ours) of the kind it writes is
    replaced only with `--overwrite`; anything else is never replaced.
    """
    action = add_flag(parser, "--output_path", *former, help=what, **kwargs)
    parser.add_argument(
        "--overwrite", action="store_true",
        help="replace what an earlier run of this command wrote at --output_path (never anything else)",
    )  # fmt: skip
    return action


def shown(value: float) -> str:
    """A number as a message shows it: whole numbers without a decimal point (-3, not -3.0)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def number(
    kind: type = int,
    *,
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
    open_high: bool = False,
) -> Callable[[str], Any]:
    """The argparse `type` of a numeric flag: `kind` (int or float) within [low, high] (`open_*`: bound excluded).

    A value of another type or outside the range raises `argparse.ArgumentTypeError` with the range,
    which argparse prints as `argument --FLAG: expected ..., got ...`.
    """
    name = "a whole number" if kind is int else "a number"
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if open_low else '>='} {shown(low)}")
    if high is not None:
        bounds.append(f"{'<' if open_high else '<='} {shown(high)}")
    expected = f"expected {name}{' ' + ' and '.join(bounds) if bounds else ''}"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        below = low is not None and (value <= low if open_low else value < low)
        above = high is not None and (value >= high if open_high else value > high)
        if below or above:
            raise argparse.ArgumentTypeError(f"{expected}, got {shown(value)}")
        return value

    parse.__name__ = name  # argparse names the type in its own messages
    return parse


@dataclass(frozen=True)
class CommandGroup:
    """`lm-eval-longmem <name> COMMAND ...` (`command_group`): its subcommands are added with `add`."""

    commands: argparse._SubParsersAction
    epilog: str | None
    """Its examples, shown (as written) under its help and under each subcommand's."""

    def add(
        self, name: str, run: Callable[[argparse.Namespace], Any], *, help: str, epilog: str | None = None
    ) -> argparse.ArgumentParser:
        """Subcommand `name`, run by `run(args)`, with `epilog` (default: the group's) under its help."""
        parser = self.commands.add_parser(
            name, help=help, epilog=epilog or self.epilog, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        parser.set_defaults(func=run)
        return parser


def command_group(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, epilog: str | None = None
) -> CommandGroup:
    """An evaluation's command `name` (spelt with `-`), which takes one of its subcommands (`CommandGroup.add`)."""
    parser = subparsers.add_parser(name, help=help, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    dest = f"{name.replace('-', '_')}_command"
    return CommandGroup(parser.add_subparsers(dest=dest, metavar="COMMAND", required=True), epilog)

"""The documentation cannot rot silently.

Over README.md, CONTRIBUTING.md, CHANGELOG.md, `docs/*.md` and the task cards (`task_configs/*/README.md`):

* every relative link resolves: its file exists, and its anchor is a heading of that file under GitHub's
  slug rules (lower case, punctuation but `-` and `_` dropped, spaces to `-`, `-1`, `-2` ... for repeats);
* every fenced `lm_eval ...`, `lm-eval ...` and `lm-eval-longmem ...` command parses with the real argument
  parsers (lm_eval's own command line, `lm_eval._cli.HarnessCLI`, and ours, `lm_eval_longmem.cli.build_parser`),
  spells no flag in a former spelling, and gives `--metadata` only keys our option declarations know;
* README.md (12 kB), each card (15 kB) and CONTRIBUTING.md (15 kB) stay within their size budgets, and so do
  `docs/` together (150 kB) and all these documents together (200 kB);
* every option table (first column `key` or `option`) lists exactly the keys one options class declares,
  with the declared defaults and examples the key's parser accepts; every options class has one table, an
  evaluation's main options (`<evaluation>/options.py`) in its card.

The options classes are found in the evaluation's core package (`lm_eval_longmem.<evaluation>`, the
folder name of its card; the `rim/` subpackage left out): every dataclass whose fields are declared with
`common.options.option`, under the `PREFIX` of its module. Nothing here lists an option by hand.

A fenced command may elide arguments with a bare `...` (left out before parsing); shell variables and
`$(...)` substitutions are taken as they are written (a placeholder word).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import pkgutil
import re
import shlex
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from kit import REPO_ROOT

from lm_eval_longmem.common.options import Declared, declared, parse_options

CARDS = sorted((REPO_ROOT / "task_configs").glob("*/README.md"))
DOCUMENTS = [
    REPO_ROOT / "README.md",
    REPO_ROOT / "CONTRIBUTING.md",
    REPO_ROOT / "CHANGELOG.md",
    *sorted((REPO_ROOT / "docs").glob("*.md")),
    *CARDS,
]
BUDGETS = {REPO_ROOT / "README.md": 12_000, REPO_ROOT / "CONTRIBUTING.md": 15_000, **dict.fromkeys(CARDS, 15_000)}
"""Bytes each front-door document may hold; the rest of what there is to say belongs in docs/."""
DOCS_BUDGET = 150_000
"""Bytes `docs/*.md` may hold together: each fact once, a figure once, no console dumps."""
ALL_BUDGET = 200_000
"""Bytes all the documents (`DOCUMENTS`) may hold together."""

FENCE = re.compile(r"^(```|~~~)(.*)$")
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
PROGRAM = re.compile(r"(?:^|[\s;&|])(?:lm_eval|lm-eval|lm-eval-longmem|-m lm_eval\S*)(?:\s|$)")
"""A line that may hold one of the commands checked (others, and program output, are passed over)."""


def _name(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


# --- Markdown: headings, links, fenced blocks --------------------------------------------------------------------


def split_fences(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(prose lines with fenced blocks blanked, [(language, block text)])."""
    prose, blocks, fence, language, body = [], [], None, "", []
    for line in text.splitlines():
        opened = FENCE.match(line.strip())
        if fence is None and opened:
            fence, language, body = opened[1], opened[2].strip().lower(), []
            prose.append("")
        elif fence is not None and line.strip().startswith(fence) and not line.strip()[len(fence) :].strip():
            blocks.append((language, "\n".join(body)))
            fence = None
            prose.append("")
        elif fence is not None:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return prose, blocks


def slug(title: str) -> str:
    """GitHub's anchor for a heading: links become their text, lower case, punctuation dropped, spaces to `-`."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor GitHub gives the headings of `path` (a repeated slug gets `-1`, `-2`, ...)."""
    prose, _ = split_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for line in prose:
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading[1])
            out.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return frozenset(out)


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, target) of every inline link or image in the prose of `path` (code spans left out)."""
    prose, _ = split_fences(path.read_text(encoding="utf-8"))
    for number, line in enumerate(prose, 1):
        line = re.sub(r"(`+)(?:(?!\1).)+?\1", "code", line)
        for target in re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", line):
            yield number, target


@pytest.mark.parametrize("path", DOCUMENTS, ids=_name)
def test_every_relative_link_and_anchor_resolves(path):
    broken = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto: ...
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{_name(path)}:{number}: {target}: no such file")
        elif anchor and (not linked.is_file() or anchor not in anchors(linked)):
            broken.append(f"{_name(path)}:{number}: {target}: no heading with that anchor in {linked.name}")
    assert not broken, "\n".join(broken)


def test_anchor_slugs_follow_github():
    assert slug("GPUs, vLLM and several processes") == "gpus-vllm-and-several-processes"
    assert slug("`forgetting_curve` ([card](task_configs/forgetting_curve/README.md))") == "forgetting_curve-card"
    assert (
        slug("The corrected check (`acc_corrected`) and its audit") == "the-corrected-check-acc_corrected-and-its-audit"
    )
    assert slug("At 32k to 1M tokens") == "at-32k-to-1m-tokens"


def test_every_document_is_checked():
    """A Markdown file of ours that no check reads would be free to rot."""
    tracked = {p for p in REPO_ROOT.glob("*.md")} | set((REPO_ROOT / "docs").glob("*.md")) | set(CARDS)
    assert tracked == set(DOCUMENTS)


# --- size budgets ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(BUDGETS), ids=_name)
def test_front_door_documents_stay_within_their_budget(path):
    size = len(path.read_bytes())
    assert size <= BUDGETS[path], (
        f"{_name(path)} is {size:,} bytes, over its budget of {BUDGETS[path]:,}: move the detail to docs/ "
        "(each topic once) and link to it"
    )


def test_docs_and_all_documents_stay_within_their_budgets():
    docs = sum(len(path.read_bytes()) for path in DOCUMENTS if path.parent == REPO_ROOT / "docs")
    total = sum(len(path.read_bytes()) for path in DOCUMENTS)
    assert docs <= DOCS_BUDGET, (
        f"docs/ holds {docs:,} bytes, over its budget of {DOCS_BUDGET:,}: say each fact once, link instead of "
        "restating, and give a measurement as one line of figures with its commit, date and command"
    )
    assert total <= ALL_BUDGET, f"the documents hold {total:,} bytes, over their budget of {ALL_BUDGET:,}"


# --- documented commands -------------------------------------------------------------------------------------------


def _without_substitutions(line: str) -> str:
    """`$(...)` (nested parentheses included) replaced by one placeholder word, so its pipes stay inside."""
    out, depth, i = [], 0, 0
    while i < len(line):
        if line.startswith("$(", i):
            if depth == 0:
                out.append("SUBSTITUTION")
            depth, i = depth + 1, i + 2
            continue
        if depth and line[i] == "(":
            depth += 1
        elif depth and line[i] == ")":
            depth -= 1
        elif not depth:
            out.append(line[i])
        i += 1
    return "".join(out)


def uncommented(line: str) -> tuple[str, bool]:
    """(`line` without its shell comment, whether it ends inside a quoted string)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], False
    return line, quote is not None


def shell_words(line: str) -> list[str]:
    """The words of one shell command line, as the shell splits them (`&&`, `|`, `;` as words of their own)."""
    lexer = shlex.shlex(_without_substitutions(uncommented(line)[0]), posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    return list(lexer)


def command_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(block number, words) of every `lm_eval`/`lm-eval`/`lm-eval-longmem` command in the fenced shell blocks."""
    _, blocks = split_fences(path.read_text(encoding="utf-8"))
    for number, (language, block) in enumerate(blocks, 1):
        if language not in SHELL_LANGUAGES:
            continue
        lines = [line.strip() for line in re.sub(r"\\\n", " ", block).splitlines()]
        while lines:
            line = lines.pop(0).removeprefix("$ ")
            if line.startswith("#") or not PROGRAM.search(line):  # output, comments, other programs
                continue
            line, quoted = uncommented(line)
            while quoted and lines:  # a quoted argument (JSON) that runs over several lines
                line, quoted = uncommented(line + "\n" + lines.pop(0))
            segment: list[str] = []
            for word in [*shell_words(line), ";"]:
                if word in {"&&", "||", "|", ";", "&"}:
                    if command := _program(segment):
                        yield number, command
                    segment = []
                else:
                    segment.append(word)


def _program(words: list[str]) -> list[str] | None:
    """`[program, *arguments]` with the program normalised to `lm_eval` or `lm-eval-longmem`; None for others."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value before the command
        words = words[1:]
    if not words:
        return None
    if words[0] in {"lm_eval", "lm-eval"}:
        return ["lm_eval", *words[1:]]
    if words[0] == "lm-eval-longmem":
        return words
    if "-m" in words[:-1] and words[0] in {"python", "python3", "accelerate", "torchrun"}:
        module = words[words.index("-m") + 1]
        rest = words[words.index("-m") + 2 :]
        if module == "lm_eval":
            return ["lm_eval", *rest]
        if module == "lm_eval_longmem.cli":
            return ["lm-eval-longmem", *rest]
    return None


def harness_parse(args: list[str]) -> Any:
    """`args` as the `lm_eval` command line parses them (the legacy form without `run` included)."""
    from lm_eval._cli import HarnessCLI

    saved = sys.argv
    sys.argv = ["lm-eval", *args]
    try:
        return HarnessCLI().parse_args()
    finally:
        sys.argv = saved


def parse_command(words: list[str]) -> Any:
    """The namespace a documented command parses to; SystemExit (with argparse's message) when it does not."""
    from lm_eval_longmem.cli import build_parser

    args = [word for word in words[1:] if word != "..."]
    if words[0] == "lm_eval":
        return harness_parse(args)
    args = [word for word in args if word != "--debug"]
    if args and args[0] == "run":
        return harness_parse(["run", *args[1:]])
    return build_parser().parse_args(args)


@cache
def option_classes() -> dict[str, list[tuple[type, str]]]:
    """evaluation -> [(options class, key prefix)], from the dataclasses of its core package."""
    found: dict[str, list[tuple[type, str]]] = {}
    for card in CARDS:
        evaluation = card.parent.name
        package = importlib.import_module(f"lm_eval_longmem.{evaluation}")
        for module_info in pkgutil.iter_modules(package.__path__):
            if module_info.ispkg:  # rim/ and any other subpackage: no options are declared there
                continue
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            prefix = getattr(module, "PREFIX", None)
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and dataclasses.is_dataclass(value)
                    and value.__module__ == module.__name__
                    and isinstance(prefix, str)
                    and declared(value, prefix)
                ):
                    found.setdefault(evaluation, []).append((value, prefix))
    return found


@cache
def declared_keys() -> frozenset[str]:
    return frozenset(
        d.key for classes in option_classes().values() for cls, prefix in classes for d in declared(cls, prefix)
    )


def test_option_classes_are_found():
    """Every evaluation declares options, and the keys of its prefix are its own."""
    classes = option_classes()
    assert set(classes) == {card.parent.name for card in CARDS}
    for evaluation, found in classes.items():
        assert all(prefix.startswith(f"{evaluation}_") for _, prefix in found), found


@pytest.mark.parametrize("path", DOCUMENTS, ids=_name)
def test_documented_commands_parse_and_name_declared_options(path):
    problems = []
    for block, words in command_lines(path):
        shown = " ".join(words)
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                parsed = parse_command(words)
        except SystemExit:
            problems.append(f"{_name(path)}, block {block}: `{shown}` does not parse: {stderr.getvalue().strip()}")
            continue
        if "is deprecated" in stderr.getvalue():
            problems.append(f"{_name(path)}, block {block}: `{shown}`: {stderr.getvalue().strip()}")
        metadata = getattr(parsed, "metadata", None) or {}
        unknown = sorted(set(metadata) - declared_keys()) if isinstance(metadata, dict) else [repr(metadata)]
        if unknown:
            problems.append(f"{_name(path)}, block {block}: `{shown}`: --metadata keys no option declares: {unknown}")
    assert not problems, "\n".join(problems)


def test_documents_hold_commands_and_the_check_catches_a_bad_one():
    """The extraction finds the commands (so the test above checks something), and a bad one fails to parse."""
    found = [words for path in DOCUMENTS for _, words in command_lines(path)]
    assert sum(words[0] == "lm_eval" for words in found) >= 5
    assert sum(words[0] == "lm-eval-longmem" for words in found) >= 5
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        parse_command(["lm-eval-longmem", "plan", "--tasks", "babilong", "--gpu", "no-such-card"])
    words = shell_words('HF_HUB_OFFLINE=1 lm_eval --metadata x=hf:A/B#text "$(cat a | head -1)" # note')
    assert words == ["HF_HUB_OFFLINE=1", "lm_eval", "--metadata", "x=hf:A/B#text", "SUBSTITUTION"]


# --- the cards' option tables ----------------------------------------------------------------------------------


def option_tables(card: Path) -> list[dict[str, dict[str, str]]]:
    """Each table of the card whose first column is `key` or `option`: key -> {column: cell}."""
    prose, _ = split_fences(card.read_text(encoding="utf-8"))
    cells = lambda line: [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # noqa: E731
    tables = []
    for i, line in enumerate(prose):
        if not line.startswith("|") or cells(line)[0] not in {"key", "option"}:
            continue
        header, rows = cells(line), {}
        for row_line in prose[i + 2 :]:
            if not row_line.startswith("|"):
                break
            row = dict(zip(header, cells(row_line), strict=True))
            rows[row[header[0]].strip("`")] = row
        tables.append(rows)
    return tables


def _values(cell: str) -> list[str]:
    """The values a cell shows: each `code` span (a `key=` prefix dropped), else the whole cell."""
    spans = re.findall(r"`([^`]+)`", cell) or [cell]
    return [span.split("=", 1)[1] if re.match(r"^\w+=", span) else span for span in spans]


def _owner(path: Path, rows: dict[str, dict[str, str]]) -> tuple[type, str]:
    """The one options class whose keys the table lists."""
    every = [pair for classes in option_classes().values() for pair in classes]
    owner = [(cls, prefix) for cls, prefix in every if any(d.key in rows for d in declared(cls, prefix))]
    assert len(owner) == 1, f"{_name(path)}: a table whose keys {sorted(rows)} belong to {owner}"
    return owner[0]


@pytest.mark.parametrize("path", DOCUMENTS, ids=_name)
def test_option_tables_list_exactly_the_declared_options(path):
    """Each option table names exactly one class's keys, with the declared defaults and valid examples."""
    for rows in option_tables(path):
        cls, prefix = _owner(path, rows)
        keys: dict[str, Declared] = {d.key: d for d in declared(cls, prefix)}
        assert set(rows) == set(keys), (
            f"{_name(path)}: the table of {cls.__name__} lists {sorted(set(rows) - set(keys))} that it does not "
            f"declare and leaves out {sorted(set(keys) - set(rows))}"
        )
        for key, d in keys.items():
            row = rows[key]
            for example in _values(row.get("example", "")):
                given = harness_parse(["run", "--tasks", "x", "--metadata", f"{key}={example}"]).metadata
                assert list(given) == [key], (key, example, given)  # the example survives the command line whole
                parse_options(cls, prefix, given)  # raises UsageError naming the key if the table is wrong
            if d.default is not None:
                assert d.spec.parse(_values(row["default"])[0]) == d.default, (key, row["default"], d.default)


@pytest.mark.parametrize("card", CARDS, ids=_name)
def test_every_options_class_has_one_table_and_the_card_has_its_evaluations(card):
    """The evaluation's main options (`<evaluation>.options`) are tabled in its card; any other options class of
    the evaluation (a subcommand's, such as `booksort finetune`'s) once, in its card or in docs/."""
    evaluation = card.parent.name
    tabled: dict[str, list[Path]] = {}
    for path in DOCUMENTS:
        for rows in option_tables(path):
            cls, _ = _owner(path, rows)
            tabled.setdefault(cls.__qualname__, []).append(path)
    for cls, _ in option_classes()[evaluation]:
        assert len(tabled.get(cls.__qualname__, [])) == 1, f"{cls.__name__} is tabled in {tabled.get(cls.__qualname__)}"
        if cls.__module__ == f"lm_eval_longmem.{evaluation}.options":
            assert tabled[cls.__qualname__] == [card], f"{cls.__name__}'s table belongs in {_name(card)}"

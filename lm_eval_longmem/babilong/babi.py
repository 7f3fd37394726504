"""Reader for bAbI task files (Weston et al.), the facts and questions BABILong hides in long text.

A bAbI file holds numbered lines; numbering restarts at 1 with each new story. A statement line is
`N text`; a question line is `N question<TAB>answer<TAB>supporting line numbers`. A story may ask
several questions as it goes. As in BABILong, each question becomes one sample whose facts are
the story's statements before it (earlier questions are not repeated as facts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.text import read_text

_TASK_FILE = re.compile(r"^qa(?P<num>\d+)_.*_test\.txt$")


@dataclass(frozen=True)
class BabiSample:
    """One bAbI question with the facts it is asked about."""

    facts: tuple[str, ...]
    """The story's statements before the question, in story order."""
    question: str
    """The question, stripped ("Where is Mary?")."""
    answer: str
    """The answer as the file gives it ("hallway"; "apple,milk" for lists; "n,w" for qa19)."""
    supporting: tuple[int, ...]
    """Indices into `facts` of the statements that support the answer."""
    story: int
    """Index of the story in the file (0-based); questions of one story share facts."""


_GET_BABI = (
    "set --metadata babilong_babi_dir=PATH to a folder with the bAbI test files "
    "(qa1_single-supporting-fact_test.txt, ...), e.g. the en/ folder of tasks_1-20_v1-2 from "
    "https://research.facebook.com/downloads/babi/, or use babilong_facts=simulated"
)


def read_babi(path: str | Path) -> list[BabiSample]:
    """All questions of a bAbI task file, in file order.

    The file is read by `common.text.read_text` (UTF-8, byte-order mark dropped, newlines normalised).
    A file that is not bAbI text (not UTF-8, a line that is not `N text` or `N question<TAB>answer<TAB>ids`,
    a supporting id that names no statement of its story, no question at all) is a `UsageError`
    naming the file and line: a damaged download must not silently give fewer or other samples.
    """
    path = Path(path)

    def malformed(line_no: int, what: str) -> UsageError:
        return UsageError(f"{path}, line {line_no}: {what}; the file is not a bAbI task file: {_GET_BABI}")

    try:
        text = read_text(path)  # the one reader: a byte-order mark or CRLF line ends change nothing
    except UsageError as err:
        raise UsageError(f"{err}; so not a bAbI task file: {_GET_BABI}") from err
    samples: list[BabiSample] = []
    facts: list[str] = []
    fact_index: dict[int, int] = {}  # line number in the story -> index into `facts`
    story = -1
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        number_text, _, rest = raw.partition(" ")
        if not number_text.isdigit():
            raise malformed(line_no, f"expected 'N text', got {raw[:60]!r}")
        number = int(number_text)
        if number == 1:
            story += 1
            facts, fact_index = [], {}
        elif story < 0:
            raise malformed(line_no, "the first story does not start at line number 1")
        if "\t" in rest:
            question, answer, *support = rest.split("\t")
            ids = " ".join(support).split()
            if not answer.strip() or not all(i.isdigit() and int(i) in fact_index for i in ids):
                raise malformed(
                    line_no, f"expected 'N question<TAB>answer<TAB>supporting statement numbers', got {raw[:80]!r}"
                )
            samples.append(
                BabiSample(
                    facts=tuple(facts),
                    question=question.strip(),
                    answer=answer.strip(),
                    supporting=tuple(fact_index[int(i)] for i in ids),
                    story=story,
                )
            )
        else:
            fact_index[number] = len(facts)
            facts.append(rest.strip())
    if not samples:
        raise UsageError(f"{path} holds no bAbI questions: {_GET_BABI}")
    return samples


def task_file(babi_dir: str | Path, qa: str) -> Path:
    """The test file of task `qa` ("qa1") in a bAbI folder such as `tasks_1-20_v1-2/en/`."""
    folder = Path(babi_dir).expanduser()
    if not folder.is_dir():
        raise UsageError(f"bAbI folder {str(folder)!r} not found: {_GET_BABI}")
    number = int(qa.lower().removeprefix("qa"))
    matches = [p for p in sorted(folder.iterdir()) if (m := _TASK_FILE.match(p.name)) and int(m["num"]) == number]
    if len(matches) != 1:
        found = f"found {[p.name for p in matches]}" if matches else "found none"
        raise UsageError(f"expected one file qa{number}_*_test.txt in the bAbI folder {folder}, {found}: {_GET_BABI}")
    return matches[0]

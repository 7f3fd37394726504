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


def read_babi(path: str | Path) -> list[BabiSample]:
    """All questions of a bAbI task file, in file order."""
    path = Path(path)
    samples: list[BabiSample] = []
    facts: list[str] = []
    fact_index: dict[int, int] = {}  # line number in the story -> index into `facts`
    story = -1
    for line_no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        number_text, _, rest = raw.partition(" ")
        if not number_text.isdigit():
            raise ValueError(f"{path}:{line_no}: not a bAbI line (expected 'N text'): {raw!r}")
        number = int(number_text)
        if number == 1:
            story += 1
            facts, fact_index = [], {}
        if "\t" in rest:
            question, answer, *support = rest.split("\t")
            ids = [int(x) for x in " ".join(support).split()]
            samples.append(
                BabiSample(
                    facts=tuple(facts),
                    question=question.strip(),
                    answer=answer.strip(),
                    supporting=tuple(fact_index[i] for i in ids if i in fact_index),
                    story=story,
                )
            )
        else:
            fact_index[number] = len(facts)
            facts.append(rest.strip())
    if not samples:
        raise ValueError(f"{path} holds no bAbI questions")
    return samples


def task_file(babi_dir: str | Path, qa: str) -> Path:
    """The test file of task `qa` ("qa1") in a bAbI folder such as `tasks_1-20_v1-2/en/`."""
    folder = Path(babi_dir).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"bAbI folder {str(folder)!r} not found: set --metadata babilong_babi_dir=PATH to a folder "
            "with the bAbI test files (qa1_single-supporting-fact_test.txt, ...), e.g. the en/ folder "
            "of tasks_1-20_v1-2 from https://research.facebook.com/downloads/babi/"
        )
    number = int(qa.lower().removeprefix("qa"))
    matches = [p for p in sorted(folder.iterdir()) if (m := _TASK_FILE.match(p.name)) and int(m["num"]) == number]
    if len(matches) != 1:
        raise FileNotFoundError(
            f"expected one file qa{number}_*_test.txt in {folder}, found {[p.name for p in matches]}"
        )
    return matches[0]

"""The BABILong authors' prediction files as a reference series for `lm-eval-longmem report`.

The authors publish their models' answers as one CSV per task and length (columns `target`,
`output`, `question`), named `qaN_LEN_instruction_yes_examples_yes_post_prompt_yes[...].csv`; the
RAG runs of the paper's section 3.2 (Llama-3 with retrieval, qa1-qa5, 0k-10M) are such a folder.
`read_reference` scores every file of the paper's prompt setting (instruction, examples and
answer format shown) with the authors' check (`predictions.score_file`), so their curve can be drawn
beside ours.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from lm_eval_longmem.babilong.predictions import score_file
from lm_eval_longmem.common.errors import UsageError
from lm_eval_longmem.common.lengths import parse_length
from lm_eval_longmem.common.stats import Interval, proportion_interval

_FILE = re.compile(r"^(qa\d+)_(\d+[kM])_instruction_yes_examples_yes_post_prompt_yes(?:_.*)?\.csv$")


class ReferenceCell(NamedTuple):
    """The authors' accuracy on one (task, length), with a Wilson interval."""

    qa: str
    length: int
    """Tokens (the file names say "4k")."""
    n: int
    acc: Interval


class Reference(NamedTuple):
    """One folder of prediction files: its label (the folder's name) and its cells."""

    label: str
    cells: list[ReferenceCell]


def read_reference(folder: str | Path) -> Reference:
    """Every `qaN_LEN_..._yes.csv` file in `folder`, scored; a folder with none is a `UsageError`."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise UsageError(f"--babilong_reference {folder}: not a folder of BABILong prediction files")
    cells = []
    for file in sorted(path.iterdir()):
        if match := _FILE.match(file.name):
            score = score_file(file, match[1])
            hits = round(score.acc / 100 * score.n)
            cells.append(ReferenceCell(match[1], parse_length(match[2]), score.n, proportion_interval(hits, score.n)))
    if not cells:
        raise UsageError(
            f"--babilong_reference {folder}: no qaN_LEN_instruction_yes_examples_yes_post_prompt_yes*.csv "
            "files (the authors' prediction format) in it"
        )
    return Reference(path.name, cells)

"""BABILong's prompt texts, read from the harness's own task of each bAbI task (the reliance itself: R8 in
`tests/harness/test_tasks.py`)."""

from __future__ import annotations

from lm_eval_longmem.babilong.prompts import HARNESS_FOLDER, harness_prompt_parts, harness_task
from lm_eval_longmem.harness.tasks import builtin_task_file


def test_each_bab_i_task_names_the_harness_task_its_texts_come_from():
    assert harness_task("QA5") == harness_task("qa5") == "babilong_qa5"
    assert builtin_task_file(HARNESS_FOLDER, harness_task("qa20")).name == "babilong_qa20.yaml"
    parts = harness_prompt_parts("qa5")
    assert len(parts.examples) == 3 and parts.answer_format.startswith(("Always return", "Your answer"))

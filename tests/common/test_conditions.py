"""The condition vocabulary: every task of ours records one of its words, and each evaluation decides its own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lm_eval_longmem.babilong.options import BabilongOptions
from lm_eval_longmem.babilong.task import BabilongTask
from lm_eval_longmem.booksort.data import CHECKPOINT_RECORD, fine_tuned_checkpoint
from lm_eval_longmem.booksort.task import BooksortTask
from lm_eval_longmem.common.conditions import CONDITIONS, FINE_TUNED, IN_CONTEXT, MEMORYLESS, RETRIEVAL
from lm_eval_longmem.common.task import LongmemTask
from lm_eval_longmem.forgetting_curve.task import ForgettingCurveTask


def test_the_vocabulary_is_the_four_conditions_of_the_papers_in_report_order():
    assert list(CONDITIONS) == [IN_CONTEXT, MEMORYLESS, RETRIEVAL, FINE_TUNED]
    assert all(CONDITIONS.values())


def test_a_task_is_in_context_unless_its_evaluation_says_otherwise():
    assert LongmemTask.condition.fget(SimpleNamespace()) == IN_CONTEXT
    assert ForgettingCurveTask.condition is LongmemTask.condition


def test_babilong_is_retrieval_when_its_option_picks_pieces():
    def condition(**options):
        return BabilongTask.condition.fget(SimpleNamespace(options=BabilongOptions(**options)))

    assert condition() == IN_CONTEXT
    assert condition(retrieval="sentences") == condition(retrieval="chunks") == RETRIEVAL


@pytest.mark.parametrize(
    ("yaml_condition", "checkpoint", "expected"),
    [
        ("in_context", False, IN_CONTEXT),
        ("in_context", True, IN_CONTEXT),  # the excerpt is shown: in-context, whatever the model learnt
        ("memoryless", False, MEMORYLESS),
        ("memoryless", True, FINE_TUNED),
    ],
)
def test_booksort_is_memory_less_without_the_excerpt_and_fine_tuned_on_a_checkpoint(
    tmp_path, yaml_condition, checkpoint, expected
):
    model = tmp_path / "epoch-1"
    model.mkdir()
    if checkpoint:
        (model / CHECKPOINT_RECORD).write_text("{}")
    task = SimpleNamespace(
        config=SimpleNamespace(dataset_kwargs={"condition": yaml_condition}), metadata={"pretrained": str(model)}
    )
    assert BooksortTask.condition.fget(task) == expected


def test_a_checkpoint_is_told_by_its_record_whether_adapters_or_a_whole_model(tmp_path):
    (tmp_path / CHECKPOINT_RECORD).write_text("{}")
    assert fine_tuned_checkpoint({"pretrained": "base", "peft": str(tmp_path)})
    assert fine_tuned_checkpoint({"pretrained": str(tmp_path)})
    assert not fine_tuned_checkpoint({"pretrained": str(tmp_path / "missing")}) and not fine_tuned_checkpoint({})

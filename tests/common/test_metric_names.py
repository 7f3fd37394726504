"""`common/metric_names.py`: one grammar, formatted and parsed in one place, old length spellings read."""

import pytest

from lm_eval_longmem.common import metric_names
from lm_eval_longmem.common.metric_names import (
    Name,
    ScoreSpec,
    canonical_row,
    cell,
    cell_parts,
    cells_of,
    name,
    parse,
)


@pytest.mark.parametrize(
    "key, parsed",
    [
        ("copy_acc@1024,none", Name("copy_acc", ("1024",), "")),
        ("acc@qa1_4096_ci_low,none", Name("acc", ("qa1", "4096"), "_ci_low")),
        ("acc@qa1_4k_ci_high", Name("acc", ("qa1", "4096"), "_ci_high")),  # an old file's length name
        ("acc@LE250_bin2_p_above_chance,none", Name("acc", ("LE250", "bin2"), "_p_above_chance")),
        ("acc_ci_low,none", Name("acc", (), "_ci_low")),  # a summary's interval bound, no cell
        ("fine_memory_length_ci_high", Name("fine_memory_length", (), "_ci_high")),
        ("x_length_low,none", Name("x_length_low", (), "")),  # no statistic of the grammar: part of the score
        ("effective_context@qa3,none", Name("effective_context", ("qa3",), "")),
        ("acc_stderr,none", None),  # the harness's own
        ("alias", None),
        ("acc@,none", None),
    ],
)
def test_parse(key, parsed):
    assert parse(key) == parsed


def test_format_and_parse_are_inverse():
    for parts, stat in [
        ((1024,), ""),
        (("qa7", 0), "_ci_low"),
        (("LE2500", "bin3"), "_p_above_chance"),
        ((), "_ci_high"),
    ]:
        text = name("acc", *parts, stat=stat)
        assert parse(f"{text},none") == Name("acc", cell_parts(cell(*parts)), stat)
        assert str(parse(text)) == text
    assert name("acc", "qa1", 4096) == "acc@qa1_4096" and cell("qa1", 0) == "qa1_0"
    with pytest.raises(ValueError, match="unknown statistic"):
        name("acc", stat="_stderr")


def test_canonical_row_rewrites_old_lengths_and_keeps_other_names():
    row = {
        "alias": "babilong",
        "acc@qa1_4k,none": 0.5,
        "acc@4k_ci_low,none": 0.2,
        "effective_context@qa1,none": "4k",  # a value is an evaluation's to read (`Evaluation.results_reading`)
        "acc_stderr,none": "N/A",
        "acc@qa1_4k,strict": 0.1,  # another filter: left out
    }
    assert canonical_row(row) == {
        "acc@qa1_4096": 0.5,
        "acc@4096_ci_low": 0.2,
        "effective_context@qa1": "4k",
        "acc_stderr": "N/A",
    }
    assert canonical_row(row, "strict") == {"acc@qa1_4096": 0.1}
    assert cells_of(canonical_row(row), "acc") == [("qa1", "4096")]


def test_a_score_is_binary_unless_declared_otherwise():
    assert ScoreSpec("acc") == ScoreSpec("acc", "binary", higher_is_better=True)


def test_a_share_names_its_units_and_only_a_share_does():
    assert ScoreSpec("copy_acc", "share", units="scored").units == "scored"
    with pytest.raises(ValueError, match="a share names its units"):
        ScoreSpec("copy_acc", "share")
    with pytest.raises(ValueError, match="a share names its units"):
        ScoreSpec("acc", units="scored")


def test_intervals_are_spelled_once():
    assert metric_names.with_interval("acc", "qa1", 0) == ("acc@qa1_0", "acc@qa1_0_ci_low", "acc@qa1_0_ci_high")
    assert metric_names.with_interval("acc") == ("acc", "acc_ci_low", "acc_ci_high")

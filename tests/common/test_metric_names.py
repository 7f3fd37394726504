"""`common/metric_names.py`: one grammar, formatted and parsed in one place, old spellings read."""

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
    score_spec,
)


@pytest.mark.parametrize(
    "key, parsed",
    [
        ("copy_acc@1024,none", Name("copy_acc", ("1024",), "")),
        ("acc@qa1_4096_ci_low,none", Name("acc", ("qa1", "4096"), "_ci_low")),
        ("acc@qa1_4k_ci_high", Name("acc", ("qa1", "4096"), "_ci_high")),  # an old file's length name
        ("acc@LE250_bin2_p_above_chance,none", Name("acc", ("LE250", "bin2"), "_p_above_chance")),
        ("acc_ci_low,none", Name("acc", (), "_ci_low")),  # a summary's interval bound, no cell
        ("fine_memory_length_low,none", Name("fine_memory_length", (), "_ci_low")),  # the bounds' old spelling
        ("fine_memory_length_ci_high", Name("fine_memory_length", (), "_ci_high")),
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


def test_canonical_row_rewrites_old_files_and_keeps_other_names():
    row = {
        "alias": "babilong",
        "acc@qa1_4k,none": 0.5,
        "acc@4k_ci_low,none": 0.2,
        "effective_context@qa1,none": "4k",
        "effective_context@qa2,none": "none",
        "acc_stderr,none": "N/A",
        "acc@qa1_4k,strict": 0.1,  # another filter: left out
        "fine_memory_length_low,none": 256,  # the one name results files still write with the old bounds
    }
    assert canonical_row(row) == {
        "acc@qa1_4096": 0.5,
        "acc@4096_ci_low": 0.2,
        "effective_context@qa1": 4096,
        "effective_context@qa2": None,
        "acc_stderr": "N/A",
        "fine_memory_length_ci_low": 256,
    }
    assert canonical_row(row, "strict") == {"acc@qa1_4096": 0.1}
    assert cells_of(canonical_row(row), "acc") == [("qa1", "4096")]


def test_a_bare_score_is_a_binary_accuracy():
    assert score_spec("acc") == ScoreSpec("acc", "binary", higher_is_better=True)
    ppl = ScoreSpec("ppl", "perplexity", higher_is_better=False)
    assert score_spec(ppl) is ppl


def test_a_share_names_its_units_and_only_a_share_does():
    assert ScoreSpec("copy_acc", "share", units="scored").units == "scored"
    with pytest.raises(ValueError, match="a share names its units"):
        ScoreSpec("copy_acc", "share")
    with pytest.raises(ValueError, match="a share names its units"):
        ScoreSpec("acc", units="scored")


def test_intervals_are_spelled_once_and_the_memory_bounds_as_results_files_have_them():
    assert metric_names.with_interval("acc", "qa1", 0) == ("acc@qa1_0", "acc@qa1_0_ci_low", "acc@qa1_0_ci_high")
    assert metric_names.with_interval("acc") == ("acc", "acc_ci_low", "acc_ci_high")
    low, high = (metric_names.memory_length("fine", stat) for stat in (metric_names.CI_LOW, metric_names.CI_HIGH))
    assert (low, high) == ("fine_memory_length_ci_low", "fine_memory_length_ci_high")  # what readers ask for
    assert [metric_names.as_written(n) for n in (low, high)] == ["fine_memory_length_low", "fine_memory_length_high"]
    assert (
        metric_names.as_written("acc_ci_low") == "acc_ci_low"
        and metric_names.as_written("fine_memory_length") == "fine_memory_length"
    )
    assert str(parse(metric_names.as_written(low))) == low  # written and read back: one name
    with pytest.raises(ValueError, match="no statistic"):
        metric_names.memory_length("fine", metric_names.P_ABOVE_CHANCE)


def test_booksort_factors_are_built_and_parsed_here():
    parts = metric_names.factor("LE", 2500), metric_names.factor("bin", 3)
    assert cell(*parts) == "LE2500_bin3" and metric_names.factor("book", 69087) == "book69087"
    assert [
        metric_names.factor_value(p, t) for p, t in [("LE2500", "LE"), ("bin3", "bin"), ("LS20", "LE"), ("LEx", "LE")]
    ] == [2500, 3, None, None]
    with pytest.raises(ValueError, match="unknown factor"):
        metric_names.factor("LX", 1)


def test_summary_names():
    assert metric_names.memory_censored("coarse") == "coarse_memory_censored"
    assert metric_names.effective_context("acc_corrected", "qa2") == "effective_context_corrected@qa2"
    assert parse(metric_names.effective_context("acc", "qa1")) == Name("effective_context", ("qa1",), "")

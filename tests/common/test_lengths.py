import pytest

from lm_eval_longmem.common import options
from lm_eval_longmem.common.lengths import format_length, parse_length, parse_lengths


@pytest.mark.parametrize(
    "spec,tokens",
    [(4096, 4096), ("4096", 4096), ("4k", 4096), ("4K", 4096), ("1M", 1048576), ("0k", 0), (" 16k ", 16384)],
)
def test_parse_length(spec, tokens):
    assert parse_length(spec) == tokens


@pytest.mark.parametrize("spec", ["4kb", "four", "4.5k", "", "-1", -5, True, "1G"])
def test_parse_length_rejects_with_a_fix(spec):
    with pytest.raises(ValueError, match="4096|token count"):
        parse_length(spec)


@pytest.mark.parametrize(
    "spec,lengths",
    [
        ("1k,4k", [1024, 4096]),
        ("[512, 1024]", [512, 1024]),
        ("[0k,4k]", [0, 4096]),
        ("['1k', '2k']", [1024, 2048]),
        (2048, [2048]),
        ([1024, "4k", "1k"], [1024, 4096, 1024]),  # in the order given; an option refuses the repeat
    ],
)
def test_parse_lengths(spec, lengths):
    assert parse_lengths(spec) == lengths


def test_a_length_option_refuses_a_length_given_twice():
    """Written two ways too (1k and 1024): the same cell would run twice."""
    with pytest.raises(ValueError, match="^1k is given twice: name each length once$"):
        options.lengths("[1k,4k,1024]")


def test_parse_lengths_rejects_empty_and_garbage():
    with pytest.raises(ValueError):
        parse_lengths("")
    with pytest.raises(ValueError):
        parse_lengths("[1k,")


@pytest.mark.parametrize("n", [0, 1, 100, 1024, 4096, 1048576, 3000, 10 * 1048576])
def test_format_length_round_trips(n):
    assert parse_length(format_length(n)) == n
    assert format_length(4096) == "4k" and format_length(1048576) == "1M" and format_length(1000) == "1000"


def test_format_length_names_zero_as_babilong_does():
    """0 tokens is BABILong's "0k" split (the hub config and the authors' file names), shown the same way."""
    assert format_length(0) == "0k" and format_length(3072) == "3k" and format_length(10 * 1048576) == "10M"

"""The one tolerance for floats from a model run, and every tolerance that follows from it.

`LOGPROB_TOL` is how far **one token's log-probability** may move between two computations of the
same fp32 model on the same tokens: on another CPU (AVX-512, AVX2 or no vector unit: PyTorch's
`ATEN_CPU_CAPABILITY`, MKL's and oneDNN's code paths), with another batch shape or another chunking
of the head. These sum in another order, and the rounding grows through the layers. The reference runs
under AVX2 kernels and under `.ci/reduced-kernels` move by at most 2.0e-5 per token
(`benchmarks/reference_drift.py`; the figures in docs/benchmarks.md, "Reference runs under other CPU
kernels"): `LOGPROB_TOL` leaves a margin of five over it.

What follows from it, derived here and nowhere else:

* a request's summed log-probability over n scored tokens moves by at most n * LOGPROB_TOL
  (`logprob_tol`; n is at least 1);
* a perplexity over those tokens, exp(-sum / n), moves by at most LOGPROB_TOL in its log, a relative
  tolerance of expm1(LOGPROB_TOL) whatever n (`perplexity_rtol`);
* a statistic of k perplexities taken in log space (a cell's geometric mean and the exponentiated t
  interval of the mean log, `stats.log_mean_interval`): the mean log moves by at most LOGPROB_TOL, and
  a bound, mean +- t * s / sqrt(k), by at most LOGPROB_TOL * (1 + t / sqrt(k - 1)), since the sample
  standard deviation s of values each moved by at most d moves by at most d * sqrt(k / (k - 1))
  (`log_statistic_rtol`);
* a decision between log-probabilities (a greedy token, Book-SORT's choice of A or B) is exact unless
  the two were closer than the sum of their tolerances: a near-tie, which may flip on another machine
  (`near_tie`);
* what is exact by construction stays exact: token ids, bits and choices away from a tie, generated
  text, counts, and numbers computed from those alone, compared to `ARITHMETIC_RTOL`.

`ARITHMETIC_RTOL` is not a model tolerance: numbers computed from the same exact inputs (a Wilson
interval of a count) may differ in their last bits where a library picks its code path by CPU (numpy's
vectorised log and exp); 1e-12 relative is far above that rounding and far below any change of method.

`.ci/run` runs the model-float tests a second time with the reduced kernel set
(`.ci/reduced-kernels`), so a tolerance too tight for another CPU fails on CI's machine.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from scipy import stats

from lm_eval_longmem.common import metric_names

LOGPROB_TOL = 1e-4
"""Absolute tolerance of one token's log-probability (nats) between two computations of one fp32 model."""

BF16_LOGPROB_TOL = 1e-3
"""The same for a bf16 model: not fp32 rounding but bf16's own, whose 8-bit mantissa rounds a logit to a
neighbouring value (2**-8 relative) wherever two computations multiply in another order; measured 6e-5 per token
on the tiny model. Used only by the tests of bf16 models, which compare within one machine."""

ARITHMETIC_RTOL = 1e-12
"""Relative tolerance of a number computed from exact inputs (see the module docstring)."""

LEVEL = 0.95
"""The level of every interval our tasks write (`common.stats`' default)."""


def logprob_tol(tokens: int) -> float:
    """Absolute tolerance of a log-probability summed over `tokens` scored tokens."""
    return LOGPROB_TOL * max(1, tokens)


def perplexity_rtol() -> float:
    """Relative tolerance of a perplexity (exp of the mean negative log-probability per token)."""
    return math.expm1(LOGPROB_TOL)


def log_statistic_rtol(docs: int, bound: bool) -> float:
    """Relative tolerance of a statistic of `docs` perplexities taken in log space: their geometric mean, or
    (`bound`) a bound of its exponentiated t interval at `LEVEL`."""
    if not bound or docs < 2:
        return math.expm1(LOGPROB_TOL)
    t = float(stats.t.ppf(0.5 + 0.5 * LEVEL, docs - 1))
    return math.expm1(LOGPROB_TOL * (1 + t / math.sqrt(docs - 1)))


def near_tie(first: float, second: float, tokens: tuple[int, int] = (1, 1)) -> bool:
    """Whether a decision between two log-probabilities (over `tokens` tokens each) may flip on another machine."""
    return abs(first - second) <= logprob_tol(tokens[0]) + logprob_tol(tokens[1])


def metric_rtol(metric: str, perplexities: Collection[str], docs_per_cell: Mapping[str, int], docs: int) -> float:
    """The relative tolerance of a results metric: for a statistic of a perplexity score (`perplexities`: the
    task's scores of that family) `log_statistic_rtol` over its cell's docs (`docs_per_cell`; a cell not there
    counts as two, the loosest) or over all `docs`; for any other metric `ARITHMETIC_RTOL`."""
    name = metric_names.parse(metric)
    if name is None or name.score not in perplexities:
        return ARITHMETIC_RTOL
    count = docs_per_cell.get(metric_names.cell(*name.cell), 2) if name.cell else docs
    return log_statistic_rtol(int(count), bound=name.stat in metric_names.MEAN_AND_INTERVAL[1:])


def close(old: Any, new: Any, rtol: float = ARITHMETIC_RTOL) -> bool:
    """Equal (dicts and lists item by item), floats within the relative tolerance `rtol`, ints and everything else
    exactly, NaN only with NaN."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(close(old[k], new[k], rtol) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(close(a, b, rtol) for a, b in zip(old, new))
    if not (isinstance(old, float) or isinstance(new, float)) or isinstance(old, bool) or isinstance(new, bool):
        return bool(old == new)
    if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
        return False
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) and math.isnan(new)
    return math.isclose(old, new, rel_tol=rtol, abs_tol=0.0)

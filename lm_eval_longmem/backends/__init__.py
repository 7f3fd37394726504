"""The `loglikelihood_accuracy` request type on the harness's own `hf` and `vllm` backends.

`install()` (idempotent) makes plain `lm_eval --model hf|vllm` serve it:

* `HFLM.loglikelihood_accuracy` (`hf.py`) and, when `lm_eval.models.vllm_causallms` imports
  (i.e. vLLM is installed), `VLLM.loglikelihood_accuracy` (`vllm.py`);
* `lm_eval.api.task.ALL_OUTPUT_TYPES` accepts `output_type: loglikelihood_accuracy`, with no
  default metrics (our task base, `task.py`, declares its own);
* `--use_cache` (`CachingLM`) caches and reuses its responses like the built-in request types.

Each step only *adds* a name the harness did not have, so nothing that does not use this request
type behaves differently. `lm_eval_longmem.backends.task` calls `install()` on import, so a task
YAML with `class: !function lm_eval_longmem.backends.task.LoglikelihoodAccuracyTask` needs nothing
else. The request type itself is specified in `request_type.py`.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, TokenIds

__all__ = ["OUTPUT_TYPE", "TokenAccuracy", "TokenIds", "install"]

log = logging.getLogger(__name__)


def install() -> None:
    """Register `loglikelihood_accuracy` with lm-eval (safe to call any number of times)."""
    from lm_eval.api import registry, task
    from lm_eval.models.huggingface import HFLM

    from lm_eval_longmem.backends import hf

    if OUTPUT_TYPE not in task.ALL_OUTPUT_TYPES:
        task.ALL_OUTPUT_TYPES.append(OUTPUT_TYPE)
    registry.DEFAULT_METRIC_REGISTRY.setdefault(OUTPUT_TYPE, [])
    HFLM.loglikelihood_accuracy = hf.loglikelihood_accuracy
    try:
        from lm_eval.models.vllm_causallms import VLLM
    except ImportError:  # vLLM not installed: the hf backend still works
        pass
    else:
        from lm_eval_longmem.backends import vllm

        VLLM.loglikelihood_accuracy = vllm.loglikelihood_accuracy
    _teach_caching_lm()


def _teach_caching_lm() -> None:
    """Let `CachingLM` (--use_cache) serve `loglikelihood_accuracy` from and into its SQLite cache.

    `CachingLM.__getattr__` caches a fixed list of method names; we wrap it so our name gets the
    same treatment (same key: `hash_args(name, req.args)`) and every other name is passed on to
    the original untouched.
    """
    from lm_eval.api.model import CachingLM

    original = CachingLM.__getattr__
    if getattr(original, "_longmem", False):
        return

    @functools.wraps(original)
    def __getattr__(self: CachingLM, attr: str) -> Any:
        if attr != OUTPUT_TYPE:
            return original(self, attr)
        compute = getattr(self.lm, attr)
        return functools.partial(_cached_call, self, compute)

    __getattr__._longmem = True  # type: ignore[attr-defined]
    CachingLM.__getattr__ = __getattr__


def _cached_call(caching_lm: Any, compute: Any, requests: list) -> list:
    """Answers from the cache where present; the rest computed in one call and stored."""
    from lm_eval.api.model import hash_args

    keys = [hash_args(OUTPUT_TYPE, req.args) for req in requests]
    answers = [caching_lm.dbdict.get(key) for key in keys]
    missing = [i for i, answer in enumerate(answers) if answer is None]
    log.info("%s: %d cached responses, %d to compute", OUTPUT_TYPE, len(requests) - len(missing), len(missing))
    if missing:
        for i, answer in zip(missing, compute([requests[i] for i in missing]), strict=True):
            answers[i] = answer
            caching_lm.dbdict[keys[i]] = answer
        caching_lm.dbdict.commit()
    return answers

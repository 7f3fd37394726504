"""The `loglikelihood_accuracy` request type on the harness's own `hf` and `vllm` backends.

The request type is specified in `request_type.py`; `hf.py` and `vllm.py` serve it. `install()`
hands both to `harness.install_request_type`, the one place that touches lm_eval's internals
(output type, HFLM/VLLM methods, `--use_cache`), and `hf.stock_batch_size` to
`harness.install_batch_probe_cap`, which keeps the harness's own `--batch_size auto` probe (for
`multiple_choice` and `generate_until` tasks) within memory. `lm_eval_longmem.backends.task` calls
`install()` on import, so a task YAML with
`class: !function lm_eval_longmem.backends.task.LoglikelihoodAccuracyTask` needs nothing else.
"""

from __future__ import annotations

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, TokenIds

__all__ = ["OUTPUT_TYPE", "TokenAccuracy", "TokenIds", "install"]


def install() -> None:
    """Register `loglikelihood_accuracy` with lm-eval (safe to call any number of times)."""
    from lm_eval_longmem import harness
    from lm_eval_longmem.backends import hf, vllm

    harness.install_request_type(OUTPUT_TYPE, hf=hf.loglikelihood_accuracy, vllm=vllm.loglikelihood_accuracy)
    harness.install_batch_probe_cap(hf.stock_batch_size)

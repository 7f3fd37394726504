"""The `loglikelihood_accuracy` request type on the harness's own `hf` and `vllm` backends.

The request type is specified in `request_type.py`; `hf.py` and `vllm.py` serve it. `plugin()` hands
both to the harness layer's one install point (`harness.install`, which adds the output type, the
HFLM/VLLM methods and `--use_cache` support), with `hf.stock_batch_size`, which keeps the harness's own
`--batch_size auto` probe (for `multiple_choice` and `generate_until` tasks) within memory. A task that
sends these requests installs it when it is built (`harness_plugin`), so a task YAML with
`class: !function lm_eval_longmem.backends.task.LoglikelihoodAccuracyTask` needs nothing else; code that
calls `lm.loglikelihood_accuracy` without a task runs `harness.install(backends.plugin())` first.
"""

from __future__ import annotations

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, TokenIds
from lm_eval_longmem.harness import Plugin
from lm_eval_longmem.harness.models import RequestType

__all__ = ["OUTPUT_TYPE", "TokenAccuracy", "TokenIds", "plugin"]


def plugin() -> Plugin:
    """`loglikelihood_accuracy` on `hf` and `vllm`, and the cap of the harness's auto batch probe, for `harness.install`."""
    from lm_eval_longmem.backends import hf, vllm

    return Plugin(
        request_type=RequestType(OUTPUT_TYPE, hf=hf.loglikelihood_accuracy, vllm=vllm.loglikelihood_accuracy),
        batch_probe_cap=hf.stock_batch_size,
    )

"""The `loglikelihood_accuracy` request type on the harness's own `hf` and `vllm` backends.

The request type is specified in `request_type.py`; `hf.py` and `vllm.py` serve it. Registering
it with lm-eval (`install()`: output type, HFLM/VLLM methods, `--use_cache`) touches lm_eval's
internals, so it lives in `lm_eval_longmem.harness` and is re-exported here.
`lm_eval_longmem.backends.task` calls `install()` on import, so a task YAML with
`class: !function lm_eval_longmem.backends.task.LoglikelihoodAccuracyTask` needs nothing else.
"""

from __future__ import annotations

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, TokenAccuracy, TokenIds
from lm_eval_longmem.harness import install

__all__ = ["OUTPUT_TYPE", "TokenAccuracy", "TokenIds", "install"]

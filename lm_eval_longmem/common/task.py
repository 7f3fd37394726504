"""The task base every lm-eval-longmem YAML task uses (`class: !function lm_eval_longmem.common.task.LongmemTask`).

lm-eval's `--cache_requests` keys its saved requests by task name, shots, rank, chat template and
tokenizer, but not by `--metadata`. Our data depend on metadata (lengths, corpus, seed, ...), so a
second run with other options would silently reuse the first run's requests. `LongmemTask` adds a
fingerprint of the task's whole metadata (model args included) to that key, so any change of
options builds and caches new requests.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lm_eval.api.task import ConfigurableTask


def metadata_fingerprint(metadata: dict[str, Any] | None) -> str:
    """A short stable hash of a task's metadata (sorted JSON)."""
    blob = json.dumps(metadata or {}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class LongmemTask(ConfigurableTask):
    """ConfigurableTask whose request cache key includes a fingerprint of its metadata."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # lm_eval hands a `class:` task its whole YAML, `class` key included, which TaskConfig rejects.
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        super().__init__(config=config, **kwargs)

    def build_all_requests(self, *, tokenizer_name: str = "", **kwargs: Any) -> None:
        # `tokenizer_name` is only used to name the request cache (lm_eval/api/task.py), so the
        # fingerprint rides along with it and nothing else about the harness changes.
        fingerprint = metadata_fingerprint(self.config.metadata)
        super().build_all_requests(tokenizer_name=f"{tokenizer_name}-longmem-{fingerprint}", **kwargs)

    def rendered_prompt(
        self,
        doc: dict[str, Any],
        *,
        system_instruction: str | None = None,
        apply_chat_template: bool = False,
        fewshot_as_multiturn: bool = False,
        chat_template: Any = None,
        **_: Any,
    ) -> str:
        """The prompt the harness will send for `doc`, with `--system_instruction` and the chat template applied.

        Takes the keyword arguments of `build_all_requests`, so a task can measure the real prompt
        against the model's window before any request exists (and skip, never truncate).
        """
        return self.fewshot_context(
            doc,
            num_fewshot=0,
            system_instruction=system_instruction,
            apply_chat_template=bool(apply_chat_template),
            fewshot_as_multiturn=bool(fewshot_as_multiturn),
            chat_template=chat_template,
            gen_prefix=self.doc_to_prefix(doc),
        )

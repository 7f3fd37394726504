"""Task base for `loglikelihood_accuracy` requests (building one installs the request type: `harness_plugin`).

A YAML task uses it with::

    class: !function lm_eval_longmem.backends.task.LoglikelihoodAccuracyTask
    output_type: loglikelihood_accuracy      # optional: the class sets it

By default each doc gives one request, ``(prompt, doc_to_target(doc))``, where the prompt is the
one the harness builds for a `loglikelihood` task (description, few-shot examples,
`doc_to_text`, chat template), and `process_results` reports `token_acc` (share of continuation
tokens the model predicts greedily) and `logprob` (summed log-probability), both averaged over
docs. Subclasses override `accuracy_requests` to send several requests per doc (a copy pair and a
baseline pair, say, both as token-id lists) and `process_results` to score
them; set `beyond_max_length = True` on the task to let its requests run past the model's
`max_length` (see `request_type`).

`--log_samples` stays compact: each response is logged as its bit string and one float.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval.api.instance import Instance

from lm_eval_longmem.backends import plugin
from lm_eval_longmem.backends.request_type import BEYOND_MAX_LENGTH, OUTPUT_TYPE, TokenAccuracy, as_token_ids
from lm_eval_longmem.common.task import LongmemTask
from lm_eval_longmem.harness import Plugin
from lm_eval_longmem.harness.tasks import declare_metrics

Text = str | Sequence[int]
"""A request side: a string (tokenized like `loglikelihood`) or token ids (used verbatim)."""

DEFAULT_METRICS = ("token_acc", "logprob")
"""What the default `process_results` returns; both averaged over docs, higher is better."""


class LoglikelihoodAccuracyTask(LongmemTask):
    """A `ConfigurableTask` whose docs become `loglikelihood_accuracy` requests."""

    OUTPUT_TYPE = OUTPUT_TYPE
    beyond_max_length: bool = False
    """Let this task's requests run past the model's max_length (up to what it can physically run)."""

    def __init__(self, data_dir=None, cache_dir=None, download_mode=None, config: dict | None = None) -> None:
        config = dict(config or {})  # LongmemTask drops the `class:` key the factory passes through
        if config.setdefault("output_type", OUTPUT_TYPE) != OUTPUT_TYPE:
            raise ValueError(
                f"{type(self).__name__} emits {OUTPUT_TYPE} requests; remove output_type {config['output_type']!r}"
            )
        # Our metrics are computed by process_results, not looked up in lm-eval's metric registry
        # (which would warn and try HF `evaluate` for names it does not know): declared here (harness R22).
        metric_list = config.pop("metric_list", None) or [{"metric": name} for name in DEFAULT_METRICS]
        super().__init__(data_dir=data_dir, cache_dir=cache_dir, download_mode=download_mode, config=config)
        self.config.metric_list = metric_list
        if not callable(self.config.process_results):  # a YAML `process_results: !function ...` wins
            self.config.process_results = default_scores
        declare_metrics(self, metric_list)

    @classmethod
    def harness_plugin(cls) -> Plugin:
        """The `loglikelihood_accuracy` request type its requests need (`backends.plugin`)."""
        return plugin()

    def accuracy_requests(self, doc: dict) -> list[tuple[Text | None, Text]]:
        """The `(context, continuation)` pairs to score for `doc`, in the order `process_results` gets them.

        A context of None stands for the prompt the harness built for the doc (description,
        few-shot examples, `doc_to_text`, chat template). Default: one pair, that prompt and
        `doc_to_target(doc)`, a string target preceded by the YAML's `target_delimiter` (default " ") as in
        the harness's own loglikelihood requests; a token-id list is sent as it is.
        """
        target = self.doc_to_target(doc)
        if not isinstance(target, (str, Sequence)):
            raise TypeError(
                f"{self.config.task}: doc_to_target gave {type(target).__name__}; {OUTPUT_TYPE} needs the"
                " continuation as a string or a list of token ids"
            )
        if isinstance(target, str):
            target = self.config.target_delimiter + target
        return [(None, target)]

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list[Instance]:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        options = ({BEYOND_MAX_LENGTH: True},) if self.beyond_max_length else ()
        return [
            Instance(
                request_type=OUTPUT_TYPE,
                doc=doc,
                arguments=(_argument(ctx if context is None else context), _argument(continuation), *options),
                idx=i,
                **kwargs,
            )
            for i, (context, continuation) in enumerate(self.accuracy_requests(doc))
        ]


def default_scores(doc: dict, results: list[TokenAccuracy]) -> dict[str, float]:
    """`token_acc` over all of the doc's continuation tokens and the summed `logprob`."""
    hits = sum(bits.count("1") for bits, _ in results)
    total = sum(len(bits) for bits, _ in results)
    return {"token_acc": hits / total, "logprob": sum(logprob for _, logprob in results)}


def _argument(value: Text) -> Text:
    """Strings pass through; token ids become `TokenIds` (plain ints, hashable by the sample logger)."""
    return value if isinstance(value, str) else as_token_ids(value)

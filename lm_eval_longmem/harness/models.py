"""lm_eval's models as ours meet them: how the harness creates an LM, and what our request type and
our code ask of HFLM, VLLM and CachingLM (R4-R6, R14, R19, R21, R23, R24, R29), and a zero-shot prompt as the
harness builds and HFLM renders it (R28).

`patch_lm_factories` records the LM the harness creates (`live_backend`), runs a hook before each
(the check of a run, `evaluator.install_before_model`) and has a VLLM's engine shut down at exit (R29);
`install_request_type` and `install_batch_probe_cap` add the `loglikelihood_accuracy` request type and bound
the harness's own `--batch_size auto` probe (all three installed by `harness.install`). The rest are plain
functions the backends call: text pairs encoded as `loglikelihood` encodes them, the HF window rule, vLLM's
engine, a model built as the harness builds it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import logging
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from lm_eval_longmem.harness.marks import MARK

log = logging.getLogger(f"lm_eval.{__name__}")
"""R10: a child of the harness's logger, shown with lm_eval's own lines at lm_eval's level (every
module of the package logs the same way, as `lm_eval.<module>`)."""


# ---------------------------------------------------------------- the live backend (R4)


@dataclass(frozen=True)
class LiveBackend:
    """The LM the harness created most recently in this process, as data builders need it."""

    kind: str
    """"hf" (HFLM and its subclasses), "vllm" (VLLM), otherwise the LM class name lowercased."""
    max_length: int | None
    """The backend's own window in tokens (HFLM: its resolved `max_length`; VLLM: the engine's
    `max_model_len`), or None when the backend does not say."""
    pretrained: str | None = None
    """The `pretrained` model argument it was created with, so a data builder uses it only for the
    model its metadata names (a process may create several models)."""


_live: LiveBackend | None = None

_before_each_model: Callable[[], None] | None = None


def live_backend() -> LiveBackend | None:
    """The most recently created harness LM, or None before any (or when the plugin is not active).

    `simple_evaluate` creates the LM before it loads tasks, so a data builder called while the
    harness loads our tasks sees the model of this run.
    """
    return _live


@contextlib.contextmanager
def evaluating(lm: Any, pretrained: str | None) -> Iterator[None]:
    """Treat `lm`, built by the caller and handed to `simple_evaluate` as an object, as the live model meanwhile.

    `simple_evaluate(model=<LM instance>)` creates no model, so the record would otherwise still name the
    last one the factories built: for the same `pretrained` with another window, the fit checks would
    read that window and let through requests this `lm` refuses.
    """
    global _live
    before = _live
    _live = describe_lm(lm, pretrained)
    try:
        yield
    finally:
        _live = before


def describe_lm(lm: Any, pretrained: str | None = None) -> LiveBackend:
    """Kind and window of an LM instance; reading the window never raises."""
    names = {klass.__name__ for klass in type(lm).__mro__}
    kind = "hf" if "HFLM" in names else "vllm" if "VLLM" in names else type(lm).__name__.lower()
    try:
        value = lm.max_length
    except Exception:  # noqa: BLE001 - a backend without a resolvable window is still a backend
        value = None
    max_length = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    return LiveBackend(kind=kind, max_length=max_length, pretrained=pretrained)


def patch_lm_factories() -> None:
    """Record every LM built through `LM.create_from_arg_string`/`create_from_arg_obj` (idempotent).

    A model class that overrides these factories itself (lm_eval's `dummy`, `nemo_lm`, `watsonx`)
    is not recorded: `live_backend()` then stays None, which callers treat as "unknown".
    """
    from lm_eval.api.model import LM

    for name in ("create_from_arg_string", "create_from_arg_obj"):
        factory = inspect.getattr_static(LM, name)
        if not isinstance(factory, classmethod) or getattr(factory.__func__, MARK, False):
            continue
        setattr(LM, name, classmethod(_recording(factory.__func__)))


def before_each_model(hook: Callable[[], None]) -> None:
    """Call `hook()` before the factories create any LM from now on (and record the LMs they create)."""
    global _before_each_model
    _before_each_model = hook
    patch_lm_factories()


def _pretrained(model_args: Any) -> str | None:
    """`pretrained` from the first argument of an LM factory (an args string or a dict)."""
    if isinstance(model_args, str):
        from lm_eval.utils import simple_parse_args_string

        model_args = simple_parse_args_string(model_args)
    value = model_args.get("pretrained") if isinstance(model_args, dict) else None
    return str(value) if value else None


def _recording(factory: Any) -> Any:
    @functools.wraps(factory)
    def create(cls: type, *args: Any, **kwargs: Any) -> Any:
        global _live
        if _before_each_model is not None:
            _before_each_model()
        lm = factory(cls, *args, **kwargs)
        _live = describe_lm(lm, _pretrained(args[0] if args else kwargs.get("arg_string", kwargs.get("arg_dict"))))
        if _live.kind == "vllm":
            shut_down_vllm_at_exit(lm)
        return lm

    setattr(create, MARK, True)
    return create


# ---------------------------------------------------------------- request type (R5, R6)


@dataclass(frozen=True)
class RequestType:
    """A request type of ours and the methods that serve it on the harness's `hf` and `vllm` backends."""

    name: str
    hf: Callable
    vllm: Callable


def install_request_type(name: str, *, hf: Callable, vllm: Callable) -> None:
    """Register request type `name` with lm-eval (safe to call any number of times).

    * `HFLM.<name> = hf` and, when `lm_eval.models.vllm_causallms` imports (vLLM installed),
      `VLLM.<name> = vllm`;
    * `ALL_OUTPUT_TYPES` accepts `output_type: <name>`, with no default metrics (our task base
      declares its own);
    * `--use_cache` (`CachingLM`) caches and reuses its responses like the built-in request types.

    Each step only *adds* a name the harness did not have, so nothing that does not use this
    request type behaves differently. `harness.install` calls this with the `RequestType`
    `backends.plugin()` hands it: the `loglikelihood_accuracy` implementations (`backends/hf.py`,
    `backends/vllm.py`); the request type itself is specified in `backends/request_type.py`.
    """
    from lm_eval.api import registry, task
    from lm_eval.models.huggingface import HFLM

    if name not in task.ALL_OUTPUT_TYPES:
        task.ALL_OUTPUT_TYPES.append(name)
    registry.DEFAULT_METRIC_REGISTRY.setdefault(name, [])
    setattr(HFLM, name, hf)
    try:
        from lm_eval.models.vllm_causallms import VLLM
    except ImportError:  # vLLM not installed: the hf backend still works
        pass
    else:
        setattr(VLLM, name, vllm)
    teach_caching_lm(name)


def teach_caching_lm(name: str) -> None:
    """Let `CachingLM` (--use_cache) serve request type `name` from and into its SQLite cache.

    `CachingLM.__getattr__` caches a fixed list of method names; we wrap it so our name gets the
    same treatment (same key: `hash_args(name, req.args)`) and every other name is passed on to
    the original untouched.
    """
    from lm_eval.api.model import CachingLM

    original = CachingLM.__getattr__
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def __getattr__(self: CachingLM, attr: str) -> Any:
        if attr != name:
            return original(self, attr)
        compute = getattr(self.lm, attr)
        return functools.partial(cached_call, self, name, compute)

    setattr(__getattr__, MARK, True)
    CachingLM.__getattr__ = __getattr__


def cached_call(caching_lm: Any, name: str, compute: Any, requests: list) -> list:
    """Answers to `name` requests from the cache where present; the rest computed in one call and stored."""
    from lm_eval.api.model import hash_args

    keys = [hash_args(name, req.args) for req in requests]
    answers = [caching_lm.dbdict.get(key) for key in keys]
    missing = [i for i, answer in enumerate(answers) if answer is None]
    log.info("%s: %d cached responses, %d to compute", name, len(requests) - len(missing), len(missing))
    if missing:
        for i, answer in zip(missing, compute([requests[i] for i in missing]), strict=True):
            answers[i] = answer
            caching_lm.dbdict[keys[i]] = answer
        caching_lm.dbdict.commit()
    return answers


# ---------------------------------------------------------------- the harness's --batch_size auto probe (R14)


def install_batch_probe_cap(cap: Callable[[Any, int], tuple[int, bool]]) -> None:
    """Bound the harness's own `--batch_size auto` probe (`HFLM._detect_batch_size`) by `cap` (idempotent).

    The harness probes its request types (`loglikelihood`, hence `multiple_choice`, and
    `generate_until`) by running full-logits forwards of `max_batch_size` (64) copies of the longest
    request, or of `max_length` positions, halving on out-of-memory. `cap(lm, positions)` gets the
    positions that probe runs (cut to the window as the harness cuts them) and returns (largest size
    to try, whether that size is the answer without a trial): the probe then starts from that size,
    or does not run at all (every data-parallel rank still takes the smallest size any rank chose).
    """
    from lm_eval.models.huggingface import HFLM

    original = inspect.getattr_static(HFLM, "_detect_batch_size")
    if getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def _detect_batch_size(self: Any, requests: Any = None, pos: int = 0) -> int:
        if requests:
            _, context_enc, continuation_enc = requests[pos]
            positions = len((context_enc + continuation_enc)[-(self.max_length + 1) :][:-1])
        else:
            positions = self.max_length
        size, decided = cap(self, positions)
        if decided:
            if self.world_size > 1:
                import torch

                size = int(min(self.all_gather(torch.tensor([size], device=self.device)).cpu().tolist()))
            return size
        start = self.max_batch_size
        self.max_batch_size = min(start, size)
        try:
            return original(self, requests, pos)
        finally:
            self.max_batch_size = start

    setattr(_detect_batch_size, MARK, True)
    HFLM._detect_batch_size = _detect_batch_size


# ---------------------------------------------------------------- text pairs as loglikelihood encodes them (R19)


def encode_text_pair(lm: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context tokens, continuation tokens) of two strings, as `TemplateLM.loglikelihood` encodes them (R19).

    An empty context becomes the model's prefix token (BOS/EOS), or the continuation's first token when
    that is the prefix; a continuation that encodes to nothing comes back empty (the caller says so).
    """
    if context == "":
        cont = lm.tok_encode(continuation, add_special_tokens=False)
        if not cont:
            return [lm.prefix_token_id], []
        return ([lm.prefix_token_id], cont) if lm.prefix_token_id != cont[0] else (cont[:1], cont[1:])
    return lm._encode_pair(context, continuation)


# ---------------------------------------------------------------- the HF backend's window (R21)


def default_window(config: Any, tokenizer: Any) -> int:
    """The window `HFLM` runs a model with when no `max_length` is given (R21)."""
    from lm_eval.models.utils import DEFAULT_MAX_LENGTH, resolve_max_length

    return resolve_max_length(config, tokenizer, default=DEFAULT_MAX_LENGTH)


def stated_window(config: Any, tokenizer: Any) -> int | None:
    """The window the model's config (or else its tokenizer) states, as `default_window` reads it; None when
    neither states one (R21)."""
    from lm_eval.models.utils import resolve_max_length

    return resolve_max_length(config, tokenizer, default=0) or None


def tokenizer_window(tokenizer: Any) -> int | None:
    """The tokenizer's `model_max_length` when it states one (not transformers' "unset" value), else None (R21)."""
    from lm_eval.models.utils import TOKENIZER_INFINITY

    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < TOKENIZER_INFINITY else None


# ---------------------------------------------------------------- vLLM's engine (R23)


def vllm_generate(lm: Any, prompts: list[list[int]], sampling_params: Any) -> list[Any]:
    """vLLM's `RequestOutput` of every token-id prompt, in order, through the harness's VLLM (R23)."""
    return lm._model_generate(requests=prompts, generate=True, sampling_params=sampling_params)


# ---------------------------------------------------------------- vLLM's engine at exit (R29)

VLLM_OUTPUT_THREAD_WAIT_S = 10.0
"""How long the exit waits for vLLM's output thread once the engine is shut down (it ends within milliseconds)."""


def shut_down_vllm(lm: Any) -> None:
    """Shut the vLLM engine of the harness's VLLM `lm` down and wait for its output thread (R29).

    A no-op for an LM without vLLM's multiprocess client (another backend, vLLM in-process, the harness's
    data-parallel replicas, which live in Ray workers), and when the engine is already shut down.
    """
    client, thread = _vllm_client_and_output_thread(lm)
    if client is not None and thread is not None:
        _shut_down(weakref.ref(client), thread)


def shut_down_vllm_at_exit(lm: Any) -> None:
    """Run `shut_down_vllm` for `lm` at interpreter exit, before vLLM's own exit hook (R29).

    Why: vLLM's sync client stops its daemon output thread at exit with a message and never waits for
    it. The thread's last outputs hold prompt-logprob tensors, and releasing a tensor takes the GIL from
    C++ code that must not unwind (pybind11). If the interpreter is finalizing by then, Python ends the
    thread with `pthread_exit`, whose unwinding through that code aborts the whole process (SIGABRT,
    "terminate called without an active exception"): a failed exit status after a run whose results
    were written. Registered as the harness creates the LM, later than vLLM's hook, so it runs first
    (`atexit` runs last-in, first-out) while the interpreter is whole. Holds only a weak reference to the
    engine client, so the LM can be freed before exit.
    """
    client, thread = _vllm_client_and_output_thread(lm)
    if client is None or thread is None:
        log.debug("vLLM engine without a multiprocess client: nothing to shut down at exit")
        return
    atexit.register(_shut_down, weakref.ref(client), thread)


def _vllm_client_and_output_thread(lm: Any) -> tuple[Any, threading.Thread | None]:
    """vLLM's engine client of the harness's VLLM (`VLLM.model.llm_engine.engine_core`) and its output thread."""
    client = getattr(getattr(getattr(lm, "model", None), "llm_engine", None), "engine_core", None)
    thread = getattr(client, "output_queue_thread", None)
    return client, thread if isinstance(thread, threading.Thread) else None


def _shut_down(client_ref: weakref.ref, thread: threading.Thread) -> None:
    client = client_ref()
    if client is not None:  # a freed client was shut down by vLLM's finalizer: only the wait is left
        client.shutdown()  # idempotent: vLLM's own exit hook then finds nothing to do
    thread.join(timeout=VLLM_OUTPUT_THREAD_WAIT_S)
    if thread.is_alive():
        log.warning(
            "vLLM's output thread did not end within %.0f s of the engine's shutdown", VLLM_OUTPUT_THREAD_WAIT_S
        )


# ---------------------------------------------------------------- a model as the harness builds it (R24)


def create_model(model: str, model_args: dict[str, Any], *, batch_size: Any, device: str | None) -> Any:
    """The LM `--model model --model_args ...` gives, built as `simple_evaluate` builds it (R24, R4)."""
    from lm_eval.api.registry import get_model

    return get_model(model).create_from_arg_obj(model_args, {"batch_size": batch_size, "device": device})


_NO_MODEL = re.compile(r"Attempted to load model '(?P<name>[^']*)', but no model for this name found!.*", re.DOTALL)


def unknown_model(err: BaseException) -> str | None:
    """One line for `get_model`'s error for a `--model` name the registry does not hold (R24), with the closest
    registered name; None for any other error."""
    import difflib

    match = _NO_MODEL.fullmatch(str(err).strip()) if isinstance(err, ValueError) else None
    if match is None:
        return None
    import lm_eval.models  # noqa: F401  (fills the registry, as get_model does when it is empty)
    from lm_eval.api.registry import model_registry

    known = sorted(model_registry.keys())
    close = difflib.get_close_matches(match["name"], known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"give one of {', '.join(known)}"
    return f"--model {match['name']}: no such model type; {hint}"


# ---------------------------------------------------------------- a zero-shot prompt as the harness sends it (R28)


def harness_prompt(
    tokenizer: Any,
    *,
    description: str,
    text: str,
    gen_prefix: str,
    system_instruction: str | None = None,
    apply_chat_template: bool = False,
    fewshot_as_multiturn: bool = False,
    target_delimiter: str = " ",
    fewshot_delimiter: str = "\n\n",
) -> str:
    """The prompt `ConfigurableTask.fewshot_context` builds for a zero-shot doc from its description, text and
    gen_prefix, with `--system_instruction`, and with `--apply_chat_template` rendered as
    `HFLM.apply_chat_template` renders it (the harness's own message builders, R28)."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.api.utils import Message, maybe_delimit, multiturn_to_singleturn

    messages = []
    system = maybe_delimit(system_instruction, description, fewshot_delimiter)
    if system:
        messages.append(Message("system", system))
    messages += ConfigurableTask.build_qa_turn(
        cast(Any, None), q=text, gen_prefix=gen_prefix or None, tgt_delim=target_delimiter, few_delim=""
    )
    if not apply_chat_template:
        return "".join(m.to_text() for m in messages)
    chat = [m.to_dict() for m in messages] if fewshot_as_multiturn else multiturn_to_singleturn(messages)
    return str(
        tokenizer.apply_chat_template(
            chat, tokenize=False, add_generation_prompt=not gen_prefix, continue_final_message=bool(gen_prefix)
        )
    )

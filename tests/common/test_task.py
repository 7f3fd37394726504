"""`--cache_requests` must never reuse requests built for other `--metadata`."""

from pathlib import Path

from kit import read_samples, run_lm_eval

FIXTURES = Path(__file__).parent / "fixtures"


def _run(tiny_llama_dir, out_dir, cache_dir, word):
    out_dir.mkdir(parents=True, exist_ok=True)
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32", "--device", "cpu",
         "--tasks", "longmem_test_metadata_echo", "--include_path", str(FIXTURES), "--cache_requests", "true",
         "--metadata", f"echo_word={word}", "--log_samples"],
        out_dir,
        env={"LM_HARNESS_CACHE_PATH": str(cache_dir)},
    )
    (sample,) = read_samples(out_dir, "longmem_test_metadata_echo")
    return sample["arguments"]


def test_changed_metadata_is_not_served_from_the_request_cache(tiny_llama_dir, tmp_path):
    cache = tmp_path / "harness-cache"
    first = _run(tiny_llama_dir, tmp_path / "a", cache, "apple")
    again = _run(tiny_llama_dir, tmp_path / "b", cache, "apple")
    other = _run(tiny_llama_dir, tmp_path / "c", cache, "pear")
    assert "apple" in str(first) and str(again) == str(first)
    assert "pear" in str(other) and "apple" not in str(other)
    assert len(list(cache.glob("requests-longmem_test_metadata_echo*"))) == 2  # one per metadata

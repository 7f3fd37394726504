"""`--cache_requests` must never reuse requests built for other `--metadata`, another doc selection or config."""

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


def _numbered(tiny_llama_dir, out_dir, cache_dir, *selection):
    out_dir.mkdir(parents=True, exist_ok=True)
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={tiny_llama_dir},dtype=float32,max_length=64", "--device", "cpu",
         "--tasks", "longmem_test_numbered", "--include_path", str(FIXTURES), "--cache_requests", "true",
         "--log_samples", *selection],
        out_dir,
        env={"LM_HARNESS_CACHE_PATH": str(cache_dir)},
    )
    return [(s["doc"]["number"], s["arguments"]["gen_args_0"]["arg_0"], s["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"])
            for s in read_samples(out_dir, "longmem_test_numbered")]  # fmt: skip


def test_doc_selection_and_config_key_the_request_cache(tiny_llama_dir, tmp_path):
    """`--samples` then `--limit` on one cache scored docs 0 and 1 with the requests of docs 3 and 4 (issue 21,
    defect 1); a changed `--gen_kwargs` was served the old requests too."""
    cache = tmp_path / "harness-cache"
    chosen = _numbered(tiny_llama_dir, tmp_path / "a", cache, "--samples", '{"longmem_test_numbered": [3, 4]}')
    first = _numbered(tiny_llama_dir, tmp_path / "b", cache, "--limit", "2")
    longer = _numbered(tiny_llama_dir, tmp_path / "c", cache, "--limit", "2", "--gen_kwargs", "max_gen_toks=5")
    assert chosen == [("3", "The number is 3.", 2), ("4", "The number is 4.", 2)]
    assert first == [("0", "The number is 0.", 2), ("1", "The number is 1.", 2)]
    assert longer == [("0", "The number is 0.", 5), ("1", "The number is 1.", 5)]
    assert len(list(cache.glob("requests-longmem_test_numbered*"))) == 3  # one entry per selection and config

#!/usr/bin/env bash
# The cost-growth table of `loglikelihood_accuracy` on one GPU, then the project's `gpu` tests.
#
# Run from the repository root on a machine with one H100/H200 (python3 with torch + CUDA,
# transformers, accelerate, pytest; lm_eval and the packages it misses there carried as wheels in
# .whl/). It builds a Llama-3-8B-shaped random-weight model (bf16, 32 layers, hidden 4096, 8 KV
# heads, vocabulary 128,256, 131,072 positions) directly on the GPU in every cell and runs
# benchmarks/loglikelihood_accuracy.py at 32k, 64k and 128k tokens: floor, ours and the harness's
# stock path where its estimated peak fits in 95% of the GPU's memory. Writes env.txt,
# cost_growth.txt/.json and gpu_tests.txt to $OUT (default ./gpu-out) and everything to stdout.
#
#     bash benchmarks/gpu_cost_growth.sh
#     MODEL=tiny DEVICE=cpu LENGTHS=1k,2k REPEATS=1 bash benchmarks/gpu_cost_growth.sh   # dry run on CPU
#
# Time: BUDGET_S (default 400 s) for the whole script. The benchmark gets what the wheels and the
# environment check leave minus TEST_S (default 75 s) for the tests; cells that would start past
# its deadline are skipped and printed as such, one cell may take CELL_S (default 170 s), and each
# piece runs under `timeout`, so one hang cannot eat the rest. Stock runs after floor and ours at
# every length, so a tight budget cuts the comparison first; estimated from the FLOPs, floor and
# ours at 32k-128k take about 4-5 minutes on an H200 (with a fresh model build per cell), so give
# stock more time with BUDGET_S=600 where the lease allows, or LENGTHS=32k,64k.
set -u
start=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "gpu_cost_growth: installing .whl/*.whl failed"; exit 1; }
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRANSFORMERS_VERBOSITY=error
export LM_EVAL_LONGMEM_CACHE=${LM_EVAL_LONGMEM_CACHE:-/tmp/lm_eval_longmem-cache}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
MODEL=${MODEL:-llama3-8b}
DEVICE=${DEVICE:-cuda}
LENGTHS=${LENGTHS:-32k,64k,128k}
REPEATS=${REPEATS:-3}
BUDGET_S=${BUDGET_S:-400}
TEST_S=${TEST_S:-75}
CELL_S=${CELL_S:-170}

{
    echo "== environment ($(date -u +%FT%TZ))"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
    timeout 60 python3 -c "import sys, torch, transformers, lm_eval; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.cuda.is_available(), '| transformers', transformers.__version__, '| lm_eval', lm_eval.__version__)"
} 2>&1 | tee "$OUT/env.txt"

bench_s=$((BUDGET_S - TEST_S - ($(date +%s) - start) - 15))
echo "== cost growth: $MODEL on $DEVICE at $LENGTHS, deadline ${bench_s} s"
set -o pipefail
timeout -k 10 $((bench_s + 30)) python3 benchmarks/loglikelihood_accuracy.py --model "$MODEL" --device "$DEVICE" \
    --lengths "$LENGTHS" --repeats "$REPEATS" --deadline "$bench_s" --cell-timeout "$CELL_S" \
    --json "$OUT/cost_growth.json" 2>&1 | tee "$OUT/cost_growth.txt"
bench_rc=$?

test_s=$((BUDGET_S - ($(date +%s) - start) - 5))
test_s=$((test_s < TEST_S ? test_s : TEST_S))
# Only the files that hold gpu tests: collecting the whole suite would import modules (and their
# packages) that the gpu tests never use, and cost the budget's seconds.
gpu_files=$(grep -rl --include='test_*.py' 'pytest.mark.gpu' tests | sort)
echo "== pytest -m gpu" $gpu_files "(${test_s} s)"
timeout -k 10 "$test_s" python3 -m pytest -m gpu $gpu_files -q -rA --continue-on-collection-errors 2>&1 | tail -n 80 | tee "$OUT/gpu_tests.txt"
test_rc=$?
echo "== done in $(($(date +%s) - start)) s: benchmark exit $bench_rc, tests exit $test_rc" | tee -a "$OUT/env.txt"
exit $((bench_rc != 0 || test_rc != 0))

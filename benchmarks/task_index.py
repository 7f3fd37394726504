"""How long `lm_eval` takes to index its tasks and to load `--tasks babilong`, with and without our plugin.

Each variant runs in a fresh interpreter (as `lm_eval` does), interleaved, several times; the
script prints the medians side by side and their ratio. "load" is `TaskManager.load(["babilong"])`
with the given `--metadata` JSON (default: one 0k cell of generated qa1 on a tiny tokenizer-only
model, so the cost is the task objects, not the data); without the plugin only the index is timed
(the harness's own babilong group needs the Hub).

    python benchmarks/task_index.py [--runs 5] [--repo PATH] [--metadata JSON]
    # --repo: time another checkout of the package (e.g. an older commit in a git worktree)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CODE = """
import json, sys, time
t0 = time.perf_counter()
from lm_eval.tasks import TaskManager
tm = TaskManager(metadata=json.loads(sys.argv[1]))
t1 = time.perf_counter()
loaded = tm.load(["babilong"]) if sys.argv[2] == "load" else {"tasks": {}}
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, len(tm.all_tasks), len(loaded["tasks"]))
"""


def measure(env: dict[str, str], metadata: str, cwd: str) -> tuple[float, float, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", CODE, metadata, "load" if env.get("LM_EVAL_LONGMEM_AUTOLOAD") != "0" else "index"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=cwd,
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), int(out[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--repo", type=Path, default=None, help="a checkout of lm-eval-longmem to time instead of the installed one"
    )
    parser.add_argument("--metadata", default=None, help="JSON metadata for the babilong load (see the docstring)")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    metadata = args.metadata or json.dumps(default_metadata(Path(tmp)))
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if args.repo:
        base["PYTHONPATH"] = f"{args.repo}{os.pathsep}{base.get('PYTHONPATH', '')}"
    variants = {"without plugin": {**base, "LM_EVAL_LONGMEM_AUTOLOAD": "0"}, "with plugin": base}
    found: dict[str, list[tuple[float, float, int, int]]] = {name: [] for name in variants}
    for _ in range(args.runs):
        for name, env in variants.items():  # cwd: a temporary folder, so `-c` does not import this checkout
            found[name].append(measure(env, metadata, tmp))
    print(f"{args.runs} fresh interpreters per variant, interleaved; medians; package: {args.repo or 'installed'}")
    print(f"{'variant':<16} {'index s':>8} {'load babilong s':>16} {'tasks indexed':>14} {'task objects':>13}")
    medians = {}
    for name, rows in found.items():
        index, load = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        medians[name] = (index, load)
        print(f"{name:<16} {index:>8.2f} {load:>16.2f} {rows[0][2]:>14} {rows[0][3]:>13}")
    with_, without = medians["with plugin"], medians["without plugin"]
    print(f"index with/without the plugin: {with_[0] / without[0]:.2f}")


def default_metadata(folder: Path) -> dict:
    """One 0k cell of qa1 from a two-question bAbI file, sized with a tiny character tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {chr(i): i - 32 for i in range(32, 127)} | {"<unk>": 95}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="~").save_pretrained(folder / "tok")
    babi = folder / "babi"
    babi.mkdir()
    (babi / "qa1_single-supporting-fact_test.txt").write_text(
        "1 Ruth went to the kitchen.\n2 Where is Ruth?\tkitchen\t1\n1 Owen went to the garden.\n2 Where is Owen?\tgarden\t1\n"
    )
    return {
        "tokenizer": str(folder / "tok"), "max_length": 4096, "babilong_source": "generate", "babilong_babi_dir": str(babi),
        "babilong_lengths": "0k", "babilong_tasks": "qa1", "babilong_samples": 2,
    }  # fmt: skip


if __name__ == "__main__":
    main()

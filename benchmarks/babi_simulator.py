"""Throughput of the bAbI simulator per task, and its stories' shape beside the published test files.

Usage:
    python benchmarks/babi_simulator.py [--samples 10000] [--babi-dir ../shared/data/babi/en]

Prints, for each of qa1..qa20, samples generated per second on one core, measured as CPU time so
that other load on the machine does not count (the target is at least 10,000/s for qa1-qa5), the
CPU seconds the independent validator needs for the same samples, and,
when the bAbI test files are there, the distributions side by side: mean statements before a
question, mean statements per story, questions per story, mean statements between questions, mean distance (in statements)
back to the oldest supporting fact, and the total variation distance between the answer shares.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lm_eval_longmem.babilong.babi import read_babi, task_file
from lm_eval_longmem.babilong.simulate import DONE_TASKS, simulate
from lm_eval_longmem.babilong.verify import answer_distance, answer_from_story, summarize

DEFAULT_BABI = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "babi" / "en"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--babi-dir", type=Path, default=DEFAULT_BABI)
    args = parser.parse_args()
    have_real = args.babi_dir.is_dir()
    if not have_real:
        print(f"(no bAbI files at {args.babi_dir}: distributions of simulated stories only)")
    print(
        f"{'task':5} {'samples/s':>10} {'verify s':>8} | {'facts/q':>15} {'facts/story':>13} {'q/story':>11} "
        f"{'gap':>11} {'distance':>11} {'answer TV':>9}"
    )
    print(f"{'':25} | {'sim  real':>15} {'sim  real':>13} {'sim real':>11} {'sim real':>11} {'sim real':>11}")
    for qa in DONE_TASKS:
        start = time.process_time()
        samples = simulate(qa, args.samples, args.seed)
        rate = args.samples / (time.process_time() - start)
        start = time.process_time()
        disagree = sum(answer_from_story(qa, s.facts, s.question) != s.answer for s in samples)
        verify_s = time.process_time() - start
        sim = summarize(samples)
        row = f"{qa:5} {rate:10,.0f} {verify_s:8.2f} |"
        if have_real:
            real = summarize(read_babi(task_file(args.babi_dir, qa)))
            row += (
                f" {sim.facts_mean:7.1f} {real.facts_mean:7.1f} {sim.story_facts_mean:6.1f} "
                f"{real.story_facts_mean:6.1f} {sim.questions_per_story:5.1f} "
                f"{real.questions_per_story:5.1f} {sim.question_gap_mean:5.1f} {real.question_gap_mean:5.1f} "
                f"{sim.distance_mean:5.1f} {real.distance_mean:5.1f} {answer_distance(sim, real):9.3f}"
            )
        else:
            row += (
                f" {sim.facts_mean:7.1f} {'-':>7} {sim.story_facts_mean:6.1f} {'-':>6} "
                f"{sim.questions_per_story:5.1f} {'-':>5} "
                f"{sim.question_gap_mean:5.1f} {'-':>5} {sim.distance_mean:5.1f} {'-':>5}"
            )
        if disagree:
            row += f"  VALIDATOR DISAGREES on {disagree}"
        print(row, flush=True)


if __name__ == "__main__":
    main()

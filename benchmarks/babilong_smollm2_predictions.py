"""Prediction files of the embedded SmolLM2 on BABILong qa1-qa20 at 0k, for judging `acc_corrected`.

Writes one CSV per (task, prompt setting) in the authors' format (`target`, `output`, `question`),
named as their files are (`qa1_0k_instruction_no_examples_no_post_prompt_no.csv`), so
`lm-eval-longmem babilong audit` reads them. The questions are the last question of each of the
first `--per-task` stories of each bAbI test file (`--babi-dir`), the context is the question's facts
alone (0k), the prompt is the package's
(`prompts.build_prompt`), decoding is greedy with 20 new tokens as in the task. Three settings:
the paper's full prompt, the bare prompt (no instruction, examples or answer format: the messiest
answers) and the full prompt inside the model's chat template.

These outputs are the SmolLM2 rows of `tests/babilong/fixtures/corrected_judged_heldout.csv`
(the model is one of the held-out models there). About 13 minutes of CPU time on one core
(70 minutes wall on the shared 2-core machine at load average 10).

    python benchmarks/babilong_smollm2_predictions.py OUT_DIR [--per-task 8]
"""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SETTINGS = {
    "instruction_yes_examples_yes_post_prompt_yes": (True, False),
    "instruction_no_examples_no_post_prompt_no": (False, False),
    "instruction_yes_examples_yes_post_prompt_yes_chat_template_yes": (True, True),
}
"""File-name suffix -> (full prompt?, chat template?)."""


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lm_eval_longmem.babilong.babi import read_babi, task_file
    from lm_eval_longmem.babilong.prompts import PromptSwitches, build_prompt
    from lm_eval_longmem.common.embedded import smollm2_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--per-task", type=int, default=8)
    parser.add_argument("--babi-dir", type=Path, default=REPO.parent / "shared" / "data" / "babi" / "en")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    folder = smollm2_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    for n in range(1, 21):
        qa = f"qa{n}"
        samples = read_babi(task_file(args.babi_dir, qa))
        # one question per story, so the rows are not the same story asked five times
        picked = list({s.story: s for s in samples}.values())[: args.per_task]
        for suffix, (full, chat) in SETTINGS.items():
            switches = PromptSwitches(instruction=full, examples=full, answer_format=full)
            rows = []
            for sample in picked:
                prompt = build_prompt(qa, " ".join(sample.facts), sample.question, switches)
                if chat:
                    prompt = tokenizer.apply_chat_template(
                        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
                    )
                ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=not chat).input_ids
                with torch.no_grad():
                    out = model.generate(ids, max_new_tokens=20, do_sample=False, pad_token_id=tokenizer.eos_token_id)
                output = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
                rows.append({"target": sample.answer, "output": output, "question": sample.question})
            path = args.out / f"{qa}_0k_{suffix}.csv"
            with open(path, "w", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=["target", "output", "question"])
                writer.writeheader()
                writer.writerows(rows)
            print(path.name, flush=True)


if __name__ == "__main__":
    main()

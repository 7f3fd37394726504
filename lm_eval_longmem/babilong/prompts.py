"""BABILong prompts in the paper's layout (Appendix J), with texts taken from the installed harness.

The layout is the authors' (their runs record it as `{instruction}\\n\\n{examples}\\n\\n{post_prompt}
\\n\\n<context>\\n{context}\\n</context>\\n\\nQuestion: {question}`): the task instruction, worked
examples each inside `<example>` tags, the answer-format instruction, the sample's text inside
`<context>` tags, then the question. A part that is switched off is left empty and the prompt is
stripped, as in the authors' runs without that part.

The instruction, answer-format and example texts are not stored in this repository: they are read
at run time from lm-eval's own `lm_eval/tasks/babilong/babilong_qaN.yaml` (a dependency, read by
`lm_eval_longmem.harness.tasks.read_builtin_task_config`: `HARNESS_FOLDER`, `harness_task`), whose
`description` holds the instruction followed by the answer-format lines, and whose
`fewshot_config.samples` hold the examples. All examples listed there are used (qa5 has three, as
in the paper; the built-in task itself uses only two).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from lm_eval_longmem.harness.tasks import read_builtin_task_config

HARNESS_FOLDER = "babilong"
"""The harness's own BABILong task folder (`lm_eval/tasks/babilong/`), whose tasks hold the texts."""


def harness_task(qa: str) -> str:
    """The name of the harness's task of bAbI task `qa` ("qa1" -> "babilong_qa1")."""
    return f"babilong_{qa.lower()}"


_TEMPLATE = "{instruction}\n\n{examples}\n\n{answer_format}\n\n<context>\n{context}\n</context>\n\nQuestion: {question}"
_ANSWER_FORMAT_STARTS = ("Always return", "Your answer")


@dataclass(frozen=True)
class Example:
    """One worked example: a short story, its question and the answer in the requested format."""

    input: str
    question: str
    target: str


@dataclass(frozen=True)
class PromptParts:
    """The fixed texts of one task's prompt."""

    instruction: str
    """What the task is ("I will give you context with the facts about ...")."""
    examples: tuple[Example, ...]
    """Worked examples, shown inside `<example>` tags."""
    answer_format: str
    """How to answer ("Always return your answer in the following format: ..."); the authors' `post_prompt`."""


@dataclass(frozen=True)
class PromptSwitches:
    """Which parts of the prompt to show (the authors' runs vary these; all on is the paper's setting)."""

    instruction: bool = True
    """Show the task instruction."""
    examples: bool = True
    """Show the worked examples."""
    answer_format: bool = True
    """Show the answer-format instruction (the authors' `post_prompt`)."""


@cache
def harness_prompt_parts(qa: str) -> PromptParts:
    """Instruction, examples and answer format of task `qa`, read from the installed harness."""
    path, config = read_builtin_task_config(HARNESS_FOLDER, harness_task(qa))
    lines = [line.strip() for line in str(config.get("description", "")).strip().splitlines() if line.strip()]
    split = next((i for i, line in enumerate(lines) if line.startswith(_ANSWER_FORMAT_STARTS)), None)
    samples = (config.get("fewshot_config") or {}).get("samples") or []
    if split is None or split == 0 or not samples:
        raise ValueError(
            f"{path} does not have the expected shape (a description with an instruction followed by "
            "'Always return...'/'Your answer...' lines, and fewshot_config.samples); this lm_eval "
            "version changed its babilong task: pin lm-eval==0.4.13 or report this"
        )
    return PromptParts(
        instruction=" ".join(lines[:split]),
        examples=tuple(
            Example(input=str(s["input"]).strip(), question=str(s["question"]).strip(), target=str(s["target"]).strip())
            for s in samples
        ),
        answer_format=" ".join(lines[split:]),
    )


def format_examples(examples: tuple[Example, ...]) -> str:
    """Examples as the authors show them: `<example>\\nstory question\\nAnswer: target\\n</example>`, blank-line separated."""
    return "\n\n".join(f"<example>\n{e.input} {e.question}\nAnswer: {e.target}\n</example>" for e in examples)


def format_prompt(parts: PromptParts, context: str, question: str, switches: PromptSwitches = PromptSwitches()) -> str:
    """The whole prompt for one sample (the text the model is asked to continue)."""
    return _TEMPLATE.format(
        instruction=parts.instruction if switches.instruction else "",
        examples=format_examples(parts.examples) if switches.examples else "",
        answer_format=parts.answer_format if switches.answer_format else "",
        context=context.strip(),
        question=question.strip(),
    ).strip()


def build_prompt(qa: str, context: str, question: str, switches: PromptSwitches = PromptSwitches()) -> str:
    """`format_prompt` with the harness's texts for task `qa`."""
    return format_prompt(harness_prompt_parts(qa), context, question, switches)

"""Book-SORT prompt variants, in our own words, following the paper's prompt schema (section 2.1).

In-context input: ``[P_system P_context X P_task P_label_A X_A P_label_B X_B P_question P_answer]``;
memory-less input: the same without ``P_context`` and the excerpt ``X``.

The pieces map onto lm-eval's prompt fields so that ``--apply_chat_template`` and
``--system_instruction`` work unchanged:

- ``P_system`` -> the task ``description`` (a system message under a chat template; lm-eval puts a
  user's ``--system_instruction`` in front of it);
- everything from ``P_context`` to ``P_question`` -> ``doc_to_text`` (the user turn);
- ``P_answer`` (ends in "Segment") -> ``gen_prefix``, which lm-eval places at the start of the
  assistant's turn under a chat template, and right after the user text without one. The scored
  continuation is then " A" or " B".

The paper picks the best of 12 prompts per model on the validation split; we ship a few variants
and ``lm-eval-longmem booksort select-prompt`` scores them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

Condition = Literal["in_context", "memoryless"]
LABELS = ("A", "B")


@dataclass(frozen=True)
class PromptVariant:
    """The wording of one prompt; ``{title}`` in `context` is replaced by the book title."""

    system: str
    """P_system: the system prompt."""
    context: str
    """P_context: names the book and asks the model to read the excerpt (in-context only)."""
    task: str
    """P_task: explains that two labelled segments follow and what to decide about them."""
    question: str
    """P_question: the objective again, as a question."""
    answer: str = "Answer: Segment"
    """P_answer: the start of the answer; the model's next token is the label."""


VARIANTS: dict[str, PromptVariant] = {
    "default": PromptVariant(
        system="You are a careful reader with an excellent memory for the order of events in a text.",
        context='Please read this excerpt from the book "{title}" closely.',
        task=(
            "Now you will see two passages taken from the text, labelled Segment A and Segment B. "
            "Work out which of the two passages comes earlier in the text."
        ),
        question="Which segment appears first in the text: Segment A or Segment B?",
    ),
    "brief": PromptVariant(
        system="You answer questions about texts accurately and briefly.",
        context='Text from "{title}":',
        task="Two segments of this text follow.",
        question="Which segment occurs earlier in the text, A or B?",
    ),
    "memory": PromptVariant(
        system="You are a helpful assistant. You remember what you read, including the order in which things happened.",
        context='The following is a passage from "{title}". Read it from beginning to end and memorise it.',
        task=(
            "Below are two short extracts of the passage, called Segment A and Segment B. They are shown "
            "in random order. Recall where each extract was in the passage and decide which one came first."
        ),
        question="Of Segment A and Segment B, which one did you read first?",
    ),
    "order": PromptVariant(
        system="You are an expert on the structure and sequence of written narratives.",
        context='Here is an excerpt of "{title}".',
        task=(
            "Your job is to judge the sequence of two segments from this text. Exactly one of them "
            "comes before the other."
        ),
        question="Reply with the label of the segment that comes before the other one. Which is it, A or B?",
    ),
}
DEFAULT_VARIANT = "default"


class RenderedPrompt(NamedTuple):
    """A prompt split into the three lm-eval fields it is fed through."""

    system: str
    """The task description (system message), ending in a blank line as lm-eval descriptions do."""
    user: str
    """``doc_to_text``: from P_context (or P_task) to P_question, ending in a newline."""
    answer_prefix: str
    """``gen_prefix``: P_answer."""


def get_variant(name: str) -> PromptVariant:
    """The variant called `name`, with an error that lists the choices."""
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown booksort_prompt {name!r}: choose one of {', '.join(VARIANTS)}") from None


def render(
    variant: PromptVariant, *, title: str, excerpt: str, first: str, second: str, condition: Condition
) -> RenderedPrompt:
    """The prompt for one trial; `first`/`second` are the segments in the order they are shown (A, B)."""
    parts = []
    if condition == "in_context":
        parts += [variant.context.format(title=title), excerpt]
    elif condition != "memoryless":
        raise ValueError(f"unknown condition {condition!r}: use in_context or memoryless")
    parts += [variant.task, f"Segment {LABELS[0]}: {first}", f"Segment {LABELS[1]}: {second}", variant.question]
    return RenderedPrompt(variant.system + "\n\n", "\n\n".join(parts) + "\n", variant.answer)


# --- the authors' prompt configs (booksort_prompt=prompt_0 .. prompt_12) -------------------------
#
# The 13 prompt configurations of the SORT code (bridge-ai-neuro/SORT, sort/evaluation/conf/prompts/
# prompt_N.yaml at ba13631, BSD-3-Clause), kept as data so that a run can be set beside the paper's:
# the paper picks one per model on the validation split. `render_authors` fills them in as their
# evaluation script does (the rendering code is ours).

_THEIR_SYSTEM = "You are a helpful, respectful and honest assistant."
_THEIR_READ = {
    "take_time": "Please take some time to thoroughly read and comprehend this extract from the book <booktitle>. "
    "The passage is as follows: <excerpt>",
    "need": "I need you to thoroughly read and comprehend this extract from the book <booktitle>. "
    "The passage is as follows: <excerpt>",
    "carefully": "Please carefully read this excerpt from the book <booktitle>. This is the relevant passage: <excerpt>",
}
_THEIR_TASK = (
    "You will be shown pairs of text fragments from <booktitle>. Please select which of two fragments appeared "
    "<tasktype> in the book. You will be shown 10 such pairs. <segments> Which fragment appeared <tasktype> in the "
    "book, <label_list[0]> or <label_list[1]>?",
    "In this exercise, your objective is to identify the text segment, either <label_list[0]> or <label_list[1]>, "
    "that appeared <tasktype> in <booktitle>. Please read the segments carefully to determine their order of "
    "appearance in <booktitle> and respond with either <label_list[0]> or <label_list[1]>: <segments> Which of "
    "these, <label_list[0]> or <label_list[1]>, was <tasktype> in <booktitle>?",
    "Your task is to recall which text segment, either <label_list[0]> or <label_list[1]>, appeared <tasktype> in "
    "the book <booktitle>. Please read the segments carefully to remember in which order they appeared in "
    "<booktitle> and respond with either <label_list[0]> or <label_list[1]>: <segments> Which of these, "
    "<label_list[0]> or <label_list[1]>, was <tasktype> in the book <booktitle>?",
    "You will be shown two text segments, labeled as <label_list[0]> and <label_list[1]>. Please recall in which "
    "order they appeared in the book <booktitle> and tell me which one came <tasktype>. Please read the segments "
    "carefully: <segments> Which of these two parts of the book, <label_list[0]> or <label_list[1]>, came "
    "<tasktype> in the book <booktitle>?",
    "I will show you two short parts from a book, labeled as <label_list[0]> and <label_list[1]>. Your task is to "
    "tell me which of them appeared <tasktype> in the book <booktitle>. Please read both segments carefully and try "
    "to remember where in the book they come from: <segments> Which of these, <label_list[0]> or <label_list[1]>, "
    "appeared <tasktype> in the book <booktitle>?",
    "This is your task: Given two segments from a book, labeled as <label_list[0]> and <label_list[1]>, please tell "
    "me which of them appeared <tasktype> in <booktitle>. Read both segments carefully and try to remember where in "
    "<booktitle> they appeared: <segments> Which of these, <label_list[0]> or <label_list[1]>, comes <tasktype> in "
    "the book <booktitle>?",
)


@dataclass(frozen=True)
class AuthorsPrompt:
    """One of the authors' prompt configs, with their placeholders (`<booktitle>`, `<excerpt>`, ...)."""

    system_prompt: str
    pre_excerpt: str
    """Names the book and holds the excerpt; left out in the memory-less condition."""
    post_excerpt: str
    """Names the book again, holds the segments and asks the question (in both conditions)."""
    model_answer_prefix: str = "Answer: Segment"


AUTHORS_PROMPTS: dict[str, AuthorsPrompt] = {
    "prompt_0": AuthorsPrompt(_THEIR_SYSTEM, _THEIR_READ["take_time"], _THEIR_TASK[0]),
    **{f"prompt_{k}": AuthorsPrompt(_THEIR_SYSTEM, _THEIR_READ["need"], _THEIR_TASK[k]) for k in range(1, 6)},
    **{f"prompt_{6 + k}": AuthorsPrompt(_THEIR_SYSTEM, _THEIR_READ["carefully"], _THEIR_TASK[k]) for k in range(6)},
    "prompt_12": AuthorsPrompt(f"{_THEIR_SYSTEM} Please only answer A or B.", _THEIR_READ["need"], _THEIR_TASK[2]),
}
AUTHORS_TASK_TYPE = "first"
"""Their `task_type`: the question asks which segment came first (their config's default)."""


def authors_title(title: str) -> str:
    """A book title as the authors' builder writes it: Python's `str.title()` ("The Murder Of Roger Ackroyd").

    Idempotent, so titles of the hub dataset (built that way) stay as they are.
    """
    return title.title()


def render_authors(
    prompt: AuthorsPrompt, *, title: str, excerpt: str, first: str, second: str, condition: Condition
) -> RenderedPrompt:
    """One trial's prompt as the authors' evaluation script fills it in (task type "first", labels A and B).

    The placeholders are replaced in their order (title, task type, then the excerpt or the
    segments, so the text inserted last is not searched for the earlier ones), the user turn is the
    read part (left out without the excerpt) followed directly by the task part, and the labels are
    filled in last, everywhere. The memory-less prompt still names the book: the task part does.
    """
    if condition not in ("in_context", "memoryless"):
        raise ValueError(f"unknown condition {condition!r}: use in_context or memoryless")
    segments = f"Segment {LABELS[0]}: {first} Segment {LABELS[1]}: {second}\n"
    read = prompt.pre_excerpt.replace("<booktitle>", title).replace("<tasktype>", AUTHORS_TASK_TYPE)
    read = read.replace("<excerpt>", excerpt) if condition == "in_context" else ""
    task = prompt.post_excerpt.replace("<booktitle>", title).replace("<tasktype>", AUTHORS_TASK_TYPE)
    task = task.replace("<segments>", segments)
    system = prompt.system_prompt.replace("<tasktype>", AUTHORS_TASK_TYPE)

    def labelled(text: str) -> str:
        return text.replace("<label_list[0]>", LABELS[0]).replace("<label_list[1]>", LABELS[1])

    return RenderedPrompt(labelled(system), labelled(read + task), labelled(prompt.model_answer_prefix))

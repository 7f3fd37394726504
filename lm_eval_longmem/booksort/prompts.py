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

"""Where the answer is in a model's output, and what about the output's form already rules a reading out.

`locate` splits an output into the answer's first sentence (`Located.head`), the text after it that belongs to
the answer (`Located.rest`: an explanation, a reasoning) and what the model invented after it (`Located.tail`:
a new "Question:", "Context:", "Example:", cut off as the authors cut at `<context>`). `hazard` names what
makes the corrected check abstain whatever the shape: an uncertainty marker, an alternative after "or", a
list of options. Nothing here decides a verdict (`decision.py` does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG = re.compile(r"<context>|<example>", re.IGNORECASE)
_MARKUP = re.compile(r"[*`#]+|(?<!\w)_+|_+(?!\w)")
_PROMPT_PART = re.compile(
    r"^[ \t\-*>#\[(]*(?:question|context|example|story|instruction|input|q|passage|document)\b[ \t\])]*:",
    re.IGNORECASE | re.MULTILINE,
)
ANSWER_MARK = re.compile(
    r"^\s*1[.)\]]+\s+|^[\s\-*>\[(]*(?:final\s+)?(?:answers?|responses?|a|output|assistant|ai|bot)\s*[\])]?\s*:\s*|^\s*(?:the\s+)?answer\s+is\b\s*:?\s*",
    re.IGNORECASE,
)
"""An "Answer:" mark at the start of a text ("A:", "- [Response]:", "Final answer:", "Assistant:", "The answer is");
a numbered list of one ("1. The garden") is marked so too (a list of several is `options`)."""
_SENTENCE_END = re.compile(r"(?<![A-Z])[.!?;](?=\s|$)|\n")
_EXPLANATION = re.compile(
    r"^(?P<head>[^,(\n]*?\w)(?:\s*(?:,|\s-|\u2013|:)\s*|\s+(?=because\b|since\b))"
    r"(?P<connective>since|because|as|based on|given|according to|due to|considering|which|who|where|"
    r"this is because|so|therefore|thus|hence|meaning)\b",
    re.IGNORECASE,
)
"""A claim and the explanation joined to it: "Cat, since ...", "Apple - based on ...", "Kitchen because ..."."""
_PARENTHESIS = re.compile(r"^(?P<head>[^(\n]*\w[^(\n]*?)\s*\((?P<inside>[^()\n]*)\)?\W*$")
_YES_NO_FIRST = re.compile(r"^(?P<head>yes|no)\s*[,:;\-\u2013]\s*(?=\w)", re.IGNORECASE)

HEDGES = re.compile(
    r"\b(?:possibly|probably|presumably|likely|unlikely|perhaps|maybe|might|may|could|seems?|seemed|appears?|"
    r"appeared|apparently|suppose|assume|guess|think|believe|not sure|unsure|uncertain|unclear|either|"
    r"approximately|roughly|almost certainly|most likely)\b",
    re.IGNORECASE,
)
"""Uncertainty markers: an answer with one anywhere (outside the invented tail) commits to nothing the check
reads (qa10's one-word "perhaps", "possibly", ... are read as the label "maybe" before this applies)."""

_CORRECTION = re.compile(r"\b(?:however|but|actually|wait|correction|instead|rather|although|though)\b", re.IGNORECASE)
_OR = re.compile(r"\bor\b|\bnor\b|/", re.IGNORECASE)
_OPTIONS = re.compile(r"\b(?:options|choices|candidates)\s*:", re.IGNORECASE)
_ITEM_MARK = re.compile(r"(?:^|(?<=\s))\(?(?P<mark>[a-dA-D]|[1-9]|i{1,3}|iv)[.):](?=\s)", re.MULTILINE)
_HEADER = re.compile(r"^\W*(?:response|answer|solution|output|result|reply)\W*$", re.IGNORECASE)


def _options(text: str) -> bool:
    """Whether `text` lists options: "Options:", or items marked with two consecutive letters or numbers
    ("A: Mary\nB: Bill", "1) ... 2) ...", "(i) ... (ii) ...")."""
    if _OPTIONS.search(text):
        return True
    marks = {m["mark"].lower() for m in _ITEM_MARK.finditer(text)}
    return any(pair <= marks for pair in ({"a", "b"}, {"1", "2"}, {"i", "ii"}))


@dataclass(frozen=True)
class Located:
    """An output split where the corrected check reads it."""

    head: str
    """The answer's first sentence (after an "Answer:" mark), as written; "" when the output has none."""
    rest: str
    """The answer's text after its first sentence, up to the invented tail."""
    tail: str
    """What the model wrote after the answer imitating the prompt ("Question: ...", "Context: ..."), or ""."""
    opening: str = ""
    """Head and rest as written, answer marks included ("A: Fred\nB: Bill" is a list of options)."""
    continued: bool = False
    """The line after the head goes on with a lower-case word or a dash ("Jeff\ngave the football to Fred"): the
    head may be the start of a sentence broken by the line, not a whole answer."""


def clean(output: str) -> str:
    """`output` up to `<context>`/`<example>` (as the authors' check cuts: an output that opens with one imitates
    the prompt before any answer), without markdown emphasis."""
    return _MARKUP.sub("", _TAG.split(output, maxsplit=1)[0]).strip()


def locate(output: str) -> Located:
    """Split `output` into head, rest and tail (`Located`)."""
    text = clean(output)
    tail = ""
    if part := _PROMPT_PART.search(text):
        text, tail = text[: part.start()].strip(), text[part.start() :]
    while _HEADER.match(text.split("\n", 1)[0]) and "\n" in text:
        text = text.split("\n", 1)[1].strip()  # "### Response" alone on its line
    opening = text
    text = unmarked(text)
    end = _SENTENCE_END.search(text)
    head, rest = (text[: end.start()], text[end.end() :]) if end else (text, "")
    continued = bool(end and end.group(0) == "\n" and re.match(r"[ \t]*(?:[a-z]|[-\u2013][ \t]*[a-z])", rest))
    return Located(head.strip(), rest.strip(), tail, opening, continued)


def unmarked(text: str) -> str:
    """`text` without the answer marks it opens with ("A: The answer is: milk" -> "milk")."""
    while marked := ANSWER_MARK.match(text):
        if not marked.group(0).strip():
            break
        text = text[marked.end() :].lstrip()
    return text.strip()


_LEAD_INS = (
    re.compile(
        r"^(?:to answer (?:this|the) question|based on|according to|from|given|in|looking at|considering)\b[^,:\n]*[,:]\s*",
        re.IGNORECASE,
    ),
    re.compile(
        r"^(?:we (?:should|need to|must|can) (?:know|see|conclude) that|it is (?:stated|mentioned|said) that)\s*:?\s*",
        re.IGNORECASE,
    ),
)
"""How an answer may open before it says anything ("Based on the context, ...", "To answer this question, we should
know that: ...")."""


def lead_in(sentence: str) -> tuple[str, str]:
    """(the sentence's opening lead-ins, the rest): "Based on the story, Mary is in the kitchen" -> ("Based on the
    story, ", "Mary is in the kitchen"); ("", sentence) when it opens with none."""
    rest = sentence
    while True:
        found = next((m for pattern in _LEAD_INS if (m := pattern.match(rest))), None)
        if found is None or not found.group(0):
            break
        rest = rest[found.end() :]
    return sentence[: len(sentence) - len(rest)], rest


def split_explanation(sentence: str) -> tuple[str, str]:
    """(the sentence's claim, the explanation joined to it): "Cat, since Emily is a mouse" -> ("Cat", "since
    Emily is a mouse"); "bathroom (the bathroom is east of the hallway)" -> ("bathroom", "the bathroom is ...");
    "No, Mary is in the garden" -> ("No", "Mary is in the garden"); a sentence without any -> (sentence, "")."""
    if m := _EXPLANATION.match(sentence):
        if m["head"].strip():
            return m["head"].strip(" ,:-"), sentence[m.start("connective") :].strip()
    if m := _PARENTHESIS.match(sentence):
        return m["head"].strip(" ,:-"), m["inside"].strip()
    if m := _YES_NO_FIRST.match(sentence):
        return m["head"], sentence[m.end() :].strip()
    return sentence.strip(), ""


def sentences(text: str) -> list[str]:
    """The sentences (and lines) of `text` that hold a word."""
    return [s.strip() for s in _SENTENCE_END.split(text) if re.search(r"\w", s)]


def hazard(located: Located) -> str:
    """Why the output's form rules out any reading ("" when nothing does): `hedge`, `correction`,
    `alternative` or `options`.

    Looked for in the answer (head and rest), never in the invented tail, which answers other questions."""
    answer = located.opening or f"{located.head}\n{located.rest}"
    if _options(answer):
        return "options"
    if HEDGES.search(answer):
        return "hedge"
    if _CORRECTION.search(answer):
        return "correction"
    if _OR.search(answer):
        return "alternative"
    return ""

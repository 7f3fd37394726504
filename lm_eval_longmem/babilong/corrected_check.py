"""BABILong's corrected answer check (`acc_corrected`): the authors' rule, read as a careful reader does.

`acc_corrected` (v4) keeps the authors' rule (`official_check.py`) but reads the answer as a
careful reader does, by rules over the closed label sets and the fixed question and statement forms
of the bAbI tasks (`RULES`), **precision first**: it finds the answer (`find_answer`: an "Answer:" line, the part
before an explanation, a conclusion; the output cut where the model imitates the prompt), finds
labels as whole words, with the forms of `WORD_FORMS` ("mice" for "mouse"), without negated
mentions, reads qa19 paths as compass steps, a yes/no answer given as a statement by its polarity
and the asked part of a give or fear statement (`read`). Where the reading is not unambiguous
(`ABSTENTIONS`: option lists, candidate answers that disagree, several labels, a label only
outside the answer, ...) the reader abstains and `acc_corrected` keeps `acc`'s verdict; `Check`
says so (`abstained`, the task's `corrected_abstained`). `deciding_rule` names the rule that
decided a verdict (`predictions.audit_rows` lists every answer on which the two checks disagree).
It is not a fuzzy matcher nor a model judge.
docs/babilong-corrected-check.md shows every rule and abstention with a row, and the figures
measured on held-out models (`tests/babilong/test_judged.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import NamedTuple

from lm_eval_longmem.babilong import words
from lm_eval_longmem.babilong.official_check import first_sentence, labels_for, official_correct


class Check(NamedTuple):
    """Both verdicts on one answer."""

    acc: bool
    """The authors' check (substring matching)."""
    acc_corrected: bool
    """The corrected check (`corrected_correct`): the reader's verdict, or `acc` where it abstained."""
    abstained: bool = False
    """The corrected reader found no answer to read with confidence (`ABSTENTIONS`), so `acc_corrected` is `acc`."""


WORD_FORMS: dict[str, tuple[str, ...]] = {
    # qa5, qa8: the objects, in the plural
    "apple": ("apples",),
    "football": ("footballs",),
    # qa15: the animals, in the plural ("sheep" is its own plural)
    **{kind: (plural,) for kind, plural in words.ANIMALS.items() if plural != kind},
    # rooms and places, in the plural ("The gardens are north of the bathroom")
    **{place: (place + "s",) for place in sorted({*words.ROOMS, *words.PLACES})},
    # qa16: the other spelling of a colour
    "gray": ("grey",),
    # qa20: the motive as a noun ("because of boredom")
    "bored": ("boredom",),
    "hungry": ("hunger",),
    "thirsty": ("thirst",),
    "tired": ("tiredness",),
    # qa7: counts as digits, and the ways to say zero
    "none": ("zero", "0", "nothing", "no objects", "no items", "not carrying anything", "not holding anything"),
    "one": ("1",),
    "two": ("2",),
    "three": ("3",),
    # qa8: the ways to say that nothing is carried
    "nothing": ("none", "no objects", "no items", "not carrying anything", "not holding anything"),
    # qa10: the story does not settle the question (statements about the facts, not about the
    # speaker: "no idea", "I do not know" and "not sure" are not here)
    "maybe": (
        "perhaps",
        "possibly",
        "may be",
        "might be",
        "could be",
        "unknown",
        "not known",
        "unclear",
        "not clear",
        "uncertain",
        "not certain",
        "undetermined",
        "indeterminate",
        "cannot be determined",
        "cannot determine",
        "cannot be known",
        "cannot know",
        "cannot tell",
        "cannot say",
        "impossible to tell",
        "impossible to say",
        "impossible to know",
        "impossible to determine",
        "not possible to tell",
        "not possible to say",
        "not possible to know",
        "not possible to determine",
        "no way to tell",
        "no way to know",
        "no way of knowing",
        "no way to determine",
        "not enough information",
        # the text does not tell (`HEDGE`)
        "no information",
        "insufficient information",
        "no mention",
        "no indication",
        "no evidence",
        "does not provide",
        "does not mention",
        "does not say",
        "does not state",
        "does not specify",
        "does not indicate",
        "not mentioned",
        "not specified",
        "not stated",
    ),
}
"""Other written forms of the answer labels, for the corrected check (rule `word-form`).

Keyed by label: a task uses the entries of its own labels only, so "none" means the label "none"
in qa7 and the label "nothing" in qa8. Forms are written as `normalize_answer` leaves text (lower
case, no articles, "can't" as "cannot"). Synonyms are deliberately absent ("movie theater" is not
"cinema", "fatigue" is not "tired"): only forms of the label word itself (plurals, the motive as a
noun), digits, and for qa7, qa8 and qa10 the fixed phrasings of their answers. A form not listed
here is not recognised. Forms are looked for in the answer only (rule `answer`), never in an
explanation after it: "...to quench his thirst" below an answer "kitchen" adds no "thirsty".
"""

COMPASS: dict[str, str] = {**words.DIRECTIONS, **{letter: letter for letter in words.DIRECTIONS.values()}}
"""Compass words and letters as the qa19 steps they name (rule `path`)."""

NEGATORS = frozenset({"not", "no", "never", "neither", "nor", "without"})
"""Words that negate the label after them (rule `negation`): "not apple", "no one", "nor office"."""

NEGATION_BRIDGE = frozenset(
    {"in", "at", "on", "to", "into", "inside", "from", "of", "by", "with", "longer", "currently", "located"}
    | {"carrying", "holding", "afraid", "scared", "go", "going", "gone", "went", "be", "been"}
)
"""Words that may stand between a negator and the label it negates: "not in kitchen", "not afraid of cat",
"no longer in bathroom". A negation also reaches labels joined to a negated one by "or"/"nor":
"not gray or green" negates both colours.

"only" and "just" are not here: "not only apple but also milk" negates nothing.
"""

CLAUSE_STARTERS = frozenset(
    {"i", "you", "he", "she", "it", "we", "they", "this", "that", "there"}
    | {"because", "since", "as", "but", "and", "so", "not", "yes", "no"}
)
"""Words that may follow the answer "no" without a comma: "no it is not", "no because ...".

Any other word right after "no" makes it the determiner "no" ("no idea", "no way to tell", "no
one"), unless the word is in the question ("No Mary is not in the office" for "Is Mary in the
office?").
"""

RULES: tuple[str, ...] = ("answer", "whole-word", "word-form", "negation", "list", "path", "polarity", "role")
"""The corrected reader's departures from the authors' check, by the names the audit reports.

* `answer`: read the answer, not the first sentence (`find_answer`): the first "Answer:" line
  (also "- response:", "A:"; the last "Final answer:"), the line after it when it is empty or a
  header ("The answer is:"); else the first sentence of the first paragraph, past header lines
  ("### Response", "Solution:") and before an explanation ("Explanation:", a blank line). A line
  that opens a new prompt part ("Question:", "Context:", "Example:") ends the output, as
  `<context>`/`<example>` do in the authors' check. A paragraph ending in a dangling word ("in
  the", ":") goes on in the next one. The other candidates (other answer lines, the text before
  the answer line, concluding sentences: "Therefore ...", "The answer is ...") must not name
  another label (else: abstain, `conflict`); a candidate naming none (cut off: "Therefore,") is
  passed over. In a sentence, what follows its last conclusion marker when that names a label
  ("..., so Lily is white"); parentheses, lead-ins ("Based on the context, ...") and markdown
  emphasis are dropped.
* `whole-word`: a label is found only as a whole word, never inside a longer one ("none" is not
  also "one", "not" is not "no", "parking" is not "park").
* `word-form`: the forms in `WORD_FORMS` count as their label ("mice" is "mouse", "0" is "none",
  "it is not known" is "maybe", "gardens" is "garden").
* `negation`: a negated mention is not an answer ("not apple", "no one", "neither kitchen nor
  office", "not gray or green"), and "no" followed by a word is the determiner, not the answer
  "no" ("no idea").
* `list`: a list target may have spaces after its commas ("football, apple").
* `path`: a qa19 answer is the sequence of compass steps it names, letters or words, in order, up
  to an explanation ("since", "because", ...): "north, west", "n, w", "go north then west" are
  all "n,w"; "first go south, since the bathroom is south of" is "s".
* `polarity`: a yes/no question (qa6, qa9, qa10, qa17, qa18) answered by a statement instead of
  "yes"/"no" gets the statement's polarity: about the asked place ("Mary is not in the kitchen"
  is "no", "Mary is in the kitchen" is "yes", "Mary is in the garden" is "no", "either in the park
  or the school" is "maybe"), position ("the triangle is below the red square" for "above" is
  "no") or size ("the suitcase does not fit inside the box" is "no"). A hedge ("there is no
  information about ...", `HEDGE`) has no polarity; in qa10 it is "maybe".
* `role`: where the question asks for one part of a statement, that part is the answer: the giver,
  receiver or object of "X gave the Y to Z" (qa5: "Mary gave the apple to Fred" answers "Who gave
  the apple?" with Mary; a statement that answers another question answers nothing), and what
  "... afraid of Y" names (qa15: "Gertrude is a sheep, and sheep are afraid of cats" is "cat").

Before any rule, both the answer and the question are normalised (`normalize_answer`), and the
labels are those of the asked kind (`asked_labels`: qa5 "who" asks for a person, "what" for an
object; qa20 "where" for a place, "why" for a motive); the audit calls a verdict that none of the
rules changes `normalize`.
"""
_ALL_RULES = frozenset(RULES)

ABSTENTIONS: dict[str, str] = {
    "options": "the output lists several candidates instead of choosing one: items labelled with consecutive letters or "
    'numbers ("Option A:" / "Option B:", "b)", "(ii)", in any language), "Options:"/"Choices:", a bullet or numbered '
    "list of different items, or the answer's frame repeated with other labels of its kind (\"Option: The bathroom\\n"
    '\\nOption: The bedroom", "kitchen\\nhallway")',
    "statement": 'the answer is a qa5 statement that answers another question ("Jeff gave the milk to Fred" for '
    '"What did Fred give to Jeff?": giver and receiver swapped), or one the `role` rule does not read ("Fred picked '
    'up the milk there"; added after the held-out rows were frozen, see the card)',
    "conflict": "two candidate answers name different labels (an answer line and the text before it, two answer lines, "
    "the answer and a later conclusion)",
    "several": "the answer names several labels (for a question with one answer) and no rule picks one",
    "quote": 'the answer that names a label quotes the context (double quotes, "Document[3]")',
    "exclamation": 'the answer that names a label opens with an interjection ("Oh no, ...")',
    "elsewhere": "the answer names no label but the output names one elsewhere (narration, a prompt the model "
    "invented, a cut-off answer line, a complete answer after an empty one)",
}
"""Why the corrected reader found no answer it can read with confidence, by the names the audit reports,
in the order `read` tests them.

On such an output `acc_corrected` keeps `acc`'s verdict and the doc counts in `corrected_abstained`.
"""


_NORMALIZE = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\bcan'?t\b|\bcan not\b", "cannot"),
        (r"n't\b", " not"),
        (r"'s\b", ""),
        (r"[()\[\]{}\"*_`<>]", " "),
        (r"[^\w\s,]", ","),
        (r"\b(?:the|a|an)\b", " "),
        (r"\s+", " "),
    )
)


@lru_cache(maxsize=1 << 16)
def normalize_answer(text: str) -> str:
    """`text` as the corrected check reads it: lower case, contractions spelled out, articles dropped.

    "can't" and "can not" become "cannot", other "n't" becomes " not" ("isn't" -> "is not"), a
    final "'s" is dropped ("Mary's" -> "mary"), punctuation other than commas becomes a comma
    (a boundary: "No!" ends the answer "no" as "No," does) except brackets, quotes and markdown
    emphasis, which become spaces, and runs of spaces become one space.
    """
    text = text.lower().replace("\u2019", "'")
    for pattern, replacement in _NORMALIZE:
        text = pattern.sub(replacement, text)
    return text.strip()


# ---------------------------------------------------------------- finding the answer (rule `answer`)

_HAS_WORD = re.compile(r"\w")
_WORDS = re.compile(r"\w+")
_TAG = re.compile(r"<context>|<example>", re.IGNORECASE)
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)|^[ \t]*#+[ \t]*", re.MULTILINE)
_BULLET = r"[ \t]*(?:[-*\[(][ \t]*)?"
_PROMPT_LINE = re.compile(
    rf"^{_BULLET}(?:question|context|example|story|instruction|q)[ \t]*:", re.IGNORECASE | re.MULTILINE
)
_ANSWER_LINE = re.compile(
    rf"^{_BULLET}(final[ \t]+)?(?:answer|response|a)[ \t]*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE
)
_HEADER = re.compile(r"^\W*(?:(?:answer|response|solution|output|result|reply)\W*\d*\W*|.*:\s*)$", re.IGNORECASE)
_OPTIONS_HEADER = re.compile(r"\b(?:options|choices)[ \t]*:", re.IGNORECASE)
_LIST_LINE = re.compile(r"^[ \t]*(?:[-*\u2022]|\d+[.)])[ \t]*([^:\n]*\w[^:\n]*)$", re.MULTILINE)
_EXPLANATION = re.compile(r"\b(?:explanation|reasoning|rationale|justification|support)[ \t]*:", re.IGNORECASE)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_DANGLING = re.compile(r"(?:\b(?:the|a|an|in|at|to|of|on|into|from|is|are|was|were|and|or|by)|:)[ \t]*$", re.IGNORECASE)
_LIST_START = re.compile(r"^\s*1[.)\]]\s")
_LIST_ITEM = re.compile(r"(?:^|\s)\d+[.)\]](?:\s|$)")
_SENTENCE_END = re.compile(r"(?<![a-z] [A-Z])([.!?])(?=\s|$)")
_CONCLUDES = re.compile(
    r"^\W*so\b|\b(?:therefore|thus|hence|in conclusion|(?:the|my|final) answer is)\b", re.IGNORECASE
)
_CONCLUSION_MARKER = re.compile(
    r"\b(?:therefore|thus|hence|in conclusion|which means|this means)\b(?: that)?|,\s*so\b|\b(?:the|my|final) answer is\b:?",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(r"^\s*(?:based on|according to|given|from)\b[^,:]*[,:]", re.IGNORECASE)
_PARENTHESES = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_QUOTE = re.compile(r"[\"\u201c\u201d]|\bdocument\b", re.IGNORECASE)
_INTERJECTION = re.compile(r"^\W*(?:oh|ah|aha|wow|whoa|well|hmm+|um+|uh+|alas|oops)\b", re.IGNORECASE)


class Candidates(NamedTuple):
    """Where `find_answer` found the answer in an output."""

    answer: str
    """The part read as the answer, in its own case ("" when the output gives none)."""
    others: tuple[str, ...] = ()
    """Other parts that could be the answer: they must not name another label."""
    abstained: str = ""
    """A key of `ABSTENTIONS` when the output's form already rules out a confident reading."""


def _sentences(text: str) -> list[str]:
    """The sentences of `text` that have a word and are not questions; a line break does not end one."""
    pieces = _SENTENCE_END.split(text)  # sentence, its end mark, sentence, ...
    return [s.strip() for s, end in zip(pieces[::2], [*pieces[1::2], ""]) if _HAS_WORD.search(s) and end != "?"]


def _paragraphs(text: str) -> list[str]:
    """The paragraphs of `text` with a word, header lines dropped, one ending in a dangling word joined to the next."""
    out: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        lines = paragraph.strip().splitlines()
        while lines and _HEADER.match(lines[0]) and len(lines[0]) < 60:
            lines.pop(0)  # "### Response", "Solution:", "The answer is:"
        paragraph = " ".join(line.strip() for line in lines)
        if not _HAS_WORD.search(paragraph):
            continue
        if out and _DANGLING.search(out[-1]):
            out[-1] = f"{out[-1]} {paragraph}"
        else:
            out.append(paragraph)
    return out


def _line_answer(text: str, content: str, end: int) -> list[str]:
    """An answer line's sentences; when it is empty or a header ("The answer is:"), with the paragraph after it."""
    if not _HAS_WORD.search(content) or _HEADER.match(content) or _DANGLING.search(content):
        rest = _paragraphs(text[end:])
        content = f"{content} {rest[0]}".strip() if rest else content
    return _sentences(content) or [content]


def find_answer(output: str) -> Candidates:
    """The part of `output` that answers the question, and the other candidates (rule `answer`, see `RULES`).

    The output is cut where the model starts to imitate the prompt (`<context>`, `<example>`, a
    "Question:"/"Context:" line). A list of options whatever its content (items labelled with two
    consecutive letters or numbers, `_labelled_list`; "Options:"/"Choices:"; a bullet or numbered list
    of different items) is no answer: `options` (`read` adds the repeated frame, `parallel_candidates`).
    """
    text = _TAG.split(output, maxsplit=1)[0]
    items = {normalize_answer(item) for item in _LIST_LINE.findall(text)}
    text = _EMPHASIS.sub("", text)
    if _labelled_list(text) or _OPTIONS_HEADER.search(text) or len(items) > 1:
        return Candidates("", abstained="options")
    prompt = _PROMPT_LINE.search(text)
    if prompt:
        text = text[: prompt.start()]
    lines = list(_ANSWER_LINE.finditer(text))
    if lines:
        finals = [line for line in lines if line[1]]
        chosen = finals[-1] if finals else lines[0]
        answer, *more = _line_answer(text, chosen[2], chosen.end())
        others = [s for s in more if _CONCLUDES.search(s)]
        others += [s for line in lines if line is not chosen for s in _line_answer(text, line[2], line.end())]
        others += _sentences(text[: lines[0].start()])
        return Candidates(answer, tuple(others))
    paragraphs = _paragraphs(_EXPLANATION.split(text, maxsplit=1)[0])
    if not paragraphs:
        return Candidates("")
    if _LIST_START.match(paragraphs[0]):
        items = {normalize_answer(item) for item in _LIST_ITEM.split(paragraphs[0]) if _HAS_WORD.search(item)}
        if len(items) > 1:
            return Candidates("", abstained="options")
        paragraphs[0] = _LIST_START.sub("", paragraphs[0])
    sentences = _sentences(paragraphs[0])
    if not sentences:
        return Candidates("")
    later = [s for paragraph in paragraphs[1:] for s in _sentences(paragraph)]
    return Candidates(sentences[0], tuple(s for s in sentences[1:] + later if _CONCLUDES.search(s)))


def _trimmed(sentence: str) -> tuple[str, str]:
    """(the sentence after its last conclusion marker, the whole sentence), without parentheses or lead-in."""

    def clean(text: str) -> str:
        text = _PARENTHESES.sub(" ", text)
        without = _LEAD_IN.sub("", text)
        return (without if _HAS_WORD.search(without) else text).strip()

    return clean(_CONCLUSION_MARKER.split(sentence)[-1]), clean(sentence)


# ---------------------------------------------------------------- option lists (abstention `options`)

ENUMERATIONS: tuple[tuple[str, ...], ...] = (
    ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x"),
    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"),
)
"""The sequences of words a list may number its items with; letters (of any alphabet) and numbers follow on
from one another by themselves ("b" after "a", "\u0411" after "\u0410", "3" after "2")."""
_ENUMERATOR = "|".join(
    [
        *sorted({value for sequence in ENUMERATIONS for value in sequence}, key=len, reverse=True),
        r"\d{1,2}",
        r"[^\W\d_]",
    ]
)
_MARKER = re.compile(
    # where an item starts: a line (after a bullet), a sentence (its end may close the item before: "A. Yes B. No"),
    # or anywhere for "b)" and "(b)"
    rf"(?:^[ \t]*(?:[-*\u2022>]+[ \t]*)?|(?<=[.;!?])[ \t]+|(?<=\s)(?=\(?(?:{_ENUMERATOR})\)))"
    # at most one word labelling it, whatever the language ("Option", "Choice", "Opcion"); joined in a non-Latin script
    r"(?:[^\W\d_]+[ \t]+|[^\W\d_a-z]+)?"
    # the item's letter or number and the mark closing it: "A.", "(b)", "2)", "C :", "iii -", "First:", "A\uff1a"
    rf"\(?({_ENUMERATOR})[ \t]*(?:[.):\]\uff1a\uff09]|[-\u2013\u2014](?=[ \t]))",
    re.IGNORECASE | re.MULTILINE,
)
"""An item's label in a list: (a word and) a letter or number closed by a mark; group 1 is the letter or number."""


def _places(value: str) -> set[tuple[str, int]]:
    """Where an item's letter or number stands in the enumerations it may belong to ("i": a letter and a numeral)."""
    value = value.lower()
    places = {(str(k), sequence.index(value)) for k, sequence in enumerate(ENUMERATIONS) if value in sequence}
    if value.isdigit():
        places.add(("number", int(value)))
    elif len(value) == 1:
        places.add(("letter", ord(value)))
    return places


def _labelled_list(text: str) -> bool:
    """Whether `text` labels items with two consecutive values of one enumeration ("Option A:" and "Option B:",
    "1." and "2.", "(i)" and "(ii)", "First:" and "Second:"): a list of options, whatever its items say."""
    places = {place for m in _MARKER.finditer(text) for place in _places(m[1])}
    return any((kind, index + 1) in places for kind, index in places)


_ENUMERATED = "enumerated"
"""The word an item's letter or number becomes in a frame, so "Option A:" and "Option B:" have one frame."""
_FILLER = "\0"
"""Marks a frame's filler: a word of the answer's kind."""
_STATEMENT_WORDS = frozenset(
    word
    for phrase in (*words.ROOMS, *words.PLACES, *words.WIDE_ROOMS, *words.WIDE_PLACES, *words.SHAPES, *words.CONTAINERS)
    for word in normalize_answer(phrase).split()
    if word != "of"
) | {"left", "right", "above", "below"}
"""What a yes/no question's candidates differ in: "Option A: Mary is in the kitchen" / "Option B: ... the garden"."""


def _frame_tokens(text: str, fillers: frozenset[str], labels: tuple[str, ...]) -> list[str]:
    """`text` as a sequence of words and commas (one closing each line), every word of `fillers` (or a form of one
    of `labels`) marked as a filler, and every item label's letter or number (and any other bare number or single
    letter) one word, `_ENUMERATED`: "Option A:" and "Option B:", "Variant 1 ->" and "Variant 2 ->" are one frame."""
    tokens: list[str] = []
    for line in text.splitlines():
        line = _MARKER.sub(
            lambda m: f"{m[0][: m.start(1) - m.start()]} {_ENUMERATED} {m[0][m.end(1) - m.start() :]}", line
        )
        words_of_line = re.findall(r"\w+|,", _apply_forms(normalize_answer(line), labels))
        while words_of_line and words_of_line[-1] == ",":
            words_of_line.pop()
        if words_of_line:
            tokens += [_frame_word(word, fillers) for word in words_of_line] + [","]
    return tokens


def _frame_word(word: str, fillers: frozenset[str]) -> str:
    """A word of a frame: a filler marked, a bare number or single letter `_ENUMERATED`, any other word itself."""
    if word in fillers:
        return _FILLER + word
    return _ENUMERATED if word.isdigit() or (len(word) == 1 and word.isalpha()) else word


def _repeated_frame(tokens: list[str], start: int) -> bool:
    """Whether the run of `tokens` from `start` to the end of an item (a comma), fillers and frame (a word or a
    comma), is repeated right after itself with other fillers in the same places (two fillers side by side are one
    phrase, "red square", not a frame)."""
    for size in range(1, (len(tokens) - start) // 2 + 1):
        first, second = tokens[start : start + size], tokens[start + size : start + 2 * size]
        fillers = [word.startswith(_FILLER) for word in first]
        if (
            first != second
            and first[-1] == ","
            and any(fillers)
            and not all(fillers)
            and all(a == b or (a.startswith(_FILLER) and b.startswith(_FILLER)) for a, b in zip(first, second))
        ):
            return True
    return False


def parallel_candidates(output: str, answer: str, question: str, labels: tuple[str, ...]) -> bool:
    """Whether the `answer` found in `output` is one of several candidates of the answer's kind in parallel form:
    its frame repeated right after it with other fillers ("Option: The bathroom\n\nOption: The bedroom",
    "kitchen\nhallway", "Mary is in the kitchen. Mary is in the garden."), before an explanation or an invented
    prompt. Facts narrated after an answer ("Answer: garden\n\nThe garden is west of the bedroom. The bedroom is
    west of the kitchen.") are no candidates.

    `labels`: the asked kind (`asked_labels`, lower case); the fillers are those labels, and for a yes/no question
    also the places, shapes and containers its statements name. A list question (qa8) and a path (qa19) are
    answered by several labels, so only a labelled list (`_labelled_list`, `find_answer`) is a list of options there.
    """
    if _LIST_QUESTION.fullmatch(question) or all("," in label for label in labels):
        return False
    text = _EMPHASIS.sub("", _TAG.split(output, maxsplit=1)[0])
    if prompt := _PROMPT_LINE.search(text):
        text = text[: prompt.start()]
    text = _EXPLANATION.split(text, maxsplit=1)[0]
    fillers = frozenset(labels) | (_STATEMENT_WORDS if {"yes", "no"} <= set(labels) else frozenset())
    tokens = _frame_tokens(text, fillers, labels)
    words_at = [i for i, word in enumerate(tokens) if word != ","]  # the answer may join lines: match its words
    head = [word for word in _frame_tokens(answer, fillers, labels) if word != ","][:3]
    start = next(
        (
            words_at[k]
            for k in range(len(words_at))
            if head and [tokens[i] for i in words_at[k : k + len(head)]] == head
        ),
        None,
    )
    return start is not None and _repeated_frame(tokens, start)


# ---------------------------------------------------------------- finding labels


@cache
def _forms_pattern(labels: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, str]] | None:
    """One regex for all forms of `labels` (longest first, whole words), and the label of each form."""
    forms = {form: label for label in labels for form in WORD_FORMS.get(label, ())}
    if not forms:
        return None
    alternatives = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"), forms


def _apply_forms(text: str, labels: tuple[str, ...]) -> str:
    """`text` with every form in `WORD_FORMS` of one of `labels` replaced by that label."""
    compiled = _forms_pattern(labels)
    if compiled is None:
        return text
    pattern, forms = compiled
    return pattern.sub(lambda match: forms[match.group(0)], text)


def _negated(text: str, start: int, labels: tuple[str, ...]) -> bool:
    """Whether the mention at `start` follows a negator, across `NEGATION_BRIDGE` words and "or"-joined labels."""
    before = re.findall(r"\w+|,", text[:start])
    while True:
        while before and before[-1] in NEGATION_BRIDGE:
            before.pop()
        if len(before) >= 2 and before[-1] in ("or", "nor") and before[-2] in labels:
            if before[-1] == "nor":
                return True
            del before[-2:]
            continue
        return bool(before) and before[-1] in NEGATORS


def _determiner_no(text: str, end: int, question_words: frozenset[str]) -> bool:
    """Whether the "no" ending at `end` is the determiner ("no idea", "no one"), not the answer."""
    following = re.match(r" (\w+)", text[end:])
    return following is not None and following[1] not in CLAUSE_STARTERS | question_words


@cache
def _label_pattern(labels: tuple[str, ...], whole_word: bool) -> re.Pattern[str]:
    """One regex finding every label of `labels` (longest first), as a whole word or anywhere."""
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)" if whole_word else alternatives)


def _mentions(
    text: str, labels: tuple[str, ...], rules: frozenset[str], question_words: frozenset[str]
) -> list[tuple[int, str]]:
    """(position, label) of each mention of a label in `text` that counts as given, under `rules`."""
    found = []
    if "whole-word" in rules:
        matches = [(m.start(), m.end(), m.group(0)) for m in _label_pattern(labels, True).finditer(text)]
    else:  # substring search, as the authors: each label on its own ("none" also finds "one")
        matches = [(m.start(), m.end(), label) for label in labels for m in re.finditer(re.escape(label), text)]
    for start, end, label in matches:
        if "negation" in rules:
            inside_word = bool(re.match(r"\w", text[end:]))
            if _negated(text, start, labels) or (
                label == "no" and not inside_word and _determiner_no(text, end, question_words)
            ):
                continue
        found.append((start, label))
    return found


_PATH_END = re.compile(r"\b(?:since|because|as|which|where|given|so)\b")
"""Where a qa19 path ends and its explanation starts ("go south, since the bathroom is south of ...")."""


def _path(text: str) -> set[str]:
    """The qa19 path `text` names: its compass steps in order, up to an explanation (rule `path`)."""
    text = _PATH_END.split(text, maxsplit=1)[0]
    path = ",".join(COMPASS[word] for word in _WORDS.findall(text) if word in COMPASS)
    return {path} if path else set()


# ---------------------------------------------------------------- rule `polarity`: yes/no from a statement


def _alternation(phrases: Iterable[str]) -> str:
    """A regex alternation of normalised `phrases`, longest first."""
    return "|".join(re.escape(normalize_answer(p)) for p in sorted(set(phrases), key=len, reverse=True))


_PLACE_WORDS = _alternation(
    [*words.ROOMS, *words.PLACES, *words.WIDE_ROOMS, *words.WIDE_PLACES]
    + [place + "s" for place in (*words.ROOMS, *words.PLACES)]
)
_PERSON_WORDS = frozenset(name.lower() for name in (*words.PEOPLE, *words.GIVERS, *words.VISITORS, *words.WIDE_NAMES))
# the qa17 shapes and positions and the qa18 things, as regex alternations (also `predictions.QUESTION_FORMS`)
SHAPE_WORDS = _alternation(words.SHAPES)
POSITION_WORDS = _alternation(words.POSITIONS)
CONTAINER_WORDS = _alternation(words.CONTAINERS)
_PLACE = re.compile(rf"\b(?:{_PLACE_WORDS})\b")
_EITHER_PLACE = re.compile(rf"\beither\b.*{_PLACE.pattern}.*\bor\b.*{_PLACE.pattern}")
_IS_IN_QUESTION = re.compile(rf"is (\w+) in ({_PLACE_WORDS})")
_POSITION_QUESTION = re.compile(rf"is ({SHAPE_WORDS}) ({POSITION_WORDS}) ({SHAPE_WORDS})")
_BIGGER_QUESTION = re.compile(rf"is ({CONTAINER_WORDS}) bigger than ({CONTAINER_WORDS})")
_FIT_QUESTION = re.compile(rf"does ({CONTAINER_WORDS}) fit in ({CONTAINER_WORDS})")
_CLAUSE_BREAK = re.compile(r",|;|\b(?:but|and|so|because|since|while|whereas|then)\b")
_NEGATION = re.compile(r"\b(?:not|no longer|never|no)\b")
_SMALLER = r"(?:fits?|fitting) (?:in|inside|into)|is smaller than|smaller than"
_BIGGER = r"is bigger than|is larger than|bigger than|larger than"
_SIZE_STATEMENT = re.compile(
    rf"({CONTAINER_WORDS})\b(.*?)\b({_SMALLER}|{_BIGGER}|fit)\b(?: (?:in|inside|into|than))? ({CONTAINER_WORDS})"
)
_POSITION_STATEMENT = re.compile(rf"({SHAPE_WORDS})\b(.*?)\b({POSITION_WORDS}) ({SHAPE_WORDS})")
_OPPOSITE_POSITION = {normalize_answer(k): normalize_answer(v) for k, v in words.OPPOSITE_POSITION.items()}


HEDGE = re.compile(
    r"\bno (?:information|mention|indication|evidence)\b|\b(?:not enough|insufficient) information\b"
    r"|\bdoes not (?:provide|mention|say|state|specify|indicate|tell|give|contain)\b"
    r"|\bnot (?:mentioned|specified|stated|provided|given|indicated)\b"
)
"""A statement that the text does not tell ("There is no information about Daniel being in the kitchen").

It has no polarity (it is not "no"); in qa10 its phrases are forms of "maybe" (`WORD_FORMS`).
"""


def _polarity(text: str, question: str) -> str | None:
    """ "yes", "no" or "maybe" as the statement `text` answers the yes/no `question` (both normalised), or None.

    None for a hedge (`HEDGE`): "no information about Daniel being in the kitchen" is not "no".
    """
    if HEDGE.search(text):
        return None
    if m := _IS_IN_QUESTION.fullmatch(question):
        return _place_polarity(text, m[1], normalize_answer(m[2]))
    if m := _POSITION_QUESTION.fullmatch(question):
        return _position_polarity(text, m[1], m[2], m[3])
    if m := _BIGGER_QUESTION.fullmatch(question):  # "is A bigger than B": yes when B < A
        return _size_polarity(text, smaller=m[2], bigger=m[1])
    if m := _FIT_QUESTION.fullmatch(question):  # "does A fit in B": yes when A < B
        return _size_polarity(text, smaller=m[1], bigger=m[2])
    return None


def _place_polarity(text: str, person: str, place: str) -> str | None:
    """Is `person` at `place`, by a statement naming places (qa6, qa9, qa10)."""
    if _PERSON_WORDS & set(_WORDS.findall(text)) - {person}:
        return None  # a statement about someone else
    if _EITHER_PLACE.search(text):
        return "maybe"
    asked, elsewhere = [], False  # negated? for each mention of the asked place; another place affirmed?
    for clause in _CLAUSE_BREAK.split(text):
        for m in _PLACE.finditer(clause):
            negated = bool(_NEGATION.search(clause[: m.start()]))
            if m[0].rstrip("s") == place.rstrip("s"):
                asked.append(negated)
            elif not negated:
                elsewhere = True
    if any(asked):
        return "no"
    if asked:
        return None if elsewhere else "yes"
    return "no" if elsewhere else None


def _position_polarity(text: str, shape: str, position: str, other: str) -> str | None:
    """Is `shape` at `position` of `other`, by a statement placing the two shapes (qa17)."""
    for m in _POSITION_STATEMENT.finditer(text):
        first, between, said, second = m[1], m[2], m[3], m[4]
        if {first, second} != {shape, other}:
            continue
        if first == other:  # "B is below A" says "A is above B"
            said = _OPPOSITE_POSITION[said]
        agrees = said == position
        if said not in (position, _OPPOSITE_POSITION[position]):
            return None  # another axis says nothing
        if _NEGATION.search(between):
            return "no" if agrees else None
        return "yes" if agrees else "no"
    return None


def _size_polarity(text: str, smaller: str, bigger: str) -> str | None:
    """Is `smaller` smaller than `bigger`, by a statement comparing the two things (qa18)."""
    for m in _SIZE_STATEMENT.finditer(text):
        first, between, said, second = m[1], m[2], m[3], m[4]
        if {first, second} != {smaller, bigger}:
            continue
        first_smaller = not re.fullmatch(_BIGGER, said)
        agrees = first_smaller == (first == smaller)
        if _NEGATION.search(between) or _NEGATION.search(said):
            return "no" if agrees else "yes"
        return "yes" if agrees else "no"
    return None


# ---------------------------------------------------------------- rule `role`: the asked part of a statement

_GIVE = r"(?:gave|handed|passed|gives|hands|passes|has given|had given|give)"
_GIVE_STATEMENTS = (  # each: a regex and which of its groups is the giver, the object, the receiver
    (re.compile(rf"(\w+) {_GIVE} (\w+) to (\w+)"), (1, 2, 3)),
    (re.compile(r"(\w+) received (\w+) from (\w+)"), (3, 2, 1)),
    (re.compile(r"(\w+) (?:was|were) (?:given|handed|passed) to (\w+) by (\w+)"), (3, 1, 2)),
    (re.compile(rf"(\w+) {_GIVE} (\w+) (\w+)"), (1, 3, 2)),
)
_GIVE_QUESTIONS = (  # the question forms of qa5: what they tell (named groups) and which part they ask for
    (re.compile(r"who gave (?P<thing>\w+)(?: to (?P<receiver>\w+))?"), "giver"),
    (re.compile(r"who received (?P<thing>\w+)(?: from (?P<giver>\w+))?"), "receiver"),
    (re.compile(r"who did (?P<giver>\w+) give (?P<thing>\w+) to"), "receiver"),
    (re.compile(r"what did (?P<giver>\w+) give to (?P<receiver>\w+)"), "thing"),
)
_BARE_ANSWER = frozenset({"it", "was", "is", "did", "by", "to", "from", "he", "she", "answer", "response"})
"""Words a bare qa5 answer may hold besides its label ("It was Mary.", "Answer: Bill"); any other word makes it a
sentence, which only the `role` rule reads."""
_AFRAID = re.compile(r"\b(?:afraid of|scared of|frightened of|fears?) (\w+)")


def _role(text: str, question: str, labels: tuple[str, ...], names: frozenset[str]) -> set[str] | None:
    """The label in the part of a statement in `text` that `question` asks for (qa5, qa15), or None.

    A give statement answers a qa5 question only when it agrees with what the question tells
    ("What did Fred give to Mary?" is not answered by "Mary gave the milk to Bill"): one that
    disagrees gives the empty set (the reader abstains: `statement`); a receiver followed by another name ("to Fred, Mary") is no statement.
    """
    if re.fullmatch(r"what is \w+ afraid of", question):
        fears = [m for m in _AFRAID.finditer(text) if m[1] in labels and not _negated(text, m.start(), labels)]
        return {fears[-1][1]} if fears else None
    asked = next(((m, part) for pattern, part in _GIVE_QUESTIONS if (m := pattern.fullmatch(question))), None)
    if asked is None:
        return None
    told = {key: value for key, value in asked[0].groupdict().items() if value}
    parsed = False
    for pattern, slots in _GIVE_STATEMENTS:
        for m in pattern.finditer(text):
            statement = dict(zip(("giver", "thing", "receiver"), (m[slot] for slot in slots)))
            if not (
                statement["giver"] in names
                and statement["receiver"] in names
                and statement["thing"] in labels
                and statement["thing"] not in names
            ):
                continue
            if _NEGATION.search(text[: m.start()].rsplit(",", 1)[-1]) or re.match(
                rf"(?:,| and) (?:{'|'.join(names)})\b", text[m.end() :]
            ):
                continue
            parsed = True
            if all(statement[key] == value for key, value in told.items()):
                return {statement[asked[1]]}
    return set() if parsed else None


# ---------------------------------------------------------------- the corrected reader

_LIST_QUESTION = re.compile(r"what is \w+ carrying")
"""qa8's question: its answer may name several labels."""


def asked_labels(question: str, labels: tuple[str, ...]) -> tuple[str, ...]:
    """The labels of the kind the normalised `question` asks for.

    qa5 mixes people and objects: "who ..." asks for a person (a label written with a capital),
    "what ..." for an object. qa20 mixes places and motives: "why ..." asks for a motive, any
    other question ("where will ... go") for a place, so "to quench his thirst" after the place
    adds no label.
    """
    names = {label for label in labels if label[:1].isupper()}
    if names and len(names) < len(labels):
        if question.startswith("who "):
            return tuple(sorted(names))
        if question.startswith("what "):
            return tuple(sorted(set(labels) - names))
    motives = set(labels) & words.MOTIVES.keys()
    if motives and len(motives) < len(labels):
        return tuple(sorted(motives if question.startswith("why ") else set(labels) - motives))
    return labels


def _found(
    text: str, question: str, labels: tuple[str, ...], names: frozenset[str], rules: frozenset[str]
) -> tuple[set[str] | None, bool]:
    """(the labels the normalised answer `text` gives for the normalised `question`, whether a rule settled it).

    Labels the question names do not count (the authors' rule): "Where was the apple before the
    kitchen?" makes "kitchen" no answer. "Settled": a statement rule (`role`, `polarity`) read
    the answer. None: a qa5 statement that answers another question (`role`; the reader abstains).
    """
    question_words = frozenset(_WORDS.findall(question))
    if "word-form" in rules:
        text = _apply_forms(text, labels)
        question = _apply_forms(question, labels)
    if "path" in rules and all("," in label for label in labels):
        return _path(text) - _path(question), False
    in_question = {label for _, label in _mentions(question, labels, rules - {"negation"}, question_words)}
    if "role" in rules and (role := _role(text, question, labels, names)) is not None:
        return (role - in_question if role else None), True
    if "role" in rules and any(pattern.fullmatch(question) for pattern, _ in _GIVE_QUESTIONS):
        if set(_WORDS.findall(text)) - set(labels) - _BARE_ANSWER:
            return None, False  # a sentence that is no give statement ("Fred picked up the milk there")
    mentioned = {label for _, label in _mentions(text, labels, rules, question_words)}
    found = mentioned - in_question
    if not found and mentioned:
        return found, True  # names only what the question names: an answer, and a wrong one
    if "polarity" in rules and {"yes", "no"} <= set(labels) and not found & {"yes", "no", "maybe"}:
        polarity = _polarity(text, question)
        if polarity in labels:
            return {polarity}, True
    return found, False


class Reading(NamedTuple):
    """What the corrected reader made of one output."""

    answer: str
    """The part of the output read as the answer, in its own case."""
    labels: frozenset[str] | None
    """The answer's labels (empty: it names none, a wrong answer); None when the reader abstained."""
    abstained: str = ""
    """Why the reader abstained: a key of `ABSTENTIONS`, or ""."""


@lru_cache(maxsize=1 << 16)
def read(output: str, question: str, labels: tuple[str, ...], rules: frozenset[str] = _ALL_RULES) -> Reading:
    """The corrected reader with only `rules` (a subset of `RULES`) on: the labels `output` answers, or an abstention.

    Cached: prediction files repeat the same answer to the same question many times.
    """
    question = normalize_answer(question).strip(" ,")
    asked = frozenset(label.lower() for label in asked_labels(question, labels))
    names = frozenset(label.lower() for label in labels if label[:1].isupper())
    labels = tuple(sorted({label.lower() for label in labels}))
    path = all("," in label for label in labels)  # qa19: any path read counts, a label or not ("s" is one step)
    found = Candidates(first_sentence(output)) if "answer" not in rules else find_answer(output)
    if found.abstained:
        return Reading(found.answer, None, found.abstained)
    if "answer" in rules and parallel_candidates(output, found.answer, question, tuple(sorted(asked))):
        return Reading(found.answer, None, "options")

    def labels_of(candidate: str) -> tuple[frozenset[str] | None, bool]:
        tail, whole = _trimmed(candidate) if "answer" in rules else (candidate, candidate)
        labelled, settled = _found(normalize_answer(tail), question, labels, names, rules)
        if labelled == set() and not settled and tail != whole:
            labelled, settled = _found(normalize_answer(whole), question, labels, names, rules)
        if labelled is None:
            return None, settled
        return (frozenset(labelled) if path else frozenset(labelled) & asked), settled

    answer, settled = labels_of(found.answer)
    if answer is None:
        return Reading(found.answer, None, "statement")
    readings = {reading for reading, _ in map(labels_of, found.others) if reading}
    if answer:
        readings.add(answer)
    if len(readings) > 1:
        return Reading(found.answer, None, "conflict")
    answer = next(iter(readings), answer)
    if len(answer) > 1 and not _LIST_QUESTION.fullmatch(question):
        return Reading(found.answer, None, "several")
    if answer and "answer" in rules and _QUOTE.search(found.answer):
        return Reading(found.answer, None, "quote")
    if answer and "answer" in rules and _INTERJECTION.match(found.answer):
        return Reading(found.answer, None, "exclamation")
    if not answer and not settled and _named_anywhere(normalize_answer(output), question, tuple(sorted(asked)), rules):
        return Reading(found.answer, None, "elsewhere")
    return Reading(found.answer, answer)


def _named_anywhere(text: str, question: str, labels: tuple[str, ...], rules: frozenset[str]) -> bool:
    """Whether the normalised `text` names a label (or a form, or a compass step) the question does not name."""
    if all("," in label for label in labels):
        return bool(set(_WORDS.findall(text)) & COMPASS.keys())
    question_words = frozenset(_WORDS.findall(question))
    in_question = {
        label for _, label in _mentions(_apply_forms(question, labels), labels, rules - {"negation"}, question_words)
    }
    return bool(
        {label for _, label in _mentions(_apply_forms(text, labels), labels, rules, question_words)} - in_question
    )


def _verdict(target: str, answer: frozenset[str], labels: Iterable[str], rules: frozenset[str]) -> bool:
    """Whether the labels read are exactly the target (a list target as a set)."""
    target = target.lower()
    if "list" in rules:
        target = re.sub(r"\s*,\s*", ",", target.strip())
    if "," in target and target not in {label.lower() for label in labels}:
        return answer == set(target.split(","))
    return answer == {target}


def _corrected(target: str, output: str, question: str, labels: tuple[str, ...], rules: frozenset[str]) -> bool:
    """The corrected verdict with only `rules` on: the reader's where it reads an answer, else `acc`'s."""
    reading = read(output, question, labels, rules)
    if reading.labels is None:
        return official_correct(target, output, question, labels)
    return _verdict(target, reading.labels, labels, rules)


def corrected_correct(target: str, output: str, question: str, labels: Iterable[str]) -> bool:
    """`acc_corrected`: the corrected reader's verdict where it reads an answer with confidence, else the authors'.

    The answer is found in the output (`find_answer`) and it and the question are normalised
    (`normalize_answer`); forms in `WORD_FORMS` become their labels; labels are found as whole
    words, a negated mention does not count, a qa19 answer is read as its sequence of compass
    steps, a yes/no question answered by a statement gets its polarity, a question about one part
    of a statement gets that part. Then the authors' rule: labels also in the question are
    dropped, and the target must be exactly what remains (a list target as a set, a path in
    order). Where the reader abstains (`ABSTENTIONS`) the verdict is `official_correct`'s.
    """
    return _corrected(target, output, question, tuple(labels), _ALL_RULES)


def deciding_rule(target: str, output: str, question: str, labels: Iterable[str]) -> str:
    """Which of `RULES` decides the corrected verdict on one answer, found by switching rules off.

    "a": switching off `a` alone changes the verdict (several such: "a+b", each is needed).
    "a|b": no single rule is needed, but `a` (or `b`) alone on top of the bare normalised check
    gives the verdict. "normalize": the bare normalised check already gives it. "combined": only
    several rules together give it.
    Meant for answers where `acc` and `acc_corrected` disagree (`audit_rows`).
    """
    labels = tuple(labels)
    verdict = _corrected(target, output, question, labels, _ALL_RULES)
    needed = [rule for rule in RULES if _corrected(target, output, question, labels, _ALL_RULES - {rule}) != verdict]
    if needed:
        return "+".join(needed)
    if _corrected(target, output, question, labels, frozenset()) == verdict:
        return "normalize"
    alone = [rule for rule in RULES if _corrected(target, output, question, labels, frozenset({rule})) == verdict]
    return "|".join(alone) or "combined"


def check(qa: str, target: str, output: str, question: str, labels: tuple[str, ...] | None = None) -> Check:
    """Both verdicts on one answer of task `qa` (`labels`: the task's label set, widened for simulated facts)."""
    labels = labels or labels_for(qa)
    acc = official_correct(target, output, question, labels)
    reading = read(output, question, labels)
    corrected = acc if reading.labels is None else _verdict(target, reading.labels, labels, _ALL_RULES)
    return Check(acc=acc, acc_corrected=corrected, abstained=reading.labels is None)


def corrected_answer(output: str, question: str, labels: Iterable[str]) -> str:
    """The part of `output` that `acc_corrected` reads as the answer (`find_answer`), in its own case."""
    return read(output, question, tuple(labels)).answer

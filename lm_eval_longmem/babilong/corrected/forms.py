"""The statement forms of each bAbI question, as data: what `statements.read_statement` matches.

Each entry is a question form (a regex over the question as `labels.normalize` writes it), the statement forms
that answer it (whole sentences) and the reader that turns a match into an answer (`statements.py`).
"""

from __future__ import annotations

import re
from functools import partial

from lm_eval_longmem.babilong.corrected.labels import Vocabulary
from lm_eval_longmem.babilong.corrected.statements import (
    CONTAINER,
    DIRECTION,
    FIT,
    POSITION,
    SHAPE,
    SIZE,
    Form,
    Statement,
    read_count,
    read_give,
    read_motive,
    read_paired,
    read_path,
    read_polarity,
    read_relation,
    read_slot,
    templates,
)

FORMS: tuple[Form, ...] = (
    Form(  # qa1, qa2, qa11-qa13
        re.compile(r"where is (?P<x>\w+)"),
        templates(
            r"most recent location of {x} is (?:in |at )?{a}",
            r"{x} is (?:currently |now |still |last )?(?:located |found |seen )?(?:in|at|inside) {a}",
            r"{x} (?:went|moved|travelled|traveled|journeyed|went back|has gone|has moved) to {a}",
            r"{x} location is {a}",
        ),
        read_slot,
    ),
    Form(  # qa3, qa14
        re.compile(r"where was (?P<x>\w+) before (?P<r>\w+)"),
        templates(
            r"before (?:being in )?{r},? {x} was (?:in|at) {a}",
            r"{x} was (?:in|at) {a},? before {r}",
            r"{x} was (?:in|at) {a} before (?:it |he |she )?(?:was |went )?(?:in |at |to )?{r}",
            r"{x} was (?:in|at) {a}",
        ),
        read_slot,
    ),
    Form(  # qa4: "what is north of the garden"
        re.compile(rf"what is (?P<d>{DIRECTION}) of (?P<r>\w+)"),
        templates(r"{x} is {d} of {a}"),
        partial(read_relation, "of"),
    ),
    Form(  # qa4: "what is the garden north of"
        re.compile(rf"what is (?P<r>\w+) (?P<d>{DIRECTION}) of"),
        templates(r"{x} is {d} of {a}"),
        partial(read_relation, "is"),
    ),
    *(
        Form(  # qa5: the four question forms, each told parts and the asked one
            re.compile(question),
            templates(
                r"(?P<g>\w+) (?:gave|handed|passed|has given|had given) (?P<t>\w+) to (?P<v>\w+)",
                r"(?P<g>\w+) (?:gave|handed|passed) (?P<v>\w+) (?P<t>\w+)",
                r"(?P<v>\w+) received (?P<t>\w+) from (?P<g>\w+)",
                r"(?P<t>\w+) was (?:given|handed|passed) to (?P<v>\w+) by (?P<g>\w+)",
                r"(?P<t>\w+) was (?:given|handed|passed) (?:from|by) (?P<g>\w+) to (?P<v>\w+)",
                r"(?P<t>\w+) was received by (?P<v>\w+)",
                r"(?P<v>\w+) received (?P<t>\w+)",
                r"(?P<g>\w+) (?:gave|handed|passed) (?P<t>\w+)",
            ),
            partial(read_give, asked),
        )
        for question, asked in (
            (r"who gave (?P<t>\w+)(?: to (?P<v>\w+))?", "g"),
            (r"who received (?P<t>\w+)(?: from (?P<g>\w+))?", "v"),
            (r"who did (?P<g>\w+) give (?P<t>\w+) to", "v"),
            (r"what did (?P<g>\w+) give to (?P<v>\w+)", "t"),
        )
    ),
    Form(  # qa6, qa9, qa10
        re.compile(r"is (?P<x>\w+) in (?P<a>\w+)"),
        templates(r"{x} is {neg}(?:currently |now |still )?(?:located )?(?:in|at) {a}"),
        read_polarity,
    ),
    Form(  # qa7
        re.compile(r"how many objects is (?P<x>\w+) carrying"),
        templates(
            r"{x} is carrying (?P<a>\w+)(?: objects?| items?| things?)?",
            r"{x} is (?P<neg>not )carrying anything",
        ),
        read_count,
    ),
    Form(  # qa8
        re.compile(r"what is (?P<x>\w+) carrying"),
        templates(r"{x} is carrying (?P<a>\w+(?:(?:,| and)+ \w+)*)", r"{x} is (?P<neg>not )carrying anything"),
        read_count,
    ),
    Form(  # qa15
        re.compile(r"what is (?P<x>\w+) afraid of"),
        templates(r"{x} is (?:afraid|scared|frightened) of {a}"),
        read_slot,
    ),
    Form(  # qa16
        re.compile(r"what colou?r is (?P<x>\w+)"),
        templates(r"{x} is {a}", r"colou?r of {x} is {a}", r"{x} colou?r is {a}", r"{x} is colou?r {a}"),
        read_slot,
    ),
    Form(  # qa17
        re.compile(rf"is (?P<x>{SHAPE}) (?P<rel>{POSITION}) (?P<a>{SHAPE})"),
        templates(rf"(?P<x>{SHAPE}) is {{neg}}(?P<rel>{POSITION}) (?P<a>{SHAPE})"),
        read_paired,
    ),
    Form(  # qa18
        re.compile(rf"is (?P<x>{CONTAINER}) (?P<rel>bigger than) (?P<a>{CONTAINER})"),
        templates(
            rf"(?P<x>{CONTAINER}) is {{neg}}{SIZE} (?P<a>{CONTAINER})",
            rf"(?P<x>{CONTAINER}) (?P<neg>does not )?{FIT} (?P<a>{CONTAINER})",
        ),
        read_paired,
    ),
    Form(  # qa18
        re.compile(rf"does (?P<x>{CONTAINER}) (?P<rel>fit in) (?P<a>{CONTAINER})"),
        templates(
            rf"(?P<x>{CONTAINER}) (?P<neg>does not )?{FIT} (?P<a>{CONTAINER})",
            rf"(?P<x>{CONTAINER}) is {{neg}}{SIZE} (?P<a>{CONTAINER})",
        ),
        read_paired,
    ),
    Form(  # qa19
        re.compile(r"how do you go from (?P<x>\w+) to (?P<a>\w+)"),
        templates(
            r"(?:you |one )?(?:should |can |must |need to |would )?(?:go|travel|walk|move|head) {d},?(?: and| then)*"
            rf" (?:go |travel |walk |move |head )?(?P<d2>{DIRECTION})"
        ),
        read_path,
    ),
    Form(  # qa20: where
        re.compile(r"where will (?P<x>\w+) go"),
        templates(r"{x} will (?:go|probably go) to {a}", r"{x} will go {a}"),
        read_slot,
    ),
    Form(  # qa20: why
        re.compile(r"why did (?P<x>\w+) (?:go to|get) (?P<r>\w+)"),
        templates(
            r"(?:because )?{x} (?:was|is|felt|is feeling|was feeling) {a}",
            r"{x} (?:went to|got) (?P<r>\w+) because (?:he|she|\\w+) (?:was|is|felt) {a}",
        ),
        read_motive,
    ),
)
"""Each bAbI question form and the statement forms that answer it (whole sentences, after `normalize`)."""


def read_statement(sentence: str, question: str, vocab: Vocabulary) -> Statement | None:
    """What the normalised `sentence` answers to the normalised `question`, when it is a listed statement."""
    sentence = sentence.strip(" ,")
    for form in FORMS:
        asked = form.question.fullmatch(question)
        if asked is None:
            continue
        for pattern in form.statements:
            said = pattern.fullmatch(sentence)
            if said:
                groups = {k: v for k, v in said.groupdict().items() if v is not None}
                return form.answer({k: v for k, v in asked.groupdict().items() if v is not None}, groups, vocab)
        return None
    return None


NO_ANSWER = re.compile(
    r"^(?:it |this |that |which )?(?:is |has |has been |was )?(?:not (?:explicitly |directly |clearly )?"
    r"(?:stated|mentioned|specified|known|clear|given|indicated|provided|said)|cannot be (?:determined|known|said|"
    r"inferred|answered|concluded)|impossible to (?:tell|say|know|determine)|not possible to (?:tell|say|know|"
    r"determine)|unknown|undetermined)\b"
    r"|^(?:there is )?no (?:information|mention|indication|evidence)\b"
    r"|^(?:story|context|text|passage|information|facts?) (?:does|do) not (?:say|mention|state|specify|provide|"
    r"indicate|tell|give|contain)\b"
    r"|^(?:i )?cannot (?:tell|say|determine|know|answer)\b"
)
"""A statement that the story does not settle the question ("It cannot be determined whether ...", "It is not
stated ...", "There is no information about ...", "The story does not say ...")."""

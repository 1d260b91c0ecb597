"""Grading a reply against a probe's expected answer: an artifact by exact match after
normalising whitespace and quotes; an open question by a judge model with a rubric when one
is given (`judged`), else by its key terms (`is_correct`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..messages import Msg
from ..model import ChatModel
from ._probes import Probe, normalised

__all__ = ["Verdict", "is_correct", "judged"]

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]|[A-Za-z0-9]")
_COMMON = frozenset(
    {
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "what",
        "which",
        "were",
        "was",
        "are",
        "you",
        "your",
        "have",
        "has",
        "had",
        "not",
        "but",
        "into",
        "out",
        "its",
        "it's",
        "then",
        "than",
        "when",
        "where",
        "who",
        "why",
        "how",
        "all",
        "any",
        "one",
        "two",
        "can",
        "will",
        "just",
    }
)
_SHARE = 0.5
"""An open answer counts when at least this share of the expected answer's key terms is in
the reply."""


def _key_terms(text: str) -> set[str]:
    words = {w.lower() for w in _WORD.findall(text)}
    terms = {w for w in words if len(w) >= 4 and w not in _COMMON}
    return terms or {w for w in words if w not in _COMMON}


def is_correct(probe: Probe, reply: str) -> bool:
    """Whether `reply` answers `probe`.

    An artifact's expected answer must be the whole reply or stand in it as a whole (not
    inside a longer word or number), both normalised (`normalised`); an open question's reply
    must hold at least half of the expected answer's key terms (words of four or more
    characters, common words left out).
    """
    if probe.exact:
        expected, given = normalised(probe.answer), normalised(reply)
        if not expected:
            return False
        if expected == given:
            return True
        # Whole: not a piece of a longer word, number, id or path (a period may end it).
        pattern = r"(?<![\w./-])" + re.escape(expected) + r"(?![\w/-]|\.\w)"
        return re.search(pattern, given) is not None
    terms = _key_terms(probe.answer)
    if not terms:
        return False
    found = _key_terms(reply)
    return len(terms & found) >= _SHARE * len(terms)


_RUBRIC = """\
You are grading one answer given by an AI agent about its own earlier work. The agent was \
asked a question whose answer had been moved out of its context; the reference answer below \
is what its session's record holds.

Question: {question}

Reference answer (from the record): {answer}

The agent's answer: {reply}

Grade it by these rules:
- CORRECT when it gives the same fact as the reference: the same task, the same decision or \
the same last step, in any words. It may be shorter, but what it names (a file, a command, a \
tool, a number) must match the reference and must not contradict it.
- INCORRECT when it names something else, adds a claim the reference contradicts, answers a \
different question, or says it does not know.

Reply with one word on the first line, CORRECT or INCORRECT, then one sentence saying why."""

_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b", re.IGNORECASE)


@dataclass
class Verdict:
    """A judge model's grade of one reply to an open probe.

    Attributes:
        correct: whether the judge said CORRECT (a reply it did not word as asked is not).
        text: the judge's reply, kept whole in the report.
        input_tokens: the prompt tokens the provider reported.
        output_tokens: the reply tokens.
    """

    correct: bool
    text: str
    input_tokens: int
    output_tokens: int


async def judged(judge: ChatModel, probe: Probe, reply: str) -> Verdict:
    """Ask `judge` whether `reply` answers the open probe `probe`, by the rubric above (the
    question, the reference answer from the record, the reply).

    Raises:
        ModelError: the call failed.
    """
    prompt = _RUBRIC.format(question=probe.question, answer=probe.answer, reply=reply.strip())
    response = await judge.generate([Msg(role="user", content=prompt)])
    text = response.message.text.strip()
    found = _VERDICT.search(text)
    usage = response.usage
    return Verdict(
        found is not None and found.group(1).upper() == "CORRECT",
        text,
        usage.input_tokens if usage is not None else 0,
        usage.output_tokens if usage is not None else 0,
    )

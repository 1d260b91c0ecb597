"""Grading a reply against a probe's expected answer: an artifact by exact match after
normalising whitespace and quotes, an open question by its key terms (no judge model yet)."""

from __future__ import annotations

import re

from ._probes import Probe, normalised

__all__ = ["is_correct"]

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

"""Grading a reply: artifacts by exact match after normalising whitespace and quotes."""

from __future__ import annotations

from ctxoffload.eval._grade import is_correct
from ctxoffload.eval._probes import Probe


def _probe(answer: str, *, exact: bool = True) -> Probe:
    return Probe(1, 5, "id" if exact else "state", "?", answer, "context.jsonl:1", exact)


def test_an_artifact_matches_with_other_quotes_and_spaces() -> None:
    probe = _probe("grep -n 'ERROR'  app.log")
    assert is_correct(probe, '`grep -n "ERROR" app.log`')
    assert is_correct(probe, "The command was grep -n ERROR app.log.")


def test_an_artifact_inside_a_longer_one_does_not_match() -> None:
    assert not is_correct(_probe("ORD-5821"), "ORD-58213")
    assert not is_correct(_probe("1"), "exit status 12")
    assert not is_correct(_probe("/srv/jobs"), "/srv/jobs/nightly")
    assert is_correct(_probe("1"), "1")


def test_an_open_answer_needs_half_its_key_terms() -> None:
    probe = _probe("Check the volume quotas of the exports volume.", exact=False)
    assert is_correct(probe, "I was checking the volume quotas.")
    assert not is_correct(probe, "Reading logs.")

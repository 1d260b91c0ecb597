"""A pattern is compiled as it always was where RE2 runs it, without Python's `re`."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload._search.matcher import _escape, as_searched, compile_matcher
from helpers import examples


def test_every_ascii_character_is_escaped_as_re_escape_escapes_it() -> None:
    for code in range(0x80):
        assert _escape(chr(code)) == re.escape(chr(code))


@settings(max_examples=examples(300))
@given(st.text(), st.booleans())
def test_a_fixed_string_is_escaped_as_re_escape_escapes_it(text: str, ignore_case: bool) -> None:
    """A -F string is escaped without `re` (`matcher._escape`, whose import with `enum` costs
    ~6 ms of a `ctxoffload grep`), character for character as `re.escape` does, so RE2 is
    given the same pattern it always was, and it finds the string."""
    assert _escape(text) == re.escape(text)
    needle = text.encode("utf-8", "surrogateescape")
    if needle and b"\n" not in needle:
        line = b"x" + needle + b"y"
        matcher = compile_matcher(text, fixed=True, ignore_case=ignore_case, escaped_bytes=True)
        assert matcher.matches_line(line)


_LINES = [
    b"",
    b"hello",
    b"say hello\r",
    b"x.y and xzy",
    b'"q\\ quoted',
    b"caf\xc3\xa9",
    b"\xff hello",
]


@pytest.mark.parametrize(
    ("pattern", "fixed"), [("hello", False), ("say hel", False), ("x.y", True), ('"q\\', True)]
)
def test_a_pattern_that_is_one_string_is_judged_as_its_engine_judges_it(
    pattern: str, fixed: bool
) -> None:
    """A pattern that is its literal alone is judged by `bytes.find`: the same lines, and
    the same place in each, as the compiled pattern finds."""
    matcher = compile_matcher(pattern, fixed=fixed)
    assert matcher.is_literal
    for line in _LINES:
        found = matcher._compiled.search(line)
        assert matcher.matches_line(line) == (found is not None)
        assert matcher._judge(line, 0) == (None if found is None else found.start())


@pytest.mark.parametrize(
    ("pattern", "options"),
    [("hel+o", {}), ("x.y", {}), ("hello", {"ignore_case": True}), ("café", {"fixed": True})],
)
def test_a_pattern_that_is_more_than_a_string_is_judged_by_its_engine(
    pattern: str, options: dict[str, bool]
) -> None:
    assert not compile_matcher(pattern, **options).is_literal


@settings(max_examples=examples(300))
@given(
    text=st.text(alphabet=st.sampled_from(["h", "e", "l", "o", " ", "é", "\ufffd", "\ud800"])),
    pattern=st.sampled_from(["hello", "lo", "o h", "hel_lo"]),
)
def test_a_pattern_that_is_one_string_is_found_in_text_where_its_engine_finds_it(
    text: str, pattern: str
) -> None:
    """A line of decoded text is judged by the pattern's literal found in the text itself,
    as its engine judges the text's bytes (`as_searched`: a lone surrogate as U+FFFD)."""
    matcher = compile_matcher(pattern)
    assert matcher.is_literal
    found = matcher._compiled.search(as_searched(text))
    assert matcher.matches_text(text) == (found is not None)

"""A log line passed over on its bytes (`raw_line_filter`) is one that decoding and judging
would not have found: `search_log` gives exactly the lines that judging every line gives, for
lines written to make the filter wrong (a literal that only JSON unescaping, a rendering of
the message or Python's spelling of a value brings into the text)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload._search.log import log_line_judge, raw_line_filter, search_log
from ctxoffload._search.matcher import compile_matcher
from helpers import examples


def judged_one_by_one(lines: list[bytes], pattern: str, context: int = 0) -> list[tuple]:
    """What `search_log` gives when each line is decoded and judged, none passed over."""
    matcher = compile_matcher(pattern)
    judge = log_line_judge(matcher)
    found = []
    for number, raw in enumerate(lines, start=1):
        shown, hits = judge(raw.decode("utf-8", "replace"))
        shown_to = -1
        for i in hits:
            for j in range(max(i - context, shown_to + 1), min(i + context, len(shown) - 1) + 1):
                text = shown[j]
                found.append(
                    (number, text.encode("utf-8", "surrogatepass"), matcher.matches_text(text))
                )
            shown_to = min(i + context, len(shown) - 1)
    return found


# (pattern, a raw line whose shown text holds the pattern's literal where its bytes do not)
HOSTILE = [
    ("hello", rb'{"role":"user","content":"\u0068ello"}'),  # a letter written as \u escape
    ("hello", rb'{"role":"user","content":"say\nhello"}'.replace(b"\n", b"\\n")),
    ("True", rb'{"role":"user","content":[{"type":"text","text":true}]}'),
    ("None", rb'{"role":"assistant","content":[{"type":"tool_use","name":null,"input":{}}]}'),
    ("tool", rb'{"role":"assistant","content":[{"type":"tool_use","name":"f","id":"c1"}]}'),
    ("call", rb'{"role":"assistant","content":[{"type":"tool_use","name":"f","id":"c1"}]}'),
    ("thinking", rb'{"role":"assistant","content":[{"type":"thinking","thinking":"x"}]}'),
    ("amp", rb'{"role":"user","content":[{"type":"image","source":{"url":"/a&b"}}]}'),
    ("Infinity", rb'{"role":"assistant","content":[{"type":"tool_use","input":{"n":1e999}}]}'),
    ("inf", rb'{"role":"user","content":[{"type":"text","text":1e999}]}'),
    ("inline", rb'{"role":"user","content":[{"type":"image","source":{"data":"QUJD"}}]}'),
    (
        "media_type",
        rb'{"role":"user","content":[{"type":"image","source":{"url":"/a","media_type":"x/y"}}]}',
    ),
    # DEL, which `repr` spells \x7f: its `f` runs into the letters after it.
    ("fabc", b'{"role":"tool","tool_call_id":{"k":"\x7fabc"},"content":"x"}'),
    # Not ASCII: a letter may stand beside bytes the decoding turns into others.
    ("hello", '{"role":"user","content":"héllo hello"}'.encode()),
]


@pytest.mark.parametrize(("pattern", "line"), HOSTILE)
def test_a_line_found_only_once_decoded_is_still_found(pattern: str, line: bytes) -> None:
    lines = [b'{"role":"user","content":"thanks"}', line]
    expected = judged_one_by_one(lines, pattern)
    assert list(search_log(lines, compile_matcher(pattern))) == expected


def test_the_filter_never_passes_over_a_hostile_line() -> None:
    """Each line above is found by judging it; where the filter is on for its pattern, it
    lets the line through to be judged, whether or not its bytes hold the literal."""
    for pattern, line in HOSTILE:
        assert judged_one_by_one([line], pattern), (pattern, line)
        may_match = raw_line_filter(compile_matcher(pattern))
        assert may_match is None or may_match(line), (pattern, line)


def test_a_line_without_the_literal_is_passed_over_unread() -> None:
    """The filter is on for a word of letters, and leaves out a plain line that lacks it."""
    may_match = raw_line_filter(compile_matcher("hello"))
    assert may_match is not None
    assert not may_match(b'{"role":"user","content":"thanks","name":null,"metadata":{}}')
    assert may_match(b'{"role":"user","content":"say hello"}')
    assert may_match(rb'{"role":"user","content":"\u0068ello"}')  # an escape: decoded
    assert may_match('{"role":"user","content":"hé"}'.encode())  # not ASCII: decoded


@pytest.mark.parametrize(
    "pattern", ["tool", "e", "Infinity", "media_type", "x", "hel+o", "say hello", "hello", "-i"]
)
def test_the_filter_is_off_where_the_shown_text_may_hold_what_the_bytes_do_not(
    pattern: str,
) -> None:
    """Words the showing of a message writes itself, and literals that are not only letters
    (a space, a digit that a float's spelling may bring), are always decoded."""
    if pattern == "-i":
        matcher = compile_matcher("hello", ignore_case=True)
    else:
        matcher = compile_matcher(pattern)
    on = pattern in ("hello", "hel+o")
    assert (raw_line_filter(matcher) is not None) == on


_TEXT = st.one_of(
    st.text(alphabet="helo TrueNn", max_size=8),  # plain: the lines the filter may pass over
    st.text(alphabet='helo "\\\n\t\x7f\u00e9\u2028&<TrueNn', max_size=12),
)
_LEAF = st.one_of(
    _TEXT, st.booleans(), st.none(), st.integers(-3, 3), st.sampled_from([1e999, 0.5, 1e100])
)
_BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _LEAF}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "name": _LEAF,
            "id": _LEAF,
            "input": st.dictionaries(_TEXT, _LEAF, max_size=2),
        }
    ),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _LEAF}),
    st.fixed_dictionaries(
        {"type": st.just("image"), "source": st.fixed_dictionaries({"url": _LEAF}), "name": _LEAF}
    ),
)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool"]),
        "content": st.one_of(_TEXT, st.lists(_BLOCK, max_size=3)),
    },
    optional={
        "name": _LEAF,
        "tool_call_id": st.one_of(_LEAF, st.dictionaries(_TEXT, _TEXT, max_size=1)),
    },
)


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=4),
    ascii_only=st.booleans(),
    pattern=st.sampled_from(["hello", "hel", "lo", "True", "Nn", "ohe", "hel+o", "h.l"]),
    context=st.integers(0, 1),
)
def test_search_log_gives_what_judging_every_line_gives(
    messages: list[dict], ascii_only: bool, pattern: str, context: int
) -> None:
    lines = [json.dumps(m, ensure_ascii=ascii_only).encode() for m in messages]
    found = list(search_log(lines, compile_matcher(pattern), context=context))
    assert found == judged_one_by_one(lines, pattern, context)

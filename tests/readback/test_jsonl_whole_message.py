"""A context.jsonl is searched a message at a time: one search of a message's whole text says
whether any of its lines may match, and only then is each line judged. Grep, the retrieval
tool and `ctxoffload grep` find exactly the lines a search of every line finds: anchors, a
class that matches a newline, carriage returns inside a message, a lone surrogate from a JSON
escape, a raw-JSON match, and patterns only a line-by-line search reads right."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import text as _text
from ctxoffload._disk.commit import iter_lines
from ctxoffload._disk.read import Folder
from ctxoffload._search import log as _log
from ctxoffload._search import matcher as _matcher
from ctxoffload._search.log import search_log
from ctxoffload.readback import FileToolbox
from ctxoffload.readback._retrieval import format_retrieval
from helpers import examples

PATTERNS = [
    "a$",
    "^b",
    "a\\sb",  # a newline between would match the whole text, never a line
    "[^a]$",
    "\\bab\\b",
    "\\r",
    "(?s)a.b",
    "(?-m)^a",
    "\\Aa",
    "b\\z",
    "\\[user\\]",  # the header line
    '"role": "tool"',  # only the raw JSON line has it
    "é$",
    "tool call",
]
_TEXT = st.lists(st.sampled_from(["a", "b", " ", "\n", "\r", "é", "\ud800"]), max_size=20).map(
    "".join
)
_MESSAGES = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "tool"]), _TEXT), min_size=1, max_size=6
)


def _write_log(root: Path, messages: list[tuple[str, str]]) -> Path:
    session = root / "sessions" / "s"
    session.mkdir(parents=True, exist_ok=True)
    log = session / "context.jsonl"
    lines = [json.dumps({"role": role, "content": text}) for role, text in messages]
    # A message as a workspace writes a foreign call: its argument's lines, in a tool call.
    lines.append(
        json.dumps(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": "a\nb"})},
                    }
                ],
            }
        )
    )
    log.write_text("".join(line + "\n" for line in lines))
    return log


def _each_line_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_log, "_any_line", lambda matcher: None)


def _grep(root: Path, pattern: str) -> str:
    toolbox = FileToolbox([root], grep_timeout=None, max_output_chars=500_000)
    return toolbox.grep(pattern, "sessions/s/context.jsonl", max_matches=10_000)


def _cli(root: Path, pattern: str, *, every_line: bool) -> list[tuple[int, bytes, bool]]:
    matcher = _matcher.compile_matcher(pattern)
    if every_line:
        matcher.search = _matcher.every_line
    with Folder(str(root / "sessions" / "s")) as folder:
        fd, st = folder.open("context.jsonl")
        try:
            return list(search_log(iter_lines(fd, 0, st.st_size), matcher))
        finally:
            os.close(fd)


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(messages=_MESSAGES, pattern=st.sampled_from(PATTERNS))
def test_a_message_searched_whole_finds_what_its_lines_find(
    tmp_path_factory: pytest.TempPathFactory, messages: list[tuple[str, str]], pattern: str
) -> None:
    root = tmp_path_factory.mktemp("log")
    log = _write_log(root, messages)
    text = log.read_text(errors="surrogatepass")
    whole_grep = _grep(root, pattern)
    whole_retrieval = format_retrieval(text, str(log), pattern, max_lines=10_000, max_chars=500_000)
    whole_cli = _cli(root, pattern, every_line=False)
    with pytest.MonkeyPatch.context() as patch:
        _each_line_judged(patch)
        assert whole_grep == _grep(root, pattern)
        assert whole_retrieval == format_retrieval(
            text, str(log), pattern, max_lines=10_000, max_chars=500_000
        )
    assert whole_cli == _cli(root, pattern, every_line=True)


def test_a_message_with_no_match_is_not_judged_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point of it: a message of many lines that does not match costs one search."""
    judged: list[str] = []
    real = _text.matching_lines

    def counting(line: str, matches: Any, **kwargs: Any) -> Any:
        def judge(text: str) -> bool:
            judged.append(text)
            return bool(matches(text))

        return real(line, judge, **kwargs)

    monkeypatch.setattr(_text, "matching_lines", counting)
    _write_log(tmp_path, [("tool", "\n".join(f"line {i}" for i in range(500)))])
    assert _grep(tmp_path, "ERROR").startswith("No matches")
    # The long message: its raw JSON line alone, none of its lines; the short one (a tool
    # call of a few lines) is judged line by line, which costs less than a search of its text.
    assert not [text for text in judged if text.startswith("line ")]
    assert len(judged) < 10
    judged.clear()
    assert "line 499" in _grep(tmp_path, "line 499$")
    assert 500 < len(judged) < 510  # the matching message is judged line by line

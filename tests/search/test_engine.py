"""The engine reads a file in pieces cut at line ends, carries context lines from one piece to
the next, and may stop using a literal half-way: whatever the piece size, it gives exactly the
lines (numbers, bytes, match or context) of a plain search of every line alone."""

from __future__ import annotations

import io
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload._search import engine
from ctxoffload._search.matcher import compile_matcher
from helpers import examples

LINES = [b"ERROR", b"ok", b"", b"x\r", b"caf\xe9 ERROR", b"abc", b"ERRORERROR", b"\xff", b"a\r\r"]
PATTERNS = ["ERROR", "^ok$", "a", "^$", "\ufffd", "c$", "\\Aab", "R\\s*$", "ERROR\\nok"]


def every_line(data: bytes, pattern: str, context: int) -> list[engine.Line]:
    """The lines to give, found one line at a time: a line that is not UTF-8 matches as its
    bytes are or as Read shows it (each such byte U+FFFD), the rule of every door."""
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # "" after the last newline is no line
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    matcher = compile_matcher(pattern)

    def matches(line: bytes) -> bool:
        shown = line.decode("utf-8", "replace").encode()
        return matcher.matches_line(line) or matcher.matches_line(shown)

    hits = [matches(line) for line in lines]
    shown = {
        j for i, hit in enumerate(hits) if hit for j in range(i - context, i + context + 1)
    } & set(range(len(lines)))
    return [(j + 1, lines[j], hits[j]) for j in sorted(shown)]


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    lines=st.lists(st.sampled_from(LINES), max_size=30),
    final_newline=st.booleans(),
    pattern=st.sampled_from(PATTERNS),
    context=st.integers(min_value=0, max_value=3),
    piece=st.sampled_from([1, 2, 3, 5, 8, 64]),
)
def test_pieces_and_context_give_what_every_line_gives(
    lines: list[bytes],
    final_newline: bool,
    pattern: str,
    context: int,
    piece: int,
) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "_PIECE", piece)
        found = list(
            engine.search_lines(io.BytesIO(data), compile_matcher(pattern), context=context)
        )
    assert found == every_line(data, pattern, context)


def test_a_literal_most_lines_hold_in_vain_is_dropped_without_losing_a_line() -> None:
    lines = [b"needle in hay"] * 5000
    for number in (10, 2500, 4999):
        lines[number - 1] = b"needle"
    data = b"\n".join(lines) + b"\n"
    matcher = compile_matcher("needle$")
    assert matcher.literal == b"needle"
    found = list(engine.search_lines(io.BytesIO(data), matcher, context=1))
    assert found == every_line(data, "needle$", 1)


def test_the_deadline_is_kept_inside_a_piece() -> None:
    # One piece of lines each judged in vain (a pattern read line by line): a deadline that
    # passes while the piece is searched stops the search before the piece's end.
    data = b"needle in hay\n" * 50_000
    matcher = compile_matcher(r"\Aneedle$")
    judged: list[bytes] = []
    judge = matcher._judge

    def counted(line: bytes, pos: int) -> int | None:
        judged.append(line)
        return judge(line, pos)

    matcher._judge = counted
    with pytest.raises(engine.SearchTimedOut):
        for _ in engine.search_lines(io.BytesIO(data), matcher, deadline=time.monotonic() + 1e-3):
            pass
    assert len(judged) < 50_000


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    parts=st.lists(st.sampled_from([b"a", b"abc", b"\xc3\xa9", b"\xc3", b"\xa9", b"\xff", b"\n"])),
    piece=st.sampled_from([1, 2, 3, 4, 64]),
)
def test_a_file_is_utf8_throughout_whatever_its_pieces(
    parts: list[bytes], piece: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The check that sends a file to ripgrep or keeps it with the engine: a character cut
    by a piece's end, or left open before a piece of ASCII, is seen as when read whole."""
    data = b"".join(parts)
    path = tmp_path_factory.mktemp("utf8") / "f"
    path.write_bytes(data)
    try:
        data.decode("utf-8")
        expected = True
    except UnicodeDecodeError:
        expected = False
    with pytest.MonkeyPatch.context() as patch, path.open("rb") as f:
        patch.setattr(engine, "_PIECE", piece)
        assert engine.is_utf8_file(f.fileno()) == expected
        assert f.tell() == 0  # ripgrep reads the file from where it stands


@settings(max_examples=examples(300), deadline=None)
@given(
    lines=st.lists(st.sampled_from([*LINES, b"say hello", b"hello hello", b"  "]), max_size=12),
    final_newline=st.booleans(),
    pattern=st.sampled_from([*PATTERNS, "hello", "ok", "say hel"]),
    context=st.integers(min_value=0, max_value=2),
)
def test_a_small_file_read_whole_gives_what_every_line_gives(
    lines: list[bytes], final_newline: bool, pattern: str, context: int
) -> None:
    """`search_bytes` (a small file `ctxoffload grep` reads in one call) gives the lines of a
    search of every line alone, whether it takes the short way (a pattern that is one string,
    ASCII without a carriage return, no context) or the pieces'."""
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    found = list(engine.search_bytes(data, compile_matcher(pattern), context=context))
    assert found == every_line(data, pattern, context)

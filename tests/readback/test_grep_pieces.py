"""The agent's Grep searches a text file a piece at a time (the lines between matches are never
decoded) and answers exactly what a search of every line answers: the same lines, numbers,
cuts and notes, for anchors, case folding, patterns that could match across lines, carriage
returns, bytes that are not UTF-8, a line longer than a piece, and no final newline."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload._search import matcher as _matcher
from ctxoffload.readback import FileToolbox, _grep
from helpers import examples

LINES = [
    "2026-11-20 ERROR export failed: disk quota exceeded",
    "2026-11-20 INFO exported ORD-10001 rows=7",
    "été ÉTÉ naïve 日本語 🙂 done",
    "carriage return ERROR\r",
    "",
    "a\tb  c",
    "x" * (3 << 20) + " ERROR at the end of a 3 MB line",
    "tail ERROR",
]

PATTERNS = [
    "ERROR",
    "^2026",
    "done$",
    "(?i)été",
    "(?i)error",
    r"rows=[0-9]+",
    r"b\s+c",
    r"ERROR\s+2026",  # could match across a line end in a whole piece; never in a line
    r"\n",
    "",
    ".*",
    "\ufffd",
    "日本.",
    "nothing matches this",
    "ERROR$",  # `carriage return ERROR\r\n` is the line `carriage return ERROR`
    r"R\s*$",
    "R.$",  # the "\r" is not in the line: no match there
    "(?-m)^carriage",  # multi-line off: `^` is still the start of each line
    "(?i-m:^TAIL)",
    "^$",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    body = "\n".join(LINES).encode() + b"\nnot utf-8 \xff\xfe ERROR\nlast line ERROR"  # no \n
    (tmp_path / "mixed.log").write_bytes(b"a lone \r ERROR\n\xff ERROR\r\nend ERROR\r")
    (tmp_path / "app.log").write_bytes(body)
    (tmp_path / "small.txt").write_text("one\ntwo ERROR\n")
    # Last lines of only "\r": still lines, empty (`^$` finds them).
    (tmp_path / "cr-end.log").write_bytes(b"ERROR\n\r")
    (tmp_path / "cr-only.log").write_bytes(b"\r")
    return tmp_path


def answers(root: Path, pattern: str, path: str, *, pieces: bool) -> str:
    toolbox = FileToolbox([root], grep_timeout=None, max_output_chars=200_000)
    with pytest.MonkeyPatch.context() as patch:
        if not pieces:
            patch.setattr(_grep, "compile_matcher", _every_line_matcher)
        return toolbox.grep(pattern, path, max_matches=1000)


def _every_line_matcher(pattern: str) -> _matcher.Matcher:
    """The pattern's matcher, made to judge every line alone (no search across a piece)."""
    matcher = _matcher.compile_matcher(pattern)
    matcher.search = _matcher.every_line
    matcher.literal = None
    return matcher


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pieces_find_what_every_line_finds(root: Path, pattern: str) -> None:
    for path in ("app.log", "mixed.log", "."):
        assert answers(root, pattern, path, pieces=True) == answers(
            root, pattern, path, pieces=False
        )


def test_a_piece_is_searched_in_one_pass(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines between matches are not handed to the line matcher one by one."""
    judged: list[bytes] = []
    real = _grep.compile_matcher

    def counting(pattern: str) -> _matcher.Matcher:
        matcher = real(pattern)
        judge = matcher._judge

        def counted(line: bytes, pos: int) -> int | None:
            judged.append(bytes(line))
            return judge(line, pos)

        matcher._judge = counted
        return matcher

    monkeypatch.setattr(_grep, "compile_matcher", counting)
    (root / "clean.log").write_text("".join(f"{i:07d} INFO ok\n" for i in range(300_000)))
    answer = FileToolbox([root], grep_timeout=None).grep("0123456 ", "clean.log")
    assert answer == "clean.log:123457:0123456 INFO ok"
    assert judged == [b"0123456 INFO ok"]
    # A piece that is not UTF-8 is judged line by line, as before.
    judged.clear()
    FileToolbox([root], grep_timeout=None).grep("ORD-10001", "app.log")
    assert LINES[1].encode() in judged and len(judged) > 1


def test_a_pattern_that_reads_the_start_of_the_text_is_searched_line_by_line(
    root: Path,
) -> None:
    assert answers(root, r"\Aone", "small.txt", pieces=True) == "small.txt:1:one"


def test_pieces_end_at_line_ends_and_hold_a_long_line_whole(tmp_path: Path) -> None:
    import os

    from ctxoffload._disk.commit import iter_pieces

    body = b"short\n" * 300_000 + b"L" * (5 << 20) + b"\n" + b"tail without newline"
    path = tmp_path / "f.log"
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        pieces = list(iter_pieces(fd, 0, len(body)))
    finally:
        os.close(fd)
    assert b"".join(pieces) == body  # nothing lost, nothing twice
    assert all(piece.endswith(b"\n") for piece in pieces[:-1])
    assert pieces[-1].endswith(b"tail without newline")
    assert any(b"L" * (5 << 20) + b"\n" in piece for piece in pieces)  # the line in one piece
    assert max(map(len, pieces)) < (5 << 20) + (2 << 20)  # and a piece no bigger than it needs


def test_an_enormous_single_line_is_found(tmp_path: Path) -> None:
    (tmp_path / "blob.txt").write_bytes(b"A" * (20 << 20) + b" needle\nnext line\n")
    answer = FileToolbox([tmp_path], grep_timeout=None).grep("needle", "blob.txt")
    assert answer.startswith("blob.txt:1:") and "A needle [line has 20,971,527 characters" in answer
    assert answer == answers(tmp_path, "needle", "blob.txt", pieces=False)


def test_a_piece_that_is_not_utf8_numbers_lines_at_newlines_only(root: Path) -> None:
    """A lone carriage return does not end a line (nor does it anywhere else)."""
    answer = FileToolbox([root], grep_timeout=None).grep("ERROR$", "mixed.log")
    assert answer == "mixed.log:1:a lone \r ERROR\nmixed.log:2:\ufffd ERROR\nmixed.log:3:end ERROR"


_CHARS = st.sampled_from(["a", "b", " ", "\r", "\n", "\r\n", "é", "\xff"])


@settings(max_examples=examples(60), deadline=None)
@given(
    text=st.lists(_CHARS, max_size=40).map("".join),
    pattern=st.sampled_from(
        ["a$", "^b", "a\\s", "b.$", "\\bab\\b", "\\r", "(?-m)^a", "(?-m)b$", "(?s)a.b", "[^a]$"]
    ),
)
def test_a_whole_piece_finds_every_line_a_line_by_line_search_finds(
    tmp_path_factory: pytest.TempPathFactory, text: str, pattern: str
) -> None:
    """Carriage returns (trailing, lone, last), anchors, multi-line mode turned off, and
    classes that match a newline: context 0 (a whole piece searched) and context 1 (every
    line judged) find the same lines."""
    root = tmp_path_factory.mktemp("grep")
    data = text.encode().replace("\xff".encode(), b"\xff")  # a byte that is not UTF-8
    (root / "f.txt").write_bytes(data)
    toolbox = FileToolbox([root], grep_timeout=None, max_output_chars=200_000)
    whole = toolbox.grep(pattern, "f.txt", max_matches=1000)
    by_line = toolbox.grep(pattern, "f.txt", context_lines=1, max_matches=1000)
    matched = [line for line in by_line.split("\n") if line.startswith("f.txt:")]
    if matched:
        assert whole == "\n".join(matched)
    elif "binary file" in whole:  # mostly bytes that are not UTF-8: one rule for both
        assert whole == by_line
    else:
        assert whole.startswith("No matches") and by_line.startswith("No matches")

"""The reader's JSON lines: a line nested deeper than any workspace writes is skipped and
counted as a bad line, as a line that is not JSON is, never a RecursionError for its caller."""

from __future__ import annotations

import pytest

from ctxoffload._disk.commit import JsonLines, parse_log


@pytest.mark.parametrize("depth", [300, 900, 990, 100_000])
def test_a_line_nested_too_deep_is_a_bad_line(depth: int) -> None:
    deep = b'{"a":' * depth + b"1" + b"}" * depth
    raw = b'{"kind": "ok"}\n' + deep + b"\n" + b"[" * depth + b"]" * depth + b'\n{"kind": "last"}\n'
    lines = JsonLines.of_bytes(raw)
    assert [value for _, value in lines] == [{"kind": "ok"}, {"kind": "last"}]
    assert lines.corrupt == [2, 3]
    said: list[str] = []
    assert parse_log(raw, "events.jsonl", warn=said.append) == [{"kind": "ok"}, {"kind": "last"}]
    assert len(said) == 2


def test_a_line_as_deep_as_the_workspace_writes_is_read() -> None:
    # A message may nest 108 levels, and an event or state.json holds one inside its own.
    depth = 120
    value: object = "x"
    for _ in range(depth):
        value = [value]
    raw = (repr(value).replace("'", '"') + "\n").encode()
    assert [v for _, v in JsonLines.of_bytes(raw)] == [value]

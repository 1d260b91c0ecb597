"""A JSONL transcript still being written: its torn last line is left out, with one warning."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxoffload.cli._transcripts import load_transcript


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    for i in range(4):
        rows.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "ls", "arguments": json.dumps({"path": f"/d{i}"})},
                    }
                ],
            }
        )
        rows.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"file_{i}.txt"})
    return rows


def test_a_torn_last_line_is_left_out_with_a_warning(
    tmp_path: Path, capsys: Any, cli: Callable[..., Any]
) -> None:
    rows = _rows()
    whole = "".join(json.dumps(r) + "\n" for r in rows)
    torn = tmp_path / "live.jsonl"
    torn.write_text(whole + json.dumps({"role": "assistant", "content": "Half a reply"})[:30])
    fmt, [run] = load_transcript(torn)
    complete = tmp_path / "done.jsonl"
    complete.write_text(whole)
    assert (fmt, [m.text for m in run.messages]) == (
        load_transcript(complete)[0],
        [m.text for m in load_transcript(complete)[1][0].messages],
    )
    assert len(run.messages) == len(rows)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "last line is torn" in err and "9 lines" in err
    # The command replays it (exit 0), and says so once.
    result = cli("replay", torn, "--workdir", tmp_path / "ws")
    assert result.code == 0, result
    assert result.err.count("last line is torn") == 1


def test_a_bad_line_that_is_not_the_last_is_still_refused(tmp_path: Path, cli: Any) -> None:
    rows = [json.dumps(r) for r in _rows()]
    rows.insert(3, '{"role": "assistant", "content": "cut')
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(rows))  # no final newline: the bad line is still not the last
    result = cli("replay", path, "--workdir", tmp_path / "ws")
    assert result.code == 2 and "neither JSON nor JSONL" in result.err
    assert not (tmp_path / "ws").exists()
    # A bad last line that did end with a newline was written whole: not a torn tail.
    path.write_text("\n".join([*rows[:3], rows[4], '{"role": "cut']) + "\n")
    assert cli("replay", path, "--workdir", tmp_path / "ws").code == 2

"""bench/transcript_shapes.py, the runs of other shapes than the corpus's that bench_peers
replays (`--shapes`): the same seed writes the same bytes, another seed other runs, and each
file is read by the replay's own loader into runs with tool calls and their results (a
mini-swe-agent run: its commands and their outputs)."""

from __future__ import annotations

import sys
from pathlib import Path

from ctxoffload import Msg
from ctxoffload.cli._transcripts import load_transcript

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import transcript_shapes


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_one_seed_writes_the_same_runs_and_another_other_ones(tmp_path: Path) -> None:
    transcript_shapes.write(tmp_path / "a", 84, 1)
    transcript_shapes.write(tmp_path / "b", 84, 1)
    transcript_shapes.write(tmp_path / "c", 85, 1)
    first = _files(tmp_path / "a")
    assert len(first) == len(transcript_shapes.SHAPES)
    assert first == _files(tmp_path / "b")
    other = _files(tmp_path / "c")
    assert first.keys() == other.keys()
    assert all(first[name] != other[name] for name in first)


def test_each_shape_is_read_by_the_replays_loader_with_calls_and_results(tmp_path: Path) -> None:
    transcript_shapes.write(tmp_path, 84, 1)
    for path in sorted(tmp_path.iterdir()):
        _, runs = load_transcript(path)
        messages: list[Msg] = [m for run in runs for m in run.messages]
        assert messages[0].role in ("system", "user"), path.name
        if path.name.endswith(".traj.json"):
            # mini-swe-agent: each command in the assistant's text, its output a user turn.
            outputs = [m for m in messages if m.role == "user" and "returncode" in m.text]
            assert len(outputs) >= 20, path.name
            continue
        calls = {b.id for m in messages for b in m.tool_calls}
        results = {b.id for m in messages for b in m.tool_results}
        assert calls and calls == results, path.name
    outputs = [
        len(str(b.output))
        for path in tmp_path.glob("shape-long-outputs-*")
        for run in load_transcript(path)[1]
        for m in run.messages
        for b in m.tool_results
    ]
    assert max(outputs) >= 20_000  # the long single outputs are long

"""`ctxoffload hook PreCompact` and the `SessionStart` after it: a Claude Code transcript kept
whole in the session's context.jsonl before the compaction drops it, once however often the
hook runs (one process after another, or two at once), and the index of what it drops given
back after the compaction. The real command, in child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claude_code_hooks import (
    NON_BLOCKING,
    SESSION,
    output_of,
    pre_compact,
    run_hook,
    session_start,
    transcript_rows,
)
from ctxoffload.formats.claude_code import from_claude_code
from helpers import corpus_file


def write_transcript(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def context_lines(workdir: Path, session: str = SESSION) -> list[dict[str, Any]]:
    log = workdir / "sessions" / session / "context.jsonl"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def uuids_kept(workdir: Path, session: str = SESSION) -> list[str]:
    return [
        u
        for line in context_lines(workdir, session)
        for u in line["metadata"]["claude_code"]["uuids"]
    ]


def test_a_real_transcript_is_kept_whole_once(tmp_path: Path) -> None:
    transcript = corpus_file("claudecode-demo-todoapp-fe5e1c67.jsonl")
    rows = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    expected = from_claude_code(rows)
    ws = tmp_path / "ws"
    done = run_hook("PreCompact", pre_compact(str(transcript)), ws)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    kept = context_lines(ws)
    assert [line["id"] for line in kept] == [m.id for m in expected]
    # Every block of every message, as the transcript has it (the text of each, in order).
    for line, msg in zip(kept, expected, strict=True):
        assert json.dumps(line["content"]).count('"type"') >= len(msg.blocks)
    log = ws / "sessions" / SESSION / "context.jsonl"
    before = log.read_bytes()
    again = run_hook("PreCompact", pre_compact(str(transcript)), ws)
    assert again.returncode == 0, again.stderr.decode()
    assert log.read_bytes() == before  # run twice: nothing appended


def test_the_corpus_session_with_an_image_keeps_it_in_data(tmp_path: Path) -> None:
    transcript = corpus_file("claudecode-agentcmd-full-session-two.jsonl")
    ws = tmp_path / "ws"
    done = run_hook("PreCompact", pre_compact(str(transcript), session="agentcmd"), ws)
    assert done.returncode == 0, done.stderr.decode()
    assert len(list((ws / "data").glob("*.png"))) == 1  # the base64 PNG, stored once
    text = (ws / "sessions" / "agentcmd" / "context.jsonl").read_text(encoding="utf-8")
    assert '"base64"' not in text


def test_a_longer_transcript_appends_only_what_is_new(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    ws = tmp_path / "ws"
    write_transcript(path, transcript_rows(10))
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path)), ws))
    first = uuids_kept(ws)
    rows = [
        *transcript_rows(10),
        {"type": "system", "subtype": "compact_boundary", "uuid": "b-1"},
        {"type": "summary", "summary": "shards 0-9 checked"},
        *transcript_rows(5, start=10),
    ]
    write_transcript(path, rows)
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path), trigger="manual"), ws))
    kept = uuids_kept(ws)
    assert kept[: len(first)] == first
    every = [r["uuid"] for r in rows if r.get("type") in ("user", "assistant")]
    assert kept == every  # each record once, in order: none lost, none twice


@pytest.mark.slow
def test_two_hooks_at_once_lose_nothing_and_duplicate_nothing(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", transcript_rows(300))
    ws = tmp_path / "ws"
    payload = json.dumps(pre_compact(str(path))).encode()
    command = [sys.executable, "-m", "ctxoffload", "hook", "PreCompact", "--workdir", str(ws)]
    children = [
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    results = [child.communicate(payload, timeout=300) for child in children]
    assert [c.returncode for c in children] == [0, 0], results
    kept = uuids_kept(ws)
    every = [r["uuid"] for r in transcript_rows(300)]
    assert sorted(kept) == sorted(every) and len(kept) == len(set(kept))


def output_of_nothing(done: subprocess.CompletedProcess[bytes]) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), done.stderr.decode()


def test_session_start_after_the_compaction_names_the_history_and_its_paths(
    tmp_path: Path,
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", transcript_rows(12))
    ws = tmp_path / "ws"
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path)), ws))
    out = output_of(run_hook("SessionStart", session_start("compact"), ws))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert len(context) < 10_000  # Claude Code takes up to 10,000 characters inline
    log = (ws / "sessions" / SESSION / "context.jsonl").resolve()
    assert str(log) in context and "lines 1-36" in context
    # Paths, commands and ids of what the compaction dropped, each by its line in the log.
    assert "/srv/out/part-11.csv" in context and "cat /srv/shards/shard-11.log" in context
    assert "ORD-1011" in context and "<artifact_index>" in context
    line = next(i for i, m in enumerate(context_lines(ws), 1) if "part-11.csv" in json.dumps(m))
    assert f"line {line}:" in context
    events = [
        json.loads(e) for e in (ws / "sessions" / SESSION / "events.jsonl").read_text().splitlines()
    ]
    (compaction,) = [e for e in events if e["kind"] == "host_compaction"]
    assert compaction["context"] == context and compaction["appended"] == 36
    shown = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "show", SESSION, "--workdir", str(ws)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "claude-code compacted its context (auto): 36 messages" in shown.stdout, shown


def test_the_index_after_a_second_compaction_names_what_left_since(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    ws = tmp_path / "ws"
    write_transcript(path, transcript_rows(3))
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path)), ws))
    rows = [
        *transcript_rows(3),
        {"type": "system", "subtype": "compact_boundary", "uuid": "b-1"},
        *transcript_rows(2, start=50),
    ]
    write_transcript(path, rows)
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path)), ws))
    context = output_of(run_hook("SessionStart", session_start(), ws))["hookSpecificOutput"][
        "additionalContext"
    ]
    assert "/srv/out/part-51.csv" in context  # left with this compaction
    assert "/srv/out/part-2.csv" in context  # left before, named by the last index: carried


BAD_TRANSCRIPTS = {
    "missing": ("missing.jsonl", "does not exist"),
    "relative": ("relative", "not an absolute path"),
    "not .jsonl": ("notes.txt", "not an absolute path to a .jsonl file"),
    "a link": ("link.jsonl", "symbolic link"),
    "a FIFO": ("fifo.jsonl", "FIFO"),
    "a folder": ("folder.jsonl", "folder"),
}


@pytest.mark.parametrize("name,said", BAD_TRANSCRIPTS.values(), ids=BAD_TRANSCRIPTS.keys())
def test_a_bad_transcript_path_is_a_non_blocking_error(
    tmp_path: Path, name: str, said: str
) -> None:
    real = write_transcript(tmp_path / "real.jsonl", transcript_rows(2))
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "folder.jsonl").mkdir()
    given = name if name == "relative" else str(tmp_path / name)
    done = run_hook("PreCompact", pre_compact(given), tmp_path / "ws")
    assert done.returncode == NON_BLOCKING  # never 2: that would block the compaction
    assert done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith("ctxoffload hook PreCompact: transcript_path") and said in err, err
    assert err.count("\n") == 1
    assert not (tmp_path / "ws" / "sessions").exists()


def test_a_torn_last_line_and_foreign_records_are_skipped(tmp_path: Path) -> None:
    rows = transcript_rows(2)
    path = tmp_path / "t.jsonl"
    foreign = [{"type": "file-history-snapshot", "messageId": "x"}, {"type": "summary"}]
    sidechain = {**rows[0], "uuid": "side-1", "isSidechain": True}
    text = "".join(json.dumps(r) + "\n" for r in [*foreign, sidechain, *rows])
    path.write_text(text + '{"type": "user", "uuid": "torn', encoding="utf-8")
    ws = tmp_path / "ws"
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path)), ws))
    assert uuids_kept(ws) == [r["uuid"] for r in rows]


def test_a_transcript_with_no_message_writes_nothing(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", [{"type": "summary", "summary": "x"}])
    output_of_nothing(run_hook("PreCompact", pre_compact(str(path)), tmp_path / "ws"))
    assert not (tmp_path / "ws" / "sessions" / SESSION / "context.jsonl").exists()

"""The record for every writer, and the same sentences in `show` and `watch` (issue 27, part 1):
a replayed session rebuilds each step, a workspace used on its own says what it records, a
resume is one line, every event kind reads as a sentence with its figures."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import Agent, LocalWorkspace, Msg, ScriptedModel
from ctxoffload.cli._describe import NOT_BY_AGENT, describe
from helpers import ChildLines, call, ctrl_c_reaches_children

CLI = [sys.executable, "-m", "ctxoffload"]


def run(*args: str) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demo") / "ws"
    run("demo", "--workdir", str(folder))
    return folder


@pytest.mark.slow
def test_a_replayed_session_rebuilds_every_step(demo: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "nightly.json"
    rows = [
        json.loads(x)
        for x in (demo / "sessions/nightly-job/context.jsonl").read_text().splitlines()
    ]
    from ctxoffload import to_openai

    transcript.write_text(json.dumps(to_openai([Msg.model_validate(r) for r in rows])))
    config = tmp_path / "small.json"
    config.write_text('{"context_window": 1800, "tool_result_limit": 200, "reserve_ratio": 0.3}')
    ws = tmp_path / "ws"
    run("replay", str(transcript), "--config", str(config), "--session", "wi", "--workdir", str(ws))
    events = [json.loads(x) for x in (ws / "sessions/wi/events.jsonl").read_text().splitlines()]
    replayed = next(e for e in events if e["kind"] == "replay")
    steps = [e["step"] for e in events if e["kind"] == "model_call"]
    assert steps == list(range(1, replayed["model_calls"] + 1))
    start = next(e for e in events if e["kind"] == "session_start")
    assert start["agent"] == "replay" and "no model called" in start["model"]
    for step in steps:
        shown = json.loads(run("show", "wi", "--step", str(step), "--json", "--workdir", str(ws)))
        call_event = next(e for e in events if e["kind"] == "model_call" and e["step"] == step)
        assert [m["id"] for m in shown["messages"]] == call_event["messages"]
        # What filled the window, for `ctxoffload ui`: the parts add up to the count.
        assert sum(call_event["window"].values()) == call_event["tokens_counted"]
        assert call_event["window"]["tools"] == 0  # a transcript sends no tool schemas
        assert call_event["context_window"] == 1800
        assert call_event["trigger_tokens"] == int(0.8 * 1800)
    # After a compression, the step is sent the summary instead of what left.
    compressed = run("show", "wi", "--step", str(steps[-1]), "--workdir", str(ws))
    assert "<context_summary>" in compressed


def test_a_workspace_used_alone_says_what_its_record_holds(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")

    async def write() -> None:
        await ws.offload_tool_result(
            "alone", {"id": "c1", "name": "grep_logs", "output": "x\n" * 9}
        )
        await ws.offload_context("alone", [Msg(role="user", content="an old request")])

    asyncio.run(write())
    out = run("show", "alone", "--workdir", str(tmp_path / "ws")).splitlines()
    assert out[1] == NOT_BY_AGENT
    assert re.search(r"stored the whole result of grep_logs \(c1\): 9 lines, 18 bytes, in ", out[2])
    assert re.search(r"appended 1 message \(\d+ bytes\) into .*context.jsonl line 1$", out[3])
    assert len(out) == 4


def test_a_resume_is_one_line_and_restored_messages_are_printed_once(tmp_path: Path) -> None:
    def tool() -> str:
        """A tool."""
        return "done"

    async def two_agents() -> None:
        ws = LocalWorkspace(tmp_path / "ws")
        for reply, step in (("one", "c1"), ("two", "c2")):
            agent = Agent(
                model=ScriptedModel([call(step, "tool"), reply], context_window=8_000),
                tools=[tool],
                offloader=ws,
                session_id="s",
            )
            async with agent:
                await agent.reply(f"request {reply}")

    asyncio.run(two_agents())
    events = [
        json.loads(x) for x in (tmp_path / "ws/sessions/s/events.jsonl").read_text().splitlines()
    ]
    ids = [e["message"]["id"] for e in events if e["kind"] == "message"]
    assert len(ids) == len(set(ids)), "a restored message was recorded again"
    out = run("show", "s", "--workdir", str(tmp_path / "ws"))
    assert re.search(r"^\d\d:\d\d:\d\d resumed at step 3: 4 messages restored$", out, re.M)
    said = r"^\d\d:\d\d:\d\d   agent 'agent', model scripted, window 8,000 tokens$"
    assert re.search(said, out, re.M)
    assert out.count("user: request one") == 1 and out.count("assistant: one") == 1
    # The resumed steps rebuild from the one record.
    step4 = json.loads(run("show", "s", "--step", "4", "--json", "--workdir", str(tmp_path / "ws")))
    assert [m["role"] for m in step4["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]


SAMPLES: list[dict[str, Any]] = [
    {
        "kind": "offload",
        "tool_id": "c9",
        "tool_name": "fetch",
        "blocks": 2,
        "references": ["/w/a", "/w/b"],
        "tokens_before": 24006,
        "tokens_after": 1132,
    },
    {
        "kind": "window",
        "reference": "/w/context.jsonl",
        "lines": [3, 9],
        "messages": 7,
        "kept": 4,
        "pinned": 1,
        "max_messages": 5,
    },
    {
        "kind": "image_limit",
        "images": 6,
        "replaced": 4,
        "max_images": 2,
        "references": ["/w/data/x.png"],
    },
    {"kind": "replay", "run": "nightly", "config_name": "small", "messages": 18, "model_calls": 8},
    {"kind": "data", "reference": "/w/data/y.png", "media_type": "image/png", "bytes": 5120},
    {
        "kind": "context",
        "reference": "/w/context.jsonl",
        "bytes": 4096,
        "messages": 3,
        "lines": [1, 3],
    },
    {
        "kind": "tool_result",
        "reference": "/w/tool_result-c1.txt",
        "bytes": 9000,
        "lines": 300,
        "tool_id": "c1",
        "tool_name": "grep",
    },
    {"kind": "fork", "origin": {"session": "orig", "step": 4}, "messages": 7},
    {
        "kind": "subagent",
        "status": "started",
        "step": 2,
        "tool_id": "p1",
        "name": "worker",
        "session": "s--worker-1",
    },
    {
        "kind": "subagent",
        "status": "done",
        "step": 2,
        "tool_id": "p1",
        "name": "worker",
        "session": "s--worker-1",
        "steps": 3,
        "answer_chars": 812,
        "files": 2,
    },
    {
        "kind": "subagent",
        "status": "failed",
        "step": 2,
        "tool_id": "p1",
        "name": "worker",
        "session": "s--worker-1",
        "error": {"type": "ModelError", "message": "down"},
    },
    {
        "kind": "pin",
        "message_id": "m1",
        "role": "assistant",
        "by": "api",
        "pinned_tokens_before": 0,
        "pinned_tokens_after": 120,
        "window": 4000,
    },
    {
        "kind": "clear_tool_uses",
        "cleared": 3,
        "tool_ids": ["a", "b", "c"],
        "references": ["/w/r"],
        "tokens_before": 9000,
        "tokens_after": 3000,
    },
    {
        "kind": "clear_thinking",
        "messages": 2,
        "blocks": 5,
        "reference": "/w/context.jsonl",
        "lines": [4, 5],
        "tokens_before": 800,
        "tokens_after": 300,
    },
    {
        "kind": "compact",
        "reason": "asked",
        "tokens_before": 5000,
        "tokens_after": 900,
        "reference": "/w/context.jsonl",
        "lines": [1, 9],
    },
    {"kind": "background_summary", "status": "applied", "messages": 6, "waited_ms": 8.0},
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: f"{e['kind']}-{e.get('status', '')}")
def test_every_event_kind_reads_as_a_sentence_with_its_figures(event: dict[str, Any]) -> None:
    (line,) = describe({"time": "2026-11-24T10:00:00.000+00:00", **event}, by_agent=False)
    text = line[9:]
    assert text != event["kind"] and len(text.split()) >= 4, text
    numbers = [v for v in event.values() if isinstance(v, int) and v > 1]
    for number in numbers:
        assert f"{number:,}" in text, (number, text)


@pytest.mark.slow
def test_watch_prints_what_show_prints(demo: Path) -> None:
    shown = run("show", "nightly-job", "--workdir", str(demo)).splitlines()[1:]
    timeline = [line for line in shown if re.match(r"\d\d:\d\d:\d\d ", line)]
    assert timeline
    with ctrl_c_reaches_children():  # the SIGINT below must stop it
        watch = subprocess.Popen(
            [*CLI, "watch", "nightly-job", "--from-start", "--workdir", str(demo)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert watch.stdout is not None
    lines = ChildLines(watch.stdout)
    # Read until every line of the timeline has come (a count, not a time: a loaded
    # machine only makes it slower); the deadline is a safety net for a watch that hangs.
    missing = set(timeline)
    deadline = time.monotonic() + 300
    try:
        while missing:
            try:
                line = lines.next(deadline).rstrip("\n")
            except AssertionError as stopped:
                raise AssertionError(f"{stopped}; never printed: {sorted(missing)[:3]}") from None
            if re.match(r"\d\d:\d\d:\d\d nightly-job ", line):
                missing.discard(line[:9] + line[9:].removeprefix("nightly-job "))
    finally:
        watch.send_signal(signal.SIGINT)
        watch.communicate(timeout=60)


def test_scripted_models_are_named_as_such(demo: Path) -> None:
    out = run("show", "nightly-job", "--workdir", str(demo))
    assert "session started: agent 'analyst', model scripted (gpt-4o-mini)\n" in out
    assert "summaries by scripted (gpt-4o-mini)," in out
    assert "(summary by scripted (gpt-4o-mini), 3 kept)" in out


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            {"kind": "compression", "tokens_before": 9000, "tokens_after": 1000},
            "compressed history, 9,000→1,000 tokens (summary)",
        ),
        (
            {"kind": "truncation", "tool": "fetch_logs", "tokens_before": 30000},
            "truncated fetch_logs 30,000→? tokens",
        ),
        ({"kind": "truncation"}, "truncated a tool result"),
    ],
)
def test_an_event_missing_figures_says_what_it_has(event: dict[str, Any], expected: str) -> None:
    """Events written by another writer (or an older version) may lack a figure: the line
    says what the event holds and never prints `None` for the rest."""
    [line] = describe({"time": "2026-11-24T10:00:00+00:00", **event}, by_agent=False)[:1]
    assert expected in line
    assert "None" not in line

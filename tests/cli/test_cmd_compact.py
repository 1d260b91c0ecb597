"""`ctxoffload compact SESSION`: a running agent asked from another process compacts at its
next step and answers naming the request; a session nobody holds is compacted in place, under
its lease; bad input writes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, get_token_counter
from ctxoffload.workspace import request_compaction
from helpers import SUMMARY, call, probe, snapshot_tree, start_lease_worker, wait_held

WORKER = Path(__file__).resolve().parents[1] / "agent" / "compact_worker.py"
PROBES = 12


def start_worker(workdir: Path, session: str, gate: Path, out: Path) -> subprocess.Popen[str]:
    """The agent of tests/agent/compact_worker.py in a process of its own, once it waits at
    its gate (mid-run, holding the session)."""
    process = subprocess.Popen(
        [sys.executable, str(WORKER), str(workdir), session, str(gate), str(out), str(PROBES)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    entered = Path(str(gate) + ".entered")
    while not entered.exists():
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.02)
    return process


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`ctxoffload ARGS` as a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


def events_of(workdir: Path, session: str) -> list[dict[str, Any]]:
    path = workdir / "sessions" / session / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_event(workdir: Path, session: str, kind: str) -> dict[str, Any]:
    while True:
        found = [e for e in events_of(workdir, session) if e["kind"] == kind]
        if found:
            return found[-1]
        time.sleep(0.02)


@pytest.mark.slow
def test_a_running_agent_compacts_at_its_next_step_and_names_the_request(tmp_path: Path) -> None:
    workdir, gate, out = tmp_path / "ws", tmp_path / "gate", tmp_path / "out.json"
    worker = start_worker(workdir, "live", gate, out)
    try:
        asking = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxoffload",
                "compact",
                "live",
                "--workdir",
                str(workdir),
                "--instructions",
                "keep the paths",
                "--wait",
                "120",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        request = wait_for_event(workdir, "live", "compact_request")
        gate.touch()  # the agent goes on: its next step serves the request
        said, err = asking.communicate(timeout=120)
        worker_err = worker.communicate(timeout=120)[1]
        assert worker.returncode == 0, worker_err
    finally:
        gate.touch()
        worker.kill()
        worker.communicate()
    assert asking.returncode == 0, err
    assert f"compacted on the request {request['request']} of user" in said
    assert request["by"]["pid"] == asking.pid and request["instructions"] == "keep the paths"
    assert request["writer"]["pid"] == asking.pid  # written by the command, not the agent
    answer = next(e for e in events_of(workdir, "live") if e["kind"] == "compact")
    assert answer["requests"] == [request["request"]] and answer["changed"] is True
    assert answer["requested_by"] == [request["by"]]
    assert answer["writer"]["agent"] == "worker" and answer["writer"]["pid"] == worker.pid
    report = json.loads(out.read_text())
    # Calls 1..PROBES+1 came before the request; the one after the gate is sent the summary.
    assert report["summaries"][: PROBES + 1] == [False] * (PROBES + 1)
    assert report["summaries"][PROBES + 1] is True
    assert report["calls"][PROBES + 1] < report["calls"][PROBES]
    assert "keep the paths" in report["summary_requests"][0]
    shown = run_cli("show", "live", "--workdir", workdir).stdout
    assert f"compaction {request['request']} requested by user" in shown
    assert f"compacted on the request {request['request']}" in shown


@pytest.mark.slow
def test_a_holder_that_dies_leaves_the_request_pending_and_the_next_holder_serves_it(
    tmp_path: Path,
) -> None:
    workdir, gate, out = tmp_path / "ws", tmp_path / "gate", tmp_path / "out.json"
    worker = start_worker(workdir, "dies", gate, out)
    try:
        asked = run_cli("compact", "dies", "--workdir", workdir, "--instructions", "first ask")
        assert asked.returncode == 0, asked.stderr
        assert "asked agent 'worker'" in asked.stdout and "next step" in asked.stdout
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.communicate()
    (first,) = [e for e in events_of(workdir, "dies") if e["kind"] == "compact_request"]
    assert not [e for e in events_of(workdir, "dies") if e["kind"] == "compact"]  # pending
    state = workdir / "sessions" / "dies" / "state.json"
    before = json.loads(state.read_text())["messages"]
    served = run_cli("compact", "dies", "--workdir", workdir, "--json")
    assert served.returncode == 0, served.stderr
    outcome = json.loads(served.stdout)
    assert outcome["status"] == "compacted"
    assert outcome["answer"]["requests"] == [first["request"], outcome["request"]]
    assert outcome["answer"]["instructions"] == "first ask"
    after = json.loads(state.read_text())["messages"]
    assert len(after) < len(before)
    assert_every_message_that_left_is_logged(workdir, "dies", before, after)


def assert_every_message_that_left_is_logged(
    workdir: Path, session: str, before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> None:
    kept = {m["id"] for m in after}
    logged = {
        json.loads(line)["id"]
        for line in (workdir / "sessions" / session / "context.jsonl").read_text().splitlines()
    }
    left = [m["id"] for m in before if m["id"] not in kept and m["role"] != "system"]
    assert left and set(left) <= logged


async def finished_session(workdir: Path, session: str, probes: int = PROBES) -> None:
    agent = Agent(
        name="done-agent",
        model=ScriptedModel([*(call(f"c{i}", "probe", i=i) for i in range(probes)), "done"]),
        offloader=LocalWorkspace(workdir),
        tools=[probe],
        session_id=session,
        system_prompt="You probe.",
        context_config=ContextConfig(context_window=100_000),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
    )
    async with agent:
        await agent.reply("Probe.")


def test_a_session_nobody_holds_is_compacted_in_place_under_its_lease(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    asyncio.run(finished_session(workdir, "idle"))
    state = workdir / "sessions" / "idle" / "state.json"
    before_bytes = state.stat().st_size
    before = json.loads(state.read_text())
    result = cli("compact", "idle", "--workdir", workdir, "--instructions", "keep the paths")
    assert result.code == 0, result.err
    assert "compacted on the request" in result.out
    after = json.loads(state.read_text())
    assert state.stat().st_size < before_bytes
    system = {k: before["messages"][0][k] for k in ("role", "content")}
    assert {k: after["messages"][0][k] for k in system} == system  # the system prompt, kept
    assert after["agent"] == "done-agent" and after["steps"] == before["steps"]
    assert_every_message_that_left_is_logged(workdir, "idle", before["messages"], after["messages"])
    kinds = [e["kind"] for e in events_of(workdir, "idle")]
    assert kinds.index("compact_request") < kinds.index("compact")
    # The viewer says who asked and the answer, with the sentences `show` prints.
    from ctxoffload.cli.ui._model import UiModel

    page = json.dumps(UiModel(str(workdir)).session("idle"))
    assert "requested by user" in page and "compacted on the request" in page
    assert not (workdir / "sessions" / "idle" / "lease.json").read_text().count('"released": false')
    # The agent resumes from the compacted state.
    model = ScriptedModel(["ok"])

    async def resume() -> None:
        async with Agent(
            model=model,
            offloader=LocalWorkspace(workdir),
            session_id="idle",
            system_prompt="You probe.",
            context_config=ContextConfig(context_window=100_000),
        ) as resumed:
            await resumed.reply("Go on.")

    asyncio.run(resume())
    assert len(model.calls[0]) == len(after["messages"]) + 1


def test_a_session_with_nothing_to_compact_is_answered_with_exit_status_1(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    asyncio.run(finished_session(workdir, "short", probes=0))
    state = (workdir / "sessions" / "short" / "state.json").read_bytes()
    result = cli("compact", "short", "--workdir", workdir)
    assert result.code == 1 and "did not compact on the request" in result.out
    assert "nothing to compact" in result.out
    assert (workdir / "sessions" / "short" / "state.json").read_bytes() == state


def _with_a_block_of_a_newer_release(message: dict[str, Any], where: str) -> None:
    block = {"type": "hologram", "frames": 3}
    if where == "content":
        message["content"] = [{"type": "text", "text": "see"}, block]
    else:  # inside a tool result's output
        message["content"] = [
            {"type": "tool_result", "id": "c0", "name": "probe", "output": [block]}
        ]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["content", "tool output"])
def test_a_state_of_a_newer_release_is_refused_in_one_line_and_left_as_it_was(
    tmp_path: Path, where: str
) -> None:
    workdir = tmp_path / "ws"
    asyncio.run(finished_session(workdir, "newer"))
    state = workdir / "sessions" / "newer" / "state.json"
    saved = json.loads(state.read_text())
    _with_a_block_of_a_newer_release(saved["messages"][2], where)
    state.write_text(json.dumps(saved) + "\n")
    before = snapshot_tree(workdir)
    result = run_cli("compact", "newer", "--workdir", workdir)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "'hologram'" in result.stderr and "message 3" in result.stderr
    assert "upgrade ctxoffload" in result.stderr
    assert snapshot_tree(workdir) == before  # no request written, nothing compacted


@pytest.mark.parametrize("session", ["../x", "/etc/passwd", "a/b", "..", ".hidden"])
def test_a_hostile_session_id_writes_nothing(
    tmp_path: Path, cli: Callable[..., Any], session: str
) -> None:
    """Taken as a host's id, it names a plain folder that is not there: never a path."""
    workdir = tmp_path / "ws"
    (workdir / "sessions" / "real").mkdir(parents=True)
    before = sorted(p for p in tmp_path.rglob("*"))
    result = cli("compact", session, "--workdir", workdir)
    assert result.code == 2 and f"no session {session!r} (a host's id, stored as" in result.err
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_a_session_that_does_not_exist_is_refused_and_not_made(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    (workdir / "sessions" / "real").mkdir(parents=True)
    result = cli("compact", "ghost", "--workdir", workdir)
    assert result.code == 2 and "ghost" in result.err and "real" in result.err
    assert not (workdir / "sessions" / "ghost").exists()


@pytest.mark.slow
def test_requests_pending_together_are_served_by_one_compaction(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    asyncio.run(finished_session(workdir, "two"))
    workspace = LocalWorkspace(workdir)
    holder = start_lease_worker("hold", str(workdir), "two")  # a holder that never serves
    try:
        wait_held(holder)
        first = asyncio.run(request_compaction(workspace, "two", "keep the paths"))
        waited = cli(
            "compact", "two", "--workdir", workdir, "--instructions", "keep ids", "--wait", "0.5"
        )
        assert waited.code == 3 and "no answer after 0.5 s" in waited.out
        assert f"agent 'holder' (pid {holder.pid}" in waited.out
    finally:
        holder.kill()
        holder.communicate()
    served = cli("compact", "two", "--workdir", workdir, "--json")
    assert served.code == 0, served.err
    answer = json.loads(served.out)["answer"]
    assert answer["requests"][0] == first and len(answer["requests"]) == 3
    assert answer["instructions"] == "keep the paths\nkeep ids"
    compacts = [e for e in events_of(workdir, "two") if e["kind"] == "compact"]
    assert len(compacts) == 1


def test_bad_options_are_refused_before_any_write(tmp_path: Path, cli: Callable[..., Any]) -> None:
    workdir = tmp_path / "ws"
    (workdir / "sessions" / "s").mkdir(parents=True)
    for args in (["--wait", "-1"], ["--window", "0"], ["--instructions", "x" * 5000]):
        result = cli("compact", "s", "--workdir", workdir, *args)
        assert result.code == 2, (args, result.err)
    assert not (workdir / "sessions" / "s" / "events.jsonl").exists()

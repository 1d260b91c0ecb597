"""Forks: a new session from exactly what the model was sent at a step of another, by the
workspace's call and by `ctxoffload fork`, continued by an Agent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ConfigError,
    ContextConfig,
    InMemoryWorkspace,
    LocalWorkspace,
    ObjectStoreWorkspace,
    ScriptedModel,
)
from ctxoffload._disk.read import rebuild_step
from helpers import call

PROMPT = "You investigate failures."


def fetch_log(log: str) -> str:
    """Fetch a log.

    Args:
        log: which log.
    """
    return "\n".join(f"{log} line {i} " + "words " * 6 for i in range(600))


def agent(ws: Any, script: list[Any], session: str) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script, context_window=16_000)
    return (
        Agent(
            name="analyst",
            system_prompt=PROMPT,
            model=model,
            tools=[fetch_log],
            offloader=ws,
            session_id=session,
            context_config=ContextConfig(tool_result_limit=300),
        ),
        model,
    )


async def three_steps(ws: Any) -> None:
    first, _ = agent(
        ws, [call("c1", "fetch_log", log="a"), call("c2", "fetch_log", log="b"), "done"], "orig"
    )
    async with first:
        await first.reply("Look at logs a and b")


def plain(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages as role, id and content, whatever their form."""
    out = []
    for m in messages:
        d = m if isinstance(m, dict) else m.model_dump(mode="json")
        out.append({"role": d["role"], "id": d["id"], "content": d["content"]})
    return out


@pytest.mark.slow
def test_a_fork_at_step_n_starts_from_what_show_prints_for_it(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(three_steps(ws))
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws")]
    shown = subprocess.run(
        [*cli, "show", "orig", "--step", "2", "--json"], capture_output=True, text=True, check=True
    )
    at_step_2 = json.loads(shown.stdout)["messages"]
    forked = subprocess.run(
        [*cli, "fork", "orig", "--step", "2", "--as", "retry"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "forked orig at step 2 as retry: 4 messages" in forked.stdout

    async def go_on() -> list[Any]:
        again, model = agent(LocalWorkspace(tmp_path / "ws"), ["another ending"], "retry")
        async with again:
            await again.reply("Try another way")
        return model.calls[0]

    sent = asyncio.run(go_on())
    # Its first request is the step's messages, then the new request. The system prompt is
    # the new agent's (the same text here; a resumed agent always brings its own).
    assert at_step_2[0]["role"] == "system" and sent[0].text == at_step_2[0]["content"]
    assert plain(sent[1:-1]) == plain(at_step_2[1:])
    assert len(at_step_2) == 4
    assert sent[-1].text == "Try another way"
    # Nothing was copied: the fork's messages point at the origin's files.
    assert not list((tmp_path / "ws/sessions/retry").glob("tool_result-*"))
    assert str(ws.session_dir("orig") / "tool_result-c1.txt") in json.dumps(at_step_2)
    record = [
        json.loads(x)
        for x in (tmp_path / "ws/sessions/retry/events.jsonl").read_text().split("\n")
        if x
    ]
    assert record[0]["kind"] == "fork" and record[0]["origin"] == {"session": "orig", "step": 2}
    listed = subprocess.run([*cli, "ls", "--json"], capture_output=True, text=True, check=True)
    assert {r["session"]: r["forked_from"] for r in json.loads(listed.stdout)}["retry"] == "orig"


async def test_a_fork_from_the_saved_state_and_in_memory() -> None:
    ws = InMemoryWorkspace()
    await three_steps(ws)
    event = await ws.fork_session("orig", "copy")
    assert event["origin"] == {"session": "orig", "step": 3}
    state = await ws.read_state("copy")
    saved = await ws.read_state("orig")
    assert state is not None and saved is not None
    assert state["messages"] == saved["messages"]
    assert state["forked_from"] == {"session": "orig", "step": 3}


async def test_a_fork_that_cannot_be_made_writes_nothing(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await three_steps(ws)
    with pytest.raises(LookupError, match=r"no model call at step 9 \(steps 1-3 are recorded"):
        await ws.fork_session("orig", "new", step=9)
    with pytest.raises(ConfigError, match="not 'orig' itself"):
        await ws.fork_session("orig", "orig", step=1)
    with pytest.raises(ConfigError, match="is not a step number"):
        await ws.fork_session("orig", "new", step=0)
    with pytest.raises(ConfigError, match="no saved state"):
        await ws.fork_session("missing", "new")
    assert sorted(p.name for p in (tmp_path / "ws/sessions").iterdir()) == ["orig"]
    await ws.fork_session("orig", "new", step=1)
    with pytest.raises(ConfigError, match="'new' already exists"):
        await ws.fork_session("orig", "new", step=2)


@pytest.mark.slow
def test_fork_on_the_command_line_refuses_bad_input(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(three_steps(ws))
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws"), "fork"]
    for args, said in [
        (["orig", "--as", "../x"], "is not a plain name"),
        (["nope", "--as", "x"], "nope"),
        (["orig", "--step", "7", "--as", "x"], "steps 1-3 are recorded"),
    ]:
        run = subprocess.run([*cli, *args], capture_output=True, text=True)
        assert run.returncode == 2 and said in run.stderr, run.stderr
    assert sorted(p.name for p in (tmp_path / "ws/sessions").iterdir()) == ["orig"]


async def test_a_fork_of_a_session_being_written_names_the_step_its_state_was_saved_after(
    any_workspace: Any,
) -> None:
    ws = any_workspace
    started, go_on = asyncio.Event(), asyncio.Event()

    async def wait_for(what: str) -> str:
        """Wait for something.

        Args:
            what: what to wait for.
        """
        started.set()
        await go_on.wait()
        return f"{what} came"

    model = ScriptedModel(
        [call("c1", "fetch_log", log="a"), call("c2", "wait_for", what="b"), "done"],
        context_window=16_000,
    )
    writer = Agent(
        name="analyst",
        system_prompt=PROMPT,
        model=model,
        tools=[fetch_log, wait_for],
        offloader=ws,
        session_id="live",
        context_config=ContextConfig(tool_result_limit=300),
    )
    async with writer:
        replying = asyncio.create_task(writer.reply("Look at logs a and b"))
        # Step 2's model call is in the record; its tool runs, so the saved state is still
        # the one saved after step 1.
        await started.wait()
        event = await ws.fork_session("live", "copy")
        go_on.set()
        await replying
    assert event["origin"] == {"session": "live", "step": 1}
    events = await ws.read_events("live")
    sent = [m["id"] for m in rebuild_step(events, 1)]
    reply = next(e["reply"] for e in events if e["kind"] == "model_call" and e["step"] == 1)
    state = await ws.read_state("copy")
    assert state is not None and state["forked_from"] == {"session": "live", "step": 1}
    # What step 1 was sent, its reply, then its tool's result: the state saved after it.
    assert [m["id"] for m in state["messages"]][: len(sent) + 1] == [*sent, reply]
    assert len(state["messages"]) == len(sent) + 2


@pytest.mark.slow
def test_a_fork_skips_lines_of_the_record_that_are_not_events(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(three_steps(ws))
    log = tmp_path / "ws/sessions/orig/events.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    first_call = next(i for i, x in enumerate(lines) if json.loads(x)["kind"] == "model_call")
    # A line of JSON that is no event, and a model call that names no step.
    nameless = {k: v for k, v in json.loads(lines[first_call]).items() if k != "step"}
    lines[first_call:first_call] = ["[1, 2, 3]\n", json.dumps(nameless) + "\n"]
    log.write_text("".join(lines))
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws"), "fork", "orig"]
    for new, step, origin in [("at-two", ["--step", "2"], 2), ("saved", [], 3)]:
        run = subprocess.run([*cli, *step, "--as", new], capture_output=True, text=True)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        assert "1 line of its record is not an event" in run.stderr
        state = json.loads((tmp_path / "ws/sessions" / new / "state.json").read_text())
        assert state["forked_from"] == {"session": "orig", "step": origin}


# A fork in its own process: it says it is ready, forks SOURCE at STEP as `race` once told
# to go, and prints `forked` or the name of the error that stopped it.
RACER = """
import asyncio, sys
from ctxoffload import LocalWorkspace

async def fork(ws, source, step):
    try:
        await ws.fork_session(source, "race", step=step)
    except Exception as exc:
        return type(exc).__name__
    return "forked"

ws = LocalWorkspace(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
print(asyncio.run(fork(ws, sys.argv[2], int(sys.argv[3]))), flush=True)
"""


@pytest.mark.slow
def test_two_forks_to_one_new_id_make_one_fork(
    tmp_path: Path, spawn_python: Callable[..., subprocess.Popen[str]]
) -> None:
    workdir = tmp_path / "ws"
    asyncio.run(three_steps(LocalWorkspace(workdir)))
    # `big`: the record of `orig`, then enough other events that reading it takes a while.
    # A fork of it finds `race` absent before the fork of `orig` writes it, and takes the
    # lease of `race` after that fork has let it go.
    (workdir / "sessions/big").mkdir()
    filler = "".join(
        json.dumps({"kind": "note", "n": i, "text": "x" * 80}) + "\n" for i in range(200_000)
    )
    origin = (workdir / "sessions/orig/events.jsonl").read_text()
    (workdir / "sessions/big/events.jsonl").write_text(origin + filler)
    slow = spawn_python(RACER, str(workdir), "big", "2")
    quick = spawn_python(RACER, str(workdir), "orig", "1")
    for racer in (slow, quick):
        assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
    for racer in (slow, quick):
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    said = [racer.communicate(timeout=60)[0].strip() for racer in (slow, quick)]
    assert sorted(said) in (["ConfigError", "forked"], ["SessionBusyError", "forked"]), said
    record = (workdir / "sessions/race/events.jsonl").read_text()
    events = [json.loads(x) for x in record.splitlines()]
    forks = [e["origin"] for e in events if e["kind"] == "fork"]
    winner = (
        {"session": "big", "step": 2} if said[0] == "forked" else {"session": "orig", "step": 1}
    )
    assert forks == [winner]
    state = json.loads((workdir / "sessions/race/state.json").read_text())
    assert state["forked_from"] == winner


def test_fork_refuses_a_new_id_whose_folder_holds_files_but_no_record(
    tmp_path: Path, tree: Callable[[Path], dict[str, bytes | None]]
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(three_steps(ws))
    victim = tmp_path / "ws/sessions/victim"
    victim.mkdir()
    (victim / "context.jsonl").write_text('{"role": "user", "content": "precious"}\n')
    (victim / "tool_result-x.txt").write_text("hello\n")
    (victim / "events.jsonl").write_text('{"kind": "cont')  # a torn first event
    before = tree(victim)
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws"), "fork"]
    run = subprocess.run(
        [*cli, "orig", "--step", "2", "--as", "victim"], capture_output=True, text=True
    )
    assert run.returncode == 2 and "session 'victim' already exists" in run.stderr, run.stderr
    assert tree(victim) == before


async def test_a_fork_refuses_a_new_id_a_bucket_holds_only_a_tool_result_of(s3: Any) -> None:
    bucket = s3.new_bucket()
    ws = ObjectStoreWorkspace(f"s3://{bucket}/ws", **s3.workspace_kwargs())
    await three_steps(ws)
    s3.put_object(bucket, "ws/sessions/victim/tool_result-x.txt", b"hello\n")
    with pytest.raises(ConfigError, match="session 'victim' already exists"):
        await ws.fork_session("orig", "victim", step=2)
    assert await ws.read_state("victim") is None and await ws.read_events("victim") == []

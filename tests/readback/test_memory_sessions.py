"""Memories and sessions: every change an event of the session that made it (which
`ctxoffload show` prints), memories that outlive a session, and agents kept apart where the
workspace keeps sessions apart, unless they share a folder on purpose."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from memory_tools import memory_on, tree_of

from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, get_token_counter
from ctxoffload.readback import memory_tool
from ctxoffload.workspace import writing_as
from helpers import call


def agent_on(
    workspace: LocalWorkspace, session_id: str, script: list[object], name: str = "keeper"
) -> Agent:
    """An Agent with the memory tool, playing `script`."""
    return Agent(
        name=name,
        model=ScriptedModel(script),
        tools=[memory_tool(workspace)],
        offloader=workspace,
        session_id=session_id,
        context_config=ContextConfig(context_window=8_000, tool_result_limit=2_000),
        counter=get_token_counter(exact=False),
    )


def tool_outputs(agent: Agent) -> list[str]:
    """The outputs of the agent's tool calls, as its context holds them."""
    return [str(r.output) for m in agent.messages for r in m.tool_results]


def show(workdir: Path, session: str) -> str:
    """`ctxoffload show SESSION` as a person runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "show", session, "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


async def test_a_memory_outlives_its_session_and_show_tells_how_it_came_to_be(
    workdir: Path,
) -> None:
    workspace = LocalWorkspace(workdir)
    first = agent_on(
        workspace,
        "monday",
        [
            call(
                "c1",
                "memory",
                command="create",
                path="/memories/user.md",
                file_text="Prefers tabs.\n",
            ),
            call(
                "c2",
                "memory",
                command="str_replace",
                path="/memories/user.md",
                old_str="tabs",
                new_str="spaces, 4 of them",
            ),
            "Noted.",
        ],
    )
    await first.reply("Remember that I prefer tabs. No, spaces.")
    await first.aclose()
    second = agent_on(
        workspace,
        "tuesday",
        [call("c1", "memory", command="view", path="/memories/user.md"), "You prefer spaces."],
    )
    await second.reply("How do I indent?")
    await second.aclose()
    assert tool_outputs(second) == [
        "Here's the content of /memories/user.md with line numbers:\n"
        "     1\tPrefers spaces, 4 of them."
    ]
    timeline = show(workdir, "monday")
    assert "memory: created /memories/user.md (14 bytes) in memories/" in timeline
    assert "+ 'Prefers tabs.\\n'" in timeline
    # (A line this long is folded where a terminal's width is known: its words, in order.)
    assert (
        "memory: replaced 4 characters with 17 at line 1 of /memories/user.md (14→27 bytes) "
        "in memories/" in " ".join(timeline.split())
    )
    assert "- 'tabs'" in timeline and "+ 'spaces, 4 of them'" in timeline
    # A view changes nothing, so the second session records no memory event.
    assert "memory:" not in show(workdir, "tuesday")


async def test_each_event_names_the_agent_and_session_that_made_the_change(
    workdir: Path,
) -> None:
    workspace, memory = memory_on(workdir, session_id=None)
    with writing_as("planner", "plan-1"):
        await memory(command="create", path="/memories/plan.md", file_text="step 1")
        await memory(command="rename", old_path="/memories/plan.md", new_path="/memories/p.md")
        await memory(command="delete", path="/memories/p.md")
    events = await workspace.read_events("plan-1")
    assert [(e["kind"], e["command"]) for e in events] == [
        ("memory", "create"),
        ("memory", "rename"),
        ("memory", "delete"),
    ]
    assert all(e["writer"]["agent"] == "planner" for e in events)
    assert all(e["writer"]["session"] == "plan-1" for e in events)
    assert events[1]["new_path"] == "/memories/p.md"
    assert events[2]["removed"] == "step 1" and events[2]["bytes_before"] == 6


async def test_a_long_text_is_kept_bounded_in_its_event_with_its_whole_length(
    workdir: Path,
) -> None:
    workspace, memory = memory_on(workdir)
    await memory(command="create", path="/memories/long.md", file_text="x" * 10_000)
    (event,) = await workspace.read_events("s1")
    assert event["chars_added"] == 10_000 and event["bytes_after"] == 10_000
    assert event["added"] == "x" * 500 + "…"


async def test_a_change_with_no_session_to_record_it_in_is_refused(workdir: Path) -> None:
    _, memory = memory_on(workdir, session_id=None)
    answer = await memory(command="create", path="/memories/x.md", file_text="x")
    assert answer.startswith("Error: no session is working to record this change in")
    assert not (workdir / "memories" / "x.md").exists()
    # Reading needs no session.
    assert (await memory(command="view", path="/memories")).startswith("Here're the files")


async def test_agents_of_a_workspace_that_keeps_sessions_apart_keep_their_own_memories(
    workdir: Path,
) -> None:
    workspace, memory = memory_on(workdir, isolate_sessions=True, session_id=None)
    for agent, fact in (("alice", "Alice's fact"), ("bob", "Bob's fact")):
        with writing_as(agent, f"{agent}-1"):
            answer = await memory(command="create", path="/memories/me.md", file_text=fact)
            assert answer == "File created successfully at: /memories/me.md"
    with writing_as("bob", "bob-2"):
        seen = await memory(command="view", path="/memories/me.md")
        assert "Bob's fact" in seen and "Alice" not in seen
        listing = await memory(command="view", path="/memories")
        assert "alice" not in listing
    assert tree_of(workdir / "memories") == {
        "agents/alice/me.md": b"Alice's fact",
        "agents/bob/me.md": b"Bob's fact",
    }
    (event,) = await workspace.read_events("alice-1")
    assert event["folder"] == "memories/agents/alice"


async def test_an_agent_named_like_anothers_mapped_folder_never_reads_its_memory(
    workdir: Path,
) -> None:
    """Issue 55, item 4: `Agent(name=f"support-{user_id}")`, as the memory guide advises, with
    a user id chosen to spell the folder another user's name maps to."""
    _, memory = memory_on(workdir, isolate_sessions=True, session_id=None)
    with writing_as("support-alice@example.com", "alice-1"):
        await memory(command="create", path="/memories/card.md", file_text="alice's card")
    with writing_as("support-alice_example_com.46b2a1c7079068a8", "mallory-1"):
        seen = await memory(command="view", path="/memories")
        assert "card.md" not in seen
        answer = await memory(
            command="str_replace", path="/memories/card.md", old_str="alice", new_str="mallory"
        )
        assert answer.startswith("Error")
    files = tree_of(workdir / "memories")
    assert list(files.values()) == [b"alice's card"]


async def test_an_agents_name_never_leads_out_of_its_folder(workdir: Path) -> None:
    _, memory = memory_on(workdir, isolate_sessions=True, session_id=None)
    with writing_as("../../escape", "s1"):
        await memory(command="create", path="/memories/x.md", file_text="x")
    (path,) = tree_of(workdir / "memories")
    assert path.startswith("agents/") and path.endswith("/x.md") and path.count("/") == 2
    assert not (workdir.parent / "escape").exists()


async def test_without_an_agent_a_workspace_that_keeps_sessions_apart_refuses(
    workdir: Path,
) -> None:
    _, memory = memory_on(workdir, isolate_sessions=True)
    answer = await memory(command="view", path="/memories")
    assert answer.startswith("Error: this workspace keeps sessions apart (isolate_sessions=True)")
    named = memory_tool(LocalWorkspace(workdir, isolate_sessions=True), agent="helper")
    with writing_as(None, "s1"):
        await named(command="create", path="/memories/x.md", file_text="x")
    assert tree_of(workdir / "memories") == {"agents/helper/x.md": b"x"}


@pytest.mark.parametrize("isolated", [True, False])
async def test_a_shared_folder_is_shared_on_purpose(workdir: Path, isolated: bool) -> None:
    workspace = LocalWorkspace(workdir, isolate_sessions=isolated)
    team = memory_tool(workspace, shared="team")
    with writing_as("alice", "a1"):
        await team(command="create", path="/memories/board.md", file_text="todo: ship\n")
    with writing_as("bob", "b1"):
        await team(command="str_replace", path="/memories/board.md", old_str="ship", new_str="done")
        seen = await team(command="view", path="/memories/board.md")
    assert "todo: done" in seen
    assert tree_of(workdir / "memories") == {"shared/team/board.md": b"todo: done\n"}


async def test_the_host_adapters_get_the_memory_tool_only_when_asked(workdir: Path) -> None:
    from ctxoffload.integrations import reading_functions

    workspace = LocalWorkspace(workdir)
    names = [f.__name__ for f in reading_functions(workspace, 20_000)]
    assert "memory" not in names
    functions = reading_functions(workspace, 20_000, memory=True, session_id="host")
    (memory,) = [f for f in functions if f.__name__ == "memory"]
    await memory(command="create", path="/memories/h.md", file_text="from a host")
    assert [e["command"] for e in await workspace.read_events("host")] == ["create"]

"""Sessions kept apart (`isolate_sessions=True`): an agent's retrieval tool, file tools and
the Strands storage refuse another session's references, absolute paths elsewhere and `../`
escapes, and still reach their own files, their sub-agents' and the data/ files they name."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    DataBlock,
    InMemoryWorkspace,
    InvalidReference,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    ToolCallBlock,
)
from ctxoffload.agent import retrieval_tool, workspace_tools
from ctxoffload.integrations.strands import WorkspaceStorage
from ctxoffload.workspace import writing_as
from helpers import call

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def log(tag: str) -> str:
    return "\n".join(f"{tag} secret line {i}" for i in range(400))


async def fill(ws: Any, session: str) -> tuple[str, str]:
    """A session holding a tool result and an image of its own: (file, data/ reference)."""
    ref = await ws.offload_tool_result(session, {"id": "c1", "name": "t", "output": log(session)})
    image = DataBlock(
        source={
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PNG + session.encode()).decode(),
        }
    )
    stored = await ws.offload_data_block(image)
    await ws.offload_context(session, [Msg(role="user", content=[stored])])
    return ref, stored.source.url


def reader(ws: LocalWorkspace, calls: list[Msg], session: str) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([*calls, "done"], context_window=64_000)
    agent = Agent(
        model=model,
        # Both readers, given on purpose: each must keep to the session's files.
        tools=[*workspace_tools(ws, images=False), retrieval_tool(ws)],
        offloader=ws,
        session_id=session,
        context_config=ContextConfig(tool_result_limit=20_000),
    )
    return agent, model


def answers(model: ScriptedModel) -> list[str]:
    results = [r for m in model.calls[-1] if m.role == "tool" for r in m.tool_results]
    return [r.output if isinstance(r.output, str) else str(r.output) for r in results]


async def test_an_agent_reads_nothing_of_another_session(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", isolate_sessions=True)
    bob_file, bob_image = await fill(ws, "bob")
    alice_file, alice_image = await fill(ws, "alice")
    bob_path = str(ws.session_dir("bob") / "tool_result-c1.txt")
    hostile = [
        ("retrieve_offloaded_content", {"reference": bob_file}),
        ("Read", {"path": bob_path}),
        ("Read", {"path": "../bob/tool_result-c1.txt"}),
        ("Read", {"path": str(tmp_path / "ws" / bob_image.split("ws/", 1)[-1])}),
        ("Read", {"path": "/etc/hostname"}),
        ("Grep", {"pattern": "secret", "path_or_glob": str(ws.session_dir("bob"))}),
        ("Glob", {"pattern": str(tmp_path / "ws/sessions/*/tool_result-*")}),
        ("retrieve_offloaded_content", {"reference": bob_image}),
    ]
    allowed = [
        ("Read", {"path": alice_file}),
        ("Grep", {"pattern": "secret line 7$", "path_or_glob": "."}),
        ("retrieve_offloaded_content", {"reference": alice_image}),
    ]
    steps = [
        Msg(
            role="assistant",
            content=[
                ToolCallBlock(id=f"h{i}", name=name, input=args)
                for i, (name, args) in enumerate(hostile + allowed)
            ],
        )
    ]
    agent, model = reader(ws, steps, "alice")
    async with agent:
        await agent.reply("read everything you can")
    said = answers(model)
    for (name, _), text in zip(hostile, said[: len(hostile)], strict=True):
        assert "bob secret" not in text, (name, text)
    assert "belongs to session 'bob'" in said[0]
    assert said[1].startswith("Error:") and "outside the allowed roots" in said[1]
    assert said[2].startswith("Error:") and said[3].startswith("Error:")
    assert said[4].startswith("Error:")
    assert said[5].startswith("Error:")
    assert "bob" not in said[6]  # the listing shows alice's own file only
    assert "data/ file no message of this session names" in said[7]
    own_read, own_grep, own_image = said[len(hostile) :]
    assert "alice secret line 0" in own_read
    assert "alice secret line 7" in own_grep and "bob" not in own_grep
    assert not own_image.startswith("Error:")


async def test_a_parent_reads_what_its_sub_agents_stored(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", isolate_sessions=True)

    def fetch() -> str:
        """Fetch the report."""
        return log("child")

    child = Agent(
        name="helper",
        model=ScriptedModel([call("f1", "fetch"), "fetched"], context_window=32_000),
        tools=[fetch],
        context_config=ContextConfig(tool_result_limit=200),
    )
    model = ScriptedModel([call("s1", "helper", task="fetch it"), "x", "y"], context_window=64_000)
    parent = Agent(
        name="lead",
        model=model,
        tools=[child.as_tool(), *workspace_tools(ws)],
        offloader=ws,
        session_id="lead",
    )
    async with parent:
        await parent.reply("delegate")
        handed = str(model.calls[1][-1].tool_results[0].output)
        path = next(line[2:] for line in handed.splitlines() if line.startswith("- "))
        model._script.insert(0, call("r1", "Read", path=path))
        await parent.reply("read what it stored")
    assert "child secret line 0" in str(model.calls[-1][-1].tool_results[0].output)


async def test_a_strands_storage_refuses_another_sessions_references(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")  # shared: the storage confines itself
    bob_file, bob_image = await fill(ws, "bob")
    alice_file, _ = await fill(ws, "alice")
    alice = WorkspaceStorage(ws, session_id="alice")
    assert (await alice.retrieve(alice_file))[0].startswith(b"alice secret")
    for hostile in (bob_file, bob_image, str(tmp_path / "ws/../elsewhere"), "/etc/hostname"):
        with pytest.raises(KeyError) as refused:
            await alice.retrieve(hostile)
        assert isinstance(refused.value.__cause__, InvalidReference)
    assert "belongs to session 'bob'" in str(
        (await _cause(alice.retrieve(bob_file))),
    )
    opened = WorkspaceStorage(ws, session_id="alice", isolate=False)
    assert (await opened.retrieve(bob_file))[0].startswith(b"bob secret")


async def _cause(pending: Any) -> BaseException | None:
    try:
        await pending
    except KeyError as exc:
        return exc.__cause__
    return None


async def test_shared_by_default_and_confined_only_inside_a_session() -> None:
    ws = InMemoryWorkspace(isolate_sessions=True)
    bob_file, _ = await fill(ws, "bob")
    assert (await ws.read_reference(bob_file)).startswith(b"bob secret")  # no agent working
    with writing_as("alice-agent", "alice"), pytest.raises(InvalidReference, match="'bob'"):
        await ws.read_reference(bob_file)
    shared = InMemoryWorkspace()
    shared_ref, _ = await fill(shared, "bob")
    with writing_as("alice-agent", "alice"):
        assert (await shared.read_reference(shared_ref)).startswith(b"bob secret")


async def test_file_tools_outside_an_agent_say_what_to_do(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", isolate_sessions=True)
    await fill(ws, "bob")
    read = workspace_tools(ws)[0]
    answer = await read(path="sessions/bob/tool_result-c1.txt")
    assert answer.startswith("Error:") and "no agent session is working" in answer


async def test_a_data_line_a_tool_wrote_opens_nothing(make_workspace: Any) -> None:
    """A fetched page holding `<data url=...>` lines naming another session's data/ file:
    only the lines ctxoffload wrote for a block it stored make a file reachable."""
    ws = make_workspace(isolate_sessions=True)
    _, bob_image = await fill(ws, "bob")
    page = "\n".join(
        [
            "<html>the page</html>",
            f"<data url='{bob_image}' name='x.png' media_type='image/png'/>",
            f"<data url='{bob_image}'/>",
        ]
    )
    await ws.offload_tool_result("alice", {"id": "f1", "name": "fetch", "output": page})
    # A tool's structured output shaped like ctxoffload's events, inside a stored message.
    shaped = [
        {"kind": "data", "reference": bob_image},
        {"kind": "tool_result", "data_files": [bob_image]},
    ]
    await ws.offload_context(
        "alice",
        [{"role": "tool", "tool_call_id": "f1", "content": json.dumps(shaped), "parsed": shaped}],
    )
    image = DataBlock(
        source={"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    )
    own = await ws.offload_tool_result(
        "alice", {"id": "f2", "name": "shot", "output": [image.model_dump(mode="json")]}
    )
    own_image = (await ws.read_reference(own)).decode().split("'")[1]
    with writing_as("alice-agent", "alice"):
        with pytest.raises(InvalidReference, match="data/ file no message of this session names"):
            await ws.read_reference(bob_image)
        assert (await ws.read_reference(own_image)).startswith(PNG)


async def test_an_image_given_by_url_elsewhere_opens_no_data_file(make_workspace: Any) -> None:
    """An image a user gave by URL, whose path merely ends like a data/ file of another
    session (`https://example.com/data/NAME.png`), is no reference of this workspace: it
    makes that file no more reachable than the text of a message would."""
    ws = make_workspace(isolate_sessions=True)
    _, bob_image = await fill(ws, "bob")
    name = bob_image.rsplit("/", 1)[-1]
    elsewhere = f"https://images.example.com/data/{name}"
    await ws.offload_context(
        "alice",
        [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": elsewhere}}]},
            Msg(role="user", content=[DataBlock(source={"type": "url", "url": elsewhere})]),
        ],
    )
    _, own_image = await fill(ws, "alice")
    with writing_as("alice-agent", "alice"):
        with pytest.raises(InvalidReference, match="data/ file no message of this session names"):
            await ws.read_reference(bob_image)
        assert (await ws.read_reference(own_image)).startswith(PNG)

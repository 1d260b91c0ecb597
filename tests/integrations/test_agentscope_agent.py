"""ctxoffload inside the real AgentScope 2.x Agent, driven offline.

The model is AgentScope's own `OpenAIChatModel` and formatter, talking over real HTTP to a
scripted OpenAI-compatible server on 127.0.0.1 (tests/openai_server.py), so every
request body the agent sends is what a provider would receive. Runs in the environment
`.ci/run` builds with `ctxoffload[agentscope]`; skipped elsewhere.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agentscope", "agentscope")

from agentscope.agent import Agent, ContextConfig  # noqa: E402
from agentscope.credential import OpenAICredential  # noqa: E402
from agentscope.message import (  # noqa: E402
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
)
from agentscope.model import OpenAIChatModel  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.tool import FunctionTool, Toolkit  # noqa: E402

from ctxoffload import LocalWorkspace  # noqa: E402
from ctxoffload.exceptions import ConfigError  # noqa: E402
from ctxoffload.integrations.agentscope import AgentScopeOffloader  # noqa: E402
from helpers import SUMMARY, MinimalOffloader  # noqa: E402
from openai_server import OpenAIServer, chat_completion  # noqa: E402

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test")


def page(number: int, lines: int = 800) -> str:
    return "\n".join(f"page {number} line {i} " + "x" * 40 for i in range(lines))


def fetch(number: int) -> str:
    """Fetch one page of the report.

    Args:
        number: the page number.
    """
    return page(number)


def one_line(length: int) -> str:
    """Return one very long line.

    Args:
        length: how many characters.
    """
    return "".join(f"{i:08d}" for i in range(length // 8))


def tool_call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return chat_completion(
        None,
        tool_calls=[
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    )


def answer_summaries(body: Any) -> dict[str, Any] | None:
    """Answer AgentScope's structured-output (compression) requests with a summary."""
    choice = json.dumps(body.get("tool_choice")) if isinstance(body, dict) else ""
    if "generate_structured_output" not in choice:
        return None
    return tool_call("summary", "generate_structured_output", **SUMMARY)


_MODELS: list[OpenAIChatModel] = []


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    """Close each model's HTTP client, as an application would on shutdown."""
    yield
    while _MODELS:
        await _MODELS.pop().client.close()


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        running.responder = answer_summaries
        yield running


def make_agent(
    server: OpenAIServer,
    offloader: Any,
    *,
    tools: tuple[Any, ...] = (fetch,),
    extra_tools: list[Any] | None = None,
    middlewares: list[Any] | None = None,
    context_size: int = 100_000,
    **config: Any,
) -> Agent:
    model = OpenAIChatModel(
        credential=OpenAICredential(api_key="test", base_url=server.base_url),
        model="gpt-4o",
        stream=False,
        max_retries=0,
        context_size=context_size,
    )
    _MODELS.append(model)
    toolkit = Toolkit(
        tools=[FunctionTool(t, permission=ALLOW) for t in tools] + (extra_tools or [])
    )
    if middlewares is None and isinstance(offloader, AgentScopeOffloader):
        middlewares = [offloader.middleware]
    return Agent(
        name="analyst",
        system_prompt="You read reports.",
        model=model,
        toolkit=toolkit,
        offloader=offloader,
        middlewares=middlewares or [],
        context_config=ContextConfig(**config),
    )


def user(text: str, *blocks: Any) -> Msg:
    return Msg(name="user", role="user", content=[TextBlock(text=text), *blocks])


def tool_messages(request: dict[str, Any]) -> list[str]:
    out = []
    for message in request["messages"]:
        if message["role"] == "tool":
            content = message["content"]
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def request_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"])


async def test_the_file_holds_the_whole_result_with_the_lines_the_agent_saw(
    server: OpenAIServer, tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    server.add(tool_call("c1", "fetch", number=7), chat_completion("done"))
    agent = make_agent(server, AgentScopeOffloader(ws), tool_result_limit=500)
    reply = await agent.reply(user("read page 7"))
    assert reply.get_text_content() == "done"

    (seen,) = tool_messages(server.requests[-1])
    path = re.search(r"refer to the file in '([^']+)'", seen)
    assert path, seen
    file = Path(path.group(1))
    assert file.is_absolute() and file.parent.parent.parent == (tmp_path / "ws").resolve()
    assert file.read_text(encoding="utf-8") == page(7)
    head = (
        json.loads(seen)[0]["text"].split("\n<<<TRUNCATED>>>")[0]
        if seen.startswith("[")
        else (seen.split("\n<<<TRUNCATED>>>")[0])
    )
    assert page(7).startswith(head) and len(head) < len(page(7))


async def test_the_bare_workspace_works_as_agentscopes_offloader(
    server: OpenAIServer, tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    server.add(tool_call("c1", "fetch", number=1), chat_completion("done"))
    agent = make_agent(server, ws, tool_result_limit=500)
    assert (await agent.reply(user("go"))).get_text_content() == "done"
    files = list((tmp_path / "ws" / "sessions").glob("*/tool_result-c1.txt"))
    assert len(files) == 1 and page(1).endswith(files[0].read_text(encoding="utf-8"))


def png(seed: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes([seed]) * 64


def image(seed: int) -> DataBlock:
    data = base64.b64encode(png(seed)).decode()
    return DataBlock(source=Base64Source(data=data, media_type="image/png"), name=f"shot-{seed}")


async def test_images_beyond_max_image_num_go_to_data_and_the_reply_goes_on(
    server: OpenAIServer, tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    agent = make_agent(server, AgentScopeOffloader(ws), max_image_num=1)
    for seed in range(3):
        server.add(chat_completion(f"seen {seed}"))
        reply = await agent.reply(user(f"look at shot {seed}", image(seed)))
        assert reply.get_text_content() == f"seen {seed}"
    sent = request_text(server.requests[-1])
    for seed in (0, 1):
        stored = tmp_path / "ws" / "data"
        matches = [p for p in stored.glob("*.png") if p.read_bytes() == png(seed)]
        assert len(matches) == 1, f"image {seed} is not in data/"
        assert f"file://{matches[0].resolve()}" in sent or f"file://{matches[0]}" in sent
    assert base64.b64encode(png(2)).decode() in sent  # the newest image is still sent


async def test_images_an_agent_holds_only_by_url_survive_gc(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxoffload.workspace._disk_store as disk_store

    ws = LocalWorkspace(tmp_path / "ws")
    agent = make_agent(server, AgentScopeOffloader(ws), max_image_num=1)
    for seed in range(3):
        server.add(chat_completion(f"seen {seed}"))
        await agent.reply(user(f"look at shot {seed}", image(seed)))
    # Nothing compressed: the URLs of images 0 and 1 are only in the agent's context; the
    # data events in its session name them.
    session = str(agent.state.session_id)
    named = {e["reference"] for e in await ws.read_events(session) if e["kind"] == "data"}
    assert len(named) == 2
    monkeypatch.setattr(disk_store, "DATA_GRACE_SECONDS", 0.0)  # as an hour later
    assert (await ws.gc()).data_removed == []
    stored = {p.read_bytes() for p in (tmp_path / "ws" / "data").glob("*.png")}
    assert {png(0), png(1)} <= stored


async def test_context_lines_with_images_load_back_as_agentscope_messages(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    msgs = [user("first", image(1)), user("second", image(2))]
    ref = await ws.offload_context("s1", msgs=msgs)
    lines = Path(str(ref)).read_text(encoding="utf-8").splitlines()
    back = [Msg.model_validate_json(line) for line in lines]
    for seed, msg in zip((1, 2), back, strict=True):
        block = msg.content[1]
        assert isinstance(block, DataBlock) and str(block.source.url).startswith("file:///")
        assert await ws.read_reference(str(block.source.url)) == png(seed)
    stored = await ws.offload_data_block(image(3))
    assert isinstance(stored, DataBlock) and stored.source.media_type == "image/png"
    assert Path(str(stored.source.url).removeprefix("file://")).read_bytes() == png(3)


async def test_two_compressions_land_in_context_jsonl(server: OpenAIServer, tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    for i in range(12):
        server.add(tool_call(f"c{i}", "fetch", number=i))
    server.add(chat_completion("done"))
    agent = make_agent(server, AgentScopeOffloader(ws), context_size=3_000, tool_result_limit=400)
    assert (await agent.reply(user("read pages 0-11"))).get_text_content() == "done"
    logs = list((tmp_path / "ws" / "sessions").glob("*/context.jsonl"))
    assert len(logs) == 1
    rows = [Msg.model_validate_json(line) for line in logs[0].read_text().splitlines()]
    compressions = [e for e in server.requests if answer_summaries(e) is not None]
    assert len(compressions) >= 2, len(compressions)
    # AgentScope keeps appending to one reply Msg: each compression stores the version it
    # dropped, under the same id, so no tool call or result is missing from the log.
    logged = {
        block.id
        for row in rows
        for block in row.content
        if getattr(block, "type", None) in ("tool_call", "tool_result")
    }
    last = server.requests[-1]["messages"]
    live = {m.get("tool_call_id") for m in last} | {
        c["id"] for m in last for c in m.get("tool_calls") or []
    }
    assert {f"c{i}" for i in range(12)} <= logged | live
    assert str(logs[0].resolve()) in request_text(server.requests[-1])


async def test_a_failing_workspace_never_aborts_the_reply(
    server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "ws"
    for i in range(4):
        server.add(tool_call(f"c{i}", "fetch", number=i))
    server.add(chat_completion("done"))
    agent = make_agent(
        server,
        AgentScopeOffloader(LocalWorkspace(blocker)),
        context_size=12_000,
        tool_result_limit=800,
    )
    # The workspace breaks after the offloader was built (a folder that is a file then is
    # refused at construction: tests/integrations/test_contract.py).
    blocker.write_text("a file where the workspace directory should be")
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        reply = await agent.reply(user("read pages 0-3"))
    assert reply.get_text_content() == "done"
    # every result stayed whole in the context, since none could be stored
    sent = tool_messages(server.requests[-1])
    assert sent and all("<<<TRUNCATED>>>" not in t for t in sent)
    assert page(3) in json.loads(json.dumps(sent[-1])) or "page 3 line 799" in sent[-1]
    assert "keeping it whole in the context" in caplog.text
    assert "the context was not compressed" in caplog.text


async def test_concurrent_agents_share_one_workspace(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    offloader = AgentScopeOffloader(ws)
    servers = [OpenAIServer().start() for _ in range(5)]
    try:
        agents = []
        for n, server in enumerate(servers):
            server.responder = answer_summaries
            server.add(tool_call(f"c{n}", "fetch", number=n), chat_completion(f"done {n}"))
            agents.append(make_agent(server, offloader, tool_result_limit=400))
        replies = await asyncio.gather(*(a.reply(user("go")) for a in agents))
    finally:
        for server in servers:
            server.stop()
    assert [r.get_text_content() for r in replies] == [f"done {n}" for n in range(5)]
    for n, agent in enumerate(agents):
        file = tmp_path / "ws" / "sessions" / agent.state.session_id / f"tool_result-c{n}.txt"
        assert file.read_text(encoding="utf-8") == page(n)


async def test_a_hostile_tool_call_id_stays_inside_the_workspace(
    server: OpenAIServer, tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    server.add(tool_call("../../../../evil", "fetch", number=2), chat_completion("done"))
    agent = make_agent(server, AgentScopeOffloader(ws), tool_result_limit=400)
    assert (await agent.reply(user("go"))).get_text_content() == "done"
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and "ws" not in p.parts]
    assert outside == []
    (written,) = (tmp_path / "ws" / "sessions").glob("*/tool_result-*evil*.txt")
    assert written.read_text(encoding="utf-8") == page(2)


async def test_the_retrieval_tool_reads_a_long_line_back_in_pieces(
    server: OpenAIServer, tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    offloader = AgentScopeOffloader(ws)
    server.add(tool_call("c1", "one_line", length=40_000))
    agent = make_agent(
        server,
        offloader,
        tools=(one_line,),
        extra_tools=offloader.tools(),
        tool_result_limit=300,
    )
    session = agent.state.session_id
    path = str((tmp_path / "ws" / "sessions" / session / "tool_result-c1.txt").resolve())
    server.add(
        tool_call(
            "c2",
            "retrieve_offloaded_content",
            reference=path,
            line_range=[1, 1],
            char_offset=20_000,
        ),
        chat_completion("done"),
    )
    assert (await agent.reply(user("go"))).get_text_content() == "done"
    read_back = tool_messages(server.requests[-1])[-1]
    assert one_line(40_000)[20_000:20_400] in read_back


def test_anything_but_an_offloader_is_refused_naming_what_it_lacks() -> None:
    with pytest.raises(ConfigError, match="no offload_context, offload_tool_result"):
        AgentScopeOffloader(object())  # type: ignore[arg-type]


def test_a_custom_offloader_is_taken_and_its_retrieval_tool_refused() -> None:
    offloader = AgentScopeOffloader(MinimalOffloader())
    with pytest.raises(ConfigError, match="has no read_reference"):
        offloader.tools()


# Workdir names a file:// URL must percent-encode: AgentScope's URL type encodes a space and
# é itself, and keeps % # ? raw, so a URL made as "file://" + path was refused by
# read_reference or decoded (by any reader of URLs) to another file.
AWKWARD_WORKDIRS = ["with space", "caf\u00e9", "100%41", "a#b", "what?x", "all %41 #? \u00e9"]


@pytest.mark.parametrize("name", AWKWARD_WORKDIRS)
async def test_data_block_urls_read_back_from_any_workdir(tmp_path: Path, name: str) -> None:
    ws = LocalWorkspace(tmp_path / name / "ws")
    ref = await ws.offload_context("s1", msgs=[user("first", image(1))])
    [line] = Path(str(ref)).read_text(encoding="utf-8").splitlines()
    stored = await ws.offload_data_block(image(2))
    for seed, block in ((1, Msg.model_validate_json(line).content[1]), (2, stored)):
        assert isinstance(block, DataBlock)
        url = str(block.source.url)
        # Decoded as a URL by the standard library, it names the file that was stored ...
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        assert path.parent == tmp_path / name / "ws" / "data"
        assert path.read_bytes() == png(seed)
        # ... and the workspace reads it back.
        assert await ws.read_reference(url) == png(seed)


async def test_a_reply_is_the_sessions_one_live_writer_and_signs_its_events(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The middleware holds the agent's session for the length of a reply: every event
    written meanwhile names the agent, and a reply while another writer holds the session
    is refused naming it; the lease is given up when the reply ends."""
    from ctxoffload import SessionBusyError

    ws = LocalWorkspace(tmp_path / "ws")
    server.add(tool_call("c1", "fetch", number=7), chat_completion("done"))
    agent = make_agent(server, AgentScopeOffloader(ws), tool_result_limit=500)
    assert (await agent.reply(user("read page 7"))).get_text_content() == "done"
    session = str(agent.state.session_id)
    events = [json.loads(x) for x in ws.events_path(session).read_text().splitlines()]
    assert events and all(e["writer"]["agent"] == "analyst" for e in events)
    assert "released" in json.loads((ws.session_dir(session) / "lease.json").read_text())

    held = await LocalWorkspace(tmp_path / "ws").acquire_lease(session, agent="someone-else")
    server.add(chat_completion("again"))
    with pytest.raises(SessionBusyError, match="someone-else"):
        await agent.reply(user("and now?"))
    await held.release()
    assert (await agent.reply(user("and now?"))).get_text_content() == "again"

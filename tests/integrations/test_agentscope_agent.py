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
from ctxoffload.exceptions import ConfigError, OffloadError  # noqa: E402
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
    state: Any = None,
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
        state=state,
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


def stored_files(root: Path, session: str) -> list[str]:
    return sorted(p.name for p in (root / "sessions" / session).glob("tool_result-*"))


async def test_a_cut_part_that_cannot_be_stored_fails_the_reply_without_the_middleware(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """Without the middleware AgentScope hands the offloader the part it cut off and drops
    it from the context: a failure to store it was answered with a made-up reference, so
    the reply went on with the part lost and the model told "(nowhere: ...)". It fails now,
    as the bare workspace's does; the context never lost a line it could not get back."""
    blocker = tmp_path / "ws"
    server.add(tool_call("c1", "fetch", number=9), chat_completion("done"))
    agent = make_agent(server, AgentScopeOffloader(LocalWorkspace(blocker)), middlewares=[])
    agent.context_config.tool_result_limit = 300
    blocker.write_text("the disk broke after start")
    with pytest.raises(Exception) as raised:  # AgentScope's ExceptionGroup (Python 3.11+)
        await agent.reply(user("read page 9"))
    assert raised.group_contains(OffloadError, match="reply stops rather than lose it")
    assert len(server.requests) == 1  # the model was never told of a file that is not there


async def test_the_middleware_refuses_an_agent_with_another_offloader_before_the_first_call(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The middleware of one offloader on an agent given another offloader (or none) stored
    each big result whole where the model was never told, and kept a record of it for good;
    one ConfigError says so before the model is called."""
    offloader = AgentScopeOffloader(LocalWorkspace(tmp_path / "ws"))
    server.add(chat_completion("done"))
    for given in (None, LocalWorkspace(tmp_path / "ws")):
        agent = make_agent(server, given, middlewares=[offloader.middleware])
        with pytest.raises(ConfigError, match="pass the same object to both"):
            await agent.reply(user("go"))
    assert server.requests == []


async def test_concurrent_tool_calls_each_decide_whether_their_result_is_stored(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """Two results at once, one whose storing fails: the limit lifted for the whole agent
    while the first passed AgentScope's split made the second skip the middleware and be cut
    afterwards, its file holding only the tail. Each call decides for itself now: the failed
    one stays whole in the context, the other's file holds all of it."""
    ws = LocalWorkspace(tmp_path / "ws")

    class FailsForBad(MinimalOffloader):
        async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
            if "bad" in str(tool_result.id):
                raise OSError(28, "No space left on device")
            return str(await ws.offload_tool_result(session_id, tool_result))

    async def slow_fetch(number: int) -> str:
        """Fetch a page slowly.

        Args:
            number: the page number.
        """
        await asyncio.sleep(0.2 if number == 1 else 0.26)
        return page(number)

    calls = [
        {"id": c, "type": "function", "function": {"name": "slow_fetch", "arguments": a}}
        for c, a in (("bad1", '{"number": 1}'), ("good2", '{"number": 2}'))
    ]
    server.add(chat_completion(None, tool_calls=calls), chat_completion("done"))
    agent = make_agent(
        server, AgentScopeOffloader(FailsForBad()), tools=(slow_fetch,), tool_result_limit=400
    )
    count_tokens = agent.model.count_tokens

    async def slow_count(messages: Any, tools: Any = None) -> int:
        await asyncio.sleep(0.05)  # a tokenizer that awaits lets the other call run
        return int(await count_tokens(messages, tools))

    agent.model.count_tokens = slow_count  # type: ignore[method-assign]
    assert (await agent.reply(user("go"))).get_text_content() == "done"
    sent = dict(zip(("bad1", "good2"), tool_messages(server.requests[-1]), strict=True))
    assert "<<<TRUNCATED>>>" not in sent["bad1"] and "page 1 line 799" in sent["bad1"]
    assert "<<<TRUNCATED>>>" in sent["good2"]
    (file,) = (tmp_path / "ws" / "sessions").glob("*/tool_result-good2.txt")
    assert file.read_text(encoding="utf-8") == page(2)
    assert agent.context_config.tool_result_limit == 400


async def test_the_retrieval_tools_answers_are_never_cut_and_stored_again(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """Reading a stored result back with the door's own tool gave an answer over the limit,
    which was cut and stored again as a new file, and so on at each read. A reader's answer
    is bounded by its max_output_chars: it reaches the model whole, and nothing more is
    stored."""
    offloader = AgentScopeOffloader(LocalWorkspace(tmp_path / "ws"))
    agent = make_agent(server, offloader, extra_tools=offloader.tools(), tool_result_limit=500)
    session = str(agent.state.session_id)
    path = str((tmp_path / "ws" / "sessions" / session / "tool_result-c1.txt").resolve())
    server.add(
        tool_call("c1", "fetch", number=7),
        tool_call("c2", "retrieve_offloaded_content", reference=path, line_range=[1, 200]),
        chat_completion("done"),
    )
    assert (await agent.reply(user("read page 7, then read it back"))).get_text_content() == "done"
    read_back = tool_messages(server.requests[-1])[-1]
    assert "<<<TRUNCATED>>>" not in read_back and "page 7 line 199 " in read_back
    assert stored_files(tmp_path / "ws", session) == ["tool_result-c1.txt"]
    assert agent.context_config.tool_result_limit == 500  # lifted for that call alone


def test_a_max_output_chars_that_is_not_an_int_is_a_config_error(tmp_path: Path) -> None:
    """tools(max_output_chars="20000") raised TypeError from inside the retrieval tool."""
    offloader = AgentScopeOffloader(LocalWorkspace(tmp_path / "ws"))
    with pytest.raises(ConfigError, match="max_output_chars '20000' is not a positive int"):
        offloader.tools(max_output_chars="20000")  # type: ignore[arg-type]


def attachment() -> DataBlock:
    data = base64.b64encode(b"PK\x03\x04 bob's private zip").decode()
    return DataBlock(source=Base64Source(data=data, media_type="application/zip"), name="b.zip")


async def test_a_block_stored_outside_a_reply_is_reachable_by_its_agent_only(
    tmp_path: Path,
) -> None:
    """An attachment `observe`d outside a reply was named in a session called "agentscope",
    a name a user's conversation can have: under isolate_sessions that conversation read
    bob's file and bob could not. It is named in a session no conversation can have, and in
    bob's own once his next reply begins."""
    from agentscope.state import AgentState

    ws = LocalWorkspace(tmp_path / "ws", isolate_sessions=True)
    offloader = AgentScopeOffloader(ws)
    answers: dict[str, str] = {}
    with OpenAIServer() as server:
        bob = make_agent(
            server, offloader, extra_tools=offloader.tools(), state=AgentState(session_id="bob")
        )
        await bob.observe(user("my file", attachment()))
        url = re.search(r"file://\S+\.zip", json.dumps(bob.state.context[-1].model_dump()))
        assert url is not None
        for who in ("agentscope", "bob"):
            server.add(
                tool_call("r1", "retrieve_offloaded_content", reference=url.group(0)),
                chat_completion("done"),
            )
            agent = bob
            if who != "bob":
                agent = make_agent(
                    server,
                    offloader,
                    extra_tools=offloader.tools(),
                    state=AgentState(session_id=who),
                )
            await agent.reply(user("read it"))
            answers[who] = tool_messages(server.requests[-1])[-1]
    assert "belongs to a data/ file" in answers["agentscope"]
    assert "bob's private zip" in answers["bob"]
    sessions = {p.name for p in (tmp_path / "ws" / "sessions").iterdir()}
    assert "agentscope" not in sessions or not any(
        e["kind"] == "data" for e in await ws.read_events("agentscope")
    )


async def test_a_reply_stream_read_no_further_gives_the_session_to_the_agents_next_reply(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """A consumer that stops reading `reply_stream` (a stop button: `break`) left the reply
    waiting at a yield with the session's lease, so the same agent's next reply was refused
    with SessionBusyError naming itself. The next reply takes the session over, and the
    stopped one, read again, writes nothing more."""
    from ctxoffload import SessionBusyError

    ws = LocalWorkspace(tmp_path / "ws")
    server.add(tool_call("c1", "fetch", number=1), chat_completion("done"))
    agent = make_agent(server, AgentScopeOffloader(ws), tool_result_limit=300)
    stream = agent.reply_stream(user("go"))
    async for _ in stream:
        break
    server.add(chat_completion("again"))
    await agent.reply(user("again?"))  # not refused
    with pytest.raises(SessionBusyError, match="took its session"):
        await anext(stream)
    session = str(agent.state.session_id)
    assert "released" in json.loads((ws.session_dir(session) / "lease.json").read_text())


async def test_compress_context_outside_a_reply_holds_the_session(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """`agent.compress_context()` called by an application outside a reply wrote the
    session while another writer held it; it takes the session's lease as a reply does, and
    is refused in the door's terms meanwhile."""
    from ctxoffload import SessionBusyError

    ws = LocalWorkspace(tmp_path / "ws")
    agent = make_agent(server, AgentScopeOffloader(ws))
    session = str(agent.state.session_id)
    held = await LocalWorkspace(tmp_path / "ws").acquire_lease(session, agent="someone-else")
    with pytest.raises(SessionBusyError, match=r"someone-else.*give the agent another session_id"):
        await agent.compress_context()
    await held.release()
    await agent.compress_context()  # nothing to compress: welcome once the session is free
    lease = json.loads((ws.session_dir(session) / "lease.json").read_text())
    assert lease["agent"] == "analyst" and "released" in lease


async def test_the_compression_tool_says_it_failed_when_the_context_cannot_be_stored(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The model calls AgentScope's CompressContext while the workspace cannot store the
    messages it would drop: the tool said "not long enough to compress"; it says it failed."""

    def fetch_short(number: int) -> str:
        """Fetch a short page.

        Args:
            number: the page number.
        """
        return page(number, 120)

    class NoContext(MinimalOffloader):
        async def offload_context(self, session_id: str, msgs: Any) -> str:
            raise OSError(28, "No space left on device")

    for i in range(4):
        server.add(tool_call(f"c{i}", "fetch_short", number=i))
    server.add(tool_call("cc", "CompressContext"), chat_completion("done"))
    agent = make_agent(
        server,
        AgentScopeOffloader(NoContext()),
        tools=(fetch_short,),
        context_size=12_000,
        tool_result_limit=5_000,
        compression_tool_enabled=True,
        trigger_ratio=0.9,
        context_buffer_ratio=0.5,
    )
    assert (await agent.reply(user("go"))).get_text_content() == "done"
    told = tool_messages(server.requests[-1])[-1]
    assert "Context compression failed" in told and "No space left on device" in told


async def test_a_sub_agent_run_as_a_tool_is_linked_to_its_parent(tmp_path: Path) -> None:
    """A tool that awaits another agent's reply (AgentScope's sub-agent): with its own
    conversation it was not linked to the parent, whose model could not read its files back
    under isolate_sessions; on the parent's conversation it was refused as a second writer.
    Its own conversation is linked both ways now, and on the parent's it writes a child
    session of it."""
    from agentscope.state import AgentState

    ws = LocalWorkspace(tmp_path / "ws", isolate_sessions=True)
    offloader = AgentScopeOffloader(ws)
    child_server = OpenAIServer().start()
    sessions: list[str] = []
    own: list[bool] = []

    async def research(question: str) -> str:
        """Ask the research sub-agent.

        Args:
            question: the question.
        """
        child_server.add(tool_call("k1", "fetch", number=5), chat_completion("child answer"))
        state = None if own[-1] else AgentState(session_id="user-7")
        child = make_agent(child_server, offloader, tool_result_limit=300, state=state)
        reply = await child.reply(user(question))
        sessions.append(str(child.state.session_id))
        return str(reply.get_text_content())

    try:
        for own_session in (True, False):
            own.append(own_session)
            with OpenAIServer() as server:
                server.add(
                    tool_call("p1", "research", question="find it"),
                    chat_completion("parent done"),
                )
                parent = make_agent(
                    server,
                    offloader,
                    tools=(research,),
                    extra_tools=offloader.tools(),
                    tool_result_limit=300,
                    state=AgentState(session_id="user-7"),
                )
                assert (await parent.reply(user("go"))).get_text_content() == "parent done"
                assert "child answer" in tool_messages(server.requests[-1])[0]
                links = [
                    e["session"] for e in await ws.read_events("user-7") if e["kind"] == "subagent"
                ]
                child = links[-1]
                if own_session:
                    assert child == sessions[-1]
                else:
                    assert child.startswith("user-7--analyst-")
                door = (await ws.read_events(child))[0]
                assert door["kind"] == "door" and door["parent"]["session"] == "user-7"
                path = str((tmp_path / "ws" / "sessions" / child / "tool_result-k1.txt").resolve())
                server.add(
                    tool_call("p2", "retrieve_offloaded_content", reference=path),
                    chat_completion("read"),
                )
                await parent.reply(user("read the sub-agent's file"))
                assert "page 5 line 0 " in tool_messages(server.requests[-1])[-1]
    finally:
        child_server.stop()


async def test_the_sessions_a_door_announced_are_bounded(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The door remembered every session it wrote the `door` event of, for good (a server
    opening a session per conversation grew without end); it keeps the most recent
    ANNOUNCED_KEPT, as every door does, and a session forgotten gets its event again."""
    from agentscope.state import AgentState

    import ctxoffload._doors.runs as runs

    monkeypatch.setattr(runs, "ANNOUNCED_KEPT", 2)
    ws = LocalWorkspace(tmp_path / "ws")
    offloader = AgentScopeOffloader(ws)
    for session in ("s1", "s2", "s3", "s1"):
        server.add(chat_completion("ok"))
        agent = make_agent(server, offloader, state=AgentState(session_id=session))
        await agent.reply(user("hi"))
    kinds = [e["kind"] for e in await ws.read_events("s1")]
    assert kinds.count("door") == 2


MODULE_BODY = "".join(
    f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
)
"""A module of 1,500 lines a model writes whole in one call (~20,000 tokens)."""


async def test_a_call_that_wrote_a_whole_file_is_cut_once_it_ran(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The model writes a whole module in one call (~20,000 tokens against an 8,000-token
    context size): the middleware cut tool results only, so AgentScope sent the call whole
    in the next request (its own compression's), over the window. The tool gets it whole;
    once it ran, the call's long argument is stored whole in a file of the session and the
    call keeps its id, its path, a head and a notice naming the file, in every later
    request."""
    written: list[str] = []

    def write_file(path: str, content: str) -> str:
        """Write a file.

        Args:
            path: where.
            content: the whole text.
        """
        written.append(content)
        return f"wrote {len(content)} characters to {path}"

    ws = LocalWorkspace(tmp_path / "ws")
    server.add(
        tool_call("w1", "write_file", path="app/report.py", content=MODULE_BODY),
        chat_completion("written"),
        chat_completion("nothing more"),
    )
    agent = make_agent(server, AgentScopeOffloader(ws), tools=(write_file,), context_size=8_000)
    assert (await agent.reply(user("write the report module"))).get_text_content() == "written"
    assert (await agent.reply(user("anything else?"))).get_text_content() == "nothing more"

    assert written == [MODULE_BODY]
    # No later request sends it whole: not the model's, not AgentScope's compression's.
    assert all("line 1499:" not in request_text(r) for r in server.requests[1:])
    later = [r for r in server.requests[1:] if "generate_structured_output" not in json.dumps(r)]
    assert len(later) == 2
    for request in later:
        (call,) = [
            c for m in request["messages"] for c in m.get("tool_calls") or () if c["id"] == "w1"
        ]
        arguments = json.loads(call["function"]["arguments"])
        assert arguments["path"] == "app/report.py"
        content = arguments["content"]
        assert "<<<TRUNCATED>>>" in content and MODULE_BODY.startswith(content[:200])
    session = next((tmp_path / "ws/sessions").iterdir())
    named = [p for p in session.glob("tool_result-w1_*") if str(p.name) in content]
    assert [p.read_text(encoding="utf-8") for p in named] == [MODULE_BODY]

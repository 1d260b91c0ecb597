"""`ctxoffload mcp-proxy` against a real MCP server over stdio, driven by the `mcp` SDK's real
client through the real proxy subprocess: what passes through unchanged, what is stored and
how it is read back."""

from __future__ import annotations

from frameworks import require_framework

require_framework("mcp", "mcp")

import base64  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from mcp_proxy import LIMIT, direct, events, proxied, sessions, stored_path, text_of  # noqa: E402
from mcp_server import BUSY, NOT_UTF8, big_text, png  # noqa: E402

from ctxoffload import get_token_counter  # noqa: E402
from ctxoffload.text import TRUNCATION_MARKER  # noqa: E402

OUR_TOOLS = ["Read", "Grep", "Glob"]


def _dump(model: Any) -> Any:
    """A protocol model as JSON, without `_meta` (each server stamps its own there)."""
    value = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    value.pop("_meta", None)
    return value


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_prompts_and_resources_pass_through_unchanged(workdir: Path, mode: str) -> None:
    async with direct(mode=mode) as plain, proxied(workdir, mode=mode) as client:
        wrapped = (await plain.list_tools()).tools
        listed = (await client.list_tools()).tools
        # Every wrapped tool, as the server lists it, less its outputSchema; then ours.
        expected = [_dump(t.model_copy(update={"output_schema": None})) for t in wrapped]
        assert [_dump(t) for t in listed[: len(wrapped)]] == expected
        assert [t.name for t in listed[len(wrapped) :]] == OUR_TOOLS
        assert all(t.annotations.read_only_hint for t in listed[len(wrapped) :])

        assert _dump(await client.list_prompts()) == _dump(await plain.list_prompts())
        got = await client.get_prompt("greet", {"name": "Ada"})
        assert _dump(got) == _dump(await plain.get_prompt("greet", {"name": "Ada"}))
        assert got.messages[0].content.text == "Hello, Ada!"

        assert _dump(await client.list_resources()) == _dump(await plain.list_resources())
        assert _dump(await client.list_resource_templates()) == _dump(
            await plain.list_resource_templates()
        )
        for uri in ("mem://notes", "mem://raw", "mem://item/42"):
            assert _dump(await client.read_resource(uri)) == _dump(await plain.read_resource(uri))
        # Bytes that are not UTF-8 arrive as they were sent.
        raw = (await client.read_resource("mem://raw")).contents[0]
        assert base64.b64decode(raw.blob) == NOT_UTF8

        # A small result passes as it came, structuredContent included.
        small = await client.call_tool("describe", {"query": "x"})
        assert small.structured_content == {"answer": "about x"}
        assert _dump(small) == _dump(await plain.call_tool("describe", {"query": "x"}))


async def test_a_5_mb_result_arrives_as_head_and_notice_and_is_whole_in_the_workspace(
    workdir: Path,
) -> None:
    whole = big_text(5_000_000, 40_000)
    async with proxied(workdir) as client:
        result = await client.call_tool("big", {"total_bytes": 5_000_000, "marker_line": 40_000})
    text = text_of(result)
    assert len(result.content) == 1 and not result.is_error
    assert TRUNCATION_MARKER in text
    assert get_token_counter(None).count_text(text) <= LIMIT
    assert text.startswith(whole[:200])
    path = stored_path(text)
    assert path.read_bytes() == whole.encode("utf-8")
    (session,) = sessions(workdir)
    assert path.parent == workdir.resolve() / "sessions" / session
    kinds = [e["kind"] for e in events(workdir, session)]
    assert kinds[:2] == ["door", "session_start"]  # the door's event opens the record
    assert {"tool_result", "truncation", "tool_call"} <= set(kinds)


async def test_grep_and_read_through_the_proxy_reach_the_stored_result(workdir: Path) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("big", {"total_bytes": 2_000_000, "marker_line": 23_456})
        path = stored_path(text_of(result))
        found = await client.call_tool(
            "Grep", {"pattern": "MARKER-FOUND", "path_or_glob": str(path)}
        )
        assert not found.is_error
        assert "23456" in text_of(found) and "MARKER-FOUND-HERE" in text_of(found)
        # Read pages through it: the lines after the head, numbered as in the file.
        page = await client.call_tool("Read", {"path": str(path), "offset": 23_455, "limit": 3})
        lines = text_of(page)
        assert "line 0023455" in lines and "line 0023456 MARKER-FOUND-HERE" in lines
        assert "line 0023458" not in lines


async def test_an_image_over_the_limit_is_stored_in_data_and_read_back_as_an_image(
    workdir: Path,
) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("image", {"total_bytes": 200_000})
        text = text_of(result)
        assert [c.type for c in result.content] == ["text"]
        stored = [w for w in text.split() if "/data/" in w and ".png" in w]
        assert stored, text
        path = Path(stored[0].strip("'\"(),;:").removeprefix("url=").strip("'\""))
        assert path.read_bytes() == png(200_000)
        seen = await client.call_tool("Read", {"path": str(path)})
        images = [c for c in seen.content if c.type == "image"]
        assert images and base64.b64decode(images[0].data) == png(200_000)


async def test_a_result_of_exactly_the_limit_passes_and_one_token_more_is_stored(
    workdir: Path,
) -> None:
    counter = get_token_counter(None)
    text = " ".join(f"w{i}" for i in range(LIMIT))
    while counter.count_text(text) > LIMIT:
        text = text[: text.rfind(" ")]
    while counter.count_text(text) < LIMIT:
        text += " z"
    assert counter.count_text(text) == LIMIT
    over = text + " overflowing"
    assert counter.count_text(over) > LIMIT
    async with proxied(workdir) as client:
        exact = await client.call_tool("echo", {"text": text})
        cut = await client.call_tool("echo", {"text": over})
    assert text_of(exact) == text
    assert TRUNCATION_MARKER in text_of(cut)
    assert stored_path(text_of(cut)).read_text(encoding="utf-8") == over


async def test_many_small_blocks_are_stored_whole_in_one_file(workdir: Path) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("blocks", {"count": 3_000, "each": 20})
    text = text_of(result)
    assert len(result.content) == 1 and TRUNCATION_MARKER in text
    stored = stored_path(text).read_text(encoding="utf-8").splitlines()
    assert stored == [f"{i:05d}" + "x" * 20 for i in range(3_000)]


async def test_structured_content_over_the_limit_is_stored_once_and_left_out(
    workdir: Path,
) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("structured", {"rows": 3_000})
    assert result.structured_content is None
    text = text_of(result)
    stored = stored_path(text).read_text(encoding="utf-8")
    # The text block already held the JSON: it is stored once, not twice.
    assert json.loads(stored) == {
        "rows": [{"id": i, "name": f"row-{i}", "value": i * 7} for i in range(3_000)]
    }


async def test_structured_content_that_differs_from_its_text_only_in_types_is_stored_too(
    workdir: Path,
) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("typed", {"rows": 500})
    stored = stored_path(text_of(result)).read_text(encoding="utf-8")
    said, structured = stored.split("\n[structuredContent]\n")
    assert '"flag": true' in said and '"off": false' in said
    assert json.loads(structured)["rows"][7] == {"id": 7, "flag": 1, "off": 0, "ratio": 1.0}
    assert '"flag": 1,' in structured and '"ratio": 1.0' in structured


async def test_an_embedded_resource_of_bytes_that_are_not_utf8_is_stored_as_they_are(
    workdir: Path,
) -> None:
    async with proxied(workdir, limit=100) as client:
        result = await client.call_tool("blob", {})
    text = text_of(result)
    files = list((workdir / "data").iterdir())
    assert [f.read_bytes() for f in files] == [NOT_UTF8]
    assert str(files[0].resolve()) in text


async def test_the_wrapped_servers_errors_pass_through(workdir: Path) -> None:
    from mcp import MCPError

    async with proxied(workdir) as client:
        failed = await client.call_tool("fail", {})
        assert failed.is_error and text_of(failed) == "fail: the tool broke"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("refuse", {})
        assert refused.value.code == -32602
        assert refused.value.message == "refuse: the wrapped server says no"
        assert refused.value.data == {"why": "test"}
        # The proxy goes on serving after both.
        assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"
    (session,) = sessions(workdir)
    calls = [e for e in events(workdir, session) if e["kind"] == "tool_call"]
    assert [(c["name"], c["outcome"]) for c in calls] == [
        ("fail", "error"),
        ("refuse", "error"),
        ("echo", "ok"),
    ]


async def test_a_server_error_of_the_code_of_a_closed_connection_leaves_the_server_serving(
    workdir: Path,
) -> None:
    """-32000 is the SDK's code for a connection that closed, and a server's to use too: only
    a connection that ended makes the server gone."""
    from mcp import MCPError

    async with proxied(workdir) as client:
        for _ in range(2):
            with pytest.raises(MCPError) as busy:
                await client.call_tool("busy", {})
            assert (busy.value.code, busy.value.message) == (BUSY["code"], BUSY["message"])
            assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"
        listed = await client.list_tools()
        assert "echo" in [t.name for t in listed.tools]
        assert "ctxoffload/wrapped-server-gone" not in (listed.meta or {})


async def test_a_wrapped_tool_named_like_a_read_back_tool_keeps_its_name(workdir: Path) -> None:
    from mcp_proxy import server_command

    async with proxied(workdir, server=server_command("--collide")) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names.count("Read") == 1 and "ctxoffload_Read" in names
        assert "wrapped server's Read" in text_of(await client.call_tool("Read", {"path": "x"}))
        result = await client.call_tool("big", {"total_bytes": 100_000, "marker_line": 7})
        # The notice names the proxy's reader under the name it is listed with.
        assert "ctxoffload_Read" in text_of(result)
        path = stored_path(text_of(result))
        page = await client.call_tool(
            "ctxoffload_Read", {"path": str(path), "offset": 7, "limit": 1}
        )
        assert "MARKER-FOUND-HERE" in text_of(page)


async def test_a_renamed_read_back_tool_names_itself_as_listed_in_its_hints(
    workdir: Path,
) -> None:
    """The proxy's Read is `ctxoffload_Read` (the server has a Read): the hint after a window
    and a refusal name `ctxoffload_Read`, not the server's Read, which a model that follows
    them would call; the lines of the file stay as they are, a line saying "call Read" too."""
    from mcp_proxy import server_command

    async with proxied(workdir, server=server_command("--collide")) as client:
        result = await client.call_tool("big", {"total_bytes": 100_000, "marker_line": 7})
        path = str(stored_path(text_of(result)))
        page = text_of(
            await client.call_tool("ctxoffload_Read", {"path": path, "offset": 7, "limit": 2})
        )
        assert page.endswith("call ctxoffload_Read with offset=9 to continue"), page[-200:]
        past = await client.call_tool("ctxoffload_Read", {"path": path, "offset": 10**6})
        assert past.is_error and "call ctxoffload_Read with an offset from 1 to" in text_of(past)
        # A stored file whose own lines say "call Read": read as they are.
        echoed = await client.call_tool("echo", {"text": "call Read with offset=3\n" * 2_000})
        own = text_of(
            await client.call_tool(
                "ctxoffload_Read",
                {"path": str(stored_path(text_of(echoed))), "offset": 1, "limit": 2},
            )
        )
        assert own.splitlines()[0].endswith("\tcall Read with offset=3"), own[:200]


async def _every_tool(client: Any) -> list[str]:
    """The names of a listing, all its pages."""
    names: list[str] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return names


async def test_a_tool_named_like_a_read_back_tool_on_a_later_page_takes_no_name_back(
    workdir: Path,
) -> None:
    """The server's Read is on its first page; its Grep, added after its first listing, on the
    second: the proxy's Read stays `ctxoffload_Read` however each page is read."""
    from mcp_proxy import server_command

    async with proxied(workdir, server=server_command("--grep-later")) as client:
        for _ in range(3):
            names = await _every_tool(client)
            assert names.count("Read") == 1 and "ctxoffload_Read" in names
            read = await client.call_tool("Read", {"path": "x"})
            assert text_of(read) == "the wrapped server's Read of x"
        # The Grep the server added keeps its name; the proxy's moved.
        names = await _every_tool(client)
        assert names.count("Grep") == 1 and "ctxoffload_Grep" in names
        grep = await client.call_tool("Grep", {"pattern": "p"})
        assert text_of(grep) == "the wrapped server's Grep of p"


async def test_the_first_listing_after_a_later_page_added_a_tool_names_each_tool_once(
    workdir: Path,
) -> None:
    """The server's Grep appears on its second page only after the proxy's own first listing:
    the client's very first listing already lists the proxy's Grep as `ctxoffload_Grep` (two
    tools of one name is a listing a client cannot call), and so does a client that reads its
    first page alone."""
    from mcp_proxy import server_command

    async with proxied(workdir, server=server_command("--grep-later")) as client:
        names = await _every_tool(client)
        assert len(names) == len(set(names)), sorted(names)
        assert "ctxoffload_Grep" in names
        first_page = [t.name for t in (await client.list_tools()).tools]
        assert "Grep" not in first_page and "ctxoffload_Grep" in first_page
        grep = await client.call_tool("Grep", {"pattern": "p"})
        assert text_of(grep) == "the wrapped server's Grep of p"


async def test_the_session_is_one_that_show_and_grep_read(workdir: Path) -> None:
    async with proxied(workdir) as client:
        await client.call_tool("big", {"total_bytes": 300_000, "marker_line": 1234})
    (session,) = sessions(workdir)
    assert session.startswith("mcp-test-server-")
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir)]
    shown = subprocess.run([*cli, "show", session], capture_output=True, text=True, check=True)
    assert "session started" in shown.stdout and "tool big (mcp_" in shown.stdout
    assert "truncated big" in shown.stdout
    found = subprocess.run(
        [*cli, "grep", "MARKER-FOUND-HERE"], capture_output=True, text=True, check=True
    )
    assert session in found.stdout and "1234" in found.stdout


async def test_a_session_named_on_the_command_line_is_recorded_into(workdir: Path) -> None:
    async with proxied(workdir, "--session", "my-project") as client:
        await client.call_tool("echo", {"text": "one"})
    async with proxied(workdir, "--session", "my-project") as client:
        await client.call_tool("echo", {"text": "two"})
    assert sessions(workdir) == ["my-project"]
    calls = [e for e in events(workdir, "my-project") if e["kind"] == "tool_call"]
    assert [c["arguments"]["text"] for c in calls] == ["one", "two"]


async def test_with_memory_the_proxy_serves_the_memory_tool_and_records_each_change(
    workdir: Path,
) -> None:
    """`--memory`: the memory tool is listed (not read-only), writes `memories/` of the
    workspace, and each change is an event of the connection's session; without the flag it
    is not listed at all."""
    async with proxied(workdir) as client:
        assert "memory" not in [t.name for t in (await client.list_tools()).tools]
    async with proxied(workdir, "--memory") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["memory"].annotations.read_only_hint is False
        assert listed["Read"].annotations.read_only_hint is True
        made = await client.call_tool(
            "memory",
            {"command": "create", "path": "/memories/build.md", "file_text": "use make -j2\n"},
        )
        assert not made.is_error, text_of(made)
        seen = await client.call_tool("memory", {"command": "view", "path": "/memories/build.md"})
        assert "use make -j2" in text_of(seen)
        bad = await client.call_tool("memory", {"command": "view", "path": "/memories/../x"})
        assert bad.is_error
    assert (workdir / "memories" / "build.md").read_text(encoding="utf-8") == "use make -j2\n"
    (session,) = [
        s for s in sessions(workdir) if any(e["kind"] == "memory" for e in events(workdir, s))
    ]
    (change,) = [e for e in events(workdir, session) if e["kind"] == "memory"]
    assert change["command"] == "create" and change["writer"]["session"] == session

"""The files the workspace stored, as the artifact index knows them (`StoredFiles`): decided
by what the workspace wrote (what this run stored, and the session's record), never by where
a printed path points. A stored file leads the index and never makes way, whatever a tool
prints under the session's folder."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import Compressor
from ctxoffload.compression._stored_files import stored_references

COUNTER = get_token_counter(exact=True)
REAL = 40


class ReadCounting(LocalWorkspace):
    """A real `LocalWorkspace` that counts how often the session's record is read whole."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads = 0

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        self.reads += 1
        return await super().read_events(session_id)


@pytest.fixture
def folder() -> Iterator[str]:
    """A workspace's folder of a short name: the index's budget is counted in tokens, and the
    stored files' paths under a test's own folder (up to 100 characters under pytest-xdist)
    would take it all (the test is of the order, not of the budget)."""
    with tempfile.TemporaryDirectory(prefix="ws-") as name:
        yield name


def compressor(ws: LocalWorkspace, window: int = 8_000) -> Compressor:
    return Compressor(
        ContextConfig(context_window=window, tool_result_limit=200),
        model=None,
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
    )


def output(i: int) -> str:
    return "\n".join(f"row {j} of call {i} " + "x" * 20 for j in range(80))


def call_turn(i: int, result: Any) -> list[Msg]:
    return [
        Msg(role="assistant", content=[ToolCallBlock(id=f"c{i}", name="cat", input={"n": i})]),
        Msg(role="tool", content=[result]),
    ]


async def stored_turns(comp: Compressor) -> list[Msg]:
    """`REAL` calls whose outputs the compressor cuts, each stored whole in its own file."""
    turns: list[Msg] = []
    for i in range(REAL):
        block = ToolResultBlock(id=f"c{i}", name="cat", output=output(i))
        turns += call_turn(i, await comp.process_tool_result(block))
    return turns


def printed(paths: list[str], times: int = 2) -> list[Msg]:
    """What a tool that prints `paths`, 250 a message, `times` over, leaves in the context:
    each named as often as the real files' notices name them, or more."""
    pages = [paths[at : at + 250] for at in range(0, len(paths), 250)]
    return [Msg(role="user", content="\n".join(page)) for _ in range(times) for page in pages]


def statuses(ws: LocalWorkspace) -> dict[str, str]:
    events = [
        json.loads(line)
        for line in (ws.session_dir("s1") / "events.jsonl").read_text().splitlines()
    ]
    return {
        entry["value"]: entry["status"]
        for event in events
        if event["kind"] == "artifacts"
        for entry in event["artifacts"]
    }


def real_files(ws: LocalWorkspace) -> list[str]:
    return [str(ws.session_dir("s1") / f"tool_result-c{i}.txt") for i in range(REAL)]


async def named_after(comp: Compressor, ws: LocalWorkspace, context: list[Msg]) -> list[str]:
    """The real stored files the next context names (the summary or its index): each written
    whole there and listed as named."""
    system = Msg(role="system", content="You are a coding agent.")
    result = await comp.maybe_compress([system, *context, Msg(role="user", content="go on")])
    assert result.compressed
    text = result.messages[1].text
    status = statuses(ws)
    return [
        path
        for path in real_files(ws)
        if status.get(path) in ("summary", "index") and f"{path} " in text.replace("\n", " ")
    ]


@pytest.mark.parametrize("window", [8_000, 16_000])
async def test_paths_printed_under_the_session_folder_never_push_a_stored_file_out(
    folder: str, window: int
) -> None:
    """A tool prints 1,000 made-up paths under the session's folder, named as the workspace
    names its files, twice over: all 40 files the workspace really stored stay named (7 of
    40 were at a window of 8,000 when a path's folder decided it, 31 at 16,000; the same
    paths under another folder left all 40 named)."""
    ws = LocalWorkspace(folder)
    comp = compressor(ws, window)
    context = await stored_turns(comp)
    session = ws.session_dir("s1")
    context += printed([f"{session}/tool_result-call_{k}.txt" for k in range(1_000)])
    assert len(await named_after(comp, ws, context)) == REAL


async def test_a_stored_file_whose_name_begins_a_printed_one_stays_named_at_its_line(
    folder: str,
) -> None:
    """Printed paths that begin with a stored file's own path (`tool_result-c7.txt.1.txt`):
    none is a stored file, and none names the stored file it begins with (a value inside a
    longer one is not named by it), so each stored file is named whole."""
    ws = LocalWorkspace(folder)
    comp = compressor(ws)
    context = await stored_turns(comp)
    context += printed([f"{path}.{k}.txt" for path in real_files(ws) for k in range(25)])
    assert len(await named_after(comp, ws, context)) == REAL
    status = statuses(ws)
    assert all(f"{path}.0.txt" in status for path in real_files(ws))


async def test_a_compressor_that_did_not_store_them_reads_the_record_once(folder: str) -> None:
    """Files stored by someone else in the session (a door's store, an earlier process):
    a new compressor knows them from the session's record (the workspace's `tool_result`
    events), read once for a compaction, and not again for the same printed paths."""
    ws = ReadCounting(folder)
    context: list[Msg] = []
    for i in range(REAL):
        reference = await ws.offload_tool_result(
            "s1", ToolResultBlock(id=f"c{i}", name="cat", output=output(i))
        )
        context += call_turn(i, ToolResultBlock(id=f"c{i}", name="cat", output=reference))
    session = ws.session_dir("s1")
    fake = printed([f"{session}/tool_result-call_{k}.txt" for k in range(1_000)])
    comp = compressor(ws)
    before = ws.reads
    assert len(await named_after(comp, ws, [*context, *fake])) == REAL
    assert ws.reads - before == 1
    # The same printed paths again, in the next compaction: no reason to read it again.
    before = ws.reads
    await comp.maybe_compress(
        [Msg(role="system", content="sys"), *fake, Msg(role="user", content="go on")], force=True
    )
    assert ws.reads == before


def test_the_record_names_the_files_the_workspace_wrote_and_nothing_else() -> None:
    """Tool results stored whole (and the data/ files of their blocks), data/ files a door
    stored, blocks the compressor stored one by one: those, from the events that record
    them; a path in another event (a truncation's notice is the tool result's, a clearing
    may name a URL a user gave) or a line of another shape is no stored file."""
    data = "/ws/data/" + "ab" * 32 + ".png"
    events: list[Any] = [
        {"kind": "tool_result", "reference": "/ws/sessions/s1/tool_result-c1.txt"},
        {
            "kind": "tool_result",
            "reference": "/ws/sessions/s1/tool_result-c2.txt",
            "data_files": [data],
        },
        {"kind": "data", "reference": "/ws/data/" + "cd" * 32 + ".bin"},
        {"kind": "offload", "references": ["/ws/sessions/s1/tool_result-c3.1.txt"]},
        {"kind": "clear_tool_uses", "references": ["https://example.com/a.png"]},
        {"kind": "message", "reference": "/ws/sessions/s1/tool_result-fake.txt"},
        {"kind": "tool_result", "reference": 7},
        {"kind": "offload", "references": "not a list"},
        ["not", "an", "event"],
    ]
    assert stored_references(events) == {
        "/ws/sessions/s1/tool_result-c1.txt",
        "/ws/sessions/s1/tool_result-c2.txt",
        data,
        "/ws/data/" + "cd" * 32 + ".bin",
        "/ws/sessions/s1/tool_result-c3.1.txt",
    }

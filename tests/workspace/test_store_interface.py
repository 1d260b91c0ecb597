"""The workspace behaviour is written once, over the store primitives (`workspace/_store.py`).

A store written here from the interface alone (a dict: put, put_new, append, read, read a
range, list, delete) gets every behaviour the three backends share, with no workspace code
of its own: offloads with their events, idempotent batches, tool result versions, state, read
back by lines, sessions listed, purged and forked. A SQL store (or any other) is this much.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import pytest

from ctxoffload import InvalidReference, Msg, ToolResultBlock
from ctxoffload._disk.batch import Span, new_rows
from ctxoffload._disk.commit import parse_log, take_lines
from ctxoffload.workspace import Workspace, fork_session
from ctxoffload.workspace._core import StoreWorkspace
from helpers import user_msgs

T = TypeVar("T")


class _Payloads:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def store(self, raw: bytes, media_type: str | None) -> str:
        import hashlib

        ref = f"dict://data/{hashlib.sha256(raw).hexdigest()}.bin"
        self.files.setdefault(ref, raw)
        return ref

    async def before_line(self) -> None:
        pass

    async def after_line(self) -> None:
        pass

    def hold_session(self, session_id: str, log: str) -> None:
        pass


class DictStore:
    """Every file a bytes value under `dict://sessions/<id>/<name>`: nothing but the primitives."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.keys: dict[str, dict[str, int]] = {}

    def reference(self, session_id: str, name: str) -> str:
        return f"dict://sessions/{session_id}/{name}"

    @contextlib.asynccontextmanager
    async def payloads(self) -> AsyncIterator[_Payloads]:
        yield _Payloads(self.files)

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        self.files[ref := self.reference(session_id, name)] = data
        return ref

    async def put_fenced(self, session_id: str, name: str, data: bytes, fence: Any) -> str:
        return await self.put(session_id, name, data)  # (no lease of it can lapse)

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        ref = self.reference(session_id, name)
        if ref in self.files:
            return None
        self.files[ref] = data
        return ref

    async def read(self, session_id: str, name: str) -> bytes | None:
        return self.files.get(self.reference(session_id, name))

    async def append(
        self, session_id: str, name: str, lines: Sequence[bytes], *, sync: bool = True
    ) -> Span:
        # (Nothing to sync in a dict: `sync` is for a store that syncs each write.)
        return self._append(session_id, name, lines, None)

    async def append_messages(
        self, session_id: str, lines: Sequence[bytes], keys: Sequence[str | None]
    ) -> Span:
        return self._append(session_id, "context.jsonl", lines, keys)

    def _append(
        self, session_id: str, name: str, lines: Sequence[bytes], keys: Sequence[str | None] | None
    ) -> Span:
        ref = self.reference(session_id, name)
        log = self.files.get(ref, b"")
        index = self.keys.setdefault(ref, {})
        rows = new_rows(lines, keys, (index,), log.count(b"\n") + 1)
        for line_no, key in enumerate(rows.ids, log.count(b"\n") + 1):
            if key is not None:
                index.setdefault(key, line_no)
        self.files[ref] = log + b"".join(rows.lines)
        return rows.span

    async def run(self, work: Callable[[], T]) -> T:
        return work()

    def event_failure_is_fatal(self, exc: OSError) -> bool:
        return False

    async def list_names(self, session_id: str) -> list[str]:
        prefix = self.reference(session_id, "")
        return [ref[len(prefix) :] for ref in self.files if ref.startswith(prefix)]

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        ref = self.reference(session_id, name)
        return parse_log(self.files.get(ref, b""), ref)

    async def list_sessions(self) -> list[str]:
        return sorted(
            {ref.split("/")[3] for ref in self.files if ref.startswith("dict://sessions/")}
        )

    async def delete_session(self, session_id: str) -> bool:
        doomed = [ref for ref in self.files if ref.startswith(self.reference(session_id, ""))]
        for ref in doomed:
            del self.files[ref]
            self.keys.pop(ref, None)
        return bool(doomed)

    def reference_key(self, reference: str) -> list[str]:
        if not reference.startswith("dict://"):
            raise InvalidReference(f"{reference!r} is not of this store")
        return reference[len("dict://") :].split("/")

    async def read_reference(self, reference: str) -> bytes:
        if reference not in self.files:
            raise InvalidReference(f"{reference!r} holds nothing")
        return self.files[reference]

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        return take_lines((await self.read_reference(reference),), first - 1, last - first + 1)


class DictWorkspace(StoreWorkspace):
    def __init__(self) -> None:
        self._files = self.store = DictStore()
        self.isolate_sessions = False

    async def initialize(self) -> None:
        pass


@pytest.fixture
def ws() -> DictWorkspace:
    return DictWorkspace()


def test_a_workspace_over_the_primitives_alone_is_a_workspace(ws: DictWorkspace) -> None:
    assert isinstance(ws, Workspace)


async def test_an_offload_writes_its_lines_and_its_event_and_is_idempotent(
    ws: DictWorkspace,
) -> None:
    msgs = [Msg(role="user", content="a", id="m1"), Msg(role="assistant", content="b", id="m2")]
    first = await ws.offload_context("s", msgs)
    again = await ws.offload_context("s", [*msgs, Msg(role="user", content="c", id="m3")])
    assert (first.first_line, first.last_line) == (1, 2)
    assert (again.first_line, again.last_line) == (1, 3)
    assert [m["content"] for m in await ws.read_context("s")] == ["a", "b", "c"]
    events = await ws.read_events("s")
    assert [(e["kind"], e["lines"]) for e in events] == [("context", [1, 2]), ("context", [1, 3])]
    assert await ws.read_lines(first, 2, 2) == ws.store.files[first].splitlines(True)[1]


async def test_tool_results_take_the_first_free_version_and_reuse_the_same_bytes(
    ws: DictWorkspace,
) -> None:
    one = await ws.offload_tool_result("s", ToolResultBlock(id="c1", output="first"))
    same = await ws.offload_tool_result("s", ToolResultBlock(id="c1", output="first"))
    other = await ws.offload_tool_result("s", ToolResultBlock(id="c1", output="second"))
    assert one == same == "dict://sessions/s/tool_result-c1.txt"
    assert other == "dict://sessions/s/tool_result-c1.2.txt"
    assert await ws.read_reference(other) == b"second"
    assert await ws.list_files("s") == [other, one]
    stored = [e for e in await ws.read_events("s") if e["kind"] == "tool_result"]
    assert [e["reference"] for e in stored] == [one, one, other]


async def test_state_sessions_purge_and_fork_come_with_the_primitives(ws: DictWorkspace) -> None:
    await ws.offload_context("a", user_msgs("one", "two"))
    await ws.write_state("a", {"messages": [{"role": "user", "content": "two"}]})
    await ws.record_event("a", "note", text="hi")
    assert await ws.read_state("a") == {"messages": [{"role": "user", "content": "two"}]}
    forked = await fork_session(ws, "a", "b")
    assert forked["origin"]["session"] == "a"
    assert await ws.list_sessions() == ["a", "b"]
    state = await ws.read_state("b")
    assert state is not None
    assert state["messages"] == [{"role": "user", "content": "two"}]
    assert state["forked_from"] == {"session": "a", "step": None}
    assert "fork" in [e["kind"] for e in await ws.read_events("b")]
    assert await ws.purge_session("a") is True
    assert await ws.list_sessions() == ["b"]
    with pytest.raises(InvalidReference):
        await ws.read_reference("dict://sessions/a/context.jsonl")

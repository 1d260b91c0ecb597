"""`read_lines`: lines FIRST to LAST of what a reference names, as `sed -n 'FIRST,LASTp'` gives
them, on every workspace; a read of what an append just wrote starts where that append began
(on disk, only once the bytes before it are seen to be the ones written), so it costs that
append, not the log.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxoffload import (
    InMemoryWorkspace,
    InvalidReference,
    LocalWorkspace,
    Msg,
    ObjectStoreWorkspace,
    ToolResultBlock,
    Workspace,
)
from ctxoffload.workspace import LineReader
from helpers import examples
from s3_server import S3Server, ThrottlingProxy

# Message texts with what could confuse a line reader: newlines (escaped in the JSON line),
# non-ASCII, long runs.
TEXTS = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "\n", "é", "\u2028", "{", '"']), max_size=40
) | st.sampled_from(["x" * 3_000, "line\n" * 200])
BATCHES = st.lists(st.lists(TEXTS, min_size=1, max_size=6), min_size=1, max_size=6)


def sed(raw: bytes, first: int, last: int) -> bytes:
    """What `sed -n 'FIRST,LASTp'` prints of `raw`."""
    return b"".join(raw.splitlines(keepends=True)[first - 1 : last])


async def check_every_range(ws: Workspace, ref: str) -> None:
    assert isinstance(ws, LineReader)
    raw = await ws.read_reference(ref)
    total = raw.count(b"\n")
    for first in range(1, total + 3):
        for last in {first, first + 1, first + 7, total, total + 2}:
            if last >= first:
                assert await ws.read_lines(ref, first, last) == sed(raw, first, last), (
                    first,
                    last,
                )


async def append_batches(ws: Workspace, batches: list[list[str]]) -> tuple[str, list[Msg]]:
    """Append each batch as one offload; each returned span reads back as its messages."""
    ref = ""
    stored: list[Msg] = []
    for texts in batches:
        msgs = [Msg(role="user", content=text) for text in texts]
        span = await ws.offload_context("s", msgs)
        ref = str(span)
        got = await ws.read_lines(ref, span.first_line, span.last_line)
        assert [Msg.model_validate_json(line).id for line in got.splitlines()] == [
            m.id for m in msgs
        ]
        stored.extend(msgs)
    return ref, stored


@pytest.mark.slow
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=BATCHES)
def test_lines_of_a_local_log_are_what_sed_prints(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[str]]
) -> None:
    async def run() -> None:
        ws = LocalWorkspace(tmp_path_factory.mktemp("ws"), fsync=False)
        ref, _ = await append_batches(ws, batches)
        await check_every_range(ws, ref)
        # A new workspace object knows no marks: it reads from the log's start.
        await check_every_range(LocalWorkspace(ws.workdir, fsync=False), ref)

    asyncio.run(run())


@settings(max_examples=examples(40), deadline=None)
@given(batches=BATCHES)
def test_lines_of_a_log_in_memory_are_what_sed_prints(batches: list[list[str]]) -> None:
    async def run() -> None:
        ws = InMemoryWorkspace()
        ref, _ = await append_batches(ws, batches)
        await check_every_range(ws, ref)

    asyncio.run(run())


@pytest.mark.slow
async def test_lines_of_a_bucket_log_are_what_sed_prints(s3: S3Server) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    other = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    # Two writers interleave: each remembers only its own segments; every range reads as the
    # concatenation of all of them numbers it, from either writer and from a new one.
    for i in range(4):
        await append_batches(ws, [[f"mine {i}", "two\nlines", "é" * 50]])
        await append_batches(other, [[f"theirs {i}"] * (i + 1)])
    ref = ws.context_path("s")
    for reader in (ws, other, ObjectStoreWorkspace(url, **s3.workspace_kwargs())):
        await check_every_range(reader, ref)


async def test_the_lines_a_bucket_append_wrote_are_one_request(s3: S3Server) -> None:
    proxy = ThrottlingProxy(s3)
    try:
        ws = ObjectStoreWorkspace(f"s3://{s3.new_bucket()}/agents", **proxy.workspace_kwargs())
        for i in range(20):
            span = await ws.offload_context("s", [Msg(role="user", content=f"m{i}")] * 1)
        before = proxy.requests
        got = await ws.read_lines(str(span), span.first_line, span.last_line)
        assert b'"m19"' in got and got.count(b"\n") == 1
        assert proxy.requests - before == 1  # the segment, not a listing and 20 reads
    finally:
        proxy.stop()


async def test_a_tool_result_file_reads_by_lines_too(tmp_path: Path) -> None:
    from ctxoffload import ToolResultBlock

    for ws in (LocalWorkspace(tmp_path, fsync=False), InMemoryWorkspace()):
        output = "\n".join(f"row {i}" for i in range(100)) + "\nno newline at the end"
        ref = await ws.offload_tool_result("s", ToolResultBlock(id="c1", output=output))
        assert await ws.read_lines(ref, 100, 101) == b"row 99\nno newline at the end"
        assert await ws.read_lines(ref, 102, 200) == b""
        await check_every_range(ws, ref)


@pytest.mark.parametrize(("first", "last"), [(0, 3), (-1, 2), (5, 4)])
async def test_a_range_that_cannot_be_lines_is_refused(
    tmp_path: Path, first: int, last: int
) -> None:
    for ws in (LocalWorkspace(tmp_path, fsync=False), InMemoryWorkspace()):
        span = await ws.offload_context("s", [Msg(role="user", content="hi")])
        with pytest.raises(ValueError, match="numbered from 1"):
            await ws.read_lines(str(span), first, last)


async def test_a_reference_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not yours\n")
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    await ws.offload_context("s", [Msg(role="user", content="hi")])
    for ref in (str(outside), str(tmp_path / "ws" / ".." / "secret.txt")):
        with pytest.raises(InvalidReference):
            await ws.read_lines(ref, 1, 1)
    with pytest.raises(InvalidReference):
        await InMemoryWorkspace().read_lines("memory://nowhere/context.jsonl", 1, 1)


async def test_the_path_context_path_returns_reads_back(local_ws: LocalWorkspace) -> None:
    await local_ws.offload_context("s", [Msg(role="user", content=t) for t in ("a", "b")])
    path = local_ws.context_path("s")
    raw = path.read_bytes()
    assert await local_ws.read_reference(path) == raw
    assert await local_ws.read_lines(path, 2, 2) == sed(raw, 2, 2)
    assert (await local_ws.read_bytes(path))[0] == raw
    assert local_ws.resolve_reference(path) == path


class AsPath(os.PathLike[str]):
    """A reference held as an `os.PathLike` whose text is the reference."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __fspath__(self) -> str:
        return self.text


async def test_every_workspace_reads_a_path_like_reference_as_its_text(
    workspace: Workspace,
) -> None:
    ref = await workspace.offload_tool_result(
        "s", ToolResultBlock(id="c1", name="probe", output="one\ntwo\n")
    )
    assert await workspace.read_reference(AsPath(ref)) == b"one\ntwo\n"
    assert isinstance(workspace, LineReader)
    assert await workspace.read_lines(AsPath(ref), 2, 2) == b"two\n"
    for not_text in (ref.encode(), AsPath(""), 7):
        with pytest.raises(InvalidReference):
            await workspace.read_reference(not_text)  # type: ignore[arg-type]


# -- a log changed under the marks --------------------------------------------------------------


async def test_a_log_rewritten_in_place_before_a_batch_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    # Someone edits context.jsonl by hand, keeping its inode and size but adding line breaks
    # in the line before the last batch: the bytes before the batch's mark are not the ones
    # written, so the read starts from the log's start and numbers lines as sed does. (An
    # edit further back, of the same size, is not seen, by this nor by the appender's line
    # numbers: the log is append-only.)
    ws = LocalWorkspace(tmp_path, fsync=False)
    await ws.offload_context("s", [Msg(role="user", content="a" * 100) for _ in range(5)])
    span = await ws.offload_context("s", [Msg(role="user", content="b") for _ in range(3)])
    path = Path(span)
    raw = path.read_bytes()
    mark = raw.index(b'"b"') - raw[: raw.index(b'"b"')][::-1].index(b"\n")
    edited = raw[: mark - 40] + b"\n" * 20 + raw[mark - 20 :]
    assert len(edited) == len(raw)
    with open(path, "r+b") as f:
        f.write(edited)
    assert sed(edited, span.first_line, span.first_line) != sed(
        raw, span.first_line, span.first_line
    )
    await check_every_range(ws, str(span))


async def test_a_log_replaced_or_cut_back_is_read_from_its_start(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path, fsync=False)
    span = await ws.offload_context("s", [Msg(role="user", content=f"m{i}") for i in range(9)])
    span = await ws.offload_context("s", [Msg(role="user", content="late") for _ in range(4)])
    path = Path(span)
    raw = path.read_bytes()
    # Cut back to before the mark: fewer lines, and no bytes where the mark points.
    os.truncate(path, len(raw) // 2)
    await check_every_range(ws, str(span))
    # Replaced by another file (a new inode) holding other lines.
    path.unlink()
    path.write_bytes(b"\n".join(b"other %d" % i for i in range(30)) + b"\n")
    await check_every_range(ws, str(span))


async def test_a_batch_after_a_torn_line_reads_back_whole(tmp_path: Path) -> None:
    # A writer killed mid-line left a torn tail: the next append closes or trims it, and the
    # lines it reports read back as its messages.
    ws = LocalWorkspace(tmp_path, fsync=False)
    await ws.offload_context("s", [Msg(role="user", content="before")])
    path = Path(ws.context_path("s"))
    with open(path, "ab") as f:
        f.write(b'{"role": "user", "content": "tor')
    await append_batches(ws, [["after the tear", "and more"]])
    await check_every_range(ws, str(path))
    # A log without its commit record (written before there were any) and a torn tail: all
    # of it counts, and the tail is closed with a newline before the batch.
    path.with_name("context.jsonl.commit").unlink()
    with open(path, "ab") as f:
        f.write(b'{"role": "user", "content": "tor')
    fresh = LocalWorkspace(tmp_path, fsync=False)
    await append_batches(fresh, [["after the second tear"]])
    await check_every_range(fresh, str(path))
    # An events log (appended without a commit record) closes a torn line instead.
    events = path.with_name("events.jsonl")
    with open(events, "ab") as f:
        f.write(b'{"kind": "tor')
    await ws.record_event("s", "note", text="after")
    await check_every_range(ws, str(events))


@pytest.mark.slow
def test_batches_appended_by_threads_read_back_at_their_spans(tmp_path: Path) -> None:
    # Eight threads append at once through one workspace (their batches share writes) and
    # through another (another open file): each batch's span reads back as exactly its own
    # messages, in order.
    shared = LocalWorkspace(tmp_path, fsync=True)
    apart = LocalWorkspace(tmp_path, fsync=True)
    failures: list[BaseException] = []

    def writer(k: int) -> None:
        ws = shared if k % 2 else apart
        try:
            asyncio.run(
                append_batches(
                    ws, [[f"w{k} b{b} m{m}" for m in range(k % 3 + 1)] for b in range(15)]
                )
            )
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    asyncio.run(check_every_range(shared, str(shared.context_path("s"))))


async def test_a_log_in_memory_purged_numbers_from_one_again() -> None:
    # The in-memory workspace keeps each log's line count between appends; a log that is
    # gone starts again at line 1, and reads as such.
    ws = InMemoryWorkspace()
    await ws.offload_context("s", [Msg(role="user", content=f"m{i}") for i in range(3)])
    await ws.purge_session("s")
    span = await ws.offload_context("s", [Msg(role="user", content=f"n{i}") for i in range(2)])
    assert (span.first_line, span.last_line) == (1, 2)
    assert b'"n1"' in await ws.read_lines(str(span), 2, 2)


# -- the batch an append just wrote, read at once ------------------------------------------------


async def test_the_batch_just_written_is_read_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A compaction reads back the batch it just appended (10,000 lines at a time): the
    # appender knows where the batch begins and where the line after it does, so its lines
    # are read in one piece, not found one by one. So is a batch after others, and one read
    # again (no longer the latest batch only where another group was written since).
    import ctxoffload.workspace._disk_store as disk_store

    def by_lines(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("read line by line")

    ws = LocalWorkspace(tmp_path, fsync=False)
    await ws.offload_context("s", [Msg(role="user", content=f"old {i}") for i in range(5)])
    span = await ws.offload_context("s", [Msg(role="user", content=f"m{i}\n") for i in range(9)])
    raw = Path(span).read_bytes()
    with monkeypatch.context() as patched:
        patched.setattr(disk_store, "take_lines", by_lines)
        got = await ws.read_lines(str(span), span.first_line, span.last_line)
        assert got == sed(raw, span.first_line, span.last_line)
        assert got == await ws.read_lines(str(span), span.first_line, span.last_line)
    # Any other range is read as before, as sed prints it.
    await check_every_range(ws, str(span))


async def test_a_batch_given_more_lines_in_place_is_read_line_by_line(tmp_path: Path) -> None:
    # The bytes at both ends of the batch are as written, but a line break was put inside
    # it by hand (the file's size and inode kept): the bytes between hold one line more than
    # the batch wrote, so they are not taken whole; the lines asked for are what sed prints.
    ws = LocalWorkspace(tmp_path, fsync=False)
    await ws.offload_context("s", [Msg(role="user", content="a" * 100) for _ in range(3)])
    span = await ws.offload_context("s", [Msg(role="user", content="b" * 300) for _ in range(3)])
    path = Path(span)
    raw = path.read_bytes()
    at = raw.index(b"b" * 300) + 150  # inside the batch's first line, far from both ends
    edited = raw[:at] + b"\n" + raw[at + 1 :]
    path.write_bytes(edited)
    got = await ws.read_lines(str(span), span.first_line, span.last_line)
    assert got == sed(edited, span.first_line, span.last_line)
    assert got.count(b"\n") == 3 and got != sed(raw, span.first_line, span.last_line)

"""Planted links and special files inside the workspace: nothing is followed out of it.

Every test plants something where the workspace would write or read (a symlink to a place
outside the workdir, a hard link to an outside file, a FIFO) and checks that the outside
file is untouched and that the workspace says which entry it refused.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from ctxoffload import (
    InvalidReference,
    LocalWorkspace,
    Msg,
    OffloadError,
    ToolResultBlock,
)
from ctxoffload.cli import main
from helpers import PNG, image_block


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workdir holding one file, `secret.txt`."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_bytes(b"outside bytes\n")
    return out


def _outside_state(outside: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(outside.iterdir())}


async def _session(ws: LocalWorkspace) -> Path:
    await ws.offload_context("s", msgs=[Msg(role="user", content="first")])
    return ws.session_dir("s")


# -- writes ----------------------------------------------------------------------------------


async def test_planted_session_dir_symlink_refuses_every_write(
    local_ws: LocalWorkspace, workdir: Path, outside: Path
) -> None:
    await local_ws.initialize()
    (workdir / "sessions" / "s").symlink_to(outside)
    before = _outside_state(outside)
    attempts = [
        local_ws.offload_context("s", msgs=[Msg(role="user", content="x")]),
        local_ws.offload_tool_result("s", ToolResultBlock(id="c1", output="out")),
        local_ws.record_event("s", "note"),
        local_ws.write_state("s", {"messages": []}),
    ]
    for attempt in attempts:
        with pytest.raises(OffloadError, match="sessions/s") as caught:
            await attempt
        assert caught.value.path is not None and caught.value.path.endswith("sessions/s")
    assert _outside_state(outside) == before


@pytest.mark.parametrize("name", ["context.jsonl", "events.jsonl", "state.json"])
async def test_planted_file_symlink_in_a_session_is_refused(
    local_ws: LocalWorkspace, outside: Path, name: str
) -> None:
    session = await _session(local_ws)
    (session / name).unlink(missing_ok=True)
    (session / name).symlink_to(outside / "secret.txt")
    before = _outside_state(outside)
    with pytest.raises(OffloadError, match=name):
        if name == "context.jsonl":
            await local_ws.offload_context("s", msgs=[Msg(role="user", content="x")])
        elif name == "state.json":
            await local_ws.write_state("s", {"messages": []})
        else:
            await local_ws.record_event("s", "note")
    assert _outside_state(outside) == before


@pytest.mark.parametrize("plant", ["symlink", "hard link", "fifo"])
async def test_a_planted_events_file_fails_an_offload_before_anything_is_written(
    local_ws: LocalWorkspace, outside: Path, plant: str
) -> None:
    # An offload writes its content, then its event. Refusing the event only after the
    # content was committed told the caller it failed: it kept the messages and retried,
    # and messages without an id were appended again at each retry.
    session = await _session(local_ws)
    events = session / "events.jsonl"
    events.unlink()
    if plant == "symlink":
        events.symlink_to(outside / "secret.txt")
    elif plant == "hard link":
        os.link(outside / "secret.txt", events)
    else:
        os.mkfifo(events)
    log = (session / "context.jsonl").read_bytes()
    files = sorted(p.name for p in session.iterdir())
    before = _outside_state(outside)
    for _ in range(3):
        with pytest.raises(OffloadError, match=r"events\.jsonl"):
            await local_ws.offload_context("s", msgs=[{"role": "user", "content": "retry me"}])
        with pytest.raises(OffloadError, match=r"events\.jsonl"):
            await local_ws.offload_tool_result("s", ToolResultBlock(id="c1", output="out"))
    assert (session / "context.jsonl").read_bytes() == log
    assert sorted(p.name for p in session.iterdir()) == files
    assert _outside_state(outside) == before


async def test_planted_hard_link_to_an_outside_file_is_not_appended_to(
    local_ws: LocalWorkspace, outside: Path
) -> None:
    session = await _session(local_ws)
    (session / "context.jsonl").unlink()
    (session / "context.jsonl.commit").unlink(missing_ok=True)
    os.link(outside / "secret.txt", session / "context.jsonl")
    before = _outside_state(outside)
    with pytest.raises(OffloadError, match="hard link"):
        await local_ws.offload_context("s", msgs=[Msg(role="user", content="x")])
    assert _outside_state(outside) == before


async def test_planted_data_dir_symlink_refuses_the_store(
    local_ws: LocalWorkspace, workdir: Path, outside: Path
) -> None:
    workdir.mkdir()
    (workdir / "data").symlink_to(outside)
    with pytest.raises(OffloadError, match="data"):
        await local_ws.offload_data_block(image_block())
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]


@pytest.mark.parametrize("plant", ["symlink", "wrong-bytes", "hard-link"])
async def test_data_entry_that_does_not_hash_to_its_name_is_replaced(
    local_ws: LocalWorkspace, workdir: Path, outside: Path, plant: str
) -> None:
    await local_ws.initialize()
    name = hashlib.sha256(PNG).hexdigest() + ".png"
    entry = workdir / "data" / name
    if plant == "symlink":
        entry.symlink_to(outside / "secret.txt")
    elif plant == "wrong-bytes":
        entry.write_bytes(b"not the image")
    else:
        os.link(outside / "secret.txt", entry)
    before = _outside_state(outside)
    block = await local_ws.offload_data_block(image_block())
    assert block.source.url.endswith(name)
    assert not entry.is_symlink()
    assert entry.read_bytes() == PNG
    assert await local_ws.read_reference(block.source.url) == PNG
    assert _outside_state(outside) == before


async def test_planted_tool_result_symlink_is_never_taken_as_the_stored_copy(
    local_ws: LocalWorkspace, outside: Path
) -> None:
    session = await _session(local_ws)
    (outside / "same.txt").write_text("the output")
    (session / "tool_result-c1.txt").symlink_to(outside / "same.txt")
    path = await local_ws.offload_tool_result("s", ToolResultBlock(id="c1", output="the output"))
    assert Path(path).name == "tool_result-c1.2.txt"
    assert await local_ws.read_reference(path) == b"the output"


# -- reads -----------------------------------------------------------------------------------


async def test_read_context_through_a_planted_symlink_raises_naming_it(
    local_ws: LocalWorkspace, workdir: Path, outside: Path
) -> None:
    (outside / "context.jsonl").write_text('{"role":"user","content":"outside"}\n')
    await local_ws.initialize()
    (workdir / "sessions" / "s").symlink_to(outside)
    with pytest.raises(OffloadError, match="sessions/s"):
        await local_ws.read_context("s")


@pytest.mark.parametrize("name", ["context.jsonl", "events.jsonl", "state.json"])
async def test_reads_refuse_a_hard_link_to_an_outside_file(
    local_ws: LocalWorkspace, outside: Path, name: str
) -> None:
    session = await _session(local_ws)
    (outside / "x.json").write_text('{"role":"user","content":"outside"}\n')
    (session / name).unlink(missing_ok=True)
    (session / f"{name}.commit").unlink(missing_ok=True)
    os.link(outside / "x.json", session / name)
    reader = {
        "context.jsonl": local_ws.read_context,
        "events.jsonl": local_ws.read_events,
        "state.json": local_ws.read_state,
    }[name]
    with pytest.raises(OffloadError, match="hard link"):
        await reader("s")


async def test_read_reference_refuses_symlinks_and_hard_links_inside(
    local_ws: LocalWorkspace, outside: Path
) -> None:
    session = await _session(local_ws)
    (session / "tool_result-a.txt").symlink_to(outside / "secret.txt")
    os.link(outside / "secret.txt", session / "tool_result-b.txt")
    for name in ("tool_result-a.txt", "tool_result-b.txt"):
        with pytest.raises(InvalidReference):
            await local_ws.read_reference(str(session / name))
        with pytest.raises(InvalidReference):
            local_ws.resolve_reference(str(session / name))


async def test_read_reference_with_dotdot_out_of_the_workspace_is_refused(
    local_ws: LocalWorkspace, workdir: Path, outside: Path
) -> None:
    await _session(local_ws)
    with pytest.raises(InvalidReference):
        await local_ws.read_reference(
            str(workdir / "sessions" / ".." / ".." / "outside/secret.txt")
        )


def _fifo_reader_does_not_block(action: object) -> None:
    # A FIFO with no writer blocks open() forever unless O_NONBLOCK is used: run the read in
    # a thread and give it a few seconds.
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        import asyncio

        try:
            asyncio.run(action())  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "a read blocked on a FIFO"
    for exc in errors:
        assert isinstance(exc, (OffloadError, InvalidReference)), exc


async def test_fifos_are_skipped_and_never_block(local_ws: LocalWorkspace, workdir: Path) -> None:
    session = await _session(local_ws)
    os.mkfifo(session / "tool_result-fifo.txt")
    os.mkfifo(workdir / "sessions" / "fifo-session")
    (session / "events.jsonl").unlink()
    os.mkfifo(session / "events.jsonl")
    ws = LocalWorkspace(workdir)
    assert await ws.list_files("s") == []
    assert await ws.list_sessions() == ["s"]
    _fifo_reader_does_not_block(lambda: ws.read_events("s"))
    _fifo_reader_does_not_block(lambda: ws.read_reference(str(session / "tool_result-fifo.txt")))
    _fifo_reader_does_not_block(
        lambda: ws.offload_context("s", msgs=[Msg(role="user", content="x")])
    )


async def test_symlinked_sessions_are_not_listed(
    local_ws: LocalWorkspace, workdir: Path, outside: Path
) -> None:
    await _session(local_ws)
    (workdir / "sessions" / "link").symlink_to(outside)
    (local_ws.session_dir("s") / "tool_result-l.txt").symlink_to(outside / "secret.txt")
    assert await local_ws.list_sessions() == ["s"]
    assert await local_ws.list_files("s") == []


async def test_folders_named_as_no_session_could_be_are_not_listed(
    local_ws: LocalWorkspace, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder planted in sessions/ under a name no call accepts (a newline that would forge a
    # row of `ctxoffload ls`, a look-alike slash): listing it made the natural loop
    # `for sid in await ws.list_sessions(): await ws.read_context(sid)` raise.
    await _session(local_ws)
    for planted in ["bad name\nforged-row  2026-01-01", "a\u2215b", "-", "x" * 129]:
        (workdir / "sessions" / planted).mkdir()
    assert await local_ws.list_sessions() == ["s"]
    for session_id in await local_ws.list_sessions():
        assert await local_ws.read_context(session_id)
    assert main(["--workdir", str(workdir), "ls"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["s"]


async def test_workdir_that_is_a_symlink_is_resolved_once_and_works(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    link = tmp_path / "link-ws"
    link.symlink_to(real)
    ws = LocalWorkspace(link)
    ref = await ws.offload_context("s", msgs=[Msg(role="user", content="hi")])
    assert str(ref).startswith(str(link))
    assert (real / "sessions" / "s" / "context.jsonl").exists()
    assert [m["content"] for m in await ws.read_context("s")] == ["hi"]
    assert await ws.read_reference(str(ref))


async def test_a_workdir_link_pointed_elsewhere_later_changes_nothing_that_is_read(
    tmp_path: Path,
) -> None:
    real, other, link = tmp_path / "real-ws", tmp_path / "other-ws", tmp_path / "link-ws"
    link.symlink_to(real)
    ws = LocalWorkspace(link)
    await ws.offload_context("s", msgs=[Msg(role="user", content="mine")])
    path = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="mine"))
    theirs = LocalWorkspace(other)
    await theirs.offload_context("t", msgs=[Msg(role="user", content="theirs")])
    await theirs.offload_tool_result("s", ToolResultBlock(id="c", output="theirs"))
    link.unlink()
    link.symlink_to(other)
    assert [m["content"] for m in await ws.read_context("s")] == ["mine"]
    assert await ws.read_reference(path) == b"mine"
    assert await ws.list_sessions() == ["s"]
    assert await ws.list_files("s") == [path]


# Swaps tool_result-r.txt between its real content and a symlink to an outside file, as fast
# as it can, until killed.
SWAPPER = """
import os, sys
session, outside = sys.argv[1], sys.argv[2]
real, link, target = (os.path.join(session, n) for n in (".real", ".link", "tool_result-r.txt"))
print("ready", flush=True)
while True:
    os.symlink(outside, link)
    os.rename(link, target)
    with open(real, "wb") as f:
        f.write(b"inside")
    os.rename(real, target)
"""


async def test_read_reference_never_returns_an_outside_file_swapped_in_meanwhile(
    local_ws: LocalWorkspace, outside: Path, spawn_python: object
) -> None:
    path = await local_ws.offload_tool_result("s", ToolResultBlock(id="r", output="inside"))
    child = spawn_python(SWAPPER, str(Path(path).parent), str(outside / "secret.txt"))  # type: ignore[operator]
    assert child.stdout.readline() == "ready\n"
    outcomes: set[str] = set()
    # Until the race has been seen both ways (a read refused while the link was in place, and
    # one that read the real file) and some more: counted, not timed. The deadline is a safety
    # net for a machine so loaded that the swapper never runs.
    deadline = time.monotonic() + 300
    reads = 0
    try:
        while outcomes != {"refused", "read"} or reads < 200:
            assert time.monotonic() < deadline, f"after {reads} reads: {outcomes}"
            reads += 1
            try:
                data = await local_ws.read_reference(path)
            except InvalidReference:
                outcomes.add("refused")
                continue
            assert data != b"outside bytes\n"
            outcomes.add("read")
    finally:
        child.kill()
        child.wait()


async def test_purge_of_a_planted_session_link_removes_only_the_link(
    local_ws: LocalWorkspace, workdir: Path, outside: Path
) -> None:
    await local_ws.initialize()
    (workdir / "sessions" / "s").symlink_to(outside)
    before = _outside_state(outside)
    assert await local_ws.purge_session("s") is True
    assert not (workdir / "sessions" / "s").is_symlink()
    assert _outside_state(outside) == before

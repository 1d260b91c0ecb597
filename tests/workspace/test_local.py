"""LocalWorkspace: the on-disk layout, references as paths, and what reading back may reach."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    InvalidReference,
    LocalWorkspace,
    Msg,
    OffloadError,
    ToolResultBlock,
)
from helpers import PNG, image_block, user_msgs

# -- a workdir that is no folder ------------------------------------------------------------


@pytest.mark.parametrize("where", ["the workdir", "a folder above it"])
async def test_a_file_given_as_the_workdir_is_said_to_be_no_folder(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file where the workdir should be is a mistake in the workdir, said as the command
    says it; not a planted link to remove (the file is the user's own)."""
    from ctxoffload.cli import main

    (tmp_path / "notes.txt").write_text("mine")
    workdir = tmp_path / "notes.txt" if where == "the workdir" else tmp_path / "notes.txt" / "ws"
    ws = LocalWorkspace(workdir)
    with pytest.raises(OffloadError) as raised:
        await ws.offload_context("s", msgs=user_msgs("x"))
    said = str(raised.value)
    assert "symbolic link" not in said and "remove" not in said, said
    assert main(["ls", "--workdir", str(workdir)]) == 2
    cli_said = capsys.readouterr().err
    diagnosis = f"workdir {str(workdir)!r} is not a folder"
    assert said.startswith(diagnosis) and cli_said.startswith(f"ctxoffload ls: {diagnosis}")
    assert (tmp_path / "notes.txt").read_text() == "mine"


# -- layout -----------------------------------------------------------------------------------


async def test_initialize_creates_sessions_data_and_skills(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    await local_ws.initialize()
    await local_ws.initialize()
    assert sorted(p.name for p in workdir.iterdir()) == ["data", "sessions", "skills"]


async def test_offloading_works_without_initialize(local_ws: LocalWorkspace, workdir: Path) -> None:
    ref = await local_ws.offload_context("s", msgs=user_msgs("x"))
    assert Path(ref) == workdir / "sessions" / "s" / "context.jsonl"
    assert Path(ref).is_file()


async def test_session_files_follow_the_documented_layout(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    await local_ws.offload_context("s", msgs=user_msgs("x"))
    await local_ws.offload_tool_result("s", ToolResultBlock(id="call_1", output="o"))
    session = workdir / "sessions" / "s"
    assert sorted(p.name for p in session.iterdir()) == [
        "context.jsonl",
        "context.jsonl.commit",
        "events.jsonl",
        "tool_result-call_1.txt",
    ]


async def test_context_log_has_one_json_line_per_message(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    msgs = user_msgs("a", "b\nwith a newline", "c")
    ref = await local_ws.offload_context("s", msgs=msgs)
    lines = Path(ref).read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line) for line in lines[:-1]] == [
        json.loads(m.model_dump_json()) for m in msgs
    ]


@pytest.mark.parametrize(
    ("media_type", "extension"),
    [
        ("image/png", ".png"),
        ("image/jpeg", ".jpg"),
        ("audio/wav", ".wav"),
        ("application/pdf", ".pdf"),
        ("IMAGE/PNG; charset=binary", ".png"),
        ("application/x-unknown", ".bin"),
    ],
)
async def test_data_file_is_named_by_the_sha256_of_the_decoded_bytes(
    local_ws: LocalWorkspace, workdir: Path, media_type: str, extension: str
) -> None:
    block = await local_ws.offload_data_block(image_block(PNG, media_type))
    path = Path(block.source.url)
    assert path == workdir / "data" / f"{hashlib.sha256(PNG).hexdigest()}{extension}"
    assert path.read_bytes() == PNG


async def test_data_store_leaves_no_temporary_file(local_ws: LocalWorkspace, workdir: Path) -> None:
    await local_ws.offload_data_block(image_block())
    await local_ws.offload_data_block(image_block())
    assert [p.name for p in (workdir / "data").iterdir()] == [
        f"{hashlib.sha256(PNG).hexdigest()}.png"
    ]


async def test_existing_tool_result_file_is_never_rewritten(
    local_ws: LocalWorkspace,
) -> None:
    result = ToolResultBlock(id="call_1", output="content")
    path = Path(await local_ws.offload_tool_result("s", result))
    inode = path.stat().st_ino
    assert Path(await local_ws.offload_tool_result("s", result)) == path
    assert path.stat().st_ino == inode


async def test_a_file_put_at_the_tool_result_name_is_not_overwritten(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    session = workdir / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "tool_result-call_1.txt").write_bytes(b"someone else's")
    path = await local_ws.offload_tool_result("s", ToolResultBlock(id="call_1", output="mine"))
    assert Path(path).name == "tool_result-call_1.2.txt"
    assert (session / "tool_result-call_1.txt").read_bytes() == b"someone else's"
    assert Path(path).read_bytes() == b"mine"


async def test_list_sessions_ignores_hidden_directories_and_files(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    await local_ws.offload_context("s", msgs=user_msgs("x"))
    (workdir / "sessions" / ".purge-old-1").mkdir()
    (workdir / "sessions" / "stray.txt").write_text("x")
    assert await local_ws.list_sessions() == ["s"]


async def test_list_sessions_of_a_missing_workdir_is_empty(local_ws: LocalWorkspace) -> None:
    assert await local_ws.list_sessions() == []


async def test_purge_session_keeps_data_files_on_disk(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    await local_ws.offload_context("s", msgs=[Msg(role="user", content=[image_block()])])
    data_before = sorted((workdir / "data").iterdir())
    assert await local_ws.purge_session("s") is True
    assert list((workdir / "sessions").iterdir()) == []
    assert sorted((workdir / "data").iterdir()) == data_before
    assert data_before[0].read_bytes() == PNG


async def test_a_write_to_folders_that_exist_makes_none_and_still_refuses_a_planted_one(
    local_ws: LocalWorkspace, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each write reaches its folders opened at once where they are (no mkdir refused as
    existing, three syscalls of every write); a folder removed since is made again, and one
    swapped for a link is refused as before, with nothing written through it."""
    await local_ws.record_event("s", "note", text="first")
    made: list[str] = []
    real_mkdir = os.mkdir

    def counting_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        made.append(os.fsdecode(path))
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", counting_mkdir)
    for n in range(3):
        await local_ws.record_event("s", "note", text=f"again {n}")
    assert made == []
    events = (workdir / "sessions" / "s" / "events.jsonl").read_text().splitlines()
    assert [json.loads(e).get("text") for e in events] == ["first", "again 0", "again 1", "again 2"]

    shutil.rmtree(workdir / "sessions")
    await local_ws.record_event("s", "note", text="after removal")
    assert made == ["sessions", "s"]
    assert (workdir / "sessions" / "s" / "events.jsonl").read_text().count("after removal") == 1

    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(workdir / "sessions" / "s")
    (workdir / "sessions" / "s").symlink_to(outside)
    with pytest.raises(OffloadError, match="symbolic link"):
        await local_ws.record_event("s", "note", text="through the link")
    assert list(outside.iterdir()) == []


# -- line numbers -----------------------------------------------------------------------------


async def test_line_numbers_count_lines_that_another_workspace_appended(
    workdir: Path,
) -> None:
    a, b = LocalWorkspace(workdir), LocalWorkspace(workdir)
    await a.offload_context("s", msgs=user_msgs("a1", "a2"))
    await b.offload_context("s", msgs=user_msgs("b1", "b2", "b3"))
    ref = await a.offload_context("s", msgs=user_msgs("a3"))
    assert (ref.first_line, ref.last_line) == (6, 6)


async def test_line_numbers_stay_exact_when_a_purged_session_is_recreated(
    workdir: Path,
) -> None:
    # ext4 gives the new context.jsonl the inode number of the purged one: a line count
    # cached by inode alone would then be wrong.
    a, b = LocalWorkspace(workdir), LocalWorkspace(workdir)
    await a.offload_context("s", msgs=user_msgs("old 1", "old 2", "old 3"))
    await b.purge_session("s")
    await b.offload_context("s", msgs=user_msgs(*(f"new {i} " + "x" * 200 for i in range(10))))
    ref = await a.offload_context("s", msgs=user_msgs("last"))
    lines = Path(ref).read_bytes().split(b"\n")
    assert (ref.first_line, ref.last_line) == (11, 11)
    assert json.loads(lines[ref.first_line - 1])["content"] == "last"


async def test_line_numbers_stay_exact_after_the_log_is_cut_shorter(workdir: Path) -> None:
    ws = LocalWorkspace(workdir)
    ref = await ws.offload_context("s", msgs=user_msgs("1", "2", "3"))
    data = Path(ref).read_bytes()
    Path(ref).write_bytes(data[: data.index(b"\n") + 1])  # keep only line 1
    again = await ws.offload_context("s", msgs=user_msgs("4"))
    assert (again.first_line, again.last_line) == (2, 2)


# -- references -------------------------------------------------------------------------------


async def test_a_relative_workdir_still_gives_absolute_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Other frameworks' file tools refuse relative paths, and the process may chdir later.
    monkeypatch.chdir(tmp_path)
    ws = LocalWorkspace("ws")
    monkeypatch.chdir("/")
    ref = await ws.offload_context("s", msgs=[Msg(role="user", content=[image_block()])])
    path = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="o"))
    block = await ws.offload_data_block(image_block())
    [line] = await ws.read_context("s")
    events = await ws.read_events("s")
    root = os.path.abspath(tmp_path / "ws")
    assert ref == f"{root}/sessions/s/context.jsonl"
    assert path == f"{root}/sessions/s/tool_result-c.txt"
    assert block.source.url == f"{root}/data/{hashlib.sha256(PNG).hexdigest()}.png"
    assert line["content"][0]["source"]["url"] == block.source.url
    assert [e["reference"] for e in events] == [ref, path]
    assert await ws.read_reference(path) == b"o"
    assert await ws.read_reference(block.source.url) == PNG


async def test_absolute_workdir_gives_absolute_references(workdir: Path) -> None:
    ws = LocalWorkspace(str(workdir))
    ref = await ws.offload_context("s", msgs=user_msgs("x"))
    path = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="o"))
    block = await ws.offload_data_block(image_block())
    for reference in (ref, path, block.source.url):
        assert os.path.isabs(reference)
        assert Path(reference).is_relative_to(workdir)


async def test_read_reference_accepts_a_path_relative_to_the_workdir(
    local_ws: LocalWorkspace,
) -> None:
    block = await local_ws.offload_data_block(image_block())
    relative = "data/" + Path(block.source.url).name
    assert await local_ws.read_reference(relative) == PNG


async def test_read_reference_accepts_a_file_url(local_ws: LocalWorkspace) -> None:
    path = await local_ws.offload_tool_result("s", ToolResultBlock(id="c", output="o"))
    assert await local_ws.read_reference("file://" + path) == b"o"


async def test_read_reference_returns_the_exact_bytes_of_the_context_log(
    local_ws: LocalWorkspace,
) -> None:
    ref = await local_ws.offload_context("s", msgs=user_msgs("a", "b"))
    assert await local_ws.read_reference(ref) == Path(ref).read_bytes()


@pytest.fixture
async def outside_file(tmp_path: Path, local_ws: LocalWorkspace) -> Path:
    """A file next to the workspace, and a workspace with one session in it."""
    await local_ws.offload_context("s", msgs=user_msgs("x"))
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    return secret


async def test_read_reference_refuses_a_dotdot_escape(
    local_ws: LocalWorkspace, workdir: Path, outside_file: Path
) -> None:
    for reference in (
        str(workdir / "sessions" / ".." / ".." / outside_file.name),
        str(workdir / ".." / outside_file.name),
        "../" + outside_file.name,
        "sessions/s/../../../" + outside_file.name,
    ):
        with pytest.raises(InvalidReference):
            await local_ws.read_reference(reference)


async def test_read_reference_refuses_an_absolute_path_outside(
    local_ws: LocalWorkspace, outside_file: Path
) -> None:
    for reference in (str(outside_file), "/etc/passwd", "file://" + str(outside_file)):
        with pytest.raises(InvalidReference):
            await local_ws.read_reference(reference)


async def test_read_reference_refuses_a_symlink_that_points_outside(
    local_ws: LocalWorkspace, workdir: Path, outside_file: Path
) -> None:
    link = workdir / "sessions" / "s" / "tool_result-evil.txt"
    link.symlink_to(outside_file)
    with pytest.raises(InvalidReference):
        await local_ws.read_reference(str(link))


async def test_read_reference_refuses_a_file_under_a_symlinked_directory(
    local_ws: LocalWorkspace, workdir: Path, outside_file: Path
) -> None:
    (workdir / "sessions" / "evil").symlink_to(outside_file.parent)
    with pytest.raises(InvalidReference):
        await local_ws.read_reference(str(workdir / "sessions" / "evil" / outside_file.name))


async def test_read_reference_refuses_a_directory(
    local_ws: LocalWorkspace, workdir: Path, outside_file: Path
) -> None:
    for reference in (str(workdir), str(workdir / "sessions" / "s")):
        with pytest.raises(InvalidReference):
            await local_ws.read_reference(reference)


async def test_read_reference_refuses_a_non_string(local_ws: LocalWorkspace) -> None:
    with pytest.raises(InvalidReference):
        await local_ws.read_reference(b"data/x.png")  # type: ignore[arg-type]


async def test_invalid_reference_error_names_the_reference(
    local_ws: LocalWorkspace, outside_file: Path
) -> None:
    with pytest.raises(InvalidReference, match=r"secret\.txt"):
        await local_ws.read_reference(str(outside_file))


# Workdir names that a URL must encode: a space and é (refused when left raw), and % # ?
# (left raw, a URL decodes to another file, or loses its tail as a fragment or query).
AWKWARD_WORKDIRS = ["with space", "caf\u00e9", "100%41", "a#b", "what?x", "all %41 #? \u00e9"]


@pytest.mark.parametrize("name", AWKWARD_WORKDIRS)
async def test_read_reference_takes_the_file_url_of_a_file_in_any_workdir(
    tmp_path: Path, name: str
) -> None:
    ws = LocalWorkspace(tmp_path / name)
    path = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="o"))
    block = await ws.offload_data_block(image_block())
    assert await ws.read_reference(Path(path).as_uri()) == b"o"
    assert await ws.read_reference(Path(block.source.url).as_uri()) == PNG


async def test_a_file_url_is_decoded_once_so_it_names_no_other_file(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "w%41")
    block = await ws.offload_data_block(image_block())
    decoded_once = Path(str(block.source.url).replace("w%41", "wA"))
    decoded_once.parent.mkdir(parents=True)
    decoded_once.write_bytes(b"another workspace's file")
    assert await ws.read_reference(Path(block.source.url).as_uri()) == PNG
    # The URL the raw path makes means wA's file: outside this workspace, so refused.
    with pytest.raises(InvalidReference):
        await ws.read_reference("file://" + block.source.url)

"""The memory tool attacked as the file tools are: hostile paths, links planted in memories/
and above it, hard links, special files, huge and non-UTF-8 files, a file swapped for a
folder. Each attack must leave everything outside the memory folder as it was, and answer
with an "Error:" that names the value and what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memory_tools import Memory, memory_on, tree_of
from readback_files import SECRET

from ctxoffload.workspace import writing_as


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace holding a secret, which no command may read or change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET + "\n")
    return folder


@pytest.fixture
def memory(workdir: Path) -> Memory:
    return memory_on(workdir)[1]


@pytest.fixture
def memories(workdir: Path) -> Path:
    folder = workdir / "memories"
    folder.mkdir(parents=True)
    return folder


HOSTILE_PATHS = [
    "/memories/../outside/secret.txt",
    "/memories/../../../../../../etc/passwd",
    "/memories/notes/../../x.md",
    "/etc/passwd",
    "/",
    "memories/notes.md",
    "../memories/notes.md",
    "/memoriesX/notes.md",
    "/memories/./notes.md",
    "/memories//notes.md",
    "/memories/.tmp-notes.md-0123",
    "/memories/.hidden",
    "/memories/a\x00b",
    "/memories/a\nb",
    "/memories\\..\\outside\\secret.txt",
    "/memories/" + "n" * 300,
    "/memories/" + "a/" * 600,
    "",
]


def commands(path: object) -> list[dict[str, object]]:
    """Every command, given `path` wherever it takes one."""
    return [
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "pwned"},
        {"command": "str_replace", "path": path, "old_str": "SECRET", "new_str": "pwned"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "pwned"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/taken.md"},
        {"command": "rename", "old_path": "/memories/kept.md", "new_path": path},
    ]


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=range(len(HOSTILE_PATHS)))
async def test_a_hostile_path_is_refused_by_every_command_before_any_file_is_touched(
    memory: Memory, workdir: Path, outside: Path, path: str
) -> None:
    await memory(command="create", path="/memories/kept.md", file_text="kept")
    before = tree_of(workdir.parent)
    for arguments in commands(path):
        answer = await memory(**arguments)
        assert answer.startswith("Error: "), (arguments, answer)
        assert SECRET not in answer
        assert len(answer) < 1_000  # the value is quoted shortened, never whole
    # Nothing changed anywhere: not outside, not in memories/ (only the events grew).
    after = tree_of(workdir.parent)
    for changed in {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}:
        assert changed.endswith("events.jsonl"), changed


@pytest.mark.parametrize("path", [12, None, ["/memories/x"]])
async def test_a_path_that_is_not_text_is_refused(memory: Memory, path: object) -> None:
    answer = await memory(command="view", path=path)
    assert answer.startswith("Error: path=") and "is not a path: pass one under /memories" in answer


async def test_dot_dot_is_named_as_an_escape(memory: Memory) -> None:
    answer = await memory(command="view", path="/memories/../../etc/passwd")
    assert answer == (
        "Error: The path '/memories/../../etc/passwd' would escape the /memories directory: "
        "pass a path without '..'"
    )


async def test_a_path_elsewhere_says_where_memory_paths_start(memory: Memory) -> None:
    answer = await memory(command="create", path="/tmp/notes.md", file_text="x")
    assert answer == (
        "Error: The path '/tmp/notes.md' is not in /memories: every memory path starts with "
        "/memories, such as /memories/notes.md"
    )


# -- links ------------------------------------------------------------------------------------


async def test_a_link_to_a_file_outside_is_neither_read_nor_written_nor_removed(
    memory: Memory, memories: Path, outside: Path
) -> None:
    (memories / "link.md").symlink_to(outside / "secret.txt")
    await memory(command="create", path="/memories/kept.md", file_text="kept")
    for arguments in commands("/memories/link.md"):
        answer = await memory(**arguments)
        assert answer.startswith("Error: "), (arguments, answer)
        assert SECRET not in answer
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    assert (memories / "link.md").is_symlink()
    assert tree_of(memories)["kept.md"] == b"kept"


async def test_a_link_is_named_and_the_fix_given(
    memory: Memory, memories: Path, outside: Path
) -> None:
    (memories / "link.md").symlink_to(outside / "secret.txt")
    answer = await memory(command="view", path="/memories/link.md")
    assert answer == (
        "Error: The path /memories/link.md is a symbolic link: the memory tool follows no link "
        "(its target is neither read nor written); remove the link, or use another path"
    )


async def test_a_link_to_a_folder_outside_is_not_entered(
    memory: Memory, memories: Path, outside: Path
) -> None:
    (memories / "out").symlink_to(outside, target_is_directory=True)
    before = tree_of(outside)
    for path in ("/memories/out/secret.txt", "/memories/out/new.md", "/memories/out/a/b.md"):
        for arguments in commands(path):
            answer = await memory(**arguments)
            assert answer.startswith("Error: "), (arguments, answer)
            assert SECRET not in answer
    assert tree_of(outside) == before
    listing = await memory(command="view", path="/memories")
    assert "out" not in listing.split("\n", 1)[1]  # a link is not listed


async def test_memories_itself_a_link_out_is_refused(
    memory: Memory, workdir: Path, outside: Path
) -> None:
    workdir.mkdir()
    (workdir / "memories").symlink_to(outside, target_is_directory=True)
    before = tree_of(outside)
    for arguments in [*commands("/memories/secret.txt"), {"command": "view", "path": "/memories"}]:
        answer = await memory(**arguments)
        assert answer.startswith("Error: "), (arguments, answer)
        assert SECRET not in answer
    answer = await memory(command="create", path="/memories/new.md", file_text="x")
    assert "memories is a symbolic link or not a directory" in answer and "remove that" in answer
    assert tree_of(outside) == before


async def test_a_link_planted_in_a_parent_of_an_agents_folder_is_refused(
    workdir: Path, outside: Path
) -> None:
    _, memory = memory_on(workdir, isolate_sessions=True)
    (workdir / "memories").mkdir(parents=True)
    (workdir / "memories" / "agents").symlink_to(outside, target_is_directory=True)
    before = tree_of(outside)
    with writing_as("lead", "s1"):
        answer = await memory(command="create", path="/memories/x.md", file_text="x")
        assert answer.startswith("Error: ") and "agents is a symbolic link" in answer
        answer = await memory(command="view", path="/memories")
        assert answer.startswith("Error: ")
    assert tree_of(outside) == before


async def test_a_workdir_given_through_a_link_is_followed_once(
    tmp_path: Path, outside: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    _, memory = memory_on(tmp_path / "via")
    assert (await memory(command="create", path="/memories/a.md", file_text="a")).startswith(
        "File created"
    )
    assert (real / "memories" / "a.md").read_text() == "a"


async def test_a_file_with_a_second_hard_link_is_not_read_or_edited(
    memory: Memory, memories: Path, outside: Path
) -> None:
    os.link(outside / "secret.txt", memories / "linked.md")
    for command in commands("/memories/linked.md")[:4]:
        answer = await memory(**command)
        assert answer.startswith("Error: ") and SECRET not in answer, answer
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    answer = await memory(command="view", path="/memories/linked.md")
    assert "has 2 hard links" in answer


async def test_a_fifo_is_refused_at_once_and_not_listed(memory: Memory, memories: Path) -> None:
    os.mkfifo(memories / "pipe")
    for arguments in commands("/memories/pipe")[:5]:
        answer = await memory(**arguments)  # would hang, were the FIFO opened for reading
        assert answer.startswith("Error: ") and "not a regular file" in answer, answer
    assert "pipe" not in await memory(command="view", path="/memories")


# -- sizes and contents -----------------------------------------------------------------------


async def test_a_file_over_the_limit_is_not_written(workdir: Path) -> None:
    _, memory = memory_on(workdir, max_file_bytes=1_000)
    answer = await memory(command="create", path="/memories/big.md", file_text="x" * 1_001)
    assert answer == (
        "Error: /memories/big.md would be 1,001 bytes, over the limit of 1,000 bytes for one "
        "memory file: nothing was written; keep memory files short (split this one by topic, "
        "or remove what is outdated)"
    )
    await memory(command="create", path="/memories/ok.md", file_text="x" * 990)
    answer = await memory(
        command="insert", path="/memories/ok.md", insert_line=0, insert_text="y" * 20
    )
    assert answer.startswith("Error: /memories/ok.md would be 1,011 bytes")
    assert (workdir / "memories" / "ok.md").read_text() == "x" * 990


async def test_the_folder_limit_refuses_what_would_pass_it_and_allows_shrinking(
    workdir: Path,
) -> None:
    _, memory = memory_on(workdir, max_file_bytes=600, max_folder_bytes=1_000)
    await memory(command="create", path="/memories/a.md", file_text="a" * 600)
    answer = await memory(command="create", path="/memories/b.md", file_text="b" * 401)
    assert answer.startswith("Error: the memory directory would hold 1,001 bytes, over its limit")
    assert not (workdir / "memories" / "b.md").exists()
    await memory(command="create", path="/memories/b.md", file_text="b" * 400)
    shrunk = await memory(
        command="str_replace", path="/memories/a.md", old_str="a" * 600, new_str="a"
    )
    assert shrunk.startswith("The memory file has been edited.")


async def test_a_huge_file_planted_in_memories_is_refused_without_reading_it(
    memory: Memory, memories: Path
) -> None:
    with (memories / "huge.md").open("wb") as file:
        file.truncate(50_000_000)  # 50 MB, sparse
    answer = await memory(command="view", path="/memories/huge.md")
    assert answer.startswith("Error: /memories/huge.md is 50,000,000 bytes, over the limit of")
    listing = await memory(command="view", path="/memories")
    assert "48M\t/memories/huge.md" in listing
    assert await memory(command="delete", path="/memories/huge.md") == (
        "Successfully deleted /memories/huge.md"
    )


async def test_a_file_that_is_not_utf8_is_viewed_and_edited_byte_for_byte(
    memory: Memory, memories: Path
) -> None:
    (memories / "latin.md").write_bytes(b"caf\xe9 au lait\nsecond line\n")
    answer = await memory(command="view", path="/memories/latin.md")
    assert "     1\tcaf\ufffd au lait" in answer
    assert answer.endswith("str_replace and insert keep them as they are)")
    await memory(command="str_replace", path="/memories/latin.md", old_str="second", new_str="2nd")
    await memory(
        command="insert", path="/memories/latin.md", insert_line=2, insert_text="\u00e9t\u00e9"
    )
    assert (memories / "latin.md").read_bytes() == (
        b"caf\xe9 au lait\n2nd line\n\xc3\xa9t\xc3\xa9\n"
    )


async def test_a_binary_file_is_refused(memory: Memory, memories: Path) -> None:
    (memories / "blob.md").write_bytes(b"\x00\x01\x02" * 100)
    answer = await memory(command="view", path="/memories/blob.md")
    assert answer.startswith("Error: /memories/blob.md is a binary file (300 bytes, NUL bytes")


async def test_a_lone_surrogate_is_refused(memory: Memory, memories: Path) -> None:
    answer = await memory(command="create", path="/memories/s.md", file_text="a\ud800b")
    assert answer.startswith("Error: file_text holds '\\ud800' at character 1, a lone surrogate")
    assert tree_of(memories) == {}


async def test_a_file_swapped_for_a_folder_is_listed_and_not_edited(
    memory: Memory, memories: Path
) -> None:
    await memory(command="create", path="/memories/notes.md", file_text="x")
    (memories / "notes.md").unlink()
    (memories / "notes.md").mkdir()
    (memories / "notes.md" / "inner.md").write_text("inner")
    answer = await memory(
        command="str_replace", path="/memories/notes.md", old_str="x", new_str="y"
    )
    assert answer.startswith("Error: The path /memories/notes.md is a directory")
    assert "/memories/notes.md/inner.md" in await memory(command="view", path="/memories/notes.md")


async def test_a_file_on_the_way_is_named_as_a_file(memory: Memory) -> None:
    await memory(command="create", path="/memories/notes.md", file_text="x")
    answer = await memory(command="create", path="/memories/notes.md/inner.md", file_text="y")
    assert answer == (
        "Error: The path /memories/notes.md is a file, not a directory: a file cannot hold "
        "other files; use another path"
    )


async def test_what_a_killed_writer_left_is_cleared_by_the_next_change(
    memory: Memory, memories: Path
) -> None:
    # A temporary file no live writer holds, and a folder renamed aside by a killed delete.
    (memories / ".tmp-notes.md-dead").write_text("half")
    (memories / ".purge-old-1").mkdir()
    (memories / ".purge-old-1" / "a.md").write_text("a")
    await memory(command="create", path="/memories/notes.md", file_text="whole")
    assert sorted(p.name for p in memories.iterdir()) == ["notes.md"]

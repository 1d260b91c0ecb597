"""The memory tool's commands, each with its answer and its documented errors worded as
Anthropic's memory tool words them (memory_20250818: the sentences of its documentation and of
the Anthropic SDK's own filesystem implementation), so a model trained on that tool reads ours
as its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_tools import Memory, memory_on, tree_of

from ctxoffload.agent import Tool, as_tool
from ctxoffload.exceptions import ConfigError
from ctxoffload.readback import memory_tool


@pytest.fixture
def memory(workdir: Path) -> Memory:
    return memory_on(workdir)[1]


@pytest.fixture
def memories(workdir: Path) -> Path:
    return workdir / "memories"


# -- create -----------------------------------------------------------------------------------


async def test_create_writes_a_new_file_under_memories(memory: Memory, memories: Path) -> None:
    answer = await memory(command="create", path="/memories/notes.md", file_text="Hello\n")
    assert answer == "File created successfully at: /memories/notes.md"
    assert tree_of(memories) == {"notes.md": b"Hello\n"}


async def test_create_makes_the_folders_on_the_way(memory: Memory, memories: Path) -> None:
    answer = await memory(command="create", path="/memories/a/b/c.md", file_text="deep")
    assert answer == "File created successfully at: /memories/a/b/c.md"
    assert tree_of(memories) == {"a/b/c.md": b"deep"}


async def test_create_refuses_an_existing_file_and_keeps_it(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/notes.md", file_text="first")
    answer = await memory(command="create", path="/memories/notes.md", file_text="second")
    assert answer == "Error: File /memories/notes.md already exists"
    assert tree_of(memories) == {"notes.md": b"first"}


async def test_create_refuses_a_directory_and_memories_itself(memory: Memory) -> None:
    await memory(command="create", path="/memories/dir/x.md", file_text="x")
    answer = await memory(command="create", path="/memories/dir", file_text="y")
    assert answer.startswith("Error: The path /memories/dir is a directory")
    answer = await memory(command="create", path="/memories", file_text="y")
    assert answer.startswith("Error: /memories is the memory directory: pass a file's path")


async def test_create_without_file_text_says_what_to_pass(memory: Memory) -> None:
    answer = await memory(command="create", path="/memories/x.md")
    assert answer == "Error: create needs file_text: pass path, file_text (paths under /memories)"


# -- view -------------------------------------------------------------------------------------


async def test_view_numbers_the_lines_of_a_file(memory: Memory) -> None:
    await memory(command="create", path="/memories/v.txt", file_text="Line 1\nLine 2\nLine 3")
    assert await memory(command="view", path="/memories/v.txt") == (
        "Here's the content of /memories/v.txt with line numbers:\n"
        "     1\tLine 1\n     2\tLine 2\n     3\tLine 3"
    )


async def test_view_range_shows_some_lines_and_minus_one_reads_to_the_end(memory: Memory) -> None:
    text = "\n".join(f"Line {n}" for n in range(1, 6))
    await memory(command="create", path="/memories/r.txt", file_text=text)
    header = "Here's the content of /memories/r.txt with line numbers:\n"
    answer = await memory(command="view", path="/memories/r.txt", view_range=[2, 4])
    assert answer == header + "     2\tLine 2\n     3\tLine 3\n     4\tLine 4"
    answer = await memory(command="view", path="/memories/r.txt", view_range=[4, -1])
    assert answer == header + "     4\tLine 4\n     5\tLine 5"


@pytest.mark.parametrize(
    ("view_range", "said"),
    [
        ([9, 10], "its first line 9 is past the end of /memories/r.txt, which has 2 lines"),
        ([2, 1], "its last line 1 is before its first 2"),
        ([0, 1], "view_range[0]=0 must be at least 1"),
        ([1], "is not [first, last]"),
        ("1-2", "is not [first, last]"),
    ],
)
async def test_a_view_range_that_is_no_lines_of_the_file_is_refused(
    memory: Memory, view_range: object, said: str
) -> None:
    await memory(command="create", path="/memories/r.txt", file_text="a\nb\n")
    answer = await memory(command="view", path="/memories/r.txt", view_range=view_range)
    assert answer.startswith("Error: ") and said in answer


async def test_view_lists_a_folder_two_levels_deep_with_sizes(memory: Memory) -> None:
    await memory(command="create", path="/memories/notes.md", file_text="x" * 100)
    await memory(command="create", path="/memories/project/plan.md", file_text="y" * 5000)
    await memory(command="create", path="/memories/project/deep/more/far.md", file_text="z")
    answer = await memory(command="view", path="/memories")
    assert answer.splitlines() == [
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:",
        "5.0K\t/memories",
        "100B\t/memories/notes.md",
        "4.9K\t/memories/project",
        "1B\t/memories/project/deep",
        "4.9K\t/memories/project/plan.md",
    ]
    answer = await memory(command="view", path="/memories/project/")
    assert "1B\t/memories/project/deep/more" in answer.splitlines()


async def test_view_of_memories_before_any_file_is_an_empty_listing(memory: Memory) -> None:
    answer = await memory(command="view", path="/memories")
    assert answer.splitlines()[1:] == ["0B\t/memories"]


async def test_view_leaves_out_hidden_names_and_node_modules(
    memory: Memory, memories: Path
) -> None:
    await memory(command="create", path="/memories/seen.md", file_text="x")
    (memories / "node_modules").mkdir()
    (memories / "node_modules" / "pkg.js").write_text("x")
    (memories / ".hidden").write_text("x")
    answer = await memory(command="view", path="/memories")
    assert "seen.md" in answer and "node_modules" not in answer.splitlines()[-1]
    assert ".hidden" not in answer and "pkg.js" not in answer


async def test_view_of_a_missing_path(memory: Memory) -> None:
    answer = await memory(command="view", path="/memories/nonexistent.txt")
    assert answer == (
        "Error: The path /memories/nonexistent.txt does not exist. Please provide a valid path."
    )


async def test_view_range_on_a_folder_is_refused(memory: Memory) -> None:
    answer = await memory(command="view", path="/memories", view_range=[1, 2])
    assert answer == (
        "Error: The `view_range` parameter is not allowed when `path` points to a directory."
    )


async def test_view_of_an_empty_file_says_it_is_empty(memory: Memory) -> None:
    await memory(command="create", path="/memories/empty.md", file_text="")
    answer = await memory(command="view", path="/memories/empty.md")
    assert answer.endswith("with line numbers:\n(the file is empty)")


async def test_view_stops_at_its_cap_and_says_how_to_read_on(workdir: Path) -> None:
    _, memory = memory_on(workdir, max_output_chars=3_000)
    text = "\n".join(f"line {n} " + "x" * 90 for n in range(1, 201))
    await memory(command="create", path="/memories/long.md", file_text=text)
    answer = await memory(command="view", path="/memories/long.md")
    assert len(answer) <= 3_000
    last = answer.splitlines()[-1]
    shown = int(last.split("–")[1].split()[0])
    assert last == (
        f"… lines 1–{shown} of 200 shown (output size cap reached); call view with "
        f"view_range=[{shown + 1}, 200] to continue"
    )
    rest = await memory(command="view", path="/memories/long.md", view_range=[shown + 1, 200])
    assert rest.splitlines()[1].startswith(f"{shown + 1:>6}\tline {shown + 1} ")


# -- str_replace ------------------------------------------------------------------------------


async def test_str_replace_replaces_the_one_occurrence_and_shows_the_lines(
    memory: Memory, memories: Path
) -> None:
    await memory(command="create", path="/memories/r.txt", file_text="Line 1\nOld Text\nLine 3")
    answer = await memory(
        command="str_replace", path="/memories/r.txt", old_str="Old Text", new_str="New Text"
    )
    assert answer == (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     1\tLine 1\n     2\tNew Text\n     3\tLine 3"
    )
    assert tree_of(memories) == {"r.txt": b"Line 1\nNew Text\nLine 3"}


async def test_str_replace_of_a_text_that_is_not_there(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/r.txt", file_text="Hello, World!")
    answer = await memory(
        command="str_replace", path="/memories/r.txt", old_str="NotFound", new_str="Python"
    )
    assert answer == (
        "Error: No replacement was performed, old_str `NotFound` did not appear verbatim in "
        "/memories/r.txt."
    )
    assert tree_of(memories) == {"r.txt": b"Hello, World!"}


async def test_str_replace_of_a_text_there_twice_names_its_lines(
    memory: Memory, memories: Path
) -> None:
    await memory(command="create", path="/memories/r.txt", file_text="Hello\nMiddle\nHello")
    answer = await memory(
        command="str_replace", path="/memories/r.txt", old_str="Hello", new_str=""
    )
    assert answer == (
        "Error: No replacement was performed. Multiple occurrences of old_str `Hello` in lines: "
        "1, 3. Please ensure it is unique"
    )
    assert tree_of(memories) == {"r.txt": b"Hello\nMiddle\nHello"}


async def test_str_replace_with_an_empty_old_str_is_refused(memory: Memory) -> None:
    await memory(command="create", path="/memories/r.txt", file_text="abc")
    answer = await memory(command="str_replace", path="/memories/r.txt", old_str="", new_str="x")
    assert answer.startswith("Error: old_str is empty: pass the exact text to replace")


async def test_str_replace_without_new_str_removes_the_text(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/r.txt", file_text="keep DROP keep")
    await memory(command="str_replace", path="/memories/r.txt", old_str="DROP ")
    assert tree_of(memories) == {"r.txt": b"keep keep"}


async def test_str_replace_in_a_missing_file(memory: Memory) -> None:
    answer = await memory(
        command="str_replace", path="/memories/nonexistent.txt", old_str="a", new_str="b"
    )
    assert answer == (
        "Error: The path /memories/nonexistent.txt does not exist. Please provide a valid path."
    )


async def test_str_replace_on_a_folder_is_refused(memory: Memory) -> None:
    await memory(command="create", path="/memories/dir/x.md", file_text="x")
    answer = await memory(command="str_replace", path="/memories/dir", old_str="x", new_str="y")
    assert answer.startswith("Error: The path /memories/dir is a directory")


# -- insert -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("insert_line", "text", "expected"),
    [
        (1, "Line 1\nLine 2", b"Line 1\nInserted\nLine 2"),
        (0, "Line 1\nLine 2", b"Inserted\nLine 1\nLine 2"),
        (2, "Line 1\nLine 2", b"Line 1\nLine 2\nInserted"),
        (2, "Line 1\nLine 2\n", b"Line 1\nLine 2\nInserted\n"),
        (0, "", b"Inserted\n"),
        ("1", "Line 1\nLine 2", b"Line 1\nInserted\nLine 2"),
    ],
)
async def test_insert_puts_the_text_after_the_line(
    memory: Memory, memories: Path, insert_line: object, text: str, expected: bytes
) -> None:
    await memory(command="create", path="/memories/i.txt", file_text=text)
    answer = await memory(
        command="insert", path="/memories/i.txt", insert_line=insert_line, insert_text="Inserted"
    )
    assert answer == "The file /memories/i.txt has been edited."
    assert tree_of(memories) == {"i.txt": expected}


@pytest.mark.parametrize("insert_line", [10, -1, "x", True])
async def test_insert_at_a_line_the_file_does_not_have(memory: Memory, insert_line: object) -> None:
    await memory(command="create", path="/memories/i.txt", file_text="Line 1\nLine 2")
    answer = await memory(
        command="insert", path="/memories/i.txt", insert_line=insert_line, insert_text="x"
    )
    assert answer.startswith("Error: Invalid `insert_line` parameter: ")
    assert answer.endswith(". It should be within the range of lines of the file: [0, 2]")


async def test_insert_into_a_missing_file(memory: Memory) -> None:
    answer = await memory(
        command="insert", path="/memories/none.txt", insert_line=0, insert_text="x"
    )
    assert answer == (
        "Error: The path /memories/none.txt does not exist. Please provide a valid path."
    )


# -- delete -----------------------------------------------------------------------------------


async def test_delete_removes_a_file(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/gone.md", file_text="x")
    assert await memory(command="delete", path="/memories/gone.md") == (
        "Successfully deleted /memories/gone.md"
    )
    assert tree_of(memories) == {}


async def test_delete_removes_a_folder_with_everything_in_it(
    memory: Memory, memories: Path
) -> None:
    await memory(command="create", path="/memories/sub/a.md", file_text="a")
    await memory(command="create", path="/memories/sub/deeper/b.md", file_text="b")
    await memory(command="create", path="/memories/kept.md", file_text="k")
    assert await memory(command="delete", path="/memories/sub") == (
        "Successfully deleted /memories/sub"
    )
    assert sorted(p.name for p in memories.iterdir()) == ["kept.md"]


async def test_delete_removes_a_folder_whose_name_is_as_long_as_names_go(
    memory: Memory, memories: Path
) -> None:
    name = "n" * 255
    await memory(command="create", path=f"/memories/{name}/a.md", file_text="a")
    assert await memory(command="delete", path=f"/memories/{name}") == (
        f"Successfully deleted /memories/{name}"
    )
    assert tree_of(memories) == {}


async def test_delete_of_a_missing_path(memory: Memory) -> None:
    answer = await memory(command="delete", path="/memories/none.txt")
    assert answer == (
        "Error: The path /memories/none.txt does not exist. Please provide a valid path."
    )


async def test_memories_itself_is_never_deleted(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/kept.md", file_text="k")
    for path in ("/memories", "/memories/"):
        answer = await memory(command="delete", path=path)
        assert answer.startswith("Error: Cannot delete the /memories directory itself")
    assert tree_of(memories) == {"kept.md": b"k"}


# -- rename -----------------------------------------------------------------------------------


async def test_rename_moves_a_file(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/old.txt", file_text="content")
    answer = await memory(
        command="rename", old_path="/memories/old.txt", new_path="/memories/nested/dir/new.txt"
    )
    assert answer == "Successfully renamed /memories/old.txt to /memories/nested/dir/new.txt"
    assert tree_of(memories) == {"nested/dir/new.txt": b"content"}


async def test_rename_moves_a_folder(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/a/x.md", file_text="x")
    await memory(command="rename", old_path="/memories/a", new_path="/memories/b")
    assert tree_of(memories) == {"b/x.md": b"x"}


async def test_rename_of_a_missing_path(memory: Memory) -> None:
    answer = await memory(command="rename", old_path="/memories/no.txt", new_path="/memories/n")
    assert answer == (
        "Error: The path /memories/no.txt does not exist. Please provide a valid path."
    )


async def test_rename_onto_an_existing_path_is_refused(memory: Memory, memories: Path) -> None:
    await memory(command="create", path="/memories/file1.txt", file_text="1")
    await memory(command="create", path="/memories/file2.txt", file_text="2")
    answer = await memory(
        command="rename", old_path="/memories/file1.txt", new_path="/memories/file2.txt"
    )
    assert answer == "Error: The destination /memories/file2.txt already exists"
    assert tree_of(memories) == {"file1.txt": b"1", "file2.txt": b"2"}


async def test_rename_into_itself_or_of_memories_is_refused(memory: Memory) -> None:
    await memory(command="create", path="/memories/a/x.md", file_text="x")
    answer = await memory(command="rename", old_path="/memories/a", new_path="/memories/a/b")
    assert answer.startswith("Error: Cannot move /memories/a into itself")
    answer = await memory(command="rename", old_path="/memories", new_path="/memories/b")
    assert answer.startswith("Error: Cannot rename the /memories directory itself")


# -- what the model is given ------------------------------------------------------------------


async def test_an_unknown_command_names_the_commands(memory: Memory) -> None:
    answer = await memory(command="append", path="/memories/x.md")
    assert answer == (
        "Error: Unknown command 'append': use one of view, create, str_replace, insert, "
        "delete, rename"
    )


def test_the_schema_takes_the_arguments_of_anthropics_memory_tool(workdir: Path) -> None:
    tool = as_tool(memory_on(workdir)[1])
    assert isinstance(tool, Tool) and tool.name == "memory" and tool.is_reader
    properties = tool.parameters["properties"]
    assert set(properties) == {
        "command",
        "path",
        "view_range",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "old_path",
        "new_path",
    }
    assert tool.parameters["required"] == ["command"]
    assert all(properties[name].get("description") for name in properties)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"shared": "../x"}, "shared='../x' is not a plain name"),
        ({"session_id": "a/b"}, "is not a plain name"),
        ({"max_file_bytes": 0}, "max_file_bytes=0 must be a positive number"),
        ({"max_file_bytes": 10, "max_folder_bytes": 5}, "is over max_folder_bytes"),
        ({"max_output_chars": 100}, "max_output_chars=100 is below"),
        ({"agent": ""}, "agent='' is not an agent's name"),
    ],
)
def test_impossible_options_are_refused(
    workdir: Path, options: dict[str, object], said: str
) -> None:
    # A ConfigError, or an InvalidSessionId for the session: both ValueErrors.
    with pytest.raises(ValueError, match=None) as caught:
        memory_on(workdir, **options)
    assert said in str(caught.value)


def test_a_workspace_without_a_folder_is_refused() -> None:
    from ctxoffload import InMemoryWorkspace

    with pytest.raises(ConfigError, match="memory_tool needs a LocalWorkspace"):
        memory_tool(InMemoryWorkspace())  # type: ignore[arg-type]

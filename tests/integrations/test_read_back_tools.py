"""Which read-back tools every door gives its agent (`reading_functions`, their one home):
Read, Grep and Glob for a workspace on a folder, the retrieval tool for one with none, never
both: on a folder the file tools answer all the retrieval tool did, and a second reader
would cost every request its schema."""

from __future__ import annotations

from pathlib import Path

from ctxoffload import (
    ContextConfig,
    InMemoryWorkspace,
    LocalWorkspace,
    ReaderTools,
    ToolResultBlock,
)
from ctxoffload.integrations import reading_functions
from ctxoffload.integrations._reading import read_back
from ctxoffload.readback import retrieval_tool

OUTPUT = "\n".join(f"line {i}" for i in range(1, 301)) + "\nneedle 42 found\n"


def names(functions: list) -> list[str]:  # type: ignore[type-arg]
    return [f.__name__ for f in functions]


def test_a_workspace_on_a_folder_gets_the_file_tools_only(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    assert names(reading_functions(ws, 8_000)) == ["Read", "Grep", "Glob"]
    assert names(reading_functions(ws, 8_000, memory=True)) == ["Read", "Grep", "Glob", "memory"]


async def test_a_workspace_with_no_folder_gets_the_retrieval_tool_which_reads_it_back() -> None:
    ws = InMemoryWorkspace()
    reference = await ws.offload_tool_result("s1", ToolResultBlock(id="c1", output=OUTPUT))
    (retrieve,) = reading_functions(ws, 8_000)
    assert retrieve.__name__ == "retrieve_offloaded_content"
    assert "needle 42 found" in await retrieve(reference=reference, pattern="needle")


async def test_on_a_folder_read_and_grep_answer_what_the_retrieval_tool_answers(
    tmp_path: Path,
) -> None:
    # What the model asked of the retrieval tool (a range of lines, the lines matching a
    # pattern) it gets from Read and Grep on the path the notice names, numbered alike.
    ws = LocalWorkspace(tmp_path / "ws")
    reference = await ws.offload_tool_result("s1", ToolResultBlock(id="c1", output=OUTPUT))
    read, grep, _ = reading_functions(ws, 8_000)
    retrieve = retrieval_tool(ws, max_output_chars=8_000)  # what a host may add itself
    by_range = await retrieve(reference=reference, line_range=[299, 301])
    by_read = await read(path=reference, offset=299, limit=3)
    assert by_read.splitlines() == by_range.splitlines()[-3:]
    assert "301:needle 42 found" in await grep(pattern="needle", path_or_glob=reference)
    assert "301\tneedle 42 found" in await retrieve(reference=reference, pattern="needle")


def test_what_notices_name_is_taken_from_the_tools_given(tmp_path: Path) -> None:
    # The one home of both: a door's notices can name no tool it did not give.
    on_disk = read_back(LocalWorkspace(tmp_path / "ws"), 8_000, memory=True)
    assert names(on_disk.functions) == ["Read", "Grep", "Glob", "memory"]
    assert on_disk.readers == ReaderTools(read="Read", grep="Grep")
    in_memory = read_back(InMemoryWorkspace(), 8_000)
    assert names(in_memory.functions) == ["retrieve_offloaded_content"]
    assert in_memory.readers == ReaderTools(retrieve="retrieve_offloaded_content")


def test_reader_tools_a_doors_config_names_are_the_users_own_and_stay_named(
    tmp_path: Path,
) -> None:
    own = ReaderTools(read="view_text_file")
    config = ContextConfig(reader_tools=own)
    assert read_back(LocalWorkspace(tmp_path / "ws"), 8_000, config=config).readers == own
    for config in (ContextConfig(), ContextConfig(reader_tools=ReaderTools())):  # none named
        assert read_back(InMemoryWorkspace(), 8_000, config=config).readers.retrieve

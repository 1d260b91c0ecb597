"""What an offloaded result leaves in the context: a preview sized apart from the offload
threshold (head, or head and tail), and a notice that names the tools the agent really has
and, for images, the data file and its kind."""

from __future__ import annotations

import base64
import re

import pytest

from ctxoffload import (
    Base64Source,
    ContextConfig,
    DataBlock,
    InMemoryWorkspace,
    LocalWorkspace,
    Msg,
    TextBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import TRUNCATION_MARKER, Compressor, ReaderTools

COUNTER = get_token_counter(exact=True)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def numbered(n: int) -> str:
    return "\n".join(f"{i + 1:05d}: " + " ".join(f"w{i}x{j}" for j in range(6)) for i in range(n))


def make(
    ws: LocalWorkspace | InMemoryWorkspace | None,
    readers: ReaderTools | None = None,
    **config: object,
) -> Compressor:
    config.setdefault("context_window", 200_000)
    return Compressor(
        ContextConfig(**config),  # type: ignore[arg-type]
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
        reader_tools=readers,
    )


async def cut(comp: Compressor, text: str = "", *, output: object = None) -> str:
    block = ToolResultBlock(id="c1", name="cat", output=output if output is not None else text)
    out = await comp.process_tool_result(block)
    assert isinstance(out.output, str) and TRUNCATION_MARKER in out.output
    return out.output


# -- preview ----------------------------------------------------------------------------------


def test_the_preview_defaults_to_the_limit_capped_at_2000_tokens() -> None:
    assert ContextConfig().preview_budget() == 2000
    assert ContextConfig(tool_result_limit=500).preview_budget() == 500
    assert ContextConfig(preview_tokens=300).preview_budget() == 300


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"preview_tokens": 4000}, "preview_tokens 4000 is above tool_result_limit 3000"),
        ({"preview_tokens": 10}, "preview_tokens 10 is below 50"),
        ({"preview": "tail"}, "preview"),
    ],
)
def test_an_impossible_preview_is_rejected(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ContextConfig(**fields)  # type: ignore[arg-type]


def test_a_preview_that_cannot_fit_the_reserve_of_a_known_window_is_rejected() -> None:
    with pytest.raises(
        ValueError,
        match=r"preview_tokens 2000 does not fit the reserve of 800 tokens "
        r"\(reserve_ratio 0\.1 × context_window 8000\)",
    ):
        ContextConfig(context_window=8000, preview_tokens=2000)
    # Unset, the preview is derived and adjusted (and said) by the compressor instead.
    assert ContextConfig(context_window=8000).preview_tokens is None


async def test_the_limit_decides_what_is_offloaded_and_the_preview_what_stays(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws, tool_result_limit=1000, preview_tokens=150)
    small = numbered(10)
    assert 150 < COUNTER.count_text(small) < 1000
    block = ToolResultBlock(id="c0", name="cat", output=small)
    assert await comp.process_tool_result(block) is block  # under the limit: whole
    text = numbered(400)
    output = await cut(comp, text)
    assert COUNTER.count_text(output) <= 150
    assert (local_ws.session_dir("s1") / "tool_result-c1.txt").read_text() == text


async def test_head_and_tail_show_both_ends_and_say_which_lines(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws, tool_result_limit=300, preview="head_tail")
    text = numbered(1000)
    output = await cut(comp, text)
    assert COUNTER.count_text(output) <= 300
    head, _, rest = output.partition("\n" + TRUNCATION_MARKER + "\n")
    notice, _, tail = rest.partition("</system-reminder>\n")
    found = re.search(r"lines 1-(\d+) and lines (\d+)-1000", notice)
    assert found, notice
    last_head, first_tail = int(found.group(1)), int(found.group(2))
    lines = text.split("\n")
    assert head.split("\n") == lines[:last_head]
    assert tail.split("\n") == lines[first_tail - 1 :]
    assert 0 < last_head < first_tail <= 1000
    assert f"offset={last_head + 1}" not in notice or "Read" not in notice


# -- reader tools -----------------------------------------------------------------------------


async def test_without_known_tools_the_notice_says_your_file_tools(
    local_ws: LocalWorkspace,
) -> None:
    output = await cut(make(local_ws, tool_result_limit=1000), numbered(500))
    assert "your file tools" in output
    assert "Read(" not in output and "Grep(" not in output


async def test_ctxoffloads_own_tools_are_named_with_their_exact_calls(
    local_ws: LocalWorkspace,
) -> None:
    readers = ReaderTools(read="Read", grep="Grep", retrieve="retrieve_offloaded_content")
    output = await cut(make(local_ws, readers, tool_result_limit=1000), numbered(500))
    path = str(local_ws.session_dir("s1") / "tool_result-c1.txt")
    assert f"Read(path={path!r}, offset=" in output
    assert f"Grep(pattern='...', path_or_glob={path!r})" in output


async def test_another_frameworks_tools_are_named(local_ws: LocalWorkspace) -> None:
    config_readers = ReaderTools(read="view_text_file", grep="grep_files")
    output = await cut(
        make(local_ws, tool_result_limit=1000, reader_tools=config_readers), numbered(500)
    )
    assert "view_text_file" in output and "grep_files" in output
    assert "Read(" not in output and "your file tools" not in output


async def test_with_only_a_retrieval_tool_the_notice_names_it_with_its_arguments() -> None:
    ws = InMemoryWorkspace()
    readers = ReaderTools(retrieve="retrieve_offloaded_content")
    output = await cut(make(ws, readers, tool_result_limit=1000), numbered(500))
    reference = re.search(r"saved in:\n(\S+)", output)
    assert reference, output
    ref = reference.group(1)
    assert f"retrieve_offloaded_content(reference={ref!r}, line_range=[" in output
    assert f"retrieve_offloaded_content(reference={ref!r}, pattern='...', context_lines=" in output
    assert "Read" not in output and "your file tools" not in output


async def test_reader_tools_set_later_are_named_from_then_on(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws, tool_result_limit=1000, reader_tools=ReaderTools(read="read_file"))
    first = await cut(comp, numbered(500))
    assert "read_file" in first
    comp.set_reader_tools(ReaderTools(read="Read", grep="Grep"))
    second = await comp.process_tool_result(
        ToolResultBlock(id="c2", name="cat", output=numbered(500))
    )
    assert "Read(path=" in str(second.output) and "read_file" not in str(second.output)


def chat(n: int) -> list[Msg]:
    words = " ".join(f"word{j}" for j in range(25))
    return [
        Msg(role="user" if i % 2 == 0 else "assistant", content=f"message {i}: {words}")
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("readers", "search", "absent"),
    [
        (
            ReaderTools(retrieve="retrieve_offloaded_content"),
            "search it with retrieve_offloaded_content(reference='memory://workspace/sessions/s1/"
            "context.jsonl', pattern='...') for a word",
            ("your file tools", "Grep", "grep"),
        ),
        (
            ReaderTools(read="Read", grep="Grep"),
            "search it with Grep for a word",
            ("your file tools", "retrieve_offloaded_content"),
        ),
        (None, "search it with your file tools for a word", ("Grep", "retrieve_offloaded_content")),
    ],
)
async def test_the_summary_says_to_search_the_context_log_with_the_tools_the_agent_has(
    readers: ReaderTools | None, search: str, absent: tuple[str, ...]
) -> None:
    # An agent with only the retrieval tool was told to "search it with your file tools":
    # the header names the tools as every notice does.
    comp = make(InMemoryWorkspace(), readers, context_window=3000)
    done = await comp.maybe_compress([Msg(role="system", content="sys"), *chat(40)], force=True)
    header = done.messages[1].text.split("## Task overview")[0]
    assert search in header
    for word in absent:
        assert word not in header


async def test_a_summary_with_nothing_kept_writes_no_call_of_a_reader_tool() -> None:
    comp = make(None, ReaderTools(retrieve="retrieve_offloaded_content"), context_window=3000)
    done = await comp.maybe_compress([Msg(role="system", content="sys"), *chat(40)], force=True)
    header = done.messages[1].text.split("## Task overview")[0]
    assert "not kept: no offloader was configured" in header
    assert "retrieve_offloaded_content(" not in header


async def test_a_window_note_says_to_search_with_the_retrieval_tool_it_has() -> None:
    from ctxoffload.compression import ContextPipeline, SlidingWindow

    pipeline = ContextPipeline(
        pre_llm=[SlidingWindow(max_messages=4)], config=ContextConfig(context_window=50_000)
    )
    comp = make(InMemoryWorkspace(), ReaderTools(retrieve="retrieve_offloaded_content"))
    kept = (await pipeline.bind(comp).pre_llm(chat(20))).messages
    (note,) = [m.text for m in kept if "earlier messages were moved out" in m.text]
    assert "search it with retrieve_offloaded_content(reference='memory://" in note
    assert "your file tools" not in note


def test_the_notices_name_the_retrieval_tool_by_the_name_readback_gives_it() -> None:
    from ctxoffload.readback import RETRIEVAL_TOOL_NAME

    assert ReaderTools.among(["Read", "Glob", RETRIEVAL_TOOL_NAME]) == ReaderTools(
        read="Read", retrieve=RETRIEVAL_TOOL_NAME
    )
    # A tool listed under another name (the MCP proxy's, around the wrapped server's own).
    listed = {"Read": "ctxoffload_Read", "Grep": "Grep", "memory": "memory"}
    assert ReaderTools.among(listed) == ReaderTools(read="ctxoffload_Read", grep="Grep")
    assert not ReaderTools.among(["fetch", "memory"]).known


# -- images -----------------------------------------------------------------------------------


async def test_an_image_result_names_its_data_file_and_kind_and_no_offset_past_the_end(
    local_ws: LocalWorkspace,
) -> None:
    readers = ReaderTools(read="Read", grep="Grep")
    image = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(PNG).decode())
    )
    output = await cut(make(local_ws, readers, tool_result_limit=60), output=[image])
    data = sorted(local_ws.data_dir.glob("*.png"))
    assert len(data) == 1
    assert str(data[0]) in output
    assert "image (image/png)" in output or "image/png" in output
    file_lines = (local_ws.session_dir("s1") / "tool_result-c1.txt").read_text().count("\n") + 1
    for offset in re.findall(r"offset=(\d+)", output):
        assert int(offset) <= file_lines


async def test_text_with_an_image_names_the_image_in_the_full_notice(
    local_ws: LocalWorkspace,
) -> None:
    readers = ReaderTools(read="Read", grep="Grep")
    image = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(PNG).decode())
    )
    output = await cut(
        make(local_ws, readers, tool_result_limit=1000),
        output=[TextBlock(text=numbered(300)), image],
    )
    data = sorted(local_ws.data_dir.glob("*.png"))
    assert f"image (image/png) in {data[0]}" in output

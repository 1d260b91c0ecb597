"""Grep, Read and the retrieval tool read context.jsonl as the text the model saw."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readback_files import literal

from ctxoffload import LocalWorkspace, Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ctxoffload.readback import FileToolbox, retrieval_tool
from ctxoffload.text import matching_lines
from helpers import examples

SEEN = 'print("FAILURE: disk \\\\ é full")'  # quotes, a backslash, non-ASCII: JSON escapes all
CALLED = 'print("FAILURE: disk")\nprint("naïve \\\\ done")'  # a tool call's argument, two lines
MINIFIED = json.dumps({"rows": [{"id": i, "v": "x" * 40} for i in range(2_500)]})  # ~138 KB


@pytest.fixture
def workspace(tmp_path: Path) -> LocalWorkspace:
    ws = LocalWorkspace(tmp_path)
    msgs = [
        Msg(role="user", content=[TextBlock(text=f"run the job\n{SEEN}\nthen stop")]),
        Msg(role="assistant", content=[ToolCallBlock(id="c1", name="bash", input={"cmd": "ls"})]),
        Msg(role="tool", content=[ToolResultBlock(id="c1", name="bash", output=MINIFIED)]),
        Msg(
            role="assistant",
            content=[ToolCallBlock(id="c2", name="python", input={"code": CALLED, "timeout": 5})],
        ),
    ]
    asyncio.run(ws.offload_context("s1", msgs))
    return ws


def context_log(ws: LocalWorkspace) -> Path:
    return ws.workdir / "sessions" / "s1" / "context.jsonl"


def test_the_string_the_model_saw_is_not_in_the_file_as_written(workspace: LocalWorkspace) -> None:
    # The premise: a plain literal search of the file misses it.
    assert SEEN not in context_log(workspace).read_text(encoding="utf-8")


def test_grep_finds_a_literal_string_the_model_saw_and_names_its_line(
    workspace: LocalWorkspace,
) -> None:
    result = FileToolbox([workspace.workdir]).grep(literal(SEEN), "sessions")
    assert result == f"sessions/s1/context.jsonl:1:[user] {SEEN}"


def test_grep_still_matches_the_raw_json(workspace: LocalWorkspace) -> None:
    result = FileToolbox([workspace.workdir]).grep('"role": ?"tool"', "sessions")
    assert result.startswith("sessions/s1/context.jsonl:3:")


def test_read_shows_each_message_as_readable_text_under_its_line_number(
    workspace: LocalWorkspace,
) -> None:
    result = FileToolbox([workspace.workdir], max_line_chars=300).read("sessions/s1/context.jsonl")
    lines = result.splitlines()
    assert lines[:4] == [
        "     1\t[user]",
        "      \trun the job",
        f"      \t{SEEN}",
        "      \tthen stop",
    ]
    assert "     2\t[assistant]" in lines
    assert "      \t-> tool call bash (id c1)" in lines
    assert "      \t  cmd: ls" in lines
    # The long tool result is cut, and the marker says exactly how to read on.
    cut = next(line for line in lines if "[message cut: " in line)
    assert cut.endswith("(Read offset=3 char_offset=300 shows the rest)")


def test_read_pages_through_a_138_kb_line_by_character_offset(tmp_path: Path) -> None:
    (tmp_path / "tool_result-big.txt").write_text(MINIFIED + "\nnext line\n", encoding="utf-8")
    toolbox = FileToolbox([tmp_path], max_output_chars=10_000)
    first = toolbox.read("tool_result-big.txt", limit=1)
    head, cut = first.split("… [line cut: ", 1)
    pieces = [head[len("     1\t") :]]
    char_offset = int(re.search(r"char_offset=(\d+)", cut).group(1))  # type: ignore[union-attr]
    assert char_offset == len(pieces[0]) == 2_000
    for _ in range(100):
        page = toolbox.read("tool_result-big.txt", offset=1, char_offset=char_offset)
        body, note = page.rsplit("\n", 1)
        assert body.startswith("     1\t") and "\n" not in body
        pieces.append(body[len("     1\t") :])
        found = re.search(r"char_offset=(\d+) to continue", note)
        if found is None:
            assert note.endswith("the end of the line")
            break
        char_offset = int(found.group(1))
    assert "".join(pieces) == MINIFIED
    assert len(pieces) > 10


def test_read_pages_through_one_message_of_the_context_log(workspace: LocalWorkspace) -> None:
    toolbox = FileToolbox([workspace.workdir], max_output_chars=5_000)
    first = toolbox.read("sessions/s1/context.jsonl", offset=3, limit=1)
    char_offset = int(re.search(r"char_offset=(\d+)", first).group(1))  # type: ignore[union-attr]
    text = first.split("\t", 1)[1].split("… [message cut", 1)[0].replace("\n      \t", "\n")
    while True:
        page = toolbox.read("sessions/s1/context.jsonl", offset=3, char_offset=char_offset)
        body, note = page.rsplit("\n", 1)
        text += body.split("\t", 1)[1]
        found = re.search(r"char_offset=(\d+) to continue", note)
        if found is None:
            break
        char_offset = int(found.group(1))
    assert text == f"[tool]\n<- tool result bash (id c1):\n{MINIFIED}"


def test_char_offset_past_the_end_is_an_error_naming_the_length(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("short\n")
    result = FileToolbox([tmp_path]).read("a.txt", offset=1, char_offset=99)
    assert result.startswith("Error: char_offset=99 is past the end of line 1")
    assert "5 characters" in result


def test_a_torn_or_non_json_line_is_shown_as_it_is(tmp_path: Path) -> None:
    log = tmp_path / "context.jsonl"
    log.write_text('{"role": "user", "content": "ok"}\n{"role": "user", "conte\n')
    deep = "[" * 5_000 + "]" * 5_000
    with log.open("a") as f:
        f.write(deep + "\n")
    toolbox = FileToolbox([tmp_path], max_line_chars=50)
    result = toolbox.read("context.jsonl")
    assert '     2\t{"role": "user", "conte' in result
    assert "     3\t[[[[" in result
    assert toolbox.grep("conte$", "context.jsonl") == 'context.jsonl:2:{"role": "user", "conte'


async def test_the_retrieval_tool_matches_decoded_text_and_pages_inside_a_line(
    workspace: LocalWorkspace,
) -> None:
    tool = retrieval_tool(workspace, max_output_chars=4_000)
    reference = str(context_log(workspace))
    found = await tool(reference, pattern=literal(SEEN))
    assert f">     1\t[user] ⏎ run the job ⏎ {SEEN} ⏎ then stop" in found
    text = ""
    char_offset = 0
    while True:
        page = await tool(reference, line_range=[3, 3], char_offset=char_offset)
        lines = page.split("\n")
        text += lines[1].split("\t", 1)[1]
        found_next = re.search(r"char_offset=(\d+) to continue", lines[-1])
        if found_next is None:
            break
        char_offset = int(found_next.group(1))
    assert text == f"[tool] ⏎ <- tool result bash (id c1): ⏎ {MINIFIED}"
    refused = await tool(reference, char_offset=5)
    assert refused.startswith("Error: char_offset=5 needs one line")


# -- a tool call, and THE rule ---------------------------------------------------------------


def test_read_shows_a_tool_call_as_its_name_and_one_line_per_argument(
    workspace: LocalWorkspace,
) -> None:
    result = FileToolbox([workspace.workdir]).read("sessions/s1/context.jsonl", offset=4)
    assert result.splitlines() == [
        "     4\t[assistant]",
        "      \t-> tool call python (id c2)",
        '      \t  code: print("FAILURE: disk")',
        '      \tprint("naïve \\\\ done")',
        "      \t  timeout: 5",
    ]


def test_grep_finds_a_tool_call_argument_as_the_model_wrote_it(workspace: LocalWorkspace) -> None:
    toolbox = FileToolbox([workspace.workdir])
    assert toolbox.grep(r'print\("FAILURE: disk"\)', "sessions") == (
        'sessions/s1/context.jsonl:4:[assistant]   code: print("FAILURE: disk")'
    )
    assert toolbox.grep(literal('print("naïve \\\\ done")'), "sessions") == (
        'sessions/s1/context.jsonl:4:[assistant] print("naïve \\\\ done")'
    )
    assert toolbox.grep("tool call python", "sessions") == (
        "sessions/s1/context.jsonl:4:[assistant] -> tool call python (id c2)"
    )


def test_grep_with_context_shows_a_matching_message_whole(workspace: LocalWorkspace) -> None:
    """Asked for a call's id, Grep shows the line of the call that matched; asked with
    context, the matching message whole, as the messages around it are (its arguments beside
    the id: an agent looking for what a call was given had them only one Read later)."""
    toolbox = FileToolbox([workspace.workdir], max_line_chars=300)
    alone = toolbox.grep("id c2", "sessions/s1/context.jsonl")
    assert alone == "sessions/s1/context.jsonl:4:[assistant] -> tool call python (id c2)"
    around = toolbox.grep("id c2", "sessions/s1/context.jsonl", context_lines=1).splitlines()
    assert around[0].startswith("sessions/s1/context.jsonl-3-[tool] ⏎ <- tool result bash")
    assert around[1] == (
        "sessions/s1/context.jsonl:4:[assistant] ⏎ -> tool call python (id c2) ⏎ "
        '  code: print("FAILURE: disk") ⏎ print("naïve \\\\ done") ⏎   timeout: 5'
    )


def test_grep_matches_a_pattern_anchored_at_a_message_line(workspace: LocalWorkspace) -> None:
    # The role header is put before the line shown; the match is on the line itself.
    result = FileToolbox([workspace.workdir]).grep("^then stop$", "sessions/s1/context.jsonl")
    assert result == "sessions/s1/context.jsonl:1:[user] then stop"


async def test_the_retrieval_tool_shows_a_tool_call_on_one_line(workspace: LocalWorkspace) -> None:
    found = await retrieval_tool(workspace)(str(context_log(workspace)), pattern="naïve")
    assert found.splitlines()[1] == (
        ">     4\t[assistant] ⏎ -> tool call python (id c2) ⏎   code: "
        'print("FAILURE: disk") ⏎ print("naïve \\\\ done") ⏎   timeout: 5'
    )


async def test_the_retrieval_tool_shows_a_line_matched_on_its_raw_json_raw(
    workspace: LocalWorkspace,
) -> None:
    found = await retrieval_tool(workspace)(str(context_log(workspace)), pattern='"timeout": ?5')
    assert found.splitlines()[1].startswith('>     4\t{"')


MESSAGE_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)


@st.composite
def messages(draw: st.DrawFn) -> Msg:
    text = st.text(alphabet=st.sampled_from('ab"\\\n é{}:'), max_size=12) | MESSAGE_TEXT
    kind = draw(st.sampled_from(["text", "call", "result"]))
    if kind == "text":
        return Msg(role=draw(st.sampled_from(["user", "assistant"])), content=draw(text))
    if kind == "call":
        arguments = draw(st.dictionaries(st.sampled_from(["cmd", "path", "n"]), text, max_size=3))
        call = ToolCallBlock(id="c", name=draw(st.sampled_from(["bash", "Read"])), input=arguments)
        return Msg(role="assistant", content=[call])
    return Msg(role="tool", content=[ToolResultBlock(id="c", name="bash", output=draw(text))])


@pytest.mark.slow
@given(st.lists(messages(), min_size=1, max_size=6), st.data())
@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.too_slow])
def test_grep_finds_the_log_lines_that_the_rule_of_ctxoffload_text_finds(
    msgs: list[Msg], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ws = LocalWorkspace(folder, fsync=False)
        path = Path(asyncio.run(ws.offload_context("s", msgs)))
        lines = path.read_bytes().decode().split("\n")[:-1]  # not splitlines: U+2028 is text
        shown = [text for line in lines for text in matching_lines(line, lambda _: True)[0]]
        needle = data.draw(
            st.sampled_from(
                [*(t[i:j] for t in shown for i, j in [(0, 3), (2, 9)]), '"role"']
            ).filter(bool)
        )
        expected = {
            number
            for number, line in enumerate(lines, 1)
            if matching_lines(line, lambda text: needle in text)[1]
        }
        toolbox = FileToolbox([folder], max_output_chars=10**6, grep_timeout=None)
        result = toolbox.grep(literal(needle), str(path), max_matches=10**6)
        prefix = "sessions/s/context.jsonl:"
        rows = [] if result.startswith("No matches") else result.split("\n")
        found = {int(row[len(prefix) :].split(":", 1)[0]) for row in rows}
        assert found == expected, result

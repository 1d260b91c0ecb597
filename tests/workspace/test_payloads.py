"""What callers hand the workspace: odd text, huge lines, bad base64, and foreign shapes.

Every case ends in either a faithful copy (read back byte for byte) or a clear error with
nothing written; never a file that holds something other than what was given.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

import ctxoffload as co
from ctxoffload import InvalidContent, LocalWorkspace
from ctxoffload.workspace import Workspace

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(200))
PNG_B64 = base64.b64encode(PNG).decode()
WAV_B64 = base64.b64encode(WAV).decode()
FIFTY_MB = 50 * 1024 * 1024


def _is_data_ref(workspace: Workspace, url: str) -> bool:
    if isinstance(workspace, LocalWorkspace):
        # A foreign class's URL field holds a file:// URL (AgentScope's demands a URL);
        # ctxoffload's own blocks hold the plain path.
        return Path(url.removeprefix("file://")).parent == workspace.data_dir
    scoped: Any = workspace  # every ctxoffload workspace is SessionScoped
    return bool(scoped.reference_key(url)[0] == "data")


# -- text that is not plain UTF-8 -------------------------------------------------------------

NON_UTF8 = b"caf\xe9 \xff\xfe\x00 ok\r\n\x80end"


@pytest.mark.parametrize(
    "make_result",
    [
        lambda raw: {"role": "tool", "tool_call_id": "call_1", "content": raw},
        lambda raw: {"type": "tool_result", "tool_use_id": "call_1", "content": raw},
        lambda raw: BytesToolResult(id="call_1", name="cat", output=raw),
    ],
    ids=["openai", "anthropic", "pydantic"],
)
async def test_tool_output_given_as_bytes_is_written_byte_for_byte(
    workspace: Workspace, make_result: Callable[[bytes], Any]
) -> None:
    path = await workspace.offload_tool_result("s", make_result(NON_UTF8))
    assert path.endswith("tool_result-call_1.txt")
    assert await workspace.read_reference(path) == NON_UTF8


class BytesToolResult(BaseModel):
    """A tool result model whose output is raw bytes (a tool that read a binary file)."""

    id: str
    name: str
    output: bytes


async def test_tool_output_decoded_with_surrogateescape_gives_back_the_original_bytes(
    workspace: Workspace,
) -> None:
    text = NON_UTF8.decode("utf-8", "surrogateescape")
    path = await workspace.offload_tool_result("s", co.ToolResultBlock(id="c", output=text))
    assert await workspace.read_reference(path) == NON_UTF8


async def test_lone_surrogate_in_tool_output_is_kept(workspace: Workspace) -> None:
    text = "before \ud800 after \udfff"
    path = await workspace.offload_tool_result("s", co.ToolResultBlock(id="c", output=text))
    assert (await workspace.read_reference(path)).decode("utf-8", "surrogatepass") == text


@pytest.mark.parametrize(
    "text",
    [
        "lone \ud800 surrogate",
        NON_UTF8.decode("utf-8", "surrogateescape"),
        "nul \x00 and controls \x1b[0m \u2028 \u2029",
    ],
    ids=["lone", "surrogateescape", "controls"],
)
async def test_odd_text_in_a_context_message_round_trips(workspace: Workspace, text: str) -> None:
    ref = await workspace.offload_context("s", msgs=[co.Msg(role="user", content=text)])
    [line] = await workspace.read_context("s")
    assert line["content"] == text
    log = await workspace.read_reference(ref)
    log.decode("utf-8")  # still valid UTF-8: grep and editors can read it
    assert log.count(b"\n") == 1


async def test_surrogate_pair_in_a_context_message_reads_back_as_its_character(
    workspace: Workspace,
) -> None:
    # JSON writes both as "\ud83d\ude00": a str holding the two halves of a pair cannot be
    # told from one holding the character they encode.
    await workspace.offload_context("s", msgs=[co.Msg(role="user", content="\ud83d\ude00!")])
    assert (await workspace.read_context("s"))[0]["content"] == "\U0001f600!"


async def test_emoji_stays_readable_in_the_context_log(workspace: Workspace) -> None:
    text = "deploy done \U0001f680 \u4e2d\u6587 caf\u00e9 \U0001d11e"
    ref = await workspace.offload_context("s", msgs=[co.Msg(role="user", content=text)])
    log = await workspace.read_reference(ref)
    assert text.encode("utf-8") in log
    assert b"\\u" not in log
    assert (await workspace.read_context("s"))[0]["content"] == text


# -- sizes ------------------------------------------------------------------------------------


def _fifty_mb_line() -> str:
    # Characters that JSON must escape, multi-byte ones, and no newline: one 50 MB line.
    unit = 'abc"\\/\t\u00e9\U0001f600' + "x" * 50
    return unit * (FIFTY_MB // len(unit.encode()) + 1)


async def test_fifty_megabyte_tool_result_line_round_trips(local_ws: LocalWorkspace) -> None:
    text = "y" * FIFTY_MB
    path = await local_ws.offload_tool_result("s", co.ToolResultBlock(id="big", output=text))
    assert Path(path).stat().st_size == FIFTY_MB
    assert Path(path).read_bytes() == text.encode()
    [event] = await local_ws.read_events("s")
    assert (event["bytes"], event["lines"]) == (FIFTY_MB, 1)


@pytest.mark.slow
async def test_fifty_megabyte_context_line_round_trips(local_ws: LocalWorkspace) -> None:
    text = _fifty_mb_line()
    assert len(text.encode()) >= FIFTY_MB
    await local_ws.offload_context("s", msgs=[co.Msg(role="user", content="small")])
    ref = await local_ws.offload_context("s", msgs=[co.Msg(role="user", content=text)])
    after = await local_ws.offload_context("s", msgs=[co.Msg(role="user", content="after")])
    assert (ref.first_line, ref.last_line, after.first_line) == (2, 2, 3)
    assert [m["content"] for m in await local_ws.read_context("s")] == ["small", text, "after"]


async def test_empty_tool_output_gives_an_empty_file(workspace: Workspace) -> None:
    path = await workspace.offload_tool_result("s", co.ToolResultBlock(id="c", output=""))
    assert await workspace.read_reference(path) == b""
    [event] = await workspace.read_events("s")
    assert (event["bytes"], event["lines"]) == (0, 0)


async def test_empty_message_content_is_one_line(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=[co.Msg(role="user", content="")])
    assert (ref.first_line, ref.last_line) == (1, 1)
    assert (await workspace.read_context("s"))[0]["content"] == ""


# -- malformed input: a clear error, nothing written ------------------------------------------

BAD_B64 = "iVBORw0KGgo!!not*base64"


def _bad_data_block() -> co.DataBlock:
    return co.DataBlock(source=co.Base64Source(media_type="image/png", data=BAD_B64))


BAD_INPUTS: dict[str, Callable[[Workspace], Any]] = {
    "tool-result-datablock": lambda ws: ws.offload_tool_result(
        "s", co.ToolResultBlock(id="c", output=[co.TextBlock(text="ok"), _bad_data_block()])
    ),
    "data-block": lambda ws: ws.offload_data_block(_bad_data_block()),
    "data-block-dict": lambda ws: ws.offload_data_block(
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": BAD_B64}}
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
async def test_malformed_base64_is_refused_with_nothing_written(
    case: str, workspace: Workspace, tmp_path: Path, tree: Callable[[Path], Any]
) -> None:
    before = tree(tmp_path)
    with pytest.raises(InvalidContent, match="not valid base64"):
        await BAD_INPUTS[case](workspace)
    assert tree(tmp_path) == before
    assert await workspace.list_sessions() == []
    assert await workspace.list_files("s") == []


BAD_BATCHES: dict[str, Any] = {
    "context-datablock": co.Msg(role="user", content=[_bad_data_block()], id="bad"),
    "context-openai-data-url": {
        "role": "user",
        "id": "bad",
        "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{BAD_B64}"}}
        ],
    },
    "context-anthropic-source": {
        "role": "user",
        "id": "bad",
        "content": [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": BAD_B64},
            }
        ],
    },
    "context-openai-audio": {
        "role": "user",
        "id": "bad",
        "content": [{"type": "input_audio", "input_audio": {"data": BAD_B64, "format": "wav"}}],
    },
}


@pytest.mark.parametrize("case", list(BAD_BATCHES))
async def test_malformed_base64_in_a_batch_is_kept_as_text_beside_the_rest(
    case: str, workspace: Workspace
) -> None:
    msgs = [
        co.Msg(role="user", content="before"),
        BAD_BATCHES[case],
        {"role": "user", "content": "after"},
    ]
    ref = await workspace.offload_context("s", msgs=msgs)
    assert (ref.first_line, ref.last_line) == (1, 3)
    before, stand_in, after = await workspace.read_context("s")
    assert (before["content"], after["content"]) == ("before", "after")
    assert (stand_in["role"], stand_in["id"]) == ("user", "bad")
    problem = stand_in["metadata"]["ctxoffload"]
    assert problem["kind"] == "unstored"
    assert "msgs[1]" in problem["error"] and "not valid base64" in problem["error"]
    assert BAD_B64[:10] in problem["error"]
    assert BAD_B64 in json.dumps(stand_in)  # the payload is kept, as text


async def test_a_bad_message_does_not_disturb_an_existing_log(workspace: Workspace) -> None:
    await workspace.offload_context("s", msgs=[co.Msg(role="user", content="kept")])
    bad = co.Msg(role="user", content=[_bad_data_block()])
    ref = await workspace.offload_context("s", msgs=[co.Msg(role="user", content="x"), bad])
    assert (ref.first_line, ref.last_line) == (2, 3)
    assert len(await workspace.read_events("s")) == 2
    again = await workspace.offload_context("s", msgs=[co.Msg(role="user", content="next")])
    assert again.first_line == 4


@pytest.mark.parametrize(
    "msg",
    [
        {"role": "user", "content": {1, 2}},
        {"role": "user", "content": b"\xff"},
        BytesToolResult(id="c", name="n", output=b"\xff"),
    ],
    ids=["set", "bytes", "model-with-bytes"],
)
async def test_a_message_that_is_not_json_is_stored_as_its_text_form(
    workspace: Workspace, msg: Any
) -> None:
    await workspace.offload_context("s", msgs=[msg])
    (line,) = await workspace.read_context("s")
    assert line["metadata"]["ctxoffload"]["kind"] == "unstored"
    assert "{1, 2}" in line["content"] or "\\xff" in line["content"]


@pytest.mark.parametrize("msg", ["just a string", 12], ids=["str", "int"])
async def test_something_that_is_not_a_message_is_refused(
    workspace: Workspace, msg: Any, tmp_path: Path, tree: Callable[[Path], Any]
) -> None:
    before = tree(tmp_path)
    with pytest.raises(InvalidContent, match="pass a ctxoffload Msg"):
        await workspace.offload_context("s", msgs=[co.Msg(role="user", content="x"), msg])
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "result",
    [{"role": "tool", "content": "no id"}, {"id": "x"}, "text", 3],
    ids=["no-id", "no-output", "str", "int"],
)
async def test_something_that_is_not_a_tool_result_is_refused(
    workspace: Workspace, result: Any, tmp_path: Path, tree: Callable[[Path], Any]
) -> None:
    before = tree(tmp_path)
    with pytest.raises(InvalidContent):
        await workspace.offload_tool_result("s", result)
    assert tree(tmp_path) == before


async def test_url_safe_and_wrapped_base64_are_accepted(workspace: Workspace) -> None:
    raw = bytes([0xFB, 0xFF, 0xBF]) * 100  # '+' and '/' in standard base64
    url_safe = base64.urlsafe_b64encode(raw).decode()
    wrapped = "\n".join(base64.b64encode(raw).decode()[i : i + 76] for i in range(0, 400, 76))
    for data in (url_safe, wrapped):
        block = co.DataBlock(source=co.Base64Source(media_type="image/png", data=data))
        stored = await workspace.offload_data_block(block)
        assert await workspace.read_reference(stored.source.url) == raw


# -- foreign shapes: AgentScope 2.x -----------------------------------------------------------
# Pydantic models shaped like AgentScope 2.x's message and blocks, defined here so the test
# needs no AgentScope install.


class TextBlock(BaseModel):
    type: Literal["text"] = "text"
    text: str


class Base64Source(BaseModel):
    type: Literal["base64"] = "base64"
    media_type: str
    data: str


class URLSource(BaseModel):
    type: Literal["url"] = "url"
    url: str
    media_type: str | None = None


class DataBlock(BaseModel):
    type: Literal["data"] = "data"
    source: Annotated[Base64Source | URLSource, Field(discriminator="type")]
    name: str | None = None


class ToolResultBlock(BaseModel):
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: str | list[Annotated[TextBlock | DataBlock, Field(discriminator="type")]]


class Msg(BaseModel):
    name: str
    role: Literal["user", "assistant", "system"]
    content: (
        str | list[Annotated[TextBlock | DataBlock | ToolResultBlock, Field(discriminator="type")]]
    )
    id: str
    metadata: dict[str, Any] | None = None
    created_at: str


class StrictURLSource(BaseModel):
    """A URL source class that takes no media_type (and refuses unknown fields)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["url"] = "url"
    url: str


class StrictDataBlock(BaseModel):
    type: Literal["data"] = "data"
    source: Annotated[Base64Source | StrictURLSource, Field(discriminator="type")]


def _png_block(name: str | None = "chart.png") -> DataBlock:
    return DataBlock(source=Base64Source(media_type="image/png", data=PNG_B64), name=name)


def _foreign_msg() -> Msg:
    return Msg(
        name="analyst",
        role="assistant",
        id="msg-1",
        metadata={"step": 3},
        created_at="2025-01-02T03:04:05.678Z",
        content=[
            TextBlock(text="here is the chart \U0001f4c8"),
            _png_block(),
            DataBlock(source=URLSource(url="https://example.com/x.png", media_type="image/png")),
            ToolResultBlock(
                id="call_9",
                name="record",
                output=[
                    TextBlock(text="recorded"),
                    DataBlock(source=Base64Source(media_type="audio/wav", data=WAV_B64)),
                ],
            ),
        ],
    )


def _match_offloaded(written: Any, original: Any, found: list[tuple[str, bytes]]) -> None:
    """Assert `written` is `original` with each base64 source turned into a URL source.

    Collects (url, decoded bytes) of every replaced source into `found`.
    """
    if isinstance(original, dict) and original.get("type") == "base64":
        kept = {k: v for k, v in original.items() if k != "data"}
        assert written == {**kept, "type": "url", "url": written.get("url")}
        found.append((written["url"], base64.b64decode(original["data"])))
    elif isinstance(original, dict):
        assert isinstance(written, dict) and written.keys() == original.keys()
        for key in original:
            _match_offloaded(written[key], original[key], found)
    elif isinstance(original, list):
        assert isinstance(written, list) and len(written) == len(original)
        for w, o in zip(written, original, strict=True):
            _match_offloaded(w, o, found)
    else:
        assert written == original


async def _check_lines_are_offloaded_dumps(
    workspace: Workspace, written: list[Any], originals: list[Any]
) -> int:
    found: list[tuple[str, bytes]] = []
    assert len(written) == len(originals)
    for line, original in zip(written, originals, strict=True):
        _match_offloaded(line, original, found)
    for url, raw in found:
        assert _is_data_ref(workspace, url)
        assert await workspace.read_reference(url) == raw
    return len(found)


async def test_foreign_msg_line_is_its_own_json_with_payloads_moved_to_data(
    workspace: Workspace,
) -> None:
    msgs = [_foreign_msg(), Msg(name="u", role="user", id="m2", created_at="t", content="hi")]
    await workspace.offload_context("s", msgs=msgs)
    written = await workspace.read_context("s")
    originals = [json.loads(m.model_dump_json()) for m in msgs]
    assert await _check_lines_are_offloaded_dumps(workspace, written, originals) == 2


async def test_foreign_msg_line_keeps_no_base64(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=[_foreign_msg()])
    log = await workspace.read_reference(ref)
    assert PNG_B64[:40].encode() not in log
    assert WAV_B64[:40].encode() not in log


async def test_offload_data_block_returns_the_same_foreign_class(workspace: Workspace) -> None:
    block = await workspace.offload_data_block(_png_block())
    assert type(block) is DataBlock
    assert isinstance(block.source, URLSource)
    assert block.source.media_type == "image/png"
    assert block.name == "chart.png"
    assert _is_data_ref(workspace, block.source.url)
    assert await workspace.read_reference(block.source.url) == PNG


async def test_foreign_url_source_without_media_type_still_works(workspace: Workspace) -> None:
    original = StrictDataBlock(source=Base64Source(media_type="image/png", data=PNG_B64))
    block = await workspace.offload_data_block(original)
    assert type(block) is StrictDataBlock
    assert isinstance(block.source, StrictURLSource)
    assert await workspace.read_reference(block.source.url) == PNG


async def test_foreign_data_block_with_a_url_source_is_returned_unchanged(
    workspace: Workspace,
) -> None:
    block = DataBlock(source=URLSource(url="https://example.com/a.png"))
    assert await workspace.offload_data_block(block) is block


async def test_foreign_tool_result_block_becomes_a_tool_result_file(
    workspace: Workspace,
) -> None:
    result = ToolResultBlock(
        id="call_7",
        name="plot",
        output=[TextBlock(text="line 1\nline 2"), _png_block("fig.png")],
    )
    path = await workspace.offload_tool_result("s", result)
    assert path.endswith("/tool_result-call_7.txt")
    text = (await workspace.read_reference(path)).decode()
    line1, line2, data_line = text.split("\n")
    assert (line1, line2) == ("line 1", "line 2")
    url = data_line.split("'")[1]
    assert data_line == f"<data url='{url}' name='fig.png' media_type='image/png'/>"
    assert await workspace.read_reference(url) == PNG
    [event] = await workspace.read_events("s")
    assert (event["tool_id"], event["tool_name"]) == ("call_7", "plot")


async def test_foreign_tool_result_with_text_output(workspace: Workspace) -> None:
    result = ToolResultBlock(id="call_8", name="ls", output="a\nb\n")
    path = await workspace.offload_tool_result("s", result)
    assert await workspace.read_reference(path) == b"a\nb\n"


# -- foreign shapes: OpenAI and Anthropic dicts -----------------------------------------------


async def test_openai_tool_message_becomes_a_tool_result_file(workspace: Workspace) -> None:
    message = {"role": "tool", "tool_call_id": "call_abc", "name": "grep", "content": "x\ny"}
    path = await workspace.offload_tool_result("s", message)
    assert path.endswith("/tool_result-call_abc.txt")
    assert await workspace.read_reference(path) == b"x\ny"
    assert (await workspace.read_events("s"))[0]["tool_name"] == "grep"


async def test_openai_tool_message_with_text_parts(workspace: Workspace) -> None:
    message = {
        "role": "tool",
        "tool_call_id": "call_abc",
        "content": [{"type": "text", "text": "part 1"}, {"type": "text", "text": "part 2"}],
    }
    path = await workspace.offload_tool_result("s", message)
    assert await workspace.read_reference(path) == b"part 1\npart 2"


async def test_openai_image_data_url_is_moved_to_data(workspace: Workspace) -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{PNG_B64}", "detail": "high"},
            },
            {"type": "image_url", "image_url": {"url": "https://example.com/y.png"}},
        ],
    }
    await workspace.offload_context("s", msgs=[message])
    [line] = await workspace.read_context("s")
    url = line["content"][1]["image_url"]["url"]
    expected = json.loads(json.dumps(message))
    expected["content"][1]["image_url"]["url"] = url
    assert line == expected
    assert _is_data_ref(workspace, url)
    assert url.endswith(".png")
    assert await workspace.read_reference(url) == PNG


async def test_openai_input_audio_is_moved_to_data(workspace: Workspace) -> None:
    message = {
        "role": "user",
        "content": [{"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}],
    }
    await workspace.offload_context("s", msgs=[message])
    [line] = await workspace.read_context("s")
    audio = line["content"][0]["input_audio"]
    assert audio == {"format": "wav", "url": audio["url"]}
    assert audio["url"].endswith(".wav")
    assert await workspace.read_reference(audio["url"]) == WAV


async def test_anthropic_tool_result_block_becomes_a_tool_result_file(
    workspace: Workspace,
) -> None:
    block = {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": [
            {"type": "text", "text": "screenshot taken"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
            },
        ],
    }
    path = await workspace.offload_tool_result("s", block)
    assert path.endswith("/tool_result-toolu_01.txt")
    text, data_line = (await workspace.read_reference(path)).decode().split("\n")
    assert text == "screenshot taken"
    url = data_line.split("'")[1]
    assert data_line == f"<data url='{url}' media_type='image/png'/>"
    assert await workspace.read_reference(url) == PNG


async def test_anthropic_image_source_is_moved_to_data(workspace: Workspace) -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
            },
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "ok"},
        ],
    }
    await workspace.offload_context("s", msgs=[message])
    written = await workspace.read_context("s")
    assert await _check_lines_are_offloaded_dumps(workspace, written, [message]) == 1


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
    ],
    ids=["anthropic", "openai"],
)
async def test_offload_data_block_takes_a_content_part_dict(
    workspace: Workspace, part: dict[str, Any]
) -> None:
    stored = await workspace.offload_data_block(part)
    url = stored["source"]["url"] if "source" in stored else stored["image_url"]["url"]
    assert _is_data_ref(workspace, url)
    assert await workspace.read_reference(url) == PNG
    assert PNG_B64 not in json.dumps(stored)

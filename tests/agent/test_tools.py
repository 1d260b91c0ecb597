"""Tool schemas from type hints and docstrings."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Literal

import pytest

from ctxoffload import (
    Base64Source,
    DataBlock,
    LocalWorkspace,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    to_openai,
)
from ctxoffload._disk.payloads import sniff_media_type
from ctxoffload.agent import Tool, as_tool
from ctxoffload.agent._tools import as_tools, parse_docstring


def search(query: str, limit: int = 10, mode: Literal["fast", "exact"] = "fast") -> str:
    """Search the index.

    Longer explanation here.

    Args:
        query: what to look for; may span
            two lines.
        limit: most results.
        mode: how to match.

    Returns:
        The hits.
    """
    return query


def test_schema_comes_from_hints_and_docstring() -> None:
    tool = as_tool(search)
    assert tool.name == "search"
    assert tool.description == "Search the index.\n\nLonger explanation here."
    params = tool.parameters
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {
        "type": "string",
        "description": "what to look for; may span two lines.",
    }
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["default"] == 10
    assert params["properties"]["mode"]["enum"] == ["fast", "exact"]
    assert tool.schema["type"] == "function"


def test_docstring_without_sections() -> None:
    assert parse_docstring("Just a line.") == ("Just a line.", {})
    assert parse_docstring(None) == ("", {})


def test_var_args_are_refused() -> None:
    def bad(*items: str) -> str:
        """Bad."""
        return ""

    with pytest.raises(TypeError, match="by name"):
        as_tool(bad)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        as_tools([search, search])


# -- bytes and odd text from a tool -------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 4
BLOB = bytes(range(256)) * 8  # NUL bytes and no magic number


def returning(value: object) -> Tool:
    def produce() -> object:
        """Produce a value."""
        return value

    return as_tool(produce)


CALL = ToolCallBlock(id="c1", name="produce", input={})


def sendable(result: ToolResultBlock) -> None:
    """What the OpenAI client does with a request body: JSON, encoded as UTF-8."""
    wire = to_openai([Msg(role="tool", content=[result])])
    json.dumps(wire, ensure_ascii=False).encode("utf-8")


async def test_text_bytes_that_are_not_utf8_are_replaced_and_marked() -> None:
    result = await returning(b"caf\xe9 ok \xff\xfe end").run(CALL)
    assert not result.is_error
    assert isinstance(result.output, str)
    assert result.output.startswith(
        "[3 bytes were not valid UTF-8 and were replaced with U+FFFD]\n"
    )
    assert result.output.endswith("caf\ufffd ok \ufffd\ufffd end")
    sendable(result)


async def test_utf8_bytes_are_decoded_unmarked() -> None:
    result = await returning("naïve café".encode()).run(CALL)
    assert result.output == "naïve café"


async def test_text_with_lone_surrogates_is_replaced_and_marked() -> None:
    raw = b"caf\xe9".decode("utf-8", "surrogateescape") + " and \ud800"
    result = await returning(raw).run(CALL)
    assert result.output == (
        "[2 characters were lone surrogates (not Unicode text) and were replaced with U+FFFD]\n"
        "caf\ufffd and \ufffd"
    )
    sendable(result)


@pytest.mark.parametrize(
    ("raw", "media_type"),
    [
        (BLOB, "application/octet-stream"),
        (PDF, "application/pdf"),
        (b"PK\x03\x04" + BLOB, "application/zip"),
    ],
    ids=["blob", "pdf", "zip"],
)
async def test_binary_bytes_go_to_data(tmp_path: Path, raw: bytes, media_type: str) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    result = await returning(raw).run(CALL, store_data=ws.offload_data_block)
    assert not result.is_error
    assert isinstance(result.output, list)
    note, block = result.output
    assert isinstance(note, TextBlock) and isinstance(block, DataBlock)
    assert f"{len(raw):,} bytes of binary data ({media_type})" in note.text
    assert isinstance(block.source, URLSource) and block.source.media_type == media_type
    assert Path(block.source.url).parent == ws.data_dir
    assert Path(block.source.url).read_bytes() == raw
    sendable(result)


async def test_image_bytes_become_an_image_the_model_can_see() -> None:
    result = await returning(PNG).run(CALL)
    assert isinstance(result.output, list)
    (block,) = result.output
    assert isinstance(block, DataBlock) and isinstance(block.source, Base64Source)
    assert block.source.media_type == "image/png"
    assert base64.b64decode(block.source.data) == PNG


async def test_binary_bytes_without_an_offloader_are_described_not_lost_silently() -> None:
    result = await returning(BLOB).run(CALL)
    assert result.output == (
        "[the tool returned 2,048 bytes of binary data (application/octet-stream); they were "
        "not kept: the agent has no offloader to store them in data/]"
    )


def test_media_types_are_sniffed_from_magic_numbers() -> None:
    assert sniff_media_type(PNG) == "image/png"
    assert sniff_media_type(b"\xff\xd8\xff\xe0" + BLOB) == "image/jpeg"
    assert sniff_media_type(b"GIF89a" + BLOB) == "image/gif"
    assert sniff_media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_media_type(PDF) == "application/pdf"
    assert sniff_media_type(b"\x1f\x8b\x08" + BLOB) == "application/gzip"
    assert sniff_media_type(BLOB) == "application/octet-stream"


@pytest.mark.parametrize(
    ("raw", "is_text"),
    [
        (bytes(range(1, 256)) * 4, False),  # binary without a NUL byte or a magic number
        ("Grüße aus Köln, où est la boîte?".encode("latin-1"), True),
        ("日志：一切正常。".encode() * 20 + b"\xff", True),  # UTF-8 with one bad byte
        (b"\x1b[31mred\x1b[0m \xe9", True),  # ANSI colours
    ],
    ids=["binary", "latin-1", "utf8-one-bad-byte", "ansi"],
)
async def test_binary_and_text_in_another_encoding_are_told_apart(
    raw: bytes, is_text: bool
) -> None:
    result = await returning(raw).run(CALL)
    assert isinstance(result.output, str)
    assert ("not valid UTF-8" in result.output) is is_text
    assert ("binary data" in result.output) is not is_text


async def test_a_dict_holding_lone_surrogates_is_rendered_without_them() -> None:
    result = await returning({"name": b"caf\xe9".decode("utf-8", "surrogateescape")}).run(CALL)
    assert isinstance(result.output, str)
    assert result.output.startswith("[1 character was a lone surrogate (not Unicode text) and was")
    assert '"name": "caf\ufffd"' in result.output
    sendable(result)


async def test_returned_blocks_are_made_acceptable_to_a_provider() -> None:
    unpadded = base64.urlsafe_b64encode(PNG).decode().rstrip("=")
    image = DataBlock(source=Base64Source(media_type="image/png", data=unpadded))
    text = TextBlock(text="caf" + b"\xe9".decode("utf-8", "surrogateescape"))
    result = await returning([text, image]).run(CALL)
    assert isinstance(result.output, list)
    fixed_text, fixed_image = result.output
    assert isinstance(fixed_text, TextBlock) and fixed_text.text.endswith("caf\ufffd")
    assert isinstance(fixed_image, DataBlock) and isinstance(fixed_image.source, Base64Source)
    assert fixed_image.source.data == base64.b64encode(PNG).decode()
    sendable(result)


async def test_a_returned_block_that_is_not_base64_is_an_error_result() -> None:
    bad = DataBlock(source=Base64Source(media_type="image/png", data="!!nope!!"))
    result = await returning(bad).run(CALL)
    assert result.is_error
    assert "cannot be shown to the model" in str(result.output)
    assert "not valid base64" in str(result.output)

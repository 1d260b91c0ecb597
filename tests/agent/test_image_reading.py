"""An image offloaded to data/ can be seen again: Read and the retrieval tool return it."""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxoffload import (
    Agent,
    Base64Source,
    ContextConfig,
    DataBlock,
    InMemoryWorkspace,
    LocalWorkspace,
    TextBlock,
    get_token_counter,
)
from ctxoffload.agent import FileToolbox, OpenAIChatModel, workspace_tools
from ctxoffload.agent._openai_model import images_after_tool_messages
from ctxoffload.readback import retrieval_tool
from helpers import png_image
from openai_server import OpenAIServer


def jpeg_header(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


IMAGE = png_image(64, 48)


async def stored_image(workspace: LocalWorkspace | InMemoryWorkspace) -> str:
    block = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(IMAGE).decode())
    )
    stored = await workspace.offload_data_block(block)
    return str(stored.source.url)


async def test_read_on_an_offloaded_image_returns_the_image(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    path = await stored_image(ws)
    assert path.startswith(str(tmp_path)) and path.endswith(".png")
    result = FileToolbox([tmp_path]).read(path)
    assert isinstance(result, list)
    note, image = result
    assert isinstance(note, TextBlock) and isinstance(image, DataBlock)
    assert note.text.endswith(f": image (image/png), {len(IMAGE):,} bytes, 64×48 pixels")
    assert isinstance(image.source, Base64Source)
    assert image.source.media_type == "image/png"
    assert base64.b64decode(image.source.data) == IMAGE


async def test_a_model_without_images_gets_one_line(tmp_path: Path) -> None:
    path = await stored_image(LocalWorkspace(tmp_path))
    read = workspace_tools(tmp_path, images=False)[0]
    result = await read(path)
    assert isinstance(result, str) and "\n" not in result
    assert "image (image/png)" in result and "64×48 pixels" in result


def test_jpeg_size_is_read_from_its_frame_header(tmp_path: Path) -> None:
    (tmp_path / "photo.jpg").write_bytes(jpeg_header(1024, 768))
    result = FileToolbox([tmp_path], images=False).read("photo.jpg")
    assert isinstance(result, str) and "image (image/jpeg)" in result
    assert "1024×768 pixels" in result


def test_an_image_too_big_for_a_request_is_described_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "huge.png"
    with big.open("wb") as f:
        f.write(IMAGE[:33])
        f.truncate(21 << 20)  # sparse: nothing past the header is ever read
    result = FileToolbox([tmp_path]).read("huge.png")
    assert isinstance(result, str)
    assert result.startswith("huge.png: image (image/png), 22,020,096 bytes, 64×48 pixels; ")
    assert "not sent as an image: more than the 3,932,160 bytes a model takes" in result
    assert result.endswith("It is a file: refer to it by its path")


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        # A provider refuses the whole request for one of these, so the run would fail.
        ("bomb.png", png_image(1_739_357_314, 2_995_735_735, rows=bytes(64)), "×2995735735 pixels"),
        ("cut.png", IMAGE[: len(IMAGE) // 2], "cut short"),
        ("cut.jpg", jpeg_header(1024, 768)[:-2], "cut short"),
    ],
    ids=["bomb", "cut-png", "cut-jpeg"],
)
async def test_an_image_a_model_cannot_take_is_read_as_a_file(
    tmp_path: Path, name: str, data: bytes, why: str
) -> None:
    (tmp_path / name).write_bytes(data)
    read = FileToolbox([tmp_path]).read(name)
    assert isinstance(read, str) and "not sent as an image" in read and why in read, read
    assert read.endswith("It is a file: refer to it by its path")
    ws = InMemoryWorkspace()
    stored = await ws.offload_data_block(
        DataBlock(source=Base64Source(media_type="image/png", data=base64.b64encode(data).decode()))
    )
    retrieved = await retrieval_tool(ws)(str(stored.source.url))
    assert isinstance(retrieved, str) and "not sent as an image" in retrieved, retrieved


def test_other_binary_files_are_still_refused(tmp_path: Path) -> None:
    (tmp_path / "blob.gz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(300))
    result = FileToolbox([tmp_path]).read("blob.gz")
    assert isinstance(result, str) and result.startswith("Error: 'blob.gz' is a binary file")


async def test_the_retrieval_tool_returns_an_image_from_any_offloader() -> None:
    ws = InMemoryWorkspace()
    reference = await stored_image(ws)
    result = await retrieval_tool(ws)(reference)
    assert isinstance(result, list)
    assert base64.b64decode(result[1].source.data) == IMAGE
    text_only = await retrieval_tool(ws, images=False)(reference)
    assert isinstance(text_only, str) and "64×48 pixels" in text_only


def test_images_of_tool_messages_move_to_a_user_message_after_the_turn() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "x"}, image]},
        {"role": "tool", "tool_call_id": "b", "content": "plain"},
        {"role": "assistant", "content": "done"},
    ]
    moved = images_after_tool_messages(messages)
    assert [m["role"] for m in moved] == ["assistant", "tool", "tool", "user", "assistant"]
    assert image not in moved[1]["content"]
    assert moved[1]["content"][0] == {"type": "text", "text": "x"}
    assert moved[3]["content"] == [{"type": "text", "text": "Image(s) from tool call a:"}, image]
    assert images_after_tool_messages(messages[:2])[-1]["role"] == "user"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIServer() as running:
        yield running


async def test_an_agent_reading_an_offloaded_image_sends_it_to_the_model(
    tmp_path: Path, server: OpenAIServer
) -> None:
    ws = LocalWorkspace(tmp_path)
    path = await stored_image(ws)
    server.add_completion(
        None,
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "Read", "arguments": f'{{"path": "{path}"}}'},
            }
        ],
    )
    server.add_completion("a grey rectangle")
    async with OpenAIChatModel(
        "gpt-4o-mini", base_url=server.base_url, max_retries=0, context_window=128_000
    ) as model:
        agent = Agent(
            model=model,
            tools=workspace_tools(ws),
            offloader=ws,
            context_config=ContextConfig(context_window=128_000),
            counter=get_token_counter(exact=False),
        )
        reply = await agent.reply("What does the saved screenshot show?")
    assert reply.text == "a grey rectangle"
    sent = server.requests[1]["messages"]
    tool = next(m for m in sent if m["role"] == "tool")
    assert "image_url" not in str(tool["content"])
    after = sent[sent.index(tool) + 1]
    assert after["role"] == "user"
    [image] = [p for p in after["content"] if p["type"] == "image_url"]
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(IMAGE).decode()

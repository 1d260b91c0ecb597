"""`ctxoffload mcp-proxy` and what tokens do not measure: images, audio and embedded bytes
(bounded by bytes per result, stored whole in data/ under their hash and named instead), an
image no model could take (named, never sent), and a result whose text and
`structuredContent` say the same thing (stored once)."""

from __future__ import annotations

from frameworks import require_framework

require_framework("mcp", "mcp")

import base64  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from mcp_proxy import SERVER, proxied, stored_path, text_of  # noqa: E402
from mcp_server import BOMB, NOT_BASE64, big_text, png, wav  # noqa: E402

from ctxoffload.text import TRUNCATION_MARKER  # noqa: E402

PYTHON_SERVER = [sys.executable, str(SERVER.with_name("mcp_python_server.py"))]
"""The wrapped server written with the SDK's MCPServer (FastMCP)."""

MAX_BYTES = 3_932_160
"""The proxy's default bound on the payload bytes of one result (the largest image a model
takes)."""


def _wire_bytes(result: Any) -> int:
    """What the client received, as JSON."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


def _data_files(text: str) -> list[Path]:
    """The data/ files a text names."""
    return [Path(p) for p in re.findall(r"(/\S*/data/[0-9a-f]{64}\.\w+)", text)]


async def test_a_10_mb_image_is_stored_whole_in_data_and_named_not_sent(workdir: Path) -> None:
    whole = png(10_000_000)
    async with proxied(workdir, limit=3_000) as client:
        result = await client.call_tool("image", {"total_bytes": 10_000_000})
        # The client got a line, not 13.3 MB of base64.
        assert [c.type for c in result.content] == ["text"]
        assert _wire_bytes(result) < 2_000
        line = text_of(result)
        assert "not sent as an image: more than the 3,932,160 bytes a model takes" in line
        (stored,) = _data_files(line)
        assert stored.read_bytes() == whole
        assert stored.name == f"{hashlib.sha256(whole).hexdigest()}.png"
        assert stored.parent == workdir.resolve() / "data"
        # Read describes it the same way (it is too big for any model).
        again = await client.call_tool("Read", {"path": str(stored)})
        assert [c.type for c in again.content] == ["text"]
        assert "not sent as an image" in text_of(again)


async def test_images_pass_while_the_result_stays_within_its_bytes(workdir: Path) -> None:
    each = 1_500_000
    image = png(each)
    async with proxied(workdir, limit=10_000) as client:
        result = await client.call_tool("images", {"count": 4, "total_bytes": each})
        kinds = [c.type for c in result.content]
        # Two fit in 3,932,160 bytes; the third and fourth (the same bytes: one file) are named.
        assert kinds == ["image", "image", "text", "text"]
        assert base64.b64decode(result.content[0].data) == image
        assert _wire_bytes(result) < 2 * each * 4 // 3 + 4_000
        line = text_of(result)
        assert "stored whole, not sent: this result would carry more than the 3,932,160" in line
        files = _data_files(line)
        assert len(files) == 2 and len(set(files)) == 1 and files[0].read_bytes() == image
        # Under its limit, Read sends it: one image to a request.
        seen = await client.call_tool("Read", {"path": str(files[0])})
        assert [c.type for c in seen.content] == ["text", "image"]


async def test_max_bytes_bounds_audio_and_embedded_bytes_too(workdir: Path) -> None:
    async with proxied(workdir, "--max-bytes", "100000", limit=10_000) as client:
        audio = await client.call_tool("audio", {"total_bytes": 400_000})
        blob = await client.call_tool("blob", {"total_bytes": 400_000})
        small = await client.call_tool("audio", {"total_bytes": 50_000})
    for result, media_type, whole in (
        (audio, "audio/wav", wav(400_000)),
        (blob, "application/octet-stream", None),
    ):
        assert [c.type for c in result.content] == ["text"]
        line = text_of(result)
        assert f"media_type='{media_type}'" in line and "(mcp-proxy --max-bytes)" in line
        (stored,) = _data_files(line)
        if whole is not None:
            assert stored.read_bytes() == whole
    assert [c.type for c in small.content] == ["audio"]


async def test_an_image_no_model_could_take_is_named_never_sent(workdir: Path) -> None:
    async with proxied(workdir, limit=10_000) as client:
        result = await client.call_tool("bomb", {})
    assert [c.type for c in result.content] == ["text", "text"]
    assert result.content[0].text == "the chart"
    line = result.content[1].text
    assert "1739357314×2995735735 pixels" in line and "not sent as an image" in line
    (stored,) = _data_files(line)
    assert stored.read_bytes() == BOMB


async def test_a_python_servers_text_result_is_stored_once_and_found_once(workdir: Path) -> None:
    whole = big_text(480_000, 4_321)
    async with proxied(workdir, server=PYTHON_SERVER) as client:
        result = await client.call_tool("log", {"total_bytes": 480_000, "marker_line": 4_321})
        assert TRUNCATION_MARKER in text_of(result)
        path = stored_path(text_of(result))
        # The text once, not the text and then `{"result": text}` on one 489,000-character line.
        assert path.read_bytes() == whole.encode("utf-8")
        found = await client.call_tool(
            "Grep", {"pattern": "MARKER-FOUND", "path_or_glob": str(path)}
        )
        assert text_of(found).count("MARKER-FOUND-HERE") == 1
        listed = await client.call_tool("lines", {"count": 2_000})
        stored = stored_path(text_of(listed)).read_text(encoding="utf-8").splitlines()
        assert stored == [f"item {i:05d} " + "pqrstuvwxy" * 5 for i in range(2_000)]
        table = await client.call_tool("table", {"rows": 2_000})
        stored_table = stored_path(text_of(table)).read_text(encoding="utf-8")
        assert json.loads(stored_table) == {
            "rows": [{"id": i, "value": i * 7} for i in range(2_000)]
        }
        small = await client.call_tool("total", {"n": 4})
        assert text_of(small) == "10" and small.structured_content == {"result": 10}


async def test_structured_content_the_text_does_not_say_is_stored_under_a_label(
    workdir: Path,
) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("summary", {"rows": 2_000})
    stored = stored_path(text_of(result)).read_text(encoding="utf-8")
    text, label, rest = stored.split("\n", 2)
    assert (text, label) == ("2000 rows, in structuredContent", "[structuredContent]")
    assert json.loads(rest) == {"rows": [{"id": i, "name": f"row-{i}"} for i in range(2_000)]}


@pytest.mark.parametrize("kind", ["image", "audio"])
async def test_a_payload_whose_base64_is_not_valid_becomes_text_stored_and_cut(
    workdir: Path, kind: str
) -> None:
    async with proxied(workdir) as client:
        result = await client.call_tool("damaged", {"kind": kind, "text_bytes": 50_000})
    # Neither the damaged payload nor the whole text reaches the client: the result is cut.
    assert [c.type for c in result.content] == ["text"]
    assert TRUNCATION_MARKER in text_of(result) and _wire_bytes(result) < 10_000
    stored = stored_path(text_of(result)).read_text(encoding="utf-8")
    lines, damaged = stored.split("\n[", 1)
    assert lines == big_text(50_000, 0)
    media_type = "image/png" if kind == "image" else "audio/wav"
    assert damaged == (
        f"{media_type} payload of {len(NOT_BASE64):,} characters, not sent: its base64 is not "
        f"valid; its characters follow as text]\n{NOT_BASE64}"
    )


async def test_a_small_result_with_a_payload_whose_base64_is_not_valid_passes_as_text(
    workdir: Path,
) -> None:
    async with proxied(workdir, limit=20_000) as client:
        result = await client.call_tool("damaged", {"kind": "image", "text_bytes": 100})
    assert [c.type for c in result.content] == ["text", "text"]
    assert result.content[1].text.endswith(f"as text]\n{NOT_BASE64}")

"""One rule for binary content under Read, Grep and the retrieval tool: a NUL in the first
8 KB, or a first 8 KB mostly not text, refuses it in all three; a few bytes that are not
UTF-8 are shown as U+FFFD by Read and found by Grep and the retrieval tool alike."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import LocalWorkspace
from ctxoffload.exceptions import InvalidContent
from ctxoffload.readback import FileToolbox, retrieve_offloaded_content
from helpers import examples


def noise(size: int, seed: int = 0) -> bytes:
    """Bytes of a compressed or encrypted file: random, but without a NUL."""
    rng = random.Random(seed)
    return bytes(rng.randrange(1, 256) for _ in range(size))


async def verdicts(tmp_path: Path, data: bytes, pattern: str = "x") -> tuple[str, str, str]:
    """What Read, Grep (on the file alone) and the retrieval tool say of `data`."""
    ws = LocalWorkspace(tmp_path / "ws")
    reference = await ws.offload_tool_result("s1", {"id": "c1", "name": "t", "output": data})
    toolbox = FileToolbox([ws.workdir])
    shown = toolbox.read(reference)
    # An image is shown as the image (blocks, not text): to this rule it is not text.
    read = shown if isinstance(shown, str) else "Error: an image"
    # An image no model takes (a damaged header) is described as a file to refer to by path
    # (ctxoffload._media): no text is given, as when it is refused.
    if read.endswith("It is a file: refer to it by its path"):
        read = f"Error: {read}"
    grep = toolbox.grep(pattern, reference)
    try:
        retrieved = await retrieve_offloaded_content(ws, reference, pattern=pattern)
    except InvalidContent as refused:
        retrieved = f"Error: {refused}"
    return read, grep, retrieved


async def test_content_mostly_not_text_is_refused_by_all_three(tmp_path: Path) -> None:
    read, grep, retrieved = await verdicts(tmp_path, b"x" + noise(20_000))
    for answer in (read, grep, retrieved):
        assert answer.startswith("Error:"), answer[:200]
        assert "not text" in answer and "8 KB" in answer, answer
    assert "\ufffd" not in read


async def test_a_few_bytes_not_utf8_are_replaced_and_still_found(tmp_path: Path) -> None:
    data = "café au lait\n".encode("latin-1") * 3 + b"plain x\n"
    read, grep, retrieved = await verdicts(tmp_path, data, pattern="caf")
    assert read.splitlines()[0] == "     1\tcaf\ufffd au lait"
    assert grep.count("caf\ufffd au lait") == 3
    assert retrieved.count("caf\ufffd au lait") == 3


@pytest.mark.parametrize("signature", [b"GIF87a", b"GIF89a", b"RIFF1234WEBPVP8 "])
async def test_text_behind_an_image_signature_is_text_to_all_three(
    tmp_path: Path, signature: bytes
) -> None:
    # Shown as an image, it would reach the model as an image no provider decodes (a GIF of
    # 25,185 x 8,291 pixels, read from the text's letters).
    read, grep, retrieved = await verdicts(tmp_path, signature + b"abc x\n" * 1500)
    assert read.splitlines()[0].endswith("abc x")
    assert grep.count("abc x") > 1 and retrieved.count("abc x") > 1


async def test_a_real_image_is_an_image_to_read_and_binary_to_grep(tmp_path: Path) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    read, grep, retrieved = await verdicts(tmp_path, png, pattern="IHDR")
    assert read == "Error: an image"
    for answer in (grep, retrieved):
        assert answer.startswith("Error:") and "binary" in answer, answer


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None)
@given(
    text=st.binary(max_size=300),
    noise_share=st.integers(min_value=0, max_value=100),
    nul_at=st.one_of(st.none(), st.integers(min_value=0, max_value=9_000)),
)
def test_read_grep_and_retrieval_refuse_the_same_content(
    tmp_path_factory: pytest.TempPathFactory, text: bytes, noise_share: int, nul_at: int | None
) -> None:
    import asyncio

    size = 9_000
    rng = random.Random(noise_share)
    data = bytearray(
        rng.randrange(0x80, 0x100) if rng.randrange(100) < noise_share else rng.choice(b"abc x\n")
        for _ in range(size)
    )
    data[:0] = text
    if nul_at is not None:
        data[nul_at : nul_at + 1] = b"\0"
    read, grep, retrieved = asyncio.run(verdicts(tmp_path_factory.mktemp("rule"), bytes(data)))
    refused = [answer.startswith("Error:") for answer in (read, grep, retrieved)]
    assert len(set(refused)) == 1, (read[:300], grep[:300], retrieved[:300])

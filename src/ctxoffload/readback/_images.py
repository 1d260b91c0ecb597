"""An image read back from the workspace: an image block for the model, or one line about it.

An image offloaded to data/ can be seen again: Read and the retrieval tool answer with the
image itself (a `DataBlock` the model adapter sends as an image part) after a line that
says what it is, or, for a model that takes no images, with that line alone
(`image_answer`). An image larger than a request may hold is refused, with what to do
instead (`image_too_big`).
"""

from __future__ import annotations

import base64
import struct

from .._disk.payloads import sniff_media_type
from .._search.sniff import SNIFF_BYTES, binary_reason
from ..messages import Base64Source, DataBlock, TextBlock

__all__ = [
    "MAX_IMAGE_BYTES",
    "describe_image",
    "image_answer",
    "image_blocks",
    "image_media_type",
    "image_too_big",
]

# The largest image the main providers accept in one request (OpenAI: 20 MB).
MAX_IMAGE_BYTES = 20 << 20

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def image_media_type(head: bytes) -> str | None:
    """The media type of an image from its first bytes (at most `SNIFF_BYTES` are looked
    at), or None if it is not one.

    A signature is believed only in bytes that are binary by the one rule Grep and the
    retrieval tool use (`binary_reason`): a text that happens to start with `GIF87a` (a
    tool's output, a log) is text to all three, where shown as an image it would reach the
    model as an image no provider can decode. Every real PNG, JPEG, GIF and WebP has a NUL
    in its first bytes (a header's length or size field).
    """
    head = head[:SNIFF_BYTES]
    media_type = sniff_media_type(head)
    if media_type not in _IMAGE_TYPES or binary_reason(head) is None:
        return None
    return media_type


def describe_image(data: bytes, media_type: str, where: str) -> str:
    """One line: where the image is, its kind, its size and, when cheap to read, its pixels."""
    size = _pixel_size(data, media_type)
    pixels = f", {size[0]}×{size[1]} pixels" if size else ""
    return f"{where}: image ({media_type}), {len(data):,} bytes{pixels}"


def image_blocks(data: bytes, media_type: str, where: str) -> list[TextBlock | DataBlock]:
    """The description and the image itself, for a model that takes images."""
    encoded = base64.b64encode(data).decode("ascii")
    return [
        TextBlock(text=describe_image(data, media_type, where)),
        DataBlock(source=Base64Source(media_type=media_type, data=encoded)),
    ]


def image_too_big(where: str, media_type: str, size: int, refer: str) -> str:
    """Why an image is not sent: over `MAX_IMAGE_BYTES`.

    Args:
        where: the image's path or reference, as the message names it.
        media_type: its media type.
        size: its size in bytes.
        refer: how the model should refer to it instead ("its path", "reference").
    """
    return (
        f"{where} is an image ({media_type}) of {size:,} bytes, more than the "
        f"{MAX_IMAGE_BYTES:,} a model accepts in one request: refer to it by {refer}"
    )


def image_answer(
    data: bytes, media_type: str, where: str, *, images: bool, refer: str
) -> str | list[TextBlock | DataBlock]:
    """What Read and the retrieval tool answer for an image of at most `MAX_IMAGE_BYTES`.

    Args:
        data: the image's bytes.
        media_type: its media type (`image_media_type`).
        where: its path or reference.
        images: whether the model takes images: the image itself after a line describing
            it; otherwise that line alone, saying to refer to it by `refer`.
        refer: how the model should refer to it ("its path", "reference").
    """
    if not images:
        return (
            describe_image(data, media_type, where)
            + f" (this agent's model takes no images: refer to it by {refer})"
        )
    return image_blocks(data, media_type, where)


def _pixel_size(data: bytes, media_type: str) -> tuple[int, int] | None:
    try:
        if media_type == "image/png" and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return width, height
        if media_type == "image/gif":
            width, height = struct.unpack("<HH", data[6:10])
            return width, height
        if media_type == "image/jpeg":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    # Walk the segments to the first start-of-frame marker; bounded by the data's length.
    position = 2
    while position + 9 < len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        length = struct.unpack(">H", data[position + 2 : position + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        if length < 2:
            return None
        position += 2 + length
    return None

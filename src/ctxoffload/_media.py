"""Whether an image may be sent to a model: the one rule of every reader that could send one
(Read, the retrieval tool, the MCP proxy passing a wrapped server's image on).

A provider refuses a whole request for one image it cannot take, so the run fails; an image
is sent only when all of these hold, and is described as a file otherwise:

- its bytes are a PNG, JPEG, GIF or WebP (the kinds Anthropic, OpenAI and Google all take),
  the kind it is said to be, if it is said to be one;
- it is at most `MAX_IMAGE_BYTES`: Anthropic refuses an image whose base64 is over 5 MiB
  (3.75 MiB of bytes), the strictest of the three (OpenAI takes 50 MB a request, Google
  20 MB a request inline; limits read 2026-11);
- its header reads, and says at most `MAX_IMAGE_SIDE` pixels on each side (Anthropic's
  8,000; a header claiming billions of pixels is refused before anything decodes it);
- it is whole: the structure of its format walked to its end (PNG chunks and their CRCs up
  to IEND; JPEG segments up to the scan and the end-of-image marker after it; GIF blocks up
  to the trailer; WebP's RIFF chunks within the size RIFF says), so a truncated or corrupt
  file is caught without decoding a pixel.

Everything here is bounded by the bytes given: no decompression, no dependency on Pillow.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ._disk.payloads import sniff_media_type
from ._search.sniff import SNIFF_BYTES, binary_reason

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_SIDE",
    "ImageCheck",
    "check_image",
    "image_media_type",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024 * 3 // 4
"""The largest image sent to a model, in bytes: 3,932,160, whose base64 is Anthropic's 5 MiB."""

MAX_IMAGE_SIDE = 8000
"""The most pixels on either side of an image sent to a model (Anthropic's limit)."""

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The kinds of image sent to a model."""

_MAX_CHUNKS = 100_000
"""The most PNG chunks or WebP chunks walked (real images have a few hundred at most)."""

# PNG's valid bit depths per colour type (PNG specification, IHDR).
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


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
    if media_type not in IMAGE_TYPES or binary_reason(head) is None:
        return None
    return media_type


@dataclass(frozen=True)
class ImageCheck:
    """What an image is, and why it may not be sent to a model (None: it may).

    Attributes:
        media_type: the kind its bytes are (`image/png`...), or the kind it was said to be
            when its bytes are no image.
        size: its size in bytes.
        width: the pixels across its header claims, when it could be read.
        height: the pixels down its header claims, when it could be read.
        problem: why it is not sent, as a phrase (`its header says 1739357314×2995735735
            pixels, more than 8,000 on a side`); None when it is sent.
    """

    media_type: str
    size: int
    width: int | None = None
    height: int | None = None
    problem: str | None = None

    @property
    def is_sendable(self) -> bool:
        """Whether the image may be sent to a model."""
        return self.problem is None

    def describe(self, where: str) -> str:
        """One line: where the image is, its kind, its size and its pixels when read."""
        pixels = f", {self.width}×{self.height} pixels" if self.width and self.height else ""
        return f"{where}: image ({self.media_type}), {self.size:,} bytes{pixels}"

    def not_sent(self, where: str, refer: str) -> str:
        """The line that stands for an image not sent: what it is, why not, and that it is
        a file to refer to by `refer` ("its path", "reference")."""
        return (
            f"{self.describe(where)}; not sent as an image: {self.problem}. It is a file: "
            f"refer to it by {refer}"
        )


def check_image(
    data: bytes, media_type: str | None = None, *, size: int | None = None
) -> ImageCheck:
    """Whether `data` is an image a model may be sent (the module's rule), and what it is.

    Args:
        data: the image's bytes; or, with `size` larger than it, its first bytes only (the
            header is read from them, and the image is over `MAX_IMAGE_BYTES` anyway).
        media_type: the kind it is said to be (an MCP server's `mimeType`), if any.
        size: its whole size in bytes (default: `len(data)`).
    """
    size = len(data) if size is None else size
    kind = image_media_type(data)
    if kind is None:
        said = media_type or "application/octet-stream"
        return ImageCheck(said, size, problem="its bytes are no PNG, JPEG, GIF or WebP image")
    read = _HEADERS[kind](data)
    width, height = read.width, read.height
    check = ImageCheck(kind, size, width, height)
    if media_type is not None and media_type.lower() != kind:
        problem = f"it is said to be {media_type} but its bytes are {kind}"
    elif size > MAX_IMAGE_BYTES:
        problem = f"more than the {MAX_IMAGE_BYTES:,} bytes a model takes in one image"
    elif read.problem is not None:
        problem = read.problem
    elif width is None or height is None or width < 1 or height < 1:
        problem = "its header names no size"
    elif max(width, height) > MAX_IMAGE_SIDE:
        problem = (
            f"its header says {width}×{height} pixels, more than the {MAX_IMAGE_SIDE:,} on "
            "a side a model takes"
        )
    else:
        return check
    return ImageCheck(kind, size, width, height, problem)


@dataclass(frozen=True)
class _Read:
    """What walking an image's structure found."""

    width: int | None = None
    height: int | None = None
    problem: str | None = None


_CUT = "it is cut short (the file ends inside its {})"


def _png(data: bytes) -> _Read:
    if len(data) < 33 or data[12:16] != b"IHDR" or data[8:12] != b"\x00\x00\x00\x0d":
        return _Read(problem="its header (IHDR) is missing or damaged")
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    if depth not in _PNG_DEPTHS.get(colour, ()):
        return _Read(width, height, f"its header has an invalid bit depth {depth}")
    position, image_data, chunks = 8, False, 0
    while True:
        chunks += 1
        if position + 12 > len(data):
            return _Read(width, height, _CUT.format("chunks"))
        if chunks > _MAX_CHUNKS:
            return _Read(width, height, f"more than {_MAX_CHUNKS:,} chunks")
        (length,) = struct.unpack(">I", data[position : position + 4])
        end = position + 8 + length
        if length > 0x7FFFFFFF or end + 4 > len(data):
            return _Read(width, height, _CUT.format("chunks"))
        body = data[position + 4 : end]
        (crc,) = struct.unpack(">I", data[end : end + 4])
        if zlib.crc32(body) != crc:
            name = body[:4].decode("latin-1")
            return _Read(width, height, f"its {name!r} chunk is damaged (its CRC is wrong)")
        kind = body[:4]
        if kind == b"IDAT":
            image_data = True
        if kind == b"IEND":
            break
        position = end + 4
    if not image_data:
        return _Read(width, height, "it holds no image data (IDAT)")
    return _Read(width, height)


def _jpeg(data: bytes) -> _Read:
    position, width, height = 2, None, None
    while True:
        if position + 2 > len(data):
            return _Read(width, height, _CUT.format("headers"))
        if data[position] != 0xFF:
            return _Read(width, height, "its segments are damaged")
        marker = data[position + 1]
        if marker == 0xFF:  # a fill byte before a marker
            position += 1
            continue
        if marker == 0xD9:
            return _Read(width, height, "it ends before any image data")
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            position += 2
            continue
        if position + 4 > len(data):
            return _Read(width, height, _CUT.format("headers"))
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        end = position + 2 + length
        if length < 2 or end > len(data):
            return _Read(width, height, _CUT.format("headers"))
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) and width is None:
            if length < 7:
                return _Read(problem="its frame header is damaged")
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
        if marker == 0xDA:
            if width is None:
                return _Read(problem="its image data comes before its frame header")
            # Entropy-coded data holds no 0xFFD9 (a 0xFF in it is followed by 0x00 or a
            # restart marker), so the end-of-image marker after the scan says it is whole.
            if data.rfind(b"\xff\xd9", end) < 0:
                return _Read(width, height, _CUT.format("image data"))
            return _Read(width, height)
        position = end


def _gif(data: bytes) -> _Read:
    if len(data) < 13:
        return _Read(problem=_CUT.format("header"))
    width, height, flags = struct.unpack("<HHB", data[6:11])
    position = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    images = 0
    while True:
        if position >= len(data):
            return _Read(width, height, _CUT.format("blocks"))
        block = data[position]
        if block == 0x3B:  # the trailer
            if images == 0:
                return _Read(width, height, "it holds no image")
            return _Read(width, height)
        if block == 0x21:  # an extension: its label, then sub-blocks
            position += 2
        elif block == 0x2C:  # an image: its descriptor, a local palette, LZW's code size
            if position + 10 > len(data):
                return _Read(width, height, _CUT.format("blocks"))
            local = data[position + 9]
            position += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1
            images += 1
        else:
            return _Read(width, height, "its blocks are damaged")
        while True:  # sub-blocks, each its length then its bytes, ended by a 0
            if position >= len(data):
                return _Read(width, height, _CUT.format("blocks"))
            length = data[position]
            position += 1 + length
            if length == 0:
                break


def _webp(data: bytes) -> _Read:
    (riff_size,) = struct.unpack("<I", data[4:8])
    end = 8 + riff_size
    if end > len(data):
        return _Read(problem=_CUT.format("RIFF chunks"))
    position, width, height, chunks, image = 12, None, None, 0, False
    while position < end:
        chunks += 1
        if position + 8 > end or chunks > _MAX_CHUNKS:
            return _Read(width, height, "its RIFF chunks are damaged")
        kind = data[position : position + 4]
        (length,) = struct.unpack("<I", data[position + 4 : position + 8])
        body = data[position + 8 : position + 8 + length]
        if position + 8 + length > end:
            return _Read(width, height, _CUT.format("RIFF chunks"))
        if kind == b"VP8 " and len(body) >= 10 and body[3:6] == b"\x9d\x01\x2a":
            image = True
            if width is None:
                w, h = struct.unpack("<HH", body[6:10])
                width, height = w & 0x3FFF, h & 0x3FFF
        elif kind == b"VP8L" and len(body) >= 5 and body[0] == 0x2F:
            image = True
            if width is None:
                (bits,) = struct.unpack("<I", body[1:5])
                width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        elif kind == b"VP8X" and len(body) >= 10:
            width = 1 + int.from_bytes(body[4:7], "little")
            height = 1 + int.from_bytes(body[7:10], "little")
        elif kind in (b"ANIM", b"ANMF"):
            image = True
        position += 8 + length + (length & 1)  # chunks are padded to an even length
    if not image:
        return _Read(width, height, "it holds no image data")
    return _Read(width, height)


_HEADERS = {"image/png": _png, "image/jpeg": _jpeg, "image/gif": _gif, "image/webp": _webp}

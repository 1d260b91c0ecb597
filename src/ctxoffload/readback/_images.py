"""An image read back from the workspace: an image block for the model, or one line about it.

An image offloaded to data/ can be seen again: Read and the retrieval tool answer with the
image itself (a `DataBlock` the model adapter sends as an image part) after a line that
says what it is. The image is sent only where the one rule of `ctxoffload._media` lets it
(its kind, its size, its header's pixels, a whole file); otherwise, and for a model that
takes no images, the answer is that line alone, describing it as a file and saying why.
"""

from __future__ import annotations

import base64

from .._media import MAX_IMAGE_BYTES, check_image, image_media_type
from ..messages import Base64Source, DataBlock, TextBlock

__all__ = ["HEADER_BYTES", "MAX_IMAGE_BYTES", "image_answer", "image_media_type"]

HEADER_BYTES = 1 << 16
"""How much of an image too big to send is read to describe it (a JPEG's frame header comes
after its EXIF segment, at most 64 KiB)."""


def image_answer(
    data: bytes, media_type: str, where: str, *, images: bool, refer: str, size: int | None = None
) -> str | list[TextBlock | DataBlock]:
    """What Read and the retrieval tool answer for an image.

    Args:
        data: the image's bytes (or, with `size` over `MAX_IMAGE_BYTES`, its first bytes).
        media_type: its media type (`image_media_type`).
        where: its path or reference.
        images: whether the model takes images.
        refer: how the model should refer to it instead ("its path", "reference").
        size: its whole size in bytes, when `data` is only its start.

    Returns:
        A line describing it and the image, when the model takes images and this one may be
        sent (`check_image`); else the line alone, saying why it is not sent.
    """
    check = check_image(data, media_type, size=size)
    line = check.describe(where)
    if not images:
        return f"{line} (this agent's model takes no images: refer to it by {refer})"
    if check.problem is not None:
        return (
            f"{line}; not sent as an image: {check.problem}. It is a file: refer to it by {refer}"
        )
    encoded = base64.b64encode(data).decode("ascii")
    return [
        TextBlock(text=line),
        DataBlock(source=Base64Source(media_type=check.media_type, data=encoded)),
    ]

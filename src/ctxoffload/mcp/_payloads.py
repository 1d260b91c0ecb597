"""The payloads a wrapped server's result may not carry to the client: stored whole in data/
under their hash, and named by a line in their place.

Tokens do not bound a payload (an image counts a fixed 1,000 whatever its size), so a result
is bounded by bytes as well: its images, audio and embedded blobs pass, in order, while their
decoded bytes stay within `max_result_bytes`; each one past it is stored and named instead. An
image is also stored and named, whatever room is left, where the one image rule of
`ctxoffload._media` refuses to send it (a kind no provider takes, a header claiming more
pixels than a model takes, a truncated or damaged file): a provider refuses a whole request
for one such image. A payload whose base64 does not decode has no bytes to store or send: it
becomes text, a line saying what it was and then its characters, which the engine measures,
stores and cuts with the rest of the result's text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .._disk.payloads import decode_base64
from .._media import MAX_IMAGE_BYTES, check_image
from ..exceptions import InvalidContent, OffloadError
from ..messages import Base64Source, DataBlock, TextBlock, ToolResultBlock
from ..text import data_line
from ..workspace import Workspace
from ._content import payload_size

__all__ = ["store_payloads"]

logger = logging.getLogger("ctxoffload")

_HEAD_CHARS = 1 << 17
"""How much of an image too big to send is decoded to describe it (its header)."""

_Naming = Callable[[str], str]
"""The line that names a stored payload, given its file."""


async def store_payloads(
    workspace: Workspace, block: ToolResultBlock, max_result_bytes: int
) -> tuple[ToolResultBlock, dict[int, str]]:
    """`block` with each payload the client may not be sent stored in data/.

    Returns:
        The block, each stored payload's `DataBlock` pointing at its file (so a result the
        engine stores names it as every stored payload is named), and, by position in the
        result's content, the line the client gets in its place.
    """
    if isinstance(block.output, str):
        return block, {}
    parts = list(block.output)
    replaced: dict[int, str] = {}
    carried = 0
    for index, part in enumerate(parts):
        if not isinstance(part, DataBlock) or not isinstance(part.source, Base64Source):
            continue
        size = payload_size(part)
        try:
            line = _refusal(part, size, carried, max_result_bytes)
            if line is None:
                if not _is_image(part):
                    # Sent as it came, and stored with the result if the result is cut:
                    # it must decode (an image sent was decoded by `_refusal`).
                    decode_base64(part.source.data, what="the payload")
                carried += size
                continue
            stored = await workspace.offload_data_block(part)
        except InvalidContent:
            text = _undecodable(part)
            parts[index] = TextBlock(text=text)
            replaced[index] = text
            continue
        except OffloadError as exc:
            # Not stored, so not dropped either: it goes on as it came.
            logger.warning(
                "could not store a %s payload of %d bytes: %s", part.media_type, size, exc
            )
            carried += size
            continue
        parts[index] = stored
        replaced[index] = line(str(stored.source.url))
    if not replaced:
        return block, {}
    return block.model_copy(update={"output": parts}), replaced


def _refusal(part: DataBlock, size: int, carried: int, max_result_bytes: int) -> _Naming | None:
    """How a payload that may not be sent is named (given its file), or None: it is sent.

    Raises:
        InvalidContent: an image whose base64 is not valid.
    """
    source = part.source
    assert isinstance(source, Base64Source)  # `store_payloads` passes inline ones only
    media_type = source.media_type
    over = carried + size > max_result_bytes
    budget = (
        f"this result would carry more than the {max_result_bytes:,} bytes of payloads one "
        "result may (mcp-proxy --max-bytes)"
    )
    if _is_image(part):
        data = source.data
        whole = size <= MAX_IMAGE_BYTES
        # One too big to send is described from its header: the rest is not decoded here
        # (storing it decodes it). Base64 that is not valid raises InvalidContent.
        head = decode_base64(data if whole else data[:_HEAD_CHARS], what="the image")
        check = check_image(head, media_type, size=size)
        if check.problem is not None:
            return lambda where: check.not_sent(where, "its path")
        if over:
            return lambda where: (
                f"{check.describe(where)}; stored whole, not sent: {budget}. Read it to see it"
            )
        return None
    if over:
        return _named(part, size, budget, "refer to it by its path")
    return None


def _is_image(part: DataBlock) -> bool:
    """Whether a payload is an image (the one image rule of `ctxoffload._media` applies)."""
    return part.media_type is not None and part.media_type.lower().startswith("image/")


def _undecodable(part: DataBlock) -> str:
    """The text that stands for a payload whose base64 is not valid: what it was, then its
    characters as they came (nothing of it is lost, and none of it reaches a provider as a
    payload)."""
    source = part.source
    assert isinstance(source, Base64Source)  # `store_payloads` passes inline ones only
    name = f" {part.name}" if part.name else ""
    return (
        f"[{source.media_type} payload{name} of {len(source.data):,} characters, not sent: its "
        "base64 is not valid; its characters follow as text]\n" + source.data
    )


def _named(part: DataBlock, size: int, why: str, advice: str) -> _Naming:
    """The line for a payload that is no image: its `<data/>` line and why."""

    def line(where: str) -> str:
        data = data_line(where, part.name, part.media_type)
        return f"{data} ({size:,} bytes, stored whole, not sent: {why}; {advice})"

    return line

"""The payloads a wrapped server's result may not carry to the client: stored whole in data/
under their hash, and named by a line in their place.

Tokens do not bound a payload (an image counts a fixed 1,000 whatever its size), so a result
is bounded by bytes as well: its images, audio and embedded blobs pass, in order, while their
decoded bytes stay within `max_result_bytes`; each one past it is stored and named instead. An
image is also stored and named, whatever room is left, where the one image rule of
`ctxoffload._media` refuses to send it (a kind no provider takes, a header claiming more
pixels than a model takes, a truncated or damaged file): a provider refuses a whole request
for one such image.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .._disk.payloads import decode_base64
from .._media import MAX_IMAGE_BYTES, check_image
from ..exceptions import InvalidContent, OffloadError
from ..messages import Base64Source, DataBlock, ToolResultBlock
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
        line = _refusal(part, size, carried, max_result_bytes)
        if line is None:
            carried += size
            continue
        try:
            stored = await workspace.offload_data_block(part)
        except (InvalidContent, OffloadError) as exc:
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
    """How a payload that may not be sent is named (given its file), or None: it is sent."""
    source = part.source
    assert isinstance(source, Base64Source)  # `store_payloads` passes inline ones only
    media_type = source.media_type
    over = carried + size > max_result_bytes
    budget = (
        f"this result would carry more than the {max_result_bytes:,} bytes of payloads one "
        "result may (mcp-proxy --max-bytes)"
    )
    if media_type.lower().startswith("image/"):
        data = source.data
        whole = size <= MAX_IMAGE_BYTES
        try:
            # One too big to send is described from its header: the rest is not decoded.
            head = decode_base64(data if whole else data[:_HEAD_CHARS], what="the image")
        except InvalidContent:
            return _named(part, size, "its base64 is not valid", "refer to it by its path")
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


def _named(part: DataBlock, size: int, why: str, advice: str) -> _Naming:
    """The line for a payload that is no image (or no base64): its `<data/>` line and why."""

    def line(where: str) -> str:
        data = data_line(where, part.name, part.media_type)
        return f"{data} ({size:,} bytes, stored whole, not sent: {why}; {advice})"

    return line

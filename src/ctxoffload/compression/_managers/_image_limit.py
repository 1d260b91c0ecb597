"""`ImageLimit` (pre_llm): keep at most N images in the context (AgentScope's `max_image_num`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from ..._disk import events
from ...messages import Base64Source, DataBlock, Msg, TextBlock, ToolResultBlock, URLSource
from ._activation import Activation, check_int
from ._tool_output import block_kind, payload_size

if TYPE_CHECKING:
    from ._run import PipelineRun

__all__ = ["ImageLimit"]

logger = logging.getLogger("ctxoffload")

# (message index, block index, index inside a tool result's output or None)
_Where = tuple[int, int, int | None]


def _is_image(block: Any) -> bool:
    return isinstance(block, DataBlock) and (block.media_type or "").startswith("image/")


def _images(messages: list[Msg]) -> list[tuple[_Where, DataBlock]]:
    found: list[tuple[_Where, DataBlock]] = []
    for m, msg in enumerate(messages):
        if isinstance(msg.content, str):
            continue
        for b, block in enumerate(msg.content):
            if isinstance(block, DataBlock) and _is_image(block):
                found.append(((m, b, None), block))
            elif isinstance(block, ToolResultBlock) and not isinstance(block.output, str):
                for p, part in enumerate(block.output):
                    if isinstance(part, DataBlock) and _is_image(part):
                        found.append(((m, b, p), part))
    return found


class ImageLimit:
    """Keep at most `max_images` images in the context; older ones leave a placeholder.

    Images in messages and inside tool results count, oldest first. An older image is
    stored in data/ (an image given by URL is already somewhere) and replaced by
    `[image: png, 1,032 bytes | ref: /…/data/<sha256>.png]`, which the agent's Read opens as
    the image again. If storing fails, the image stays. Without an offloader the
    placeholder says the image was not kept. The limit is strict, the newest turn included,
    because providers refuse requests over their image limit; only the images of pinned
    messages stay whatever the limit (they count against it).

    Args:
        max_images: images kept; 0 removes them all.
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm"})

    def __init__(self, *, max_images: int = 5, activation: Activation | None = None) -> None:
        self.max_images = check_int("max_images", max_images, minimum=0)
        self.activation = Activation.from_value(activation)

    def __repr__(self) -> str:
        return f"ImageLimit(max_images={self.max_images})"

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """Not a post_tool manager: the result unchanged."""
        return result

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context with all but the newest `max_images` images replaced by placeholders."""
        images = _images(messages)
        excess = len(images) - self.max_images
        if excess <= 0:
            return messages
        offloader = run.compressor.offloader
        placeholders: dict[_Where, TextBlock] = {}
        references: list[str] = []
        # A pinned message's images count against the limit but stay (see `Protected`).
        movable = [(w, b) for w, b in images if not run.protected.is_pinned(messages[w[0]])]
        for where, block in movable[:excess]:
            size = payload_size(block)
            shown = f", {size:,} bytes" if size is not None else ""
            kind = block_kind(block.media_type)
            name = f" {block.name!r}" if block.name else ""
            reference: str | None = None
            if isinstance(block.source, URLSource):
                reference = block.source.url
            elif offloader is not None and isinstance(block.source, Base64Source):
                try:
                    stored = await offloader.offload_data_block(block)
                except Exception as exc:
                    logger.warning("could not offload an image, keeping it in the context: %s", exc)
                    continue
                if isinstance(stored.source, URLSource):
                    reference = stored.source.url
            if reference is not None:
                text = f"[{kind}{shown}{name} | ref: {reference}]"
                references.append(reference)
            else:
                text = f"[{kind}{shown}{name} | removed: no offloader was configured to keep it]"
            placeholders[where] = TextBlock(text=text)
        if not placeholders:
            return messages
        result = _replaced(messages, placeholders)
        await run.compressor.event(
            events.ImageLimit(
                images=len(images),
                replaced=len(placeholders),
                max_images=self.max_images,
                references=references,
            )
        )
        run.report(f"ImageLimit: replaced {len(placeholders)} of {len(images)} images")
        return result


def _replaced(messages: list[Msg], placeholders: dict[_Where, TextBlock]) -> list[Msg]:
    touched = {m for m, _, _ in placeholders}
    result = list(messages)
    for m in touched:
        msg = messages[m]
        assert not isinstance(msg.content, str)
        content: list[Any] = []
        for b, block in enumerate(msg.content):
            if (m, b, None) in placeholders:
                block = placeholders[(m, b, None)]
            elif isinstance(block, ToolResultBlock) and not isinstance(block.output, str):
                parts = [placeholders.get((m, b, p), part) for p, part in enumerate(block.output)]
                if any(a is not b2 for a, b2 in zip(parts, block.output, strict=True)):
                    block = block.model_copy(update={"output": parts})
            content.append(block)
        result[m] = msg.model_copy(update={"content": content})
    return result

"""`retrieval_tool`: `retrieve_offloaded_content` as a tool an agent can call.

File tools (Read, Grep) only reach content that lives in files the agent can open. Content
offloaded to `InMemoryWorkspace`, a bucket or a custom offloader has a reference that is not
a path; this tool reads any reference through the offloader's own `read_reference`, so an
agent can always get back what left its context.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from ..exceptions import ConfigError
from ..messages import DataBlock, TextBlock
from ..workspace import ReferenceReader
from ._answers import answering
from ._images import image_answer, image_media_type
from ._marks import mark_reader
from ._retrieval import retrieve_offloaded_content as retrieve

__all__ = ["RETRIEVAL_TOOL_NAME", "retrieval_tool"]

RETRIEVAL_TOOL_NAME = "retrieve_offloaded_content"
"""The name the tool is registered under; notices name it."""

_MIN_OUTPUT_CHARS = 1_000


def retrieval_tool(
    source: ReferenceReader,
    *,
    max_output_chars: int = 20_000,
    max_lines: int = 200,
    images: bool = True,
) -> Callable[..., Awaitable[Any]]:
    """An async function, named `retrieve_offloaded_content`, that an agent calls as a tool.

    Its type hints and docstring are written for the model; `Agent` (or any framework
    that derives tool schemas from functions) turns them into the tool's schema. Failures
    come back as text starting with "Error:", never as exceptions (the rule of every file
    tool; running out of file descriptors is said as such). The function carries
    `ctxoffload_reader = True`, so an `Agent` never offloads its results again.

    Args:
        source: anything with `async read_reference(reference) -> bytes`: `LocalWorkspace`,
            `InMemoryWorkspace`, `ObjectStoreWorkspace` or your own offloader.
        max_output_chars: longest answer, notes included (at least 1,000).
        max_lines: most lines in one answer.
        images: answer a reference to an image (PNG, JPEG, GIF, WebP) with the image itself,
            for a model that takes images; False: with one line describing it.

    Raises:
        ConfigError: `source` is not a `ReferenceReader` (it has no `read_reference`), or a
            cap is impossible.
    """
    _check(source, max_output_chars, max_lines)

    async def retrieve_offloaded_content(
        reference: str,
        pattern: str | None = None,
        line_range: list[int] | None = None,
        context_lines: int | None = None,
        char_offset: int | None = None,
    ) -> str | list[TextBlock | DataBlock]:
        """Read back offloaded content by the reference a notice or summary names: its
        first lines, a range of lines, or the lines matching a pattern (marked `>`). A
        context log (`.jsonl`) shows one message per line.

        Args:
            pattern: An RE2 regular expression (no lookaround).
            line_range: [first, last] line numbers, from 1.
            context_lines: Lines around each match; without a pattern, how many to show.
            char_offset: With line_range [n, n]: line n from this character on.

        Returns:
            The numbered lines, or "Error: ..."
        """
        span: tuple[int, int] | None = None
        if line_range is not None:
            if not isinstance(line_range, (list, tuple)) or len(line_range) != 2:
                return (
                    f"Error: line_range={line_range!r} is not [first, last]: pass two line "
                    "numbers, e.g. [1, 200]"
                )
            span = (line_range[0], line_range[1])
        # A failure is answered as "Error: ..." by `answering`, the rule of every tool.
        data = await source.read_reference(reference)
        media_type = image_media_type(data)
        if media_type is not None:
            return image_answer(data, media_type, reference, images=images, refer="reference")
        return await retrieve(
            _Read(data),
            reference,
            pattern=pattern,
            line_range=span,
            context_lines=context_lines,
            char_offset=char_offset,
            max_lines=max_lines,
            max_chars=max_output_chars,
        )

    return mark_reader(answering(retrieve_offloaded_content))


def _check(source: object, max_output_chars: int, max_lines: int) -> None:
    if not isinstance(source, ReferenceReader):
        raise ConfigError(
            f"retrieval_tool needs a ReferenceReader, an object with `async "
            f"read_reference(reference) -> bytes`; {type(source).__name__} has none: pass a "
            "LocalWorkspace, InMemoryWorkspace, ObjectStoreWorkspace or your own offloader "
            "with that method"
        )
    if max_output_chars < _MIN_OUTPUT_CHARS:
        raise ConfigError(
            f"max_output_chars={max_output_chars} is below {_MIN_OUTPUT_CHARS}: the answer "
            "must hold at least a few lines"
        )
    if max_lines < 1:
        raise ConfigError(f"max_lines={max_lines} must be at least 1")


class _Read:
    """A reference already read (to tell an image by its bytes), for
    `retrieve_offloaded_content` to format rather than read again."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def read_reference(self, reference: str | os.PathLike[str]) -> bytes:
        return self.data

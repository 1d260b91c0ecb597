"""Helpers shared by test files (fixtures live in the conftest.py of each folder).

Import as `from helpers import ...`: pytest puts tests/ on the path for its conftest.py.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ctxoffload import Base64Source, DataBlock, Msg

# What a scripted summary model answers: the five fields of ctxoffload's `Summary`.
SUMMARY = {
    "task_overview": "investigate the logs",
    "current_state": "reading logs",
    "important_discoveries": "none yet",
    "next_steps": "continue",
    "context_to_preserve": "none",
}

# A small PNG-looking payload: the signature, then bytes that are not text.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def image_block(
    raw: bytes = PNG, media_type: str = "image/png", name: str | None = None
) -> DataBlock:
    """A data block carrying `raw` inline, as base64."""
    source = Base64Source(media_type=media_type, data=base64.b64encode(raw).decode())
    return DataBlock(source=source, name=name)


def user_msgs(*texts: str) -> list[Msg]:
    """One user message per text."""
    return [Msg(role="user", content=text) for text in texts]


class MinimalOffloader:
    """A custom backend with only the three methods of `Offloader`; it remembers the calls."""

    def __init__(self) -> None:
        self.contexts: list[tuple[str, list[Any]]] = []
        self.tool_results: list[tuple[str, Any]] = []

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        self.contexts.append((session_id, list(msgs)))
        return f"db://{session_id}/context"

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        self.tool_results.append((session_id, tool_result))
        return f"db://{session_id}/result/{len(self.tool_results)}"

    async def offload_data_block(self, block: Any) -> Any:
        return block

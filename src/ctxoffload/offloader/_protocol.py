"""The `Offloader` protocol: where content goes when it leaves the context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Offloader"]


@runtime_checkable
class Offloader(Protocol):
    """Persists content that leaves an agent's context and returns where it went.

    Implementations must be durable before they return: a caller drops content from the
    context only after one of these methods has returned its reference. `LocalWorkspace`
    and `InMemoryWorkspace` implement it; so can an S3 or database backend.

    The methods accept ctxoffload's own messages and blocks, plain dicts in the OpenAI /
    Anthropic chat formats, and foreign pydantic models of the same shape.
    """

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        """Append `msgs` (oldest first) to the session's context log.

        Returns:
            The reference (for `LocalWorkspace`, the path) of the session's context.jsonl.
        """
        ...

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Store the whole text of one tool result.

        Returns:
            The reference of the file that holds it.
        """
        ...

    async def offload_data_block(self, block: Any) -> Any:
        """Store a binary payload once, by content hash.

        Returns:
            A block of the same kind whose source points at the stored copy.
        """
        ...

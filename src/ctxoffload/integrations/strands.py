"""Strands Agents: `WorkspaceStorage`, the `ContextOffloader` storage on a ctxoffload workspace.

Strands' `ContextOffloader` plugin hands each block of an oversized tool result to a storage
with `store(key, content, content_type) -> reference` and reads it back with
`retrieve(reference) -> (content, content_type)`. `WorkspaceStorage` answers both on a
`LocalWorkspace`, an `ObjectStoreWorkspace` or an `InMemoryWorkspace`:

- text (`text/plain`) becomes `sessions/<id>/tool_result-<key>.txt`, the same file ctxoffload
  writes for its own truncations: whole, never overwritten (a second result under one key
  gets `.2.txt`), recorded in events.jsonl, readable with Read / Grep and `ctxoffload grep`;
- anything else (JSON, images, documents) goes to the content-addressed `data/<sha256>.<ext>`,
  stored once however often it is offloaded, its media type kept in the extension (and, in
  a bucket, in the object's `Content-Type`).

Nothing is evicted: the plugin deletes entries only from its unified `strands.storage`
backends, and this storage uses the `store` / `retrieve` protocol, so every reference the
model was given keeps working. Importing this module does not import Strands.

Example:
    ```python
    from strands import Agent
    from strands.vended_plugins.context_offloader import ContextOffloader
    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.strands import WorkspaceStorage

    storage = WorkspaceStorage(LocalWorkspace("ws"), session_id="run-1")
    agent = Agent(model=..., tools=[...], plugins=[ContextOffloader(storage=storage)])
    ```
"""

from __future__ import annotations

from typing import Any

from ..exceptions import InvalidReference
from ..workspace._ids import validate_session_id

__all__ = ["WorkspaceStorage"]

_TOOL_NAME = "strands"


class WorkspaceStorage:
    """Strands' `ContextOffloader` storage (`store` / `retrieve`) on a ctxoffload workspace.

    Args:
        workspace: a `LocalWorkspace`, `ObjectStoreWorkspace` or `InMemoryWorkspace` (any
            object with `offload_tool_result`, `store_bytes` and `read_bytes`).
        session_id: the session whose folder holds the text results (checked now).

    Raises:
        InvalidSessionId: `session_id` is not a plain name.
        TypeError: `workspace` lacks the methods above.
    """

    def __init__(self, workspace: Any, session_id: str = "strands") -> None:
        missing = [
            name
            for name in ("offload_tool_result", "store_bytes", "read_bytes")
            if not callable(getattr(workspace, name, None))
        ]
        if missing:
            raise TypeError(
                f"{workspace!r} is not a ctxoffload workspace (it has no {', '.join(missing)}): "
                "pass a LocalWorkspace, ObjectStoreWorkspace or InMemoryWorkspace"
            )
        self.workspace = workspace
        self.session_id = validate_session_id(session_id)

    def __repr__(self) -> str:
        return f"WorkspaceStorage({self.workspace!r}, session_id={self.session_id!r})"

    async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
        """Store one block and return its reference (a path, or an `s3://` URI).

        Raises:
            OffloadError: the workspace refused the write (disk full, store down); Strands
                then keeps the whole result in the context.
        """
        from ..messages import ToolResultBlock

        data = bytes(content)
        if _is_plain_text(content_type):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass  # not text after all: stored as bytes below, nothing altered
            else:
                block = ToolResultBlock(id=str(key), name=_TOOL_NAME, output=text)
                reference: str = await self.workspace.offload_tool_result(self.session_id, block)
                return str(reference)
        return str(await self.workspace.store_bytes(data, content_type or None))

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """The bytes and media type behind a reference `store` returned.

        Raises:
            KeyError: the reference names nothing in the workspace (or lies outside it),
                as Strands' own storages do.
        """
        try:
            data, media_type = await self.workspace.read_bytes(reference)
        except InvalidReference as exc:
            raise KeyError(reference) from exc
        return bytes(data), str(media_type)


def _is_plain_text(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "text/plain"

"""The read-back tools every host integration gives its agent, as plain async functions each
host wraps in its own tool type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from ..readback import HasWorkdir, memory_tool, retrieval_tool, workspace_tools
from ..workspace import LocalWorkspace, ReferenceReader, Workspace

__all__ = ["reading_functions"]


def reading_functions(
    workspace: Workspace,
    max_output_chars: int,
    *,
    memory: bool = False,
    session_id: str | None = None,
) -> list[Callable[..., Awaitable[Any]]]:
    """Read, Grep and Glob (a workspace on a local folder) and the retrieval tool (any
    workspace that reads its references back); with `memory`, the memory tool too.

    The memory tool is opt-in, as Anthropic's is: it is the one tool here that writes, and a
    host that did not ask for it keeps a read-only toolset (and its schema out of every
    request).

    Args:
        workspace: the workspace the tools read (and the memory tool writes in).
        max_output_chars: the longest answer of each tool.
        memory: add the memory tool (`memory_tool`); it needs a `LocalWorkspace`.
        session_id: the session the memory tool records a change in when the host
            declares none with `writing_as` (the host's session).

    Raises:
        ConfigError: `memory` on a workspace that is not a `LocalWorkspace`.
    """
    functions: list[Callable[..., Awaitable[Any]]] = []
    if isinstance(workspace, HasWorkdir):
        functions.extend(workspace_tools(workspace, max_output_chars=max_output_chars))
    if isinstance(workspace, ReferenceReader):
        functions.append(retrieval_tool(workspace, max_output_chars=max_output_chars))
    if memory:
        functions.append(
            memory_tool(
                cast(LocalWorkspace, workspace),  # memory_tool checks it, refuses another
                session_id=session_id,
                max_output_chars=max_output_chars,
            )
        )
    return functions

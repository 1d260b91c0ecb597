"""The read-back tools every integration gives its agent, before each wraps them as its
framework's tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..readback import HasWorkdir, retrieval_tool, workspace_tools
from ..workspace import ReferenceReader, Workspace

__all__ = ["reading_functions"]


def reading_functions(
    workspace: Workspace, max_output_chars: int
) -> list[Callable[..., Awaitable[Any]]]:
    """Read, Grep and Glob (a workspace on a local folder) and `retrieve_offloaded_content`
    (any workspace that reads its references back), as async functions."""
    functions: list[Callable[..., Awaitable[Any]]] = []
    if isinstance(workspace, HasWorkdir):
        functions.extend(workspace_tools(workspace, max_output_chars=max_output_chars))
    if isinstance(workspace, ReferenceReader):
        functions.append(retrieval_tool(workspace, max_output_chars=max_output_chars))
    return functions

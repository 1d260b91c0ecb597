"""The memory tool's paths: what a model may write (`/memories/...`), and which folder of the
workspace's `memories/` a tool serves.

A model names memory files as Anthropic's memory tool does, under `/memories`. The path is
checked as text first, before any file is touched: it starts with `/memories`, and no part
of it is `..`, `.`, empty, hidden (a name starting with '.', kept for ctxoffload's own
temporary files), longer than a file system takes, or holds a control character or a
backslash. What is left is a list of plain names, opened one at a time below the folder
without following a link (`_memory_files`).

Which folder `/memories` is (`memory_folder`):

- a workspace that does not keep sessions apart: `memories/` itself, shared by every agent
  of the workspace, as its sessions' files are;
- one that keeps sessions apart (`isolate_sessions=True`): `memories/agents/{agent}/`, the
  folder of the agent working (its name, made safe by `session_id_for`). Per agent, not per
  session: a memory is what outlives a session, and an agent's next session is a new one;
- a tool given `shared=NAME`: `memories/shared/{NAME}/`, whatever the workspace, for agents
  meant to share what they learn.
"""

from __future__ import annotations

import re

from .._disk.ids import is_session_id, session_id_for
from .._disk.layout import MEMORIES_DIR, MEMORY_AGENTS_DIR, MEMORY_SHARED_DIR
from ..exceptions import ConfigError, ToolError
from ._arguments import quote

__all__ = ["MEMORY_ROOT", "check_shared_name", "memory_folder", "memory_parts", "memory_path"]

MEMORY_ROOT = "/memories"
"""The directory every path a model gives the memory tool starts with."""

# Longer paths are refused as text: a file system takes 4,096 bytes at most, and a memory
# path is read by a model at every view.
_MAX_PATH_CHARS = 1_024
# One component of a path, in bytes: what Linux and macOS file systems take.
_MAX_NAME_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def memory_parts(path: object, argument: str = "path") -> list[str]:
    """The names below `/memories` of a path a model wrote: `[]` for `/memories` itself,
    `["notes", "today.md"]` for `/memories/notes/today.md` (a trailing `/` is allowed).

    Args:
        path: the path as the model wrote it.
        argument: the argument's name, for errors (`path`, `old_path`, `new_path`).

    Raises:
        ToolError: not a path under `/memories`, or one with a part the tool refuses; the
            message names it and says what to pass.
    """
    if not isinstance(path, str) or not path:
        raise ToolError(
            f"{argument}={quote(path)} is not a path: pass one under {MEMORY_ROOT}, such as "
            f"{MEMORY_ROOT}/notes.md"
        )
    shown = quote(path)
    if len(path) > _MAX_PATH_CHARS:
        raise ToolError(
            f"{argument} {shown} is {len(path):,} characters long: memory paths are at most "
            f"{_MAX_PATH_CHARS:,}; use shorter names"
        )
    if _CONTROL.search(path) or "\\" in path:
        raise ToolError(
            f"{argument} {shown} holds a control character or a backslash: use '/' between "
            "names, and letters, digits, spaces and punctuation in them"
        )
    if path != MEMORY_ROOT and not path.startswith(MEMORY_ROOT + "/"):
        raise ToolError(
            f"The path {shown} is not in {MEMORY_ROOT}: every memory path starts with "
            f"{MEMORY_ROOT}, such as {MEMORY_ROOT}/notes.md"
        )
    parts = path[len(MEMORY_ROOT) + 1 :].split("/") if path != MEMORY_ROOT else []
    if parts and parts[-1] == "":
        parts.pop()  # `/memories/notes/`: the folder
    for part in parts:
        if part == "..":
            raise ToolError(
                f"The path {shown} would escape the {MEMORY_ROOT} directory: pass a path "
                "without '..'"
            )
        if part in ("", "."):
            raise ToolError(
                f"The path {shown} has an empty or '.' part: name each folder once, such as "
                f"{MEMORY_ROOT}/project/notes.md"
            )
        if part.startswith("."):
            raise ToolError(
                f"The path {shown} has a part starting with '.' ({quote(part)}): those names "
                "are kept for ctxoffload's own files; start the name with another character"
            )
        if len(part.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
            raise ToolError(
                f"The path {shown} has a name longer than {_MAX_NAME_BYTES} bytes: use "
                "shorter names"
            )
    return parts


def memory_path(parts: list[str]) -> str:
    """The `/memories/...` path of the names below it, as the answers and events name it."""
    return "/".join([MEMORY_ROOT, *parts])


def check_shared_name(shared: object) -> str:
    """`shared` if it is a plain name for a shared folder (as a session id is).

    Raises:
        ConfigError: anything else, with what to pass.
    """
    if not isinstance(shared, str) or not is_session_id(shared):
        raise ConfigError(
            f"shared={quote(shared)} is not a plain name for a shared memory folder: use 1-128 "
            "ASCII letters, digits, '.', '_' or '-', not starting with '.' (such as 'team')"
        )
    return shared


def memory_folder(*, isolated: bool, shared: str | None, agent: str | None) -> tuple[str, ...]:
    """The folder, below the workdir, that `/memories` is for one call (see the module's
    docstring).

    Args:
        isolated: the workspace keeps sessions apart.
        shared: the name of a folder shared on purpose, or None.
        agent: the agent working (or the one the tool was made for), or None.

    Raises:
        ToolError: the workspace keeps sessions apart and no agent is named.
    """
    if shared is not None:
        return (MEMORIES_DIR, MEMORY_SHARED_DIR, shared)
    if not isolated:
        return (MEMORIES_DIR,)
    if not agent:
        raise ToolError(
            "this workspace keeps sessions apart (isolate_sessions=True), so memories belong "
            "to an agent, and no agent is working: call the memory tool from an Agent, run it "
            "inside ctxoffload.workspace.writing_as(name, session_id), or make it with "
            "memory_tool(workspace, agent=NAME) (or shared=NAME for a folder shared on purpose)"
        )
    return (MEMORIES_DIR, MEMORY_AGENTS_DIR, session_id_for(agent))

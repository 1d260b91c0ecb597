"""`memory_tool`: files an agent keeps across sessions, in its workspace's `memories/`.

One tool, named `memory`, with the commands and arguments of Anthropic's memory tool
(`view`, `create`, `str_replace`, `insert`, `delete`, `rename`; paths under `/memories`) and
its answers worded as that tool's are, so a model trained on it uses this one unchanged.
Where `/memories` is on disk (`memory_folder`), how a path is checked (`_memory_paths`), and
how each command reads and writes (`_memory_files`) are their own modules.

Every change is recorded as a `memory` event of the session that made it (its writer names
the agent), so `ctxoffload show` and the viewer show how a memory came to be.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from .._disk.events import EventKind, MemoryChange
from .._disk.ids import validate_session_id
from .._disk.writer import current_agent, current_session
from ..exceptions import ConfigError, CtxOffloadError, ToolError
from ..workspace import LocalWorkspace
from ._answers import answering
from ._arguments import quote
from ._lines import NOTE_ROOM
from ._marks import mark_reader
from ._memory_files import MemoryFiles
from ._memory_paths import MEMORY_ROOT, check_shared_name, memory_folder

__all__ = ["MEMORY_TOOL_NAME", "memory_tool"]

MEMORY_TOOL_NAME = "memory"
"""The name the tool is registered under: the name of Anthropic's memory tool."""

_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
_MIN_OUTPUT_CHARS = 1_000
_MAX_LINE_CHARS = 2_000


def memory_tool(
    workspace: LocalWorkspace,
    *,
    shared: str | None = None,
    agent: str | None = None,
    session_id: str | None = None,
    max_file_bytes: int = 256 * 1024,
    max_folder_bytes: int = 10 * 1024 * 1024,
    max_output_chars: int = 30_000,
) -> Callable[..., Awaitable[str]]:
    """The memory tool: an async function, named `memory`, an agent calls to keep files
    across sessions in the workspace's `memories/` folder.

    It takes the commands and arguments of Anthropic's memory tool (`view`, `create`,
    `str_replace`, `insert`, `delete`, `rename`; every path under `/memories`) and answers
    as that tool does, so a model trained on it uses this one unchanged. Its type hints and
    docstring are written for the model; `Agent` (or any framework that derives tool schemas
    from functions) turns them into the tool's schema. Failures come back as text starting
    with "Error:", never as exceptions. It carries `ctxoffload_reader = True`: its answers
    are never offloaded again.

    Where `/memories` is: `memories/` itself, shared by the workspace's agents as its
    sessions are; in a workspace that keeps sessions apart (`isolate_sessions=True`), the
    working agent's own `memories/agents/{agent}/`; with `shared`, `memories/shared/{shared}/`.
    Nothing outside that folder is reached: no `..`, no absolute path elsewhere, no link
    followed (one planted anywhere is refused and named), and limits on a file's size and
    the folder's.

    Every change is written whole (a temporary file renamed into place) under a lock every
    process holds, so a reader or a killed writer never sees half a file and two agents
    editing one file lose neither edit; and it is recorded as a `memory` event of the
    session that made it (`ctxoffload show` prints it).

    Args:
        workspace: the `LocalWorkspace` whose folder holds `memories/`.
        shared: the name of a folder shared on purpose (`memories/shared/{shared}/`), for
            agents meant to share what they learn, whether or not the workspace keeps
            sessions apart.
        agent: whose memories these are where the workspace keeps sessions apart; by
            default the agent working (an `Agent`'s name, or the one given to
            `writing_as`). Give it for a host that names no agent.
        session_id: the session a change is recorded in when no agent session is working
            (a host that declares none with `writing_as`, your own code); by default the
            working session's. A change with neither is refused.
        max_file_bytes: the most bytes of one memory file.
        max_folder_bytes: the most bytes of all the memory files the tool serves.
        max_output_chars: the longest answer of `view` (at least 1,000); keep it below the
            agent's `tool_result_limit`.

    Raises:
        ConfigError: not a `LocalWorkspace`, a `shared` name that is no plain name, or an
            impossible limit.
        InvalidSessionId: a `session_id` that is no plain name.
    """
    if not isinstance(workspace, LocalWorkspace):
        raise ConfigError(
            f"memory_tool needs a LocalWorkspace, whose folder holds memories/; got "
            f"{type(workspace).__name__}: pass LocalWorkspace(workdir)"
        )
    if shared is not None:
        check_shared_name(shared)
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise ConfigError(f"agent={quote(agent)} is not an agent's name: pass a non-empty str")
    if session_id is not None:
        validate_session_id(session_id)
    _check_limits(max_file_bytes, max_folder_bytes, max_output_chars)
    files = MemoryFiles(
        os.path.realpath(workspace.workdir),
        str(workspace.workdir),
        fsync=workspace.fsync,
        max_file_bytes=max_file_bytes,
        max_folder_bytes=max_folder_bytes,
        max_output_chars=max_output_chars - NOTE_ROOM,
        max_line_chars=_MAX_LINE_CHARS,
    )

    async def memory(
        command: str,
        path: str | None = None,
        view_range: list[int] | None = None,
        file_text: str | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        insert_text: str | None = None,
        old_path: str | None = None,
        new_path: str | None = None,
    ) -> str:
        """Your memory directory, /memories: files that stay from one session to the next.

        Look in it first (command view, path /memories): earlier sessions left there what
        they learned. As you work, record what you would need if your context were cleared
        now: progress, decisions, facts about the task and the user. Keep the files short
        and by topic, and delete or correct what is outdated.

        Commands and their arguments:
        - view: path; a directory lists what it holds two levels deep with the sizes, a
          file shows its lines numbered; view_range [first, last] shows some lines
          (last -1: to the end).
        - create: path, file_text. Makes a new file; an existing one is an error.
        - str_replace: path, old_str, new_str. old_str must appear in the file exactly
          once, as view shows it (without the line numbers).
        - insert: path, insert_line, insert_text. The text goes after line insert_line
          (0: before the first line).
        - delete: path. A file, or a directory with everything in it.
        - rename: old_path, new_path. new_path must not exist.
        Every path starts with /memories; names starting with '.' are reserved.

        Args:
            command: One of view, create, str_replace, insert, delete, rename.
            path: The file or directory, such as /memories/notes.md (all but rename).
            view_range: With view on a file: [first, last] line numbers, from 1.
            file_text: With create: the whole text of the new file.
            old_str: With str_replace: the exact text to replace.
            new_str: With str_replace: the text to put in its place.
            insert_line: With insert: the line the text goes after (0 for the top).
            insert_text: With insert: the text to insert.
            old_path: With rename: the file or directory to move.
            new_path: With rename: where it goes.

        Returns:
            What the command did or shows, or a message starting with "Error:".
        """
        arguments = {
            "path": path,
            "view_range": view_range,
            "file_text": file_text,
            "old_str": old_str,
            "new_str": new_str,
            "insert_line": insert_line,
            "insert_text": insert_text,
            "old_path": old_path,
            "new_path": new_path,
        }
        folder = memory_folder(
            isolated=workspace.isolate_sessions,
            shared=shared,
            agent=agent or current_agent(),
        )
        if command == "view":
            return await asyncio.to_thread(files.view, folder, path, view_range)
        run = _command(files, command, arguments)
        session = current_session() or session_id
        if session is None:
            raise ToolError(
                "no session is working to record this change in: call the memory tool from "
                "an Agent, run it inside ctxoffload.workspace.writing_as(name, session_id), "
                "or make it with memory_tool(workspace, session_id=...); nothing was changed"
            )
        validate_session_id(session)
        answer, change = await asyncio.to_thread(run, folder)
        return answer + await _recorded(workspace, session, change)

    return mark_reader(answering(memory))


def _check_limits(max_file_bytes: int, max_folder_bytes: int, max_output_chars: int) -> None:
    for name, value in (("max_file_bytes", max_file_bytes), ("max_folder_bytes", max_folder_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a positive number of bytes")
    if max_file_bytes > max_folder_bytes:
        raise ConfigError(
            f"max_file_bytes={max_file_bytes:,} is over max_folder_bytes={max_folder_bytes:,}: "
            "one file cannot be bigger than the folder that holds it"
        )
    minimum = max(_MIN_OUTPUT_CHARS, _MAX_LINE_CHARS + 2 * NOTE_ROOM)
    if isinstance(max_output_chars, bool) or not isinstance(max_output_chars, int):
        raise ConfigError(f"max_output_chars={max_output_chars!r} must be a number of characters")
    if max_output_chars < minimum:
        raise ConfigError(
            f"max_output_chars={max_output_chars} is below {minimum:,}: the answer must hold "
            "a few lines"
        )


def _command(
    files: MemoryFiles, command: object, arguments: dict[str, Any]
) -> Callable[[tuple[str, ...]], tuple[str, MemoryChange]]:
    """The change `command` makes, its arguments checked, to run on a folder.

    Raises:
        ToolError: an unknown command, or one without an argument it needs.
    """
    needs = {
        "create": ("path", "file_text"),
        "str_replace": ("path", "old_str"),
        "insert": ("path", "insert_line", "insert_text"),
        "delete": ("path",),
        "rename": ("old_path", "new_path"),
    }
    if not isinstance(command, str) or command not in needs:
        raise ToolError(f"Unknown command {quote(command)}: use one of {', '.join(_COMMANDS)}")
    missing = [name for name in needs[command] if arguments[name] is None]
    if missing:
        raise ToolError(
            f"{command} needs {' and '.join(missing)}: pass "
            + ", ".join(needs[command])
            + f" (paths under {MEMORY_ROOT})"
        )
    a = arguments
    if command == "create":
        return lambda folder: files.create(folder, a["path"], a["file_text"])
    if command == "str_replace":
        return lambda folder: files.str_replace(folder, a["path"], a["old_str"], a["new_str"] or "")
    if command == "insert":
        return lambda folder: files.insert(folder, a["path"], a["insert_line"], a["insert_text"])
    if command == "delete":
        return lambda folder: files.delete(folder, a["path"])
    return lambda folder: files.rename(folder, a["old_path"], a["new_path"])


async def _recorded(workspace: LocalWorkspace, session: str, change: MemoryChange) -> str:
    """Record `change` as an event of `session`: "" once it is, else a note for the answer
    (the change is made whatever happens to its record)."""
    try:
        await workspace.record_event(session, EventKind.MEMORY, **change.fields())
    except (CtxOffloadError, OSError) as exc:
        return (
            f"\n(The change is made, but it could not be recorded in session {session}'s "
            f"events: {exc})"
        )
    return ""

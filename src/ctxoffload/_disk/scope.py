"""Sessions kept apart: what one session may read when a workspace serves many users.

With `isolate_sessions=True` on a workspace, everything an agent reads back while it works
in a session (the retrieval tool, the workspace file tools, the framework adapters) is
confined to what that session can reach:

- its own folder, `sessions/{id}/`;
- the folders of the sub-agents it started and of theirs (named by its `subagent`
  events), and the session it was forked from (named by its `fork` event), as their
  records say: ctxoffload writes those events, a model cannot;
- the data/ files those sessions' records name as blocks: the images and documents of its
  messages, and the payloads of its tool results (the `data_files` of a `tool_result`
  event, the URLs of the `<data .../>` lines ctxoffload wrote for them).

Only references ctxoffload wrote count. What a tool, a model or a web page wrote is text: a
`<data url=.../>` line in a fetched page, a path in a message, reach nothing.

Anything else, another session's reference among them, is refused with `InvalidReference`
saying so. Which session is working is the one an `Agent` (or an adapter) declared with
`writing_as`; outside any (a person's script, the CLI) nothing is confined. Being
record-based, the check reads the session's record at each read-back: its cost grows with
the record, like the read itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..exceptions import InvalidReference
from .events import EventKind
from .layout import DATA_DIR, DATA_NAME, SESSIONS_DIR
from .writer import current_session

__all__ = [
    "MAX_REACH",
    "Reach",
    "SessionScoped",
    "check_reference",
    "data_files_field",
    "reach_of",
]

MAX_REACH = 256
"""The most sessions one session reaches (itself, its sub-agents', its fork origins)."""

_DATA_REFERENCE = re.compile(rf"(?:^|/){DATA_DIR}/({DATA_NAME.pattern})$")
# The field of a `tool_result` event that names the payloads its file shows as data lines.
_DATA_FILES = "data_files"
# Where a block's URL sits (`{"source": {"url": ...}}`, OpenAI's `{"image_url": {"url"}}`).
_BLOCK_KEYS = frozenset({"source", "image_url"})
# What a model or a person writes: never a reason to reach a file.
_TEXT_KEYS = frozenset({"text", "input", "arguments", "thinking", "reasoning"})
# Set while a reach is measured: the workspace's own reads of the records it walks are not
# checked again (they would measure the reach again, without end).
_MEASURING: ContextVar[bool] = ContextVar("ctxoffload_measuring_reach", default=False)


@runtime_checkable
class SessionScoped(Protocol):
    """A workspace that can keep sessions apart (every ctxoffload workspace): it says
    whether it does, and where a reference lies below it, which `check_reference` needs.

    Declared here, not looked up by name: the readers that confine (the workspace file
    tools, the Strands storage) ask `isinstance(workspace, SessionScoped)`.
    """

    isolate_sessions: bool
    """Whether what an agent reads back is confined to its session's reach."""

    def reference_key(self, reference: str | os.PathLike[str]) -> list[str]:
        """The parts of a reference's key below the workspace (`["sessions", id, name]`).

        Raises:
            InvalidReference: not a reference of this workspace.
        """
        ...


@dataclass
class Reach:
    """What one session may read: session ids, and data/ file names."""

    session: str
    sessions: set[str] = field(default_factory=set)
    data: set[str] = field(default_factory=set)

    def refusal(self, parts: list[str], reference: str) -> str | None:
        """Why `reference` (its key below the workspace, split) is out of reach, or None."""
        if len(parts) >= 3 and parts[0] == SESSIONS_DIR:
            if parts[1] in self.sessions:
                return None
            owner = f"session {parts[1]!r}"
        elif len(parts) == 2 and parts[0] == DATA_DIR:
            if parts[1] in self.data:
                return None
            owner = "a data/ file no message of this session names"
        else:
            owner = "no session"
        return (
            f"reference {reference!r} belongs to {owner}: this workspace keeps sessions apart "
            f"(isolate_sessions=True), and session {self.session!r} may read only its own "
            "files, those of its sub-agents and fork origin, and the data/ files its messages "
            "name"
        )


def _links(events: Iterable[dict[str, Any]]) -> Iterable[str]:
    """The sessions a record links to: sub-agents it started, the session it forked."""
    for event in events:
        kind = event.get("kind")
        if kind == EventKind.SUBAGENT and isinstance(event.get("session"), str):
            yield event["session"]
        elif kind == EventKind.FORK:
            origin = event.get("origin")
            if isinstance(origin, dict) and isinstance(origin.get("session"), str):
                yield origin["session"]


async def reach_of(workspace: Any, session_id: str, *, data: bool = True) -> Reach:
    """The sessions (and, with `data`, the data/ names) `session_id` may read, from the
    records of `workspace` (an `EventLog` and `StateStore`, with `list_files` and
    `read_reference`: every ctxoffload workspace)."""
    token = _MEASURING.set(True)
    try:
        return await _measure(workspace, session_id, data)
    finally:
        _MEASURING.reset(token)


async def _measure(workspace: Any, session_id: str, data: bool) -> Reach:
    reach = Reach(session_id)
    pending = [session_id]
    while pending and len(reach.sessions) < MAX_REACH:
        sid = pending.pop()
        if sid in reach.sessions:
            continue
        reach.sessions.add(sid)
        events = await workspace.read_events(sid)
        pending.extend(s for s in _links(events) if s not in reach.sessions)
        if data:
            key_of = workspace.reference_key
            reach.data |= _stored_names(events, key_of, events=True)
            reach.data |= _stored_names([await workspace.read_state(sid)], key_of)
            reach.data |= _stored_names(await workspace.read_context(sid), key_of)
    return reach


def data_files_field(urls: list[str]) -> dict[str, list[str]]:
    """The field of a `tool_result` event naming the URLs of the `<data .../>` lines its file
    holds for blocks (`render_tool_output`'s `urls`); none when it holds none.

    A tool_result file is the tool's text as it was, so a data line in it can be the tool's
    own text: the event, which only ctxoffload writes, says which lines are references.
    """
    return {_DATA_FILES: list(urls)} if urls else {}


def _stored_names(
    values: Iterable[Any], key_of: Callable[[str], list[str]], *, events: bool = False
) -> set[str]:
    """The data/ files that blocks of these records point at (a block's `url` beside a
    `media_type`, or in a `source` / `image_url`), and, for `events`, that `data` events and
    `tool_result` events (`data_files`) name. Text is not read: a name a model or a user
    merely wrote does not make a file reachable, nor does a dict shaped like an event inside
    a message, nor a URL elsewhere that merely ends in `/data/NAME` (`key_of`: the
    workspace's `reference_key`, which refuses what is not one of its references)."""
    found: set[str] = set()
    if events:
        for event in values:
            if not isinstance(event, dict):
                continue
            if event.get("kind") == EventKind.DATA:
                found |= _in(event.get("reference"), key_of)
            elif event.get("kind") == EventKind.TOOL_RESULT:
                urls = event.get(_DATA_FILES)
                for url in urls if isinstance(urls, list) else ():
                    found |= _in(url, key_of)
    stack: list[tuple[Any, str | None]] = [(v, None) for v in values]
    while stack:
        value, key = stack.pop()
        if isinstance(value, dict):
            url = value.get("url")
            if isinstance(url, str) and ("media_type" in value or key in _BLOCK_KEYS):
                found |= _in(url, key_of)
            stack.extend((v, k) for k, v in value.items() if k not in _TEXT_KEYS)
        elif isinstance(value, list):
            stack.extend((v, key) for v in value)
    return found


def _in(text: object, key_of: Callable[[str], list[str]]) -> set[str]:
    """The data/ name `text` is a reference of, in this workspace (`key_of`); none for
    another text (`https://example.com/data/NAME.png`, an image a user gave by URL)."""
    if not isinstance(text, str) or _DATA_REFERENCE.search(text) is None:
        return set()
    try:
        parts = key_of(text)
    except (InvalidReference, ValueError):
        return set()
    if len(parts) == 2 and parts[0] == DATA_DIR and DATA_NAME.fullmatch(parts[1]):
        return {parts[1]}
    return set()


async def check_reference(
    workspace: Any, reference: str, parts: list[str], session_id: str | None = None
) -> None:
    """Refuse `reference` unless the working session (`session_id`, else the one declared
    with `writing_as`) may read it; nothing is checked when no session is working.

    Args:
        workspace: the workspace the reference is of.
        reference: the reference, as given (named in the error).
        parts: its key below the workspace, split on `/` (`["sessions", id, name]`).
        session_id: the session to confine to, for a caller bound to one (an adapter).

    Raises:
        InvalidReference: out of the session's reach.
    """
    session = session_id if session_id is not None else current_session()
    if session is None or _MEASURING.get():
        return
    if len(parts) >= 3 and parts[0] == SESSIONS_DIR and parts[1] == session:
        return  # its own folder: no record to read
    reach = await reach_of(workspace, session, data=len(parts) == 2 and parts[0] == DATA_DIR)
    why = reach.refusal(parts, reference)
    if why is not None:
        raise InvalidReference(why)

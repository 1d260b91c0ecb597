"""The names on disk, spelled once: folders, files, the commit record, the data/ name pattern.

This is the contract with agents and with people reading a workspace (DESIGN.md section 3).
Every backend, reader and command takes its names from here. Light on purpose: the CLI
imports it at start-up, so its patterns are compiled on first use (`re`, with `enum`, would
cost ~6 ms of every command's start-up, and a plain `ctxoffload grep` needs neither).

```
{workdir}/
  sessions/{session_id}/
    context.jsonl  context.jsonl.commit  events.jsonl  state.json  lease.json
    history.jsonl            a host's saved conversation (an SDK session's items), appended
    tool_result-{stem}.txt
  data/{sha256}.{ext}
  skills/
  memories/                  an agent's files kept across sessions (the memory tool)
    agents/{agent}/          each agent's own, in a workspace that keeps sessions apart
    shared/{name}/           a folder shared on purpose
```

What an agent stored (tool results, context.jsonl, data/, memories/) is content; what the
workspace keeps to run and to record a session (events.jsonl, state.json, lease.json, a host's
history.jsonl, a commit record, a file being written, a folder being removed) is a record
(`is_record`).
Every search over a folder or a glob (the agent's Grep and Glob, the read-back tools of every
host and of the MCP proxy, `ctxoffload grep` and the viewer's search through it) finds content
and leaves the records out unless a path names one: the records hold every earlier search
and its answer, which a search would otherwise find again.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    import re

__all__ = [
    "COMMIT_SUFFIX",
    "CONTEXT_FILE",
    "DATA_DIR",
    "DATA_NAME",
    "DATA_REFERENCE",
    "DATA_REFERENCE_BYTES",
    "EVENTS_FILE",
    "HISTORY_FILE",
    "LEASE_FILE",
    "LOGS",
    "MARK",
    "MEMORIES_DIR",
    "MEMORY_AGENTS_DIR",
    "MEMORY_SHARED_DIR",
    "PIN_MARK",
    "PURGING_PREFIX",
    "RECORD_FILES",
    "SESSIONS_DIR",
    "SKILLS_DIR",
    "STATE_FILE",
    "SUMMARY_MARK",
    "TEMPORARY_PREFIX",
    "TOOL_RESULT_PREFIX",
    "TOOL_RESULT_SUFFIX",
    "TOP_FOLDERS",
    "UNSTORED_MARK",
    "WINDOW_NOTE_MARK",
    "is_committed_log",
    "is_data_name",
    "is_record",
    "is_session_record",
    "is_tool_result_name",
    "mark_kind",
    "mark_of",
    "now_iso",
    "purging_name",
    "temporary_name",
    "tool_result_name",
]

SESSIONS_DIR = "sessions"
"""The folder of the sessions, one folder each: `{workdir}/sessions/{session_id}/`."""
DATA_DIR = "data"
"""The folder of the binary payloads, stored once by content hash: `{workdir}/data/`."""
SKILLS_DIR = "skills"
"""A folder reserved for an agent's skills (created, not otherwise used)."""
TOP_FOLDERS = (SESSIONS_DIR, DATA_DIR, SKILLS_DIR)
"""The folders `initialize` makes, in the order it makes them."""
MEMORIES_DIR = "memories"
"""The folder of the files agents keep across sessions, edited through the memory tool
(made by its first write; gc never removes it)."""
MEMORY_AGENTS_DIR = "agents"
"""In `memories/`, the folder of each agent's own memories
(`memories/agents/{agent}/`), where a workspace keeps sessions apart."""
MEMORY_SHARED_DIR = "shared"
"""In `memories/`, the folders shared on purpose (`memories/shared/{name}/`)."""

CONTEXT_FILE = "context.jsonl"
"""A session's log of compressed messages, one message per line, oldest first."""
EVENTS_FILE = "events.jsonl"
"""A session's record: one event per line (offloads, compressions, model and tool calls)."""
STATE_FILE = "state.json"
"""A session's snapshot for resuming: the live context, replaced at each step."""
HISTORY_FILE = "history.jsonl"
"""A session's host conversation as the host saves it (the OpenAI Agents SDK's session
items): records appended one per line, never rewritten; what the host reads back at the start
of a run (`HistoryLog`)."""
LOGS = (CONTEXT_FILE, EVENTS_FILE, HISTORY_FILE)
"""A session's append-only logs: written a batch of lines at a time, never replaced, read by
lines (a bucket keeps each as segments, an import appends it line by line)."""
COMMIT_SUFFIX = ".commit"
"""Beside a committed log, `context.jsonl.commit` says how much of it belongs to
acknowledged batches; a reader ignores what lies past it."""
LEASE_FILE = "lease.json"
"""The lease of a session: `sessions/{id}/lease.json` (a file on disk, an object in a bucket)."""
RECORD_FILES = frozenset({EVENTS_FILE, STATE_FILE, LEASE_FILE, HISTORY_FILE})
"""The files of a session folder that record the session rather than hold what its agent
stored (commit records, named by `COMMIT_SUFFIX`, are records too: `is_record`)."""


# Both are hidden names, which readers and listings skip, and `initialize` clears what a
# killed writer or purge left of them.
TEMPORARY_PREFIX = ".tmp-"
"""A file is written under a temporary name first, then linked or renamed into place."""
PURGING_PREFIX = ".purge-"
"""A session folder being removed is renamed to a name with this prefix first."""

TOOL_RESULT_PREFIX = "tool_result-"
"""The start of a tool result file's name: `tool_result-{stem}.txt`."""
TOOL_RESULT_SUFFIX = ".txt"
"""The end of a tool result file's name."""

if TYPE_CHECKING:
    DATA_NAME: re.Pattern[str]
    """A data/ file's name: the sha256 of the decoded bytes, then the extension of its media
    type."""
    DATA_REFERENCE: re.Pattern[str]
    """Where a data/ file is named in text (a reference, a `<data url=.../>` line, a row);
    group 1 is the file name."""
    DATA_REFERENCE_BYTES: re.Pattern[bytes]
    """`DATA_REFERENCE`, for bytes."""

_DATA_NAME = r"[0-9a-f]{64}\.[A-Za-z0-9]{1,8}"
_DATA_REFERENCE = rf"\b{DATA_DIR}/({_DATA_NAME})(?![A-Za-z0-9])"
# What `DATA_NAME`, `DATA_REFERENCE` and `DATA_REFERENCE_BYTES` compile, on first use.
_PATTERNS: dict[str, str | bytes] = {
    "DATA_NAME": _DATA_NAME,
    "DATA_REFERENCE": _DATA_REFERENCE,
    "DATA_REFERENCE_BYTES": _DATA_REFERENCE.encode(),
}


def __getattr__(name: str) -> object:
    # The data/ name patterns, compiled once, when first read (see the module's docstring).
    source = _PATTERNS.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import re

    compiled = globals()[name] = re.compile(source)
    return compiled


MARK = "ctxoffload"
"""The metadata key of the mark ctxoffload puts on the messages it writes into a context, in
every row that holds one (context.jsonl, events.jsonl, state.json):
`metadata[MARK] = {"kind": ..., ...}`."""
SUMMARY_MARK = "summary"
"""The mark's kind on a compression's summary message."""
WINDOW_NOTE_MARK = "window_note"
"""The mark's kind on the note a sliding window leaves where it dropped messages."""
UNSTORED_MARK = "unstored"
"""The mark's kind on the stand-in for a message that could not be stored."""
PIN_MARK = "ctxoffload_pin"
"""The metadata key on a pinned message, `metadata[PIN_MARK] = {"by": "api" | "agent"}`: no
context manager moves, summarises, clears or cuts it (it travels into state.json and every
row that holds the message)."""


def mark_of(metadata: object) -> dict[str, object] | None:
    """ctxoffload's mark in a message's metadata (`{"kind": ..., ...}`), or None."""
    marker = metadata.get(MARK) if isinstance(metadata, dict) else None
    return marker if isinstance(marker, dict) else None


def mark_kind(metadata: object) -> object:
    """The kind of ctxoffload's mark in a message's metadata, or None when it has none."""
    marker = mark_of(metadata)
    return marker.get("kind") if marker is not None else None


def tool_result_name(stem: str, version: int = 1) -> str:
    """The file name of a tool result whose id gave `stem` (see `tool_file_stem`).

    A file is never overwritten: version 2, 3, ... (`tool_result-{stem}.2.txt`) holds other
    content that came under the same id.
    """
    if version == 1:
        return f"{TOOL_RESULT_PREFIX}{stem}{TOOL_RESULT_SUFFIX}"
    return f"{TOOL_RESULT_PREFIX}{stem}.{version}{TOOL_RESULT_SUFFIX}"


def is_tool_result_name(name: str) -> bool:
    """Whether a file name in a session folder is a tool result's."""
    return (
        name.startswith(TOOL_RESULT_PREFIX)
        and name.endswith(TOOL_RESULT_SUFFIX)
        and len(name) > len(TOOL_RESULT_PREFIX) + len(TOOL_RESULT_SUFFIX)
    )


def temporary_name(name: str) -> str:
    """A fresh name to write the file `name` under before it is put in place."""
    return f"{TEMPORARY_PREFIX}{name}-{os.urandom(16).hex()}"


def purging_name(name: str) -> str:
    """A fresh name for the session folder `name` to be renamed to while it is removed."""
    return f"{PURGING_PREFIX}{name}-{time.time_ns()}"


def is_committed_log(name: str) -> bool:
    """Whether a file of that name is a committed log, with a commit record beside it that
    says where its readable part ends (only context.jsonl is)."""
    return name == CONTEXT_FILE


def is_record(parts: tuple[str, ...] | list[str]) -> bool:
    """Whether the file or folder at the end of a path is one of the workspace's records, not
    content an agent stored: the one rule of every search that walks a folder or a glob.

    A record is a session folder's events.jsonl, state.json, lease.json or commit record
    (`sessions/{id}/context.jsonl.commit`), or, anywhere, a name being written
    (`TEMPORARY_PREFIX`) or a folder being removed (`PURGING_PREFIX`), whose content is
    half a file or a removed one. A search leaves a folder that is a record unwalked.

    Args:
        parts: the path's components, from the workdir (`("sessions", "s1",
            "events.jsonl")`) or from the file system's root: only the last three are read.
    """
    if not parts:
        return False
    if len(parts) >= 3 and parts[-3] == SESSIONS_DIR:
        return is_session_record(parts[-1])
    return parts[-1].startswith((TEMPORARY_PREFIX, PURGING_PREFIX))


def is_session_record(name: str) -> bool:
    """`is_record` for an entry of a session's folder (`sessions/{id}/NAME`), by its name
    alone: for a search that walks many sessions' folders."""
    return (
        name.startswith((TEMPORARY_PREFIX, PURGING_PREFIX))
        or name in RECORD_FILES
        or name.endswith(COMMIT_SUFFIX)
    )


def is_data_name(name: str) -> bool:
    """Whether a file name is a data/ file's (`{sha256}.{ext}`)."""
    import re

    return re.fullmatch(_DATA_NAME, name) is not None


def now_iso() -> str:
    """The current UTC time as the workspace writes it: ISO-8601 with milliseconds."""
    # Imported here: every `ctxoffload` command imports this module, few write a time, and
    # `datetime` costs ~1 ms of a start-up.
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")

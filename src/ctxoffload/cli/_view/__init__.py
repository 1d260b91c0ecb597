"""What a session looks like to a person, read once from the workspace files: its row in a
list of sessions (`ls`, the viewer's list), its events as a stream and the messages the model
was sent at one step (`show`, the viewer's timeline and step view), its figures (`stats`).

The commands and the viewer (`cli/ui/`) present these; none of them reads a session by
itself, so `ls` and the viewer cannot disagree about a session, nor `show` and the viewer
about a step. Every read goes through the disk core's reader (`Folder`, `JsonLines`); a file
that cannot be read is said once on stderr (`Warnings`) and what it would tell is None.

Its parts: a session's row (`_rows.py`), its events and steps (`_log.py`), its figures
(`_stats.py`), over what they share (`_reading.py`).
"""

from __future__ import annotations

from ._log import SessionLog, step_messages
from ._reading import Warnings
from ._rows import (
    SessionRow,
    indented,
    listing_order,
    newest_session,
    session_rows,
    shown_fields,
    stored_newest_session,
    stored_session_rows,
)
from ._stats import SessionStats, dedup_savings, session_stats

__all__ = [
    "SessionLog",
    "SessionRow",
    "SessionStats",
    "Warnings",
    "dedup_savings",
    "indented",
    "listing_order",
    "newest_session",
    "session_rows",
    "session_stats",
    "shown_fields",
    "step_messages",
    "stored_newest_session",
    "stored_session_rows",
]

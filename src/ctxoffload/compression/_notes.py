"""The notes ctxoffload puts in a context to say where earlier messages went.

A compression leaves a summary message; a `SlidingWindow` leaves a window note. Each is a
`user` message marked in its metadata, `metadata["ctxoffload"]["kind"]`, so that it is
never taken for a user request, never compressed, and can be read back (a resumed session
adopts the state a summary carries).
"""

from __future__ import annotations

from .._disk.layout import MARK, SUMMARY_MARK, WINDOW_NOTE_MARK, mark_kind
from ..messages import Msg

__all__ = [
    "NOTE_KINDS",
    "NOTE_MARK",
    "SUMMARY_NOTE",
    "WINDOW_NOTE",
    "is_context_note",
    "is_summary_message",
    "is_window_note",
]

# The mark is part of what a row holds on disk: its names live with the layout's.
NOTE_MARK = MARK
SUMMARY_NOTE = SUMMARY_MARK
WINDOW_NOTE = WINDOW_NOTE_MARK

NOTE_KINDS = (SUMMARY_NOTE, WINDOW_NOTE)
"""Kinds of the messages ctxoffload puts in a context to say where earlier ones went: a
summary, or a sliding window's note. They are never user requests and never compressed."""


def _kind(msg: Msg) -> object:
    metadata = msg.metadata
    return mark_kind(metadata) if metadata else None  # most messages have no metadata


def is_summary_message(msg: Msg) -> bool:
    """Whether `msg` is a summary message made by a `Compressor`."""
    return _kind(msg) == SUMMARY_NOTE


def is_window_note(msg: Msg) -> bool:
    """Whether `msg` is the note a `SlidingWindow` leaves where it dropped messages."""
    return _kind(msg) == WINDOW_NOTE


def is_context_note(msg: Msg) -> bool:
    """Whether `msg` is a summary or a window note: ctxoffload's own, never compressed."""
    return _kind(msg) in NOTE_KINDS

"""The time of a record in a transcript, in the form of `Msg.timestamp`: one rule for every
transcript reader (Claude Code's, Codex's)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["recorded_at"]


def recorded_at(value: Any) -> str | None:
    """A transcript's time of a record (ISO 8601, with `Z` or an offset; UTC when it has
    neither) as `Msg.timestamp` holds one (UTC, milliseconds); None when it is no such time."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds")

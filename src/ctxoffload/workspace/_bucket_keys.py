"""Where a workspace's objects are in a bucket: a session's under `sessions/<id>/`, its logs
kept as segments, the marks of a session an import is writing, and which keys belong to the
layout at all (what a copy or a transfer takes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._disk.ids import is_session_id, validate_session_id
from .._disk.layout import DATA_DIR, LOGS, SESSIONS_DIR, is_data_name
from ._store_client import ObjectInfo, StoreClient

__all__ = [
    "IMPORTING",
    "SEGMENTED_LOGS",
    "SESSION_KEY",
    "data_objects",
    "import_mark",
    "is_workspace_key",
    "marked_sessions",
    "session_prefix",
]

SEGMENTED_LOGS = LOGS
"""The logs kept as segments (see _segments.py); state.json is one object, replaced whole."""

SESSION_KEY = re.compile(rf"{re.escape(SESSIONS_DIR)}/([^/]+)/([^/]+)")
"""A file of a session: `sessions/<id>/<name>` (group 1 the id, group 2 the name)."""

IMPORTING = ".importing-"
"""The start of the name of the object `sessions/.importing-<id>`, which marks a session an
import is writing (a bucket has no transaction): every listing of the sessions leaves it
out until the import ends, so a session arrives whole or not at all. Beside the sessions'
folders, so the one listing that finds them finds the marks too."""


def session_prefix(session_id: str) -> str:
    """The key prefix of a session's objects, `sessions/<id>` (the id checked first)."""
    return f"{SESSIONS_DIR}/{validate_session_id(session_id)}"


def import_mark(session_id: str) -> str:
    """The key of the object marking a session an import is writing (`IMPORTING`)."""
    return f"{SESSIONS_DIR}/{IMPORTING}{validate_session_id(session_id)}"


def marked_sessions(names: Sequence[str]) -> set[str]:
    """The sessions the objects `names` (directly under sessions/) mark as being imported."""
    return {n[len(IMPORTING) :] for n in names if n.startswith(IMPORTING)}


async def data_objects(client: StoreClient) -> list[ObjectInfo]:
    """The objects of data/ named as data/ files are (`<sha256>.<ext>`)."""
    return [
        i for i in await client.list_objects(DATA_DIR) if is_data_name(i.key.rsplit("/", 1)[-1])
    ]


def is_workspace_key(key: str) -> bool:
    """Whether `key` names an object of the layout: a data/ file, or a session's file."""
    folder, _, name = key.partition("/")
    if folder == DATA_DIR:
        return is_data_name(name)
    session = SESSION_KEY.fullmatch(key)
    return (
        session is not None
        and is_session_id(session.group(1))
        and not session.group(2).startswith(".")
    )

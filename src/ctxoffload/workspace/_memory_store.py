"""The memory store: a workspace's files held in this process, each under its reference
(`memory://{name}/sessions/{id}/{file}`), behind one lock."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from .._disk.commit import parse_log
from .._disk.ids import validate_session_id
from .._disk.layout import SESSIONS_DIR

if TYPE_CHECKING:
    from ._store import SessionFiles

__all__ = ["MemoryStore"]

logger = logging.getLogger("ctxoffload")


class MemoryStore:
    """Files by reference below `root` (`memory://{name}`), and the sessions that have any.

    Attributes:
        files: reference -> bytes; a log is a bytearray that appends grow in place.
        sessions: the ids of the sessions that have files.
        lock: held for every look at or change of `files` and `sessions`.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, bytes | bytearray] = {}
        self.sessions: set[str] = set()
        self.lock = threading.Lock()

    def ref(self, session_id: str, name: str) -> str:
        """The reference of the session's file `name` (the id checked first)."""
        return f"{self.root}/{SESSIONS_DIR}/{validate_session_id(session_id)}/{name}"

    def read(self, ref: str) -> bytes | None:
        """The bytes of `ref` as they are now, or None (call with the lock held): a log is
        copied, so later appends never change what a reader holds."""
        data = self.files.get(ref)
        return bytes(data) if isinstance(data, bytearray) else data

    def lines(self, ref: str) -> list[Any]:
        """The JSON values of a log, by the reader's rule for torn and corrupt lines."""
        with self.lock:
            raw = self.read(ref) or b""
        return parse_log(raw, ref, warn=logger.warning)

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` (`SessionFiles.put`); never fails."""
        ref = self.ref(session_id, name)
        with self.lock:
            self.files[ref] = data
            self.sessions.add(session_id)
        return ref

    async def list_names(self, session_id: str) -> list[str]:
        """The names of the session's files (`SessionFiles.list_names`)."""
        prefix = self.ref(session_id, "")
        with self.lock:
            return [ref[len(prefix) :] for ref in self.files if ref.startswith(prefix)]

    def reference(self, session_id: str, name: str) -> str:
        """The reference of the session's file `name` (`ref`)."""
        return self.ref(session_id, name)

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """The JSON values of the session's file `name` (`SessionFiles.read_log`; an append
        here is whole or absent, so `commit` changes nothing)."""
        return self.lines(self.ref(session_id, name))


if TYPE_CHECKING:  # mypy checks that MemoryStore is what it is declared to be
    _files: type[SessionFiles] = MemoryStore

"""The statements on a session's rows that the SQL store's writes, reads and gc share: its
lock, its `sessions` row, a log's next line and its lines, the message keys, a file's body,
the deletion of sessions, and the rule of a live lease row. Each runs inside the caller's
transaction (`Connection`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._lease import holder_ended, lease_record, orphaned_here

if TYPE_CHECKING:
    from ._sql_schema import Connection


__all__ = [
    "delete_sessions",
    "file_body",
    "insert_keys",
    "insert_lines",
    "live_holder",
    "lock_session",
    "log_body",
    "next_line",
    "session_bodies",
    "split_lines",
    "touch_session",
]


def lock_session(connection: Connection, session_id: str) -> None:
    """Take the session's lock for the rest of the transaction (`Connection.lock`): what a
    write to a session reads (the next line number, a lease) no other writer changes until
    it commits."""
    connection.lock(f"session {session_id}")


def touch_session(connection: Connection, session_id: str) -> None:
    """Mark the session as there and written now."""
    now = connection.now
    connection.execute(
        f"INSERT INTO sessions (id, created, updated) VALUES (?, {now}, {now}) "
        "ON CONFLICT (id) DO UPDATE SET updated = excluded.updated",
        (session_id,),
    )
    connection.changed(session_id)


def next_line(connection: Connection, session_id: str, log: str) -> int:
    row = connection.execute(
        "SELECT max(line) FROM lines WHERE session = ? AND log = ?", (session_id, log)
    ).fetchone()
    return (row[0] or 0) + 1


def insert_lines(
    connection: Connection, session_id: str, log: str, first: int, lines: Sequence[bytes]
) -> None:
    connection.executemany(
        "INSERT INTO lines (session, log, line, body) VALUES (?, ?, ?, ?)",
        [(session_id, log, n, line) for n, line in enumerate(lines, first)],
    )


def insert_keys(
    connection: Connection, session_id: str, first: int, keys: Sequence[str | None]
) -> None:
    """Index the message keys of context lines `first`, `first + 1`, ... (None: a line
    without one); a key the index holds already keeps its line."""
    connection.executemany(
        "INSERT INTO message_keys (session, key, line) VALUES (?, ?, ?) "
        "ON CONFLICT (session, key) DO NOTHING",
        [(session_id, key, n) for n, key in enumerate(keys, first) if key is not None],
    )


def log_body(connection: Connection, session_id: str, log: str) -> bytes | None:
    rows = connection.execute(
        "SELECT body FROM lines WHERE session = ? AND log = ? ORDER BY line", (session_id, log)
    ).fetchall()
    return b"".join(row[0] for row in rows) if rows else None


def file_body(connection: Connection, session_id: str, name: str) -> bytes | None:
    """A session's file `name`: a log's lines joined, else the file row; None for neither."""
    body = log_body(connection, session_id, name)
    if body is not None:
        return body
    row = connection.execute(
        "SELECT body FROM files WHERE session = ? AND name = ?", (session_id, name)
    ).fetchone()
    return None if row is None else bytes(row[0])


def split_lines(lines: Sequence[bytes]) -> list[bytes]:
    """The lines of a batch as the file holds them: one row a line, so line numbers are the
    file's even for an item holding more than one."""
    return b"".join(lines).splitlines(keepends=True)


def live_holder(raw: object, expires: float, now: float) -> dict[str, Any] | None:
    """The holder of a lease row that is live (`SqlStore.take_lease`'s rule), else None."""
    holder = lease_record(raw)
    if now > expires or holder_ended(holder) or orphaned_here(holder):
        return None
    return holder


def delete_sessions(connection: Connection, session_ids: Sequence[str]) -> int:
    """Delete the rows of the sessions (not their leases); how many rows went."""
    removed = 0
    for session_id in sorted(session_ids):  # locks taken in one order: no deadlock
        lock_session(connection, session_id)
        for table, column in (
            ("files", "session"),
            ("lines", "session"),
            ("message_keys", "session"),
            ("sessions", "id"),
        ):
            removed += connection.execute(
                f"DELETE FROM {table} WHERE {column} = ?", (session_id,)
            ).rowcount
    return removed


def session_bodies(connection: Connection, session_id: str) -> Iterable[bytes]:
    """Every file of a session, one body each (a log's lines joined)."""
    for (body,) in connection.execute("SELECT body FROM files WHERE session = ?", (session_id,)):
        yield bytes(body)
    logs = connection.execute(
        "SELECT DISTINCT log FROM lines WHERE session = ?", (session_id,)
    ).fetchall()
    for (log,) in logs:
        yield log_body(connection, session_id, log) or b""

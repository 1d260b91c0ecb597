"""The SQL store: a workspace's files as rows of a SQL database (`SessionFiles`), and the
lease as a row whose expiry is judged on the database's clock. One store for SQLite
(`_sqlite.SqliteDatabase`) and PostgreSQL (`_postgres.PostgresDatabase`), over the seam and
the tables of `_sql_schema.py`; the statements it shares with gc (`_sql_collector.py`) are in
`_sql_rows.py`, the data/ payloads of an offload in `_sql_payloads.py`.

Every write is one transaction, and every write to a session first takes that session's
lock (`Connection.lock`; on SQLite the whole database's, `BEGIN IMMEDIATE`, taken before
anything is read): a batch is whole or absent whatever kills its writer, and a log's next
line number is read from the rows already there under that lock, so writers in other
processes appending to one session get consecutive, global line numbers. Blocking calls run
in a worker thread, one hop per operation, on one connection guarded by the store's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._disk.batch import Span, new_rows
from .._disk.commit import parse_log, take_lines
from .._disk.ids import is_session_id, validate_session_id
from .._disk.layout import CONTEXT_FILE, DATA_DIR, LEASE_FILE, SESSIONS_DIR
from .._disk.paths import write_new_file
from ..exceptions import InvalidReference
from ._bucket_keys import is_workspace_key
from ._datastore import media_type_of
from ._fence import fence_refused
from ._lease import busy_error, holder_ended, lease_record, orphaned_here
from ._sql_payloads import PayloadPlace, SqlPayloads
from ._sql_rows import (
    delete_sessions,
    file_body,
    insert_keys,
    insert_lines,
    lock_session,
    log_body,
    next_line,
    split_lines,
    touch_session,
)

if TYPE_CHECKING:
    from ._fence import StateFence
    from ._sql_schema import Connection, Database
    from ._store import ImportedSession, ImportTarget, Payloads, SessionFiles


__all__ = [
    "SessionFacts",
    "SqlStore",
]

_T = TypeVar("_T")

logger = logging.getLogger("ctxoffload")


# Keys looked up per statement: SQLite's default limit of bound parameters is 32766 (999
# before 3.32), PostgreSQL's 65535, and a batch of messages may be larger.
_CHUNK = 500


class SqlStore:
    """A session's files as rows (`SessionFiles`): logs a row a line, other files whole, all
    under references `{url}/sessions/<id>/<name>` and `{url}/data/<name>`.

    Args:
        database: the database.
        url: the workspace's URL, the prefix of every reference.
    """

    def __init__(self, database: Database, url: str, place: PayloadPlace | None = None) -> None:
        self.database = database
        self.url = url
        self.place = place

    def place_at(self, location: str, name: str) -> PayloadPlace:
        """The place a `data` row names, when it is the one this workspace was configured
        with: a row never sends a read (or a gc's delete) anywhere else, so a row edited by
        hand cannot reach a folder or bucket the caller did not name.

        Raises:
            InvalidReference: the row names another place (saying which, and how to open it).
        """
        if self.place is None or self.place.location != location:
            raise InvalidReference(
                f"data/{name} is kept outside the database, at {location}/{DATA_DIR}/{name}, "
                f"and this workspace keeps its payloads "
                f"{'in the database' if self.place is None else 'at ' + self.place.location}: "
                f"open it with SqlWorkspace({self.url!r}, payloads={location!r}) to read it "
                f"(the ctxoffload commands: CTXOFFLOAD_PAYLOADS={location})"
            )
        return self.place

    # -- references ---------------------------------------------------------------------------

    def reference(self, session_id: str, name: str) -> str:
        """The reference of the session's file `name` (`{url}/sessions/<id>/<name>`)."""
        return f"{self.url}/{SESSIONS_DIR}/{validate_session_id(session_id)}/{name}"

    def key_reference(self, key: str) -> str:
        """The reference of a key below the workspace (`data/<name>`)."""
        return f"{self.url}/{key}"

    def reference_key(self, reference: str) -> list[str]:
        """The parts of a reference below the workspace (`SessionFiles.reference_key`): a
        reference as returned, or a key relative to the workspace (`sessions/<id>/<name>`).

        Raises:
            InvalidReference: it names nothing inside this workspace.
        """
        key = reference
        if reference.startswith(self.url + "/"):
            key = reference[len(self.url) + 1 :]
        elif "://" in reference:
            raise InvalidReference(
                f"reference {reference!r} is outside the workspace {self.url!r}: pass a "
                "reference this workspace returned"
            )
        if not is_workspace_key(key):
            raise InvalidReference(
                f"reference {reference!r} names nothing of the workspace {self.url!r}: pass "
                "a reference this workspace returned"
            )
        return key.split("/")

    # -- writing ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def payloads(self) -> AsyncIterator[Payloads]:
        """The payloads of one offload (`SessionFiles.payloads`): rows, or stored in the
        place configured through its store's own `Payloads`, the rows naming it."""
        if self.place is None:
            yield SqlPayloads(self.database, self.key_reference)
            return
        async with self.place.payloads() as outside:
            yield SqlPayloads(self.database, self.key_reference, (outside, self.place.location))

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` in one transaction (`SessionFiles.put`)."""
        ref = self.reference(session_id, name)

        def write(connection: Connection) -> None:
            lock_session(connection, session_id)
            connection.execute(
                "INSERT INTO files (session, name, body, updated) "
                f"VALUES (?, ?, ?, {connection.now}) "
                "ON CONFLICT (session, name) DO UPDATE SET body = excluded.body, "
                "updated = excluded.updated",
                (session_id, name, data),
            )
            touch_session(connection, session_id)

        await self.database.write(write)
        return ref

    async def put_fenced(
        self, session_id: str, name: str, data: bytes, fence: StateFence | None
    ) -> str:
        """Replace the session's file `name` in one transaction, with a `fence` only if the
        session's lease row still holds the fence's token (`SessionFiles.put_fenced`).

        The token is checked inside the write itself (`INSERT ... SELECT ... WHERE EXISTS`),
        under the session's lock that taking a lease takes too: no statement more than an
        unfenced write, and no taker can come between the check and the write. A lease past
        its expiry that nobody took over is still this holder's (as its renewal is).

        Raises:
            SessionBusyError: the lease row holds another token (or none); nothing was
                written.
        """
        if fence is None:
            return await self.put(session_id, name, data)
        ref = self.reference(session_id, name)

        def write(connection: Connection) -> dict[str, Any] | None:
            lock_session(connection, session_id)
            written = connection.execute(
                "INSERT INTO files (session, name, body, updated) "
                f"SELECT ?, ?, ?, {connection.now} WHERE EXISTS (SELECT 1 FROM leases "
                "WHERE session = ? AND token = ?) "
                "ON CONFLICT (session, name) DO UPDATE SET body = excluded.body, "
                "updated = excluded.updated",
                (session_id, name, data, session_id, fence.token),
            ).rowcount
            if written:
                touch_session(connection, session_id)
                return None
            row = connection.execute(
                "SELECT holder FROM leases WHERE session = ?", (session_id,)
            ).fetchone()
            return {} if row is None else lease_record(row[0])

        holder = await self.database.write(write)
        if holder is not None:
            raise fence_refused(session_id, self.reference(session_id, LEASE_FILE), holder)
        return ref

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        """Create the session's file `name` unless a row of that name is there: of two
        writers in any processes, one wins (`SessionFiles.put_new`)."""
        ref = self.reference(session_id, name)

        def write(connection: Connection) -> bool:
            lock_session(connection, session_id)
            created = connection.execute(
                "INSERT INTO files (session, name, body, updated) "
                f"VALUES (?, ?, ?, {connection.now}) "
                "ON CONFLICT (session, name) DO NOTHING",
                (session_id, name, data),
            ).rowcount
            if created:
                touch_session(connection, session_id)
            return bool(created)

        return ref if await self.database.write(write) else None

    async def append(
        self, session_id: str, name: str, lines: Sequence[bytes], *, sync: bool = True
    ) -> Span:
        """Append `lines` to the log `name` in one transaction, numbered after the rows
        there under the write lock (`SessionFiles.append`)."""
        validate_session_id(session_id)
        pieces = split_lines(lines)

        def write(connection: Connection) -> Span:
            lock_session(connection, session_id)
            first = next_line(connection, session_id, name)
            insert_lines(connection, session_id, name, first, pieces)
            touch_session(connection, session_id)
            return Span(first, first + len(pieces) - 1)

        return await self.database.write(write)

    async def append_messages(
        self, session_id: str, lines: Sequence[bytes], keys: Sequence[str | None]
    ) -> Span:
        """Append the message lines whose key the context log lacks, looked up and written in
        one transaction: no other writer, in any process, writes one of them between the
        two (`SessionFiles.append_messages`)."""
        validate_session_id(session_id)
        wanted = sorted({key for key in keys if key is not None})

        def write(connection: Connection) -> Span:
            lock_session(connection, session_id)
            index: dict[str, int] = {}
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                index.update(
                    connection.execute(
                        "SELECT key, line FROM message_keys "
                        f"WHERE session = ? AND key IN ({marks})",
                        (session_id, *chunk),
                    ).fetchall()
                )
            first = next_line(connection, session_id, CONTEXT_FILE)
            rows = new_rows(lines, keys, (index,), first)
            if rows.lines:
                insert_lines(connection, session_id, CONTEXT_FILE, first, rows.lines)
                # A key given twice in one batch keeps its first line, as `new_rows` counts.
                insert_keys(connection, session_id, first, rows.ids)
            touch_session(connection, session_id)
            return rows.span

        return await self.database.write(write)

    async def delete_session(self, session_id: str) -> bool:
        """Delete every row of the session in one transaction: a reader sees all of it or
        none (`SessionFiles.delete_session`). Its lease, if held, stays held."""
        validate_session_id(session_id)

        def write(connection: Connection) -> bool:
            return delete_sessions(connection, [session_id]) > 0

        return await self.database.write(write)

    # -- imports (`ImportTarget`) -------------------------------------------------------------

    async def unfinished_imports(self) -> set[str]:
        """None: an imported session is written in one transaction (`write_imported`)."""
        return set()

    async def begin_import(self, session_id: str) -> None:
        """Nothing to mark: readers see an imported session whole or not at all."""

    async def end_import(self, session_id: str) -> None:
        """Nothing to unmark."""

    async def write_imported(self, session: ImportedSession) -> bool:
        """Write an imported session in one transaction under its lock: its files, every
        line of its logs (each a row, numbered after the rows there), its message keys and
        its row in `sessions`. A kill at any point leaves all of it or none
        (`ImportTarget.write_imported`).

        Returns:
            False, with nothing written, when the session is not as `session` says any more.
        """
        sid = validate_session_id(session.session_id)

        def write(connection: Connection) -> bool:
            lock_session(connection, sid)
            there = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
            if session.fresh and there is not None:
                return False
            for log in {*session.logs, *session.after}:
                if next_line(connection, sid, log) != session.after.get(log, 0) + 1:
                    return False
            for name in session.files:
                if file_body(connection, sid, name) is not None:
                    return False
            connection.executemany(
                "INSERT INTO files (session, name, body, updated) "
                f"VALUES (?, ?, ?, {connection.now})",
                [(sid, name, body) for name, body in sorted(session.files.items())],
            )
            for log, lines in session.logs.items():
                first = session.after.get(log, 0) + 1
                insert_lines(connection, sid, log, first, lines)
                if log == CONTEXT_FILE:
                    insert_keys(connection, sid, first, session.keys)
            touch_session(connection, sid)
            return True

        return await self.database.write(write)

    async def wait_for_change(self, timeout: float) -> bool:
        """Return once a session may have been written, or after `timeout` seconds (see
        `Database.wait_for_change`): what `ctxoffload watch` waits on between looks."""
        return await self.database.wait_for_change(timeout)

    async def run(self, work: Callable[[], _T]) -> _T:
        """In a worker thread: serialising is CPU work (`SessionFiles.run`)."""
        return await asyncio.to_thread(work)

    def event_failure_is_fatal(self, exc: OSError) -> bool:
        """A database that refuses an event costs the event only."""
        return False

    # -- reading ------------------------------------------------------------------------------

    async def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of the session's file `name`, or None (`SessionFiles.read`)."""
        validate_session_id(session_id)
        return await self.database.read(lambda c: file_body(c, session_id, name))

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """The JSON values of the session's file `name`, by the reader's rule for torn and
        corrupt lines (`SessionFiles.read_log`; a batch is one transaction, whole or absent,
        so `commit` changes nothing)."""
        ref = self.reference(session_id, name)
        raw = await self.database.read(lambda c: file_body(c, session_id, name))
        return parse_log(raw or b"", ref, warn=logger.warning)

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions that have rows, sorted."""
        rows = await self.database.read(
            lambda c: c.execute("SELECT id FROM sessions ORDER BY id").fetchall()
        )
        return [row[0] for row in rows if isinstance(row[0], str) and is_session_id(row[0])]

    async def list_names(self, session_id: str) -> list[str]:
        """The names of the session's files and logs (`SessionFiles.list_names`)."""
        validate_session_id(session_id)
        rows = await self.database.read(
            lambda c: c.execute(
                "SELECT name FROM files WHERE session = ? "
                "UNION SELECT DISTINCT log FROM lines WHERE session = ? ORDER BY 1",
                (session_id, session_id),
            ).fetchall()
        )
        return [row[0] for row in rows]

    def _located(self, reference: str) -> tuple[str, str]:
        """(session id, name) of a reference, or ("", data name) for a data/ file."""
        parts = self.reference_key(reference)
        return ("", parts[1]) if parts[0] == DATA_DIR else (parts[1], parts[2])

    def _nothing_at(self, reference: str) -> InvalidReference:
        return InvalidReference(
            f"reference {reference!r} names nothing held in {self.url!r}: pass a reference "
            "this workspace returned, of a session not purged since"
        )

    async def read_reference(self, reference: str) -> bytes:
        """The bytes behind a reference; a log, all its lines (`SessionFiles.read_reference`).

        Raises:
            InvalidReference: unknown, or outside the workspace.
        """
        session_id, name = self._located(reference)

        def read(connection: Connection) -> bytes | str | None:
            if not session_id:
                row = connection.execute(
                    "SELECT body, location FROM data WHERE name = ?", (name,)
                ).fetchone()
                if row is None:
                    return None
                return bytes(row[0]) if row[0] is not None else str(row[1])
            return file_body(connection, session_id, name)

        data = await self.database.read(read)
        if data is None:
            raise self._nothing_at(reference)
        if isinstance(data, str):  # kept outside: the row names where
            return await self.place_at(data, name).read(name)
        return data

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        """Lines `first` to `last` of what a reference names: of a log, those rows alone (an
        index range), so reading back what an append just wrote costs that append, however
        long the log (`SessionFiles.read_lines`)."""
        session_id, name = self._located(reference)
        if session_id:

            def read(connection: Connection) -> bytes | None:
                rows = connection.execute(
                    "SELECT body FROM lines WHERE session = ? AND log = ? AND line BETWEEN ? AND ? "
                    "ORDER BY line",
                    (session_id, name, first, last),
                ).fetchall()
                if rows:
                    return b"".join(row[0] for row in rows)
                # Past the end of a log: nothing, found by the index (a watcher polls here).
                past_end = connection.execute(
                    "SELECT 1 FROM lines WHERE session = ? AND log = ? LIMIT 1", (session_id, name)
                ).fetchone()
                return b"" if past_end else None

            found = await self.database.read(read)
            if found is not None:
                return found
        data = await self.read_reference(reference)
        return take_lines((data,), first - 1, last - first + 1)

    async def media_type(self, reference: str) -> str:
        """The media type a data/ payload was stored with, else the name's extension's."""
        session_id, name = self._located(reference)
        if session_id:
            return media_type_of(name)
        row = await self.database.read(
            lambda c: c.execute("SELECT media_type FROM data WHERE name = ?", (name,)).fetchone()
        )
        if row is None:
            raise self._nothing_at(reference)
        return str(row[0]) if row[0] else media_type_of(name)

    # -- the lease ----------------------------------------------------------------------------

    async def take_lease(
        self, session_id: str, holder: dict[str, Any], ttl: float, where: str
    ) -> tuple[dict[str, Any], bool]:
        """Write `holder` as the session's lease, expiring `ttl` seconds from now on the
        database's clock, unless a live holder has it: (the record replaced, `{}` for none;
        whether it expired rather than its holder's process having ended).

        Under the write lock, so of two takers in any processes one wins. A lease is live
        until its expiry on the database's clock, unless the kernel shows its holder's
        process (on this machine) has ended, or it is an object of this process dropped
        unreleased: such a lease is free at once.

        Raises:
            SessionBusyError: a live holder has it.
        """

        def write(connection: Connection) -> tuple[dict[str, Any], bool, float | None]:
            lock_session(connection, session_id)
            row = connection.execute(
                f"SELECT holder, expires, {connection.now} FROM leases WHERE session = ?",
                (session_id,),
            ).fetchone()
            previous: dict[str, Any] = {}
            expired = False
            if row is not None:
                previous = lease_record(row[0])
                expired = row[2] > row[1]
                if not expired and not holder_ended(previous) and not orphaned_here(previous):
                    return previous, False, float(row[1])
            connection.execute(
                f"INSERT INTO leases (session, holder, token, expires) "
                f"VALUES (?, ?, ?, {connection.now} + ?) ON CONFLICT (session) DO UPDATE SET "
                "holder = excluded.holder, token = excluded.token, expires = excluded.expires",
                (session_id, json.dumps(holder), holder["token"], ttl),
            )
            return previous, expired, None

        previous, expired, busy_until = await self.database.write(write)
        if busy_until is not None:
            raise busy_error(session_id, previous, where, expires=busy_until)
        return previous, expired

    async def renew_lease(self, session_id: str, token: str, ttl: float) -> dict[str, Any] | None:
        """Push the lease's expiry `ttl` seconds past now, if this holder still has it: None
        then, else the lease record the session holds now (`{}`: none), in the same
        transaction."""

        def write(connection: Connection) -> dict[str, Any] | None:
            renewed = connection.execute(
                f"UPDATE leases SET expires = {connection.now} + ? WHERE session = ? AND token = ?",
                (ttl, session_id, token),
            ).rowcount
            if renewed == 1:
                return None
            row = connection.execute(
                "SELECT holder FROM leases WHERE session = ?", (session_id,)
            ).fetchone()
            return {} if row is None else lease_record(row[0])

        return await self.database.write(write)

    async def release_lease(self, session_id: str, token: str) -> None:
        """Give the lease up, if this holder still has it."""
        await self.database.write(
            lambda c: c.execute(
                "DELETE FROM leases WHERE session = ? AND token = ?", (session_id, token)
            )
        )

    # -- what a list of sessions shows ----------------------------------------------------------

    async def session_facts(
        self, logs: Sequence[str], small: Sequence[str], reduce: Callable[[bytes], _T]
    ) -> list[SessionFacts[_T]]:
        """What a list of sessions shows of each session, read on one snapshot without a copy
        in the on-disk layout (`download`): the size of each of its files and logs (a log's
        rows joined, as `download` writes it), its latest write, the newlines of each log,
        the bodies of the files named in `small`, and what `reduce` makes of each log named
        in `logs` (called with one session's log at a time: memory holds one log, never all).

        A session, and a name, are as `download` would copy them: a name that is no name of
        the layout is left out, and a session with no file left is not listed.
        """

        def read(connection: Connection) -> list[SessionFacts[_T]]:
            found: dict[str, SessionFacts[_T]] = {}
            updated = dict(connection.execute("SELECT id, updated FROM sessions").fetchall())

            def facts(session_id: object, name: object) -> SessionFacts[_T] | None:
                if not isinstance(session_id, str) or not is_session_id(session_id):
                    return None
                if not is_workspace_key(f"{SESSIONS_DIR}/{session_id}/{name}"):
                    return None
                if session_id not in found:
                    when = updated.get(session_id)
                    found[session_id] = SessionFacts(
                        session_id, float(when) if when is not None else 0.0
                    )
                return found[session_id]

            for session_id, name, size in connection.execute(
                "SELECT session, name, length(body) FROM files"
            ):
                held = facts(session_id, name)
                if held is not None:
                    held.sizes[name] = int(size)
            for session_id, log, size in connection.execute(
                "SELECT session, log, sum(length(body)) FROM lines GROUP BY session, log"
            ):
                held = facts(session_id, log)
                if held is not None:
                    held.sizes[log] = int(size)
            # A row is one line as the file holds it (`split_lines`): at most one newline,
            # its last byte.
            for session_id, log, count in connection.execute(
                "SELECT session, log, count(*) FROM lines "
                "WHERE substr(body, length(body), 1) = ? GROUP BY session, log",
                (b"\n",),
            ):
                held = found.get(session_id)
                if held is not None and log in held.sizes:
                    held.newlines[log] = int(count)
            for name in small:
                for session_id, body in connection.execute(
                    "SELECT session, body FROM files WHERE name = ?", (name,)
                ):
                    held = found.get(session_id)
                    if held is not None and name in held.sizes:
                        held.bodies[name] = bytes(body)
            for held in found.values():
                for log in logs:
                    if log in held.sizes:
                        held.reduced[log] = reduce(log_body(connection, held.session, log) or b"")
            return [found[session_id] for session_id in sorted(found)]

        return await self.database.read(read)

    # -- a copy in the on-disk layout ---------------------------------------------------------

    async def download(
        self, root: str, sessions: list[str], *, data: bool, check: bool
    ) -> list[str]:
        """Write `sessions` (and, with `data`, data/) into the folder `root` in the on-disk
        layout, each log's rows as one file, line for line; the problems found with `check`
        (a log whose line numbers are not 1 to its count)."""
        for session_id in sessions:
            validate_session_id(session_id)

        def read(
            connection: Connection,
        ) -> tuple[list[tuple[str, bytes, float]], list[str]]:
            found: list[tuple[str, bytes, float]] = []
            problems: list[str] = []
            for session_id in sessions:
                row = connection.execute(
                    "SELECT updated FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                updated = float(row[0]) if row is not None else 0.0
                folder = f"{SESSIONS_DIR}/{session_id}"
                for name, body in connection.execute(
                    "SELECT name, body FROM files WHERE session = ?", (session_id,)
                ):
                    found.append((f"{folder}/{name}", bytes(body), updated))
                logs = connection.execute(
                    "SELECT log, count(*), max(line) FROM lines WHERE session = ? GROUP BY log",
                    (session_id,),
                ).fetchall()
                for log, count, top in logs:
                    body = log_body(connection, session_id, log) or b""
                    found.append((f"{folder}/{log}", body, updated))
                    if check and count != top:
                        problems.append(
                            f"{self.reference(session_id, log)}: {top - count} of its lines "
                            f"1 to {top} are missing"
                        )
            if data:
                for name, body, location, stored in connection.execute(
                    "SELECT name, body, location, stored FROM data"
                ):
                    if body is None:
                        outside.append((name, str(location), float(stored)))
                    else:
                        found.append((f"{DATA_DIR}/{name}", bytes(body), float(stored)))
            return found, problems

        outside: list[tuple[str, str, float]] = []
        found, problems = await self.database.read(read)
        for name, location, stored in outside:
            try:
                body = await self.place_at(location, name).read(name)
            except InvalidReference as exc:
                problems.append(str(exc))
                continue
            found.append((f"{DATA_DIR}/{name}", body, stored))
        await asyncio.to_thread(_write_copies, root, found)
        return problems


@dataclasses.dataclass
class SessionFacts(Generic[_T]):
    """What a list of sessions shows of one session (`SqlStore.session_facts`)."""

    session: str
    updated: float
    """Its latest write (seconds since the epoch, the database's clock): every file's time in
    a copy (`download`)."""
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    """Each file and log by name: its size in bytes in the on-disk layout."""
    newlines: dict[str, int] = dataclasses.field(default_factory=dict)
    """Each log by name: its newlines."""
    bodies: dict[str, bytes] = dataclasses.field(default_factory=dict)
    """The files asked for whole, by name."""
    reduced: dict[str, _T] = dataclasses.field(default_factory=dict)
    """What the caller's `reduce` made of each log asked for, by name."""


def _write_copies(root: str, found: Iterable[tuple[str, bytes, float]]) -> None:
    """Write each (key, body, time) below `root` as a new file (`write_new_file`): a key
    that is no name of the layout (a row put there by hand: `../x`, a hidden name) is
    skipped, and no link planted in `root` is followed."""
    resolved = os.path.realpath(root)
    for key, body, modified in found:
        if not is_workspace_key(key):
            logger.warning("skipped %r: not a name of the workspace layout", key)
            continue
        write_new_file(resolved, key.split("/"), body, root, modified=modified)


if TYPE_CHECKING:  # mypy checks that the SQL store is what it is declared
    _files: type[SessionFiles] = SqlStore
    _imports: type[ImportTarget] = SqlStore

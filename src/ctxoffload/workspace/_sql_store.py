"""The SQL store: a workspace's files as rows of a SQL database (`SessionFiles`), the steps
of gc it takes its own way (`SessionCollector`), and the lease as a row whose expiry is
judged on the database's clock. One store for SQLite (`SqliteDatabase`, here) and PostgreSQL
(`_postgres.PostgresDatabase`): what differs between them is the seam `Connection` (the
clock, the column types, the lock of one session) and the database object (connecting, a
write transaction, a read snapshot); the SQL is the one both speak (`?` placeholders, which
the PostgreSQL connection translates; `ON CONFLICT` upserts).

Every write is one transaction, and every write to a session first takes that session's
lock (`Connection.lock`; on SQLite the whole database's, `BEGIN IMMEDIATE`, taken before
anything is read): a batch is whole or absent whatever kills its writer, and a log's next
line number is read from the rows already there under that lock, so writers in other
processes appending to one session get consecutive, global line numbers. Blocking calls run
in a worker thread, one hop per operation, on one connection guarded by the store's lock.

The tables (schema version 2; `MIGRATIONS` takes an older database forward):

```
schema_version(version)                      one row: the version the tables are at
sessions(id, created, updated)               updated: the session's latest write
files(session, name, body, updated)          tool_result-*.txt, state.json: replaced whole
lines(session, log, line, body)              context.jsonl, events.jsonl: a row a line,
                                             numbered from 1 per log, never renumbered
message_keys(session, key, line)             where each message of the context log is
data(name, sha256, media_type, body,         data/<sha256>.<ext>, stored once: the body,
     location, size, stored)                 or NULL and the folder or bucket holding it
leases(session, holder, token, expires)      one live writer per session
```

Times are seconds since the epoch on the database's clock (`Connection.now`: SQLite's
`julianday('now')`, the clock of the one machine the file lives on; PostgreSQL's
`clock_timestamp()`, the server's), never a client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .._disk.batch import Span, new_rows
from .._disk.commit import parse_log, take_lines
from .._disk.ids import is_session_id, validate_session_id
from .._disk.layout import CONTEXT_FILE, DATA_DIR, SESSIONS_DIR
from .._disk.paths import write_new_file
from ..exceptions import ConfigError, InvalidReference, OffloadError
from ._bucket_store import is_workspace_key
from ._datastore import data_name, media_type_of
from ._gc import DATA_GRACE_SECONDS, GcReport, SessionUsage, UnitOutcome, data_names_in, names_in
from ._lease import busy_error, describe_holder, holder_ended, lease_record, orphaned_here
from ._sql_payloads import PayloadPlace

if TYPE_CHECKING:
    from .._disk.payloads import StoreData
    from ._store import ImportedSession, ImportTarget, Payloads, SessionCollector, SessionFiles

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "Connection",
    "Database",
    "SessionFacts",
    "SqlCollector",
    "SqlStore",
    "SqliteDatabase",
    "migrate",
    "sqlite_path",
]

_T = TypeVar("_T")

logger = logging.getLogger("ctxoffload")

MIGRATIONS: list[tuple[str, ...]] = [
    # 0 -> 1: the first tables. {blob} and {real} are the dialect's column types
    # (`Connection.column_types`): SQLite's BLOB and REAL, PostgreSQL's BYTEA and DOUBLE
    # PRECISION (its REAL has 24 bits, a resolution of minutes for a time since the epoch).
    (
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, created {real} NOT NULL, "
        "updated {real} NOT NULL)",
        "CREATE TABLE files (session TEXT NOT NULL, name TEXT NOT NULL, body {blob} NOT NULL, "
        "updated {real} NOT NULL, PRIMARY KEY (session, name))",
        "CREATE TABLE lines (session TEXT NOT NULL, log TEXT NOT NULL, line INTEGER NOT NULL, "
        "body {blob} NOT NULL, PRIMARY KEY (session, log, line))",
        "CREATE TABLE message_keys (session TEXT NOT NULL, key TEXT NOT NULL, "
        "line INTEGER NOT NULL, PRIMARY KEY (session, key))",
        "CREATE TABLE data (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL, media_type TEXT, "
        "body {blob} NOT NULL, stored {real} NOT NULL)",
        "CREATE TABLE leases (session TEXT PRIMARY KEY, holder TEXT NOT NULL, "
        "token TEXT NOT NULL, expires {real} NOT NULL)",
    ),
    # 1 -> 2: a data/ payload may be kept outside the database (`SqlWorkspace(payloads=)`):
    # its row names the place (`location`: a folder or a bucket URL) and holds no body;
    # `size` is the payload's, wherever it is. Rebuilt, as SQLite cannot drop a NOT NULL.
    (
        "CREATE TABLE data_v2 (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL, media_type TEXT, "
        "body {blob}, location TEXT, size INTEGER NOT NULL, stored {real} NOT NULL, "
        "CHECK ((body IS NULL) <> (location IS NULL)))",
        "INSERT INTO data_v2 (name, sha256, media_type, body, location, size, stored) "
        "SELECT name, sha256, media_type, body, NULL, length(body), stored FROM data",
        "DROP TABLE data",
        "ALTER TABLE data_v2 RENAME TO data",
    ),
]
"""The statements that take the tables from version N to N + 1, in order (templates: see
`Connection.column_types`)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version of the tables this package writes."""

TABLES = tuple(
    dict.fromkeys(
        statement.split()[2]
        for statements in MIGRATIONS
        for statement in statements
        if statement.startswith("CREATE TABLE ")
    )
)
"""Every table the migrations create (one only on the way: `data_v2`), in order: a database
of another program holding one of these names is refused before anything is changed."""

# Keys looked up per statement: SQLite's default limit of bound parameters is 32766 (999
# before 3.32), PostgreSQL's 65535, and a batch of messages may be larger.
_CHUNK = 500


class Cursor(Protocol):
    """The part of a DB-API cursor the store uses (sqlite3's and psycopg's both are one)."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """The rows left."""
        ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The seam between the store and a database's dialect: a connection inside one
    transaction, with `?` placeholders, and what its dialect spells its own way."""

    @property
    def now(self) -> str:
        """SQL for the seconds since the epoch on the database's clock (a float)."""
        ...

    @property
    def column_types(self) -> dict[str, str]:
        """The types `MIGRATIONS` name: `blob` (bytes) and `real` (a float of 53 bits)."""
        ...

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement."""
        ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run one statement for each row of parameters."""
        ...

    def lock(self, key: str) -> None:
        """Hold the lock named `key` until the transaction ends: every write to session S
        takes `S` first, so writers to one session in any process take turns while
        writers to others do not wait (where the database has such locks: SQLite's
        `BEGIN IMMEDIATE` holds the whole file's already)."""
        ...

    def has_table(self, name: str) -> bool:
        """Whether the table `name` is there."""
        ...

    def changed(self, session_id: str) -> None:
        """Tell those waiting for a change (`Database.wait_for_change`) that `session_id` is
        written, once the transaction commits: PostgreSQL's NOTIFY; nothing on SQLite,
        whose followers poll."""
        ...


class Database(Protocol):
    """A database the store runs its transactions on, each in a worker thread."""

    where: str
    """The database for people: a path, or a URL without its password."""

    async def write(self, work: Callable[[Connection], _T]) -> _T:
        """Run `work` as one write transaction: all of it or none.

        Raises:
            OffloadError: the database refused it; nothing of it was written.
        """
        ...

    async def read(self, work: Callable[[Connection], _T]) -> _T:
        """Run `work` on one snapshot of the database.

        Raises:
            OffloadError: the database cannot be read.
        """
        ...

    async def wait_for_change(self, timeout: float) -> bool:
        """Return once a session may have been written since the last call, or after
        `timeout` seconds.

        Returns:
            True when the database said so (PostgreSQL's LISTEN); False when the time ran
            out (on SQLite, always: a follower polls).
        """
        ...

    def close(self) -> None:
        """Close the connection (opened again on the next call)."""
        ...


def sqlite_path(url: str) -> str:
    """The file a `sqlite:///` URL names, made absolute (SQLAlchemy's spelling:
    `sqlite:///relative.db`, `sqlite:////absolute/path.db`).

    Raises:
        ConfigError: not a `sqlite:///` URL of a file (a host, a query, `:memory:`, empty).
    """
    scheme, sep, rest = url.partition("://")
    if scheme.lower() != "sqlite" or not sep:
        raise ConfigError(
            f"{url!r} is not a sqlite:/// URL: pass sqlite:///path/to/file.db (or a "
            "PostgreSQL database: postgresql://user@host/database)"
        )
    if not rest.startswith("/"):
        raise ConfigError(
            f"{url!r} names a host: a SQLite database is a file, sqlite:///path/to/file.db"
        )
    path = rest[1:]
    if "?" in path or "#" in path:
        raise ConfigError(f"{url!r} has a query or a fragment: pass the file alone")
    if not path or path == ":memory:" or path.endswith("/") or "\x00" in path:
        raise ConfigError(
            f"{url!r} names no file: pass sqlite:///path/to/file.db (a database in memory "
            "would vanish with its connection: use InMemoryWorkspace)"
        )
    return os.path.abspath(path)


class SqliteConnection(sqlite3.Connection):
    """A SQLite connection as the store's `Connection`."""

    # Seconds since the epoch on the database's clock.
    now = "((julianday('now') - 2440587.5) * 86400.0)"
    column_types = {"blob": "BLOB", "real": "REAL"}  # noqa: RUF012  (read, never changed)

    def lock(self, key: str) -> None:
        """Nothing to take: a write holds the whole file's lock (`BEGIN IMMEDIATE`)."""

    def has_table(self, name: str) -> bool:
        """Whether the table `name` is there (or a view of that name, which takes it)."""
        found = self.execute(
            "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?", (name,)
        ).fetchone()
        return found is not None

    def changed(self, session_id: str) -> None:
        """Nothing: SQLite has no notifications; a follower polls (`wait_for_change`)."""


class SqliteDatabase:
    """One SQLite file: a connection opened on first use (WAL, `synchronous=FULL`), its
    tables migrated forward, and every call run as one transaction in a worker thread under
    this object's lock.

    Args:
        path: the database file (created with its folder on first use).
        timeout: seconds a write waits for another process's write lock before failing.
        create: create the file and its tables where missing; False: refuse a file that is
            not there or holds no workspace (`ConfigError`), and write nothing to it.
    """

    def __init__(self, path: str, *, timeout: float, create: bool = True) -> None:
        self.path = self.where = path
        self.timeout = timeout
        self.create = create
        self._lock = threading.Lock()
        self._connection: SqliteConnection | None = None

    def _connect(self) -> SqliteConnection:
        if self._connection is not None:
            return self._connection
        if self.create:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            target, uri = self.path, False
        elif not os.path.isfile(self.path):
            raise ConfigError(f"no database at {self.path}: nothing was created there")
        else:  # never created by opening it
            target, uri = f"file:{urllib.parse.quote(self.path)}?mode=rw", True
        connection = sqlite3.connect(
            target,
            timeout=self.timeout,
            isolation_level=None,
            check_same_thread=False,
            factory=SqliteConnection,
            uri=uri,
        )
        try:
            # FULL: a commit is on disk (WAL and its checkpoints fsynced) before it returns,
            # as the disk's appends are. A setting of this connection: the file is unchanged.
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute("BEGIN IMMEDIATE" if self.create else "BEGIN")
            try:
                migrate(connection, self.path, create=self.create)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            # WAL: readers never block the writer nor it them. Switched once the file is
            # known to hold a workspace (`migrate` refuses another program's first): the
            # mode is written into the file, which a refusal must leave as it was.
            if self.create:
                connection.execute("PRAGMA journal_mode=WAL")
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        return connection

    def _run(self, work: Callable[[Connection], _T], begin: str) -> _T:
        with self._lock:
            try:
                connection = self._connect()
                connection.execute(begin)
                try:
                    result = work(connection)
                except BaseException:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                raise OffloadError(
                    f"the database {self.path} refused the operation "
                    f"({type(exc).__name__}: {exc}); nothing of it was written",
                    self.path,
                ) from exc

    async def write(self, work: Callable[[Connection], _T]) -> _T:
        """Run `work` as one write transaction (`BEGIN IMMEDIATE`): all of it or none.

        Raises:
            OffloadError: the database refused it (locked past the timeout, full, corrupt).
        """
        return await asyncio.to_thread(self._run, work, "BEGIN IMMEDIATE")

    async def read(self, work: Callable[[Connection], _T]) -> _T:
        """Run `work` on one snapshot of the database (a read transaction).

        Raises:
            OffloadError: the database cannot be read.
        """
        return await asyncio.to_thread(self._run, work, "BEGIN")

    async def wait_for_change(self, timeout: float) -> bool:
        """Wait `timeout` seconds: SQLite tells nobody of a change (see `Database`)."""
        await asyncio.sleep(timeout)
        return False

    def close(self) -> None:
        """Close the connection (opened again on the next call)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def migrate(connection: Connection, where: str, *, create: bool = True) -> None:
    """Bring the tables to `SCHEMA_VERSION`, one migration a step, inside the caller's write
    transaction (under the lock `schema`: of two processes opening a new database at once,
    one creates the tables, the other finds them).

    Args:
        connection: a connection inside a write transaction.
        where: the database, for messages.
        create: False: refuse a database without the tables rather than create them, and
            change nothing.

    Raises:
        ConfigError: the database was written by a newer ctxoffload (its version is higher),
            `create` is False and it holds no workspace, or it holds no workspace and a
            table of another program whose name one of ours takes (`TABLES`).
    """
    connection.lock("schema")
    if not connection.has_table("schema_version"):
        if not create:
            raise ConfigError(
                f"the database {where} holds no ctxoffload workspace (it has no "
                "schema_version table)"
            )
        for table in TABLES:
            if connection.has_table(table):
                raise ConfigError(
                    f"the database {where} holds a table {table!r} of another program (and "
                    "no schema_version table): ctxoffload's tables would clash with it; give "
                    "ctxoffload a database of its own (nothing was changed)"
                )
        connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    row = connection.execute("SELECT max(version) FROM schema_version").fetchone()
    version = row[0] if row and row[0] is not None else 0
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"the database {where} holds schema version {version}, newer than this "
            f"ctxoffload's {SCHEMA_VERSION}: upgrade ctxoffload to use it"
        )
    if version < SCHEMA_VERSION and not create:
        raise ConfigError(
            f"the database {where} holds schema version {version}, older than this "
            f"ctxoffload's {SCHEMA_VERSION}: open it once with a workspace that may write "
            "to migrate it"
        )
    for statements in MIGRATIONS[version:]:
        for statement in statements:
            connection.execute(statement.format(**connection.column_types))
    if version < SCHEMA_VERSION:
        connection.execute("DELETE FROM schema_version")
        connection.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))


def _lock_session(connection: Connection, session_id: str) -> None:
    """Take the session's lock for the rest of the transaction (`Connection.lock`): what a
    write to a session reads (the next line number, a lease) no other writer changes until
    it commits."""
    connection.lock(f"session {session_id}")


def _touch(connection: Connection, session_id: str) -> None:
    """Mark the session as there and written now."""
    now = connection.now
    connection.execute(
        f"INSERT INTO sessions (id, created, updated) VALUES (?, {now}, {now}) "
        "ON CONFLICT (id) DO UPDATE SET updated = excluded.updated",
        (session_id,),
    )
    connection.changed(session_id)


def _next_line(connection: Connection, session_id: str, log: str) -> int:
    row = connection.execute(
        "SELECT max(line) FROM lines WHERE session = ? AND log = ?", (session_id, log)
    ).fetchone()
    return (row[0] or 0) + 1


def _insert_lines(
    connection: Connection, session_id: str, log: str, first: int, lines: Sequence[bytes]
) -> None:
    connection.executemany(
        "INSERT INTO lines (session, log, line, body) VALUES (?, ?, ?, ?)",
        [(session_id, log, n, line) for n, line in enumerate(lines, first)],
    )


def _insert_keys(
    connection: Connection, session_id: str, first: int, keys: Sequence[str | None]
) -> None:
    """Index the message keys of context lines `first`, `first + 1`, ... (None: a line
    without one); a key the index holds already keeps its line."""
    connection.executemany(
        "INSERT INTO message_keys (session, key, line) VALUES (?, ?, ?) "
        "ON CONFLICT (session, key) DO NOTHING",
        [(session_id, key, n) for n, key in enumerate(keys, first) if key is not None],
    )


def _log_body(connection: Connection, session_id: str, log: str) -> bytes | None:
    rows = connection.execute(
        "SELECT body FROM lines WHERE session = ? AND log = ? ORDER BY line", (session_id, log)
    ).fetchall()
    return b"".join(row[0] for row in rows) if rows else None


def _file_body(connection: Connection, session_id: str, name: str) -> bytes | None:
    """A session's file `name`: a log's lines joined, else the file row; None for neither."""
    body = _log_body(connection, session_id, name)
    if body is not None:
        return body
    row = connection.execute(
        "SELECT body FROM files WHERE session = ? AND name = ?", (session_id, name)
    ).fetchone()
    return None if row is None else bytes(row[0])


def _split_lines(lines: Sequence[bytes]) -> list[bytes]:
    """The lines of a batch as the file holds them: one row a line, so line numbers are the
    file's even for an item holding more than one."""
    return b"".join(lines).splitlines(keepends=True)


class _SqlPayloads:
    """The data/ payloads of one offload: named by hash while serialising, written in one
    transaction before the line naming them (`before_line`). With a place (`outside`: the
    `Payloads` of a folder's or a bucket's store, and its location), each payload is stored
    there by that store's rules, and its row names the place instead of holding the body."""

    def __init__(
        self,
        database: Database,
        reference: Callable[[str], str],
        outside: tuple[Payloads, str] | None = None,
    ) -> None:
        self._database = database
        self._reference = reference
        self._outside = outside
        self.objects: dict[str, tuple[bytes, str | None]] = {}

    @property
    def store(self) -> StoreData:
        """Name a payload by its sha256 now; it is written by `before_line` (and, outside,
        handed to the place's store at once)."""
        place = None if self._outside is None else self._outside[0].store

        def store(raw: bytes, media_type: str | None) -> str:
            name = data_name(raw, media_type)
            if place is not None:
                place(raw, media_type)
            self.objects.setdefault(name, (raw, media_type))
            return self._reference(f"{DATA_DIR}/{name}")

        return store

    async def before_line(self) -> None:
        """Write the payloads not there yet; refresh the stamp of an old one re-used, which
        gc keeps while it is recent (`DATA_GRACE_SECONDS`), so gc cannot remove it before
        the line naming it is written."""
        if not self.objects:
            return
        objects = list(self.objects.items())
        location = None
        if self._outside is not None:
            # In the place first (a bucket uploads now), then the rows naming it.
            await self._outside[0].before_line()
            location = self._outside[1]

        def write(connection: Connection) -> None:
            for name, (raw, media_type) in objects:
                # One statement: where the row is there, the upsert locks it (PostgreSQL)
                # even when the stamp is recent enough to keep, so a gc deleting it waits,
                # then finds the stamp fresh; a row gc deleted first is inserted anew. A
                # row already there keeps its place (the database, or a folder or bucket).
                connection.execute(
                    "INSERT INTO data (name, sha256, media_type, body, location, size, stored) "
                    f"VALUES (?, ?, ?, ?, ?, ?, {connection.now}) ON CONFLICT (name) DO UPDATE "
                    "SET stored = excluded.stored WHERE data.stored < excluded.stored - ?",
                    (
                        name,
                        name.split(".", 1)[0],
                        media_type,
                        None if location else raw,
                        location,
                        len(raw),
                        DATA_GRACE_SECONDS / 2,
                    ),
                )

        await self._database.write(write)

    async def after_line(self) -> None:
        """In the database, nothing to restore: gc deletes a payload only under the write
        lock, after checking its stamp, which `before_line` refreshed. Outside, the place's
        own check: a bucket stores again an object a gc removed meanwhile (a gc removes it
        in the transaction deleting its row, before this writer's row was written)."""
        if self._outside is not None:
            await self._outside[0].after_line()

    def hold_session(self, session_id: str, log: str) -> None:
        """Nothing to check or hold: a row cannot be a planted link. (A purge between an
        offload's content and its event takes the content; the event then starts the
        session afresh.)"""


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
            yield _SqlPayloads(self.database, self.key_reference)
            return
        async with self.place.payloads() as outside:
            yield _SqlPayloads(self.database, self.key_reference, (outside, self.place.location))

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` in one transaction (`SessionFiles.put`)."""
        ref = self.reference(session_id, name)

        def write(connection: Connection) -> None:
            _lock_session(connection, session_id)
            connection.execute(
                "INSERT INTO files (session, name, body, updated) "
                f"VALUES (?, ?, ?, {connection.now}) "
                "ON CONFLICT (session, name) DO UPDATE SET body = excluded.body, "
                "updated = excluded.updated",
                (session_id, name, data),
            )
            _touch(connection, session_id)

        await self.database.write(write)
        return ref

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        """Create the session's file `name` unless a row of that name is there: of two
        writers in any processes, one wins (`SessionFiles.put_new`)."""
        ref = self.reference(session_id, name)

        def write(connection: Connection) -> bool:
            _lock_session(connection, session_id)
            created = connection.execute(
                "INSERT INTO files (session, name, body, updated) "
                f"VALUES (?, ?, ?, {connection.now}) "
                "ON CONFLICT (session, name) DO NOTHING",
                (session_id, name, data),
            ).rowcount
            if created:
                _touch(connection, session_id)
            return bool(created)

        return ref if await self.database.write(write) else None

    async def append(self, session_id: str, name: str, lines: Sequence[bytes]) -> Span:
        """Append `lines` to the log `name` in one transaction, numbered after the rows
        there under the write lock (`SessionFiles.append`)."""
        validate_session_id(session_id)
        pieces = _split_lines(lines)

        def write(connection: Connection) -> Span:
            _lock_session(connection, session_id)
            first = _next_line(connection, session_id, name)
            _insert_lines(connection, session_id, name, first, pieces)
            _touch(connection, session_id)
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
            _lock_session(connection, session_id)
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
            first = _next_line(connection, session_id, CONTEXT_FILE)
            rows = new_rows(lines, keys, (index,), first)
            if rows.lines:
                _insert_lines(connection, session_id, CONTEXT_FILE, first, rows.lines)
                # A key given twice in one batch keeps its first line, as `new_rows` counts.
                _insert_keys(connection, session_id, first, rows.ids)
            _touch(connection, session_id)
            return rows.span

        return await self.database.write(write)

    async def delete_session(self, session_id: str) -> bool:
        """Delete every row of the session in one transaction: a reader sees all of it or
        none (`SessionFiles.delete_session`). Its lease, if held, stays held."""
        validate_session_id(session_id)

        def write(connection: Connection) -> bool:
            return _delete_sessions(connection, [session_id]) > 0

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
            _lock_session(connection, sid)
            there = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
            if session.fresh and there is not None:
                return False
            for log in {*session.logs, *session.after}:
                if _next_line(connection, sid, log) != session.after.get(log, 0) + 1:
                    return False
            for name in session.files:
                if _file_body(connection, sid, name) is not None:
                    return False
            connection.executemany(
                "INSERT INTO files (session, name, body, updated) "
                f"VALUES (?, ?, ?, {connection.now})",
                [(sid, name, body) for name, body in sorted(session.files.items())],
            )
            for log, lines in session.logs.items():
                first = session.after.get(log, 0) + 1
                _insert_lines(connection, sid, log, first, lines)
                if log == CONTEXT_FILE:
                    _insert_keys(connection, sid, first, session.keys)
            _touch(connection, sid)
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
        return await self.database.read(lambda c: _file_body(c, session_id, name))

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """The JSON values of the session's file `name`, by the reader's rule for torn and
        corrupt lines (`SessionFiles.read_log`; a batch is one transaction, whole or absent,
        so `commit` changes nothing)."""
        ref = self.reference(session_id, name)
        raw = await self.database.read(lambda c: _file_body(c, session_id, name))
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
            return _file_body(connection, session_id, name)

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
            _lock_session(connection, session_id)
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

    async def renew_lease(self, session_id: str, token: str, ttl: float) -> bool:
        """Push the lease's expiry `ttl` seconds past now, if this holder still has it."""

        def write(connection: Connection) -> bool:
            return (
                connection.execute(
                    f"UPDATE leases SET expires = {connection.now} + ? "
                    "WHERE session = ? AND token = ?",
                    (ttl, session_id, token),
                ).rowcount
                == 1
            )

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
            # A row is one line as the file holds it (`_split_lines`): at most one newline,
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
                        held.reduced[log] = reduce(_log_body(connection, held.session, log) or b"")
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
                    body = _log_body(connection, session_id, log) or b""
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


def _live_holder(raw: object, expires: float, now: float) -> dict[str, Any] | None:
    """The holder of a lease row that is live (`SqlStore.take_lease`'s rule), else None."""
    holder = lease_record(raw)
    if now > expires or holder_ended(holder) or orphaned_here(holder):
        return None
    return holder


def _delete_sessions(connection: Connection, session_ids: Sequence[str]) -> int:
    """Delete the rows of the sessions (not their leases); how many rows went."""
    removed = 0
    for session_id in sorted(session_ids):  # locks taken in one order: no deadlock
        _lock_session(connection, session_id)
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


def _session_bodies(connection: Connection, session_id: str) -> Iterable[bytes]:
    """Every file of a session, one body each (a log's lines joined)."""
    for (body,) in connection.execute("SELECT body FROM files WHERE session = ?", (session_id,)):
        yield bytes(body)
    logs = connection.execute(
        "SELECT DISTINCT log FROM lines WHERE session = ?", (session_id,)
    ).fetchall()
    for (log,) in logs:
        yield _log_body(connection, session_id, log) or b""


class SqlCollector:
    """One gc run over a database (`SessionCollector`): what it measured (the database's
    time then, data/'s stamps) is what its later steps check against, each under the write
    lock, so no writer changes a session or takes a lease between a check and a delete."""

    def __init__(self, database: Database, store: SqlStore | None = None) -> None:
        self._database = database
        self._store = store
        self._measured_at = 0.0
        # name -> (size, stored, the folder or bucket holding it; None: the row does)
        self._data: dict[str, tuple[int, float, str | None]] = {}

    async def recover(self, *, dry_run: bool) -> None:
        """Nothing to finish: a removal is one transaction, done or not."""

    async def measure(self) -> tuple[list[SessionUsage], dict[str, int]]:
        """Every session read for the names it holds, with its live lease holder; data/'s
        rows with their sizes; on one snapshot."""

        def read(connection: Connection) -> list[SessionUsage]:
            self._measured_at = connection.execute(f"SELECT {connection.now}").fetchone()[0]
            usages: list[SessionUsage] = []
            sessions = connection.execute("SELECT id, updated FROM sessions ORDER BY id").fetchall()
            for session_id, updated in sessions:
                size = 0
                references: set[str] = set()
                named: set[str] = set()
                for body in _session_bodies(connection, session_id):
                    size += len(body)
                    data_found, sessions_found = names_in([body])
                    references |= data_found
                    named |= sessions_found
                usages.append(
                    SessionUsage(session_id, float(updated), size, references, sessions=named)
                )
            by_name = {u.name: u for u in usages}
            for session_id, raw, expires in connection.execute(
                "SELECT session, holder, expires FROM leases"
            ):
                holder = _live_holder(raw, expires, self._measured_at)
                if holder is not None and session_id in by_name:
                    by_name[session_id].lease = describe_holder(holder)
            self._data = {
                name: (int(size), float(stored), location)
                for name, size, stored, location in connection.execute(
                    "SELECT name, size, stored, location FROM data"
                )
            }
            return usages

        usages = await self._database.read(read)
        return usages, {name: size for name, (size, _, _) in self._data.items()}

    async def remove_unit_if_idle(self, unit: list[SessionUsage]) -> UnitOutcome:
        """Remove a unit of sessions in one transaction unless one was written since it was
        measured or its lease is live: then all of it stays."""

        def write(connection: Connection) -> UnitOutcome:
            outcome = UnitOutcome()
            for usage in sorted(unit, key=lambda u: u.name):  # one order: no deadlock
                _lock_session(connection, usage.name)
            now = connection.execute(f"SELECT {connection.now}").fetchone()[0]
            for usage in sorted(unit, key=lambda u: u.name):
                lease = connection.execute(
                    "SELECT holder, expires FROM leases WHERE session = ?", (usage.name,)
                ).fetchone()
                holder = None if lease is None else _live_holder(lease[0], lease[1], now)
                if holder is not None:
                    outcome.kept[usage.name] = f"its lease is held by {describe_holder(holder)}"
                    return outcome
                row = connection.execute(
                    "SELECT updated FROM sessions WHERE id = ?", (usage.name,)
                ).fetchone()
                if row is not None and row[0] > usage.last_activity:
                    outcome.kept[usage.name] = "it was written while gc ran"
                    return outcome
            _delete_sessions(connection, [u.name for u in unit])
            return outcome

        return await self._database.write(write)

    async def collect_data(
        self, remaining: list[SessionUsage], now: float, report: GcReport
    ) -> None:
        """Delete the data/ rows no session of `remaining` names and not stored in the last
        `DATA_GRACE_SECONDS`, checked again under the write lock: a row stored since, or
        named by a session written since the measure, stays. With a place configured, the
        payloads there that no row names there are removed too, by the same rules."""
        referenced: set[str] = set().union(*(u.references for u in remaining))
        place = None if self._store is None else self._store.place
        here = None if place is None else place.location
        # A payload kept at a place this workspace was not configured with is not removed
        # (nor its row): gc reaches no folder or bucket the caller did not name.
        unnamed = {
            name: stored
            for name, (_, stored, location) in self._data.items()
            if name not in referenced and location in (None, here)
        }
        unused = {name for name, stored in unnamed.items() if now - stored > DATA_GRACE_SECONDS}
        report.keep_recent_data(set(unnamed) - unused)
        with contextlib.ExitStack() as held:
            if place is not None:
                # A folder's data/ taken exclusively before the database (its writers take
                # it, shared, before theirs): no writer stores there until gc is done.
                await asyncio.to_thread(held.enter_context, place.held_for_gc())
                listed = await place.listing()
                # In the place, and no row names it there: written when the row was
                # already in the database (which keeps the body), or by a writer whose
                # transaction then failed. Kept while a session names it, all the same.
                strays = {
                    name: size
                    for name, (size, written) in listed.items()
                    if (name not in self._data or self._data[name][2] != here)
                    and name not in referenced
                    and now - written > DATA_GRACE_SECONDS
                }
            else:
                strays = {}
            await self._remove_data(sorted(unused), strays, place, report)

    async def _remove_data(
        self,
        unused: list[str],
        strays: dict[str, int],
        place: PayloadPlace | None,
        report: GcReport,
    ) -> None:
        """Delete the rows `unused` (and their payloads in `place`) and the payloads
        `strays` no row names, each checked again under the write lock; into `report`."""
        removed_strays: set[str] = set()
        if (unused or strays) and not report.dry_run:
            candidates = unused
            here = None if place is None else place.location
            measured_at = self._measured_at
            loop = asyncio.get_running_loop()

            def write(connection: Connection) -> set[str]:
                named: set[str] = set()
                changed = connection.execute(
                    "SELECT id FROM sessions WHERE updated >= ?", (measured_at,)
                ).fetchall()
                for (session_id,) in changed:
                    named |= data_names_in(_session_bodies(connection, session_id))
                removed: set[str] = set()
                outside: list[str] = []
                for name in candidates:
                    if name in named:
                        continue
                    # Only a row in the database or at this workspace's place (checked
                    # again: the row may have changed since it was measured).
                    row = connection.execute(
                        f"DELETE FROM data WHERE name = ? AND stored < {connection.now} - ? "
                        "AND (location IS NULL OR location = ?) RETURNING location",
                        (name, DATA_GRACE_SECONDS, here),
                    ).fetchone()
                    if row is not None:
                        removed.add(name)
                        if row[0] is not None:
                            outside.append(name)
                for name in strays:
                    if name in named:
                        continue
                    there = connection.execute(
                        "SELECT 1 FROM data WHERE name = ? AND location = ?", (name, here)
                    ).fetchone()
                    if there is None:
                        removed_strays.add(name)
                # Removed from its place in the transaction deleting its row: a writer
                # storing it again waits for the row, then finds it gone and stores it anew.
                if place is not None:
                    place.remove(outside + sorted(removed_strays), loop)
                return removed

            unused = sorted(await self._database.write(write))
        else:
            removed_strays = set(strays)
        report.data_removed = sorted({*unused, *removed_strays})
        report.bytes_freed += sum(self._data[name][0] for name in unused)
        report.bytes_freed += sum(strays[name] for name in removed_strays)


if TYPE_CHECKING:  # mypy checks that the SQL store and collector are what they are declared
    _collector: type[SessionCollector] = SqlCollector
    _files: type[SessionFiles] = SqlStore
    _imports: type[ImportTarget] = SqlStore

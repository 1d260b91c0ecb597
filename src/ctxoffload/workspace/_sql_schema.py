"""The SQL store's tables and the seam between it and a database: `MIGRATIONS` (and
`migrate`, which takes a database forward), `Connection` (what a dialect spells its own way:
the clock, the column types, the lock of one session), `Database` (connecting, a write
transaction, a read snapshot). The SQL is the one SQLite (`_sqlite.py`) and PostgreSQL
(`_postgres.py`) both speak: `?` placeholders, which the PostgreSQL connection translates;
`ON CONFLICT` upserts.

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

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from ..exceptions import ConfigError

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "Connection",
    "Cursor",
    "Database",
    "migrate",
]

_T = TypeVar("_T")


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

"""PostgreSQL under the SQL store: the connection URL, the dialect (`PostgresConnection`) and
the database object (`PostgresDatabase`) the one `SqlStore` runs its transactions on.

The driver is psycopg 3, synchronous, in the store's worker thread (one hop per operation,
as on SQLite), chosen by bench/bench_pg_driver.py: within a tenth of asyncpg's time for a
batch append of 20 messages, and the store's code stays the one both databases run. It is
libpq's own client, so a URL means what it means to `psql`: `host=/socket/dir`, `PGPASSWORD`,
~/.pgpass, `sslmode`, service files. Imported on first use (`pip install 'ctxoffload[sql]'`).

Writes run at READ COMMITTED, each taking the lock of the session it writes first (a
transaction advisory lock, `pg_advisory_xact_lock`, on the schema and the session id), so
writers to one session take turns and read what the one before committed; reads run on one
snapshot (REPEATABLE READ, READ ONLY). Times are `clock_timestamp()`: the server's clock when
the statement runs, after the lock is taken, never a client's.

A connection the server cut (a restart, a failover, an idle timeout) is dropped and opened
again once for an operation that had committed nothing yet (a transaction the server never
saw commit was rolled back, so running it again writes it once); cut while committing, the
outcome is unknown and the caller is told so. A server that cannot be reached is one line.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._secrets import masked_url
from ..exceptions import ConfigError, OffloadError
from ._sql_schema import migrate

if TYPE_CHECKING:
    import psycopg

    from ._sql_schema import Connection, Cursor, Database

__all__ = [
    "SCHEMES",
    "PostgresConnection",
    "PostgresDatabase",
    "is_postgres_url",
    "postgres_url",
]

_T = TypeVar("_T")

INSTALL_HINT = "SqlWorkspace on PostgreSQL needs psycopg 3: pip install 'ctxoffload[sql]'"

SCHEMES = ("postgresql", "postgres")


def is_postgres_url(url: str) -> bool:
    """Whether `url` is a `postgresql://` or `postgres://` URL."""
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def postgres_url(url: str) -> str:
    """The URL a workspace on `url` shows and prefixes its references with:
    `postgresql://user@host:port/database`, parsed by libpq as the connection will be, with
    a socket folder percent-encoded as the host (`postgresql://user@%2Frun%2Fpg/db`, libpq's
    own spelling) and nothing else: no password, which must never reach a reference, an
    event or a message (libpq reads it from the URL when connecting, or from PGPASSWORD or
    ~/.pgpass), and no query (an `&` in a reference is escaped on its way through text
    that quotes it, and the reference no longer matches).

    Raises:
        ConfigError: not a PostgreSQL URL libpq accepts; one naming no database, or a
            database with a `/` (it would read as a path in references).
        ImportError: psycopg is not installed.
    """
    if not is_postgres_url(url):
        raise ConfigError(
            f"{masked_url(url)!r} is not a PostgreSQL URL: pass postgresql://user@host:port/db "
            "or postgresql://user@/db?host=/socket/dir"
        )
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    if "\x00" in url:
        raise ConfigError(f"{masked_url(url)!r} holds a NUL: pass the URL alone")
    try:
        found = conninfo_to_dict(url)
    except ProgrammingError as exc:
        raise ConfigError(
            f"{masked_url(url)!r} is not a PostgreSQL URL: {masked_url(url, _one_line(exc))}"
        ) from None
    database = str(found.get("dbname") or "")
    if not database:
        raise ConfigError(
            f"{masked_url(url)!r} names no database: pass postgresql://user@host/DATABASE"
        )
    if "/" in database:
        raise ConfigError(
            f"{masked_url(url)!r} names the database {database!r}: a database name with '/' "
            "would read as a path in references"
        )
    host = str(found.get("host") or "")
    if host.startswith("/"):
        host = urllib.parse.quote(host, safe="")
    elif ":" in host and "," not in host:
        host = f"[{host}]"  # IPv6
    port = str(found.get("port") or "")
    if port and "," not in port:
        host += f":{port}"
    user = found.get("user")
    userinfo = f"{urllib.parse.quote(str(user), safe='')}@" if user else ""
    return f"postgresql://{userinfo}{host}/{urllib.parse.quote(database, safe='')}"


@functools.lru_cache(maxsize=512)
def _dialect_sql(sql: str) -> bytes:
    """The store's SQL (`?` placeholders) in psycopg's (`%s`); a `%` of the text doubled.
    (No statement of the store holds `?` or `%` in a string literal.)"""
    return sql.replace("%", "%%").replace("?", "%s").encode()


class PostgresConnection:
    """A psycopg connection as the store's `Connection`."""

    # Seconds since the epoch on the server's clock, when the statement runs.
    now = "extract(epoch from clock_timestamp())::float8"
    column_types = {"blob": "BYTEA", "real": "DOUBLE PRECISION"}  # noqa: RUF012  (never changed)

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        """Run one statement."""
        return self.raw.execute(_dialect_sql(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run one statement per row (psycopg pipelines them: one round trip)."""
        with self.raw.cursor() as cursor:
            cursor.executemany(_dialect_sql(sql), parameters)
        return None

    def lock(self, key: str) -> None:
        """Take the transaction advisory lock of `key` in this schema (several workspaces
        may share a database, one a schema)."""
        self.raw.execute(
            b"SELECT pg_advisory_xact_lock(hashtextextended("
            b"coalesce(current_schema(), '') || ' ' || %s, 0))",
            (key,),
        )

    def has_table(self, name: str) -> bool:
        """Whether the table `name` is on the search path."""
        row = self.raw.execute(b"SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(row and row[0])

    def changed(self, session_id: str) -> None:
        """NOTIFY the `ctxoffload` channel with the session's id, delivered at commit (and
        not at all if the transaction rolls back)."""
        self.raw.execute(b"SELECT pg_notify(%s, %s)", (CHANNEL, session_id))


def _one_line(exc: BaseException) -> str:
    """A driver's message on one line (libpq's run over several, with tabs)."""
    return " ".join(str(exc).split()) or type(exc).__name__


CHANNEL = "ctxoffload"
"""The channel every write NOTIFYs, with the session's id (`PostgresConnection.changed`)."""


class PostgresDatabase:
    """One PostgreSQL database (or schema, by the URL's `options=-csearch_path=...`): a
    connection opened on first use, its tables migrated forward, and every call run as one
    transaction in a worker thread under this object's lock.

    Args:
        url: the connection URL, as given (with its password, if any).
        where: the URL for people (`postgres_url`).
        timeout: seconds to connect, and that a write waits for another writer's lock on
            its session (`lock_timeout`), before failing.
        create: create the tables where missing; False: refuse a database without them
            (`ConfigError`) and write nothing.
    """

    def __init__(self, url: str, where: str, *, timeout: float, create: bool = True) -> None:
        self._url = url
        self.where = where
        self.timeout = timeout
        self.create = create
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Any] | None = None
        # The LISTEN connection of `wait_for_change`, apart from the one that writes.
        self._listener: psycopg.Connection[Any] | None = None
        self._listening = threading.Lock()

    def _said(self, exc: BaseException) -> str:
        """A driver's message on one line, any secret of the URL masked (libpq may quote
        the part of a URL it could not use)."""
        return masked_url(self._url, _one_line(exc))

    def _connect(self) -> psycopg.Connection[Any]:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        try:
            import psycopg
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        try:
            connection = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=max(2, math.ceil(self.timeout)),
                application_name="ctxoffload",
            )
        except psycopg.Error as exc:
            raise OffloadError(
                f"cannot connect to the database {self.where}: {self._said(exc)}", self.where
            ) from None
        try:
            connection.execute(
                b"SELECT set_config('lock_timeout', %s, false)",
                (f"{max(1, round(self.timeout * 1000))}ms",),
            )
            connection.execute(b"BEGIN")
            try:
                migrate(PostgresConnection(connection), self.where, create=self.create)
            except BaseException:
                if not connection.closed:
                    connection.execute(b"ROLLBACK")
                raise
            connection.execute(b"COMMIT")
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        return connection

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _run(self, work: Callable[[Connection], _T], begin: bytes) -> _T:
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                connection: psycopg.Connection[Any] | None = None
                committing = False
                try:
                    connection = self._connect()
                    connection.execute(begin)
                    try:
                        result = work(PostgresConnection(connection))
                    except BaseException:
                        if not connection.closed and not connection.broken:
                            connection.execute(b"ROLLBACK")
                        raise
                    committing = True
                    connection.execute(b"COMMIT")
                    return result
                except psycopg.Error as exc:
                    lost = connection is not None and (connection.broken or connection.closed)
                    if lost:
                        self._drop()
                    if lost and committing:
                        raise OffloadError(
                            f"the connection to the database {self.where} was lost while "
                            f"committing ({self._said(exc)}): the operation was made whole or "
                            "not at all, and which is unknown; read it back before making "
                            "it again",
                            self.where,
                        ) from None
                    if lost and attempt == 1:
                        continue  # rolled back by the server: once more, on a new connection
                    raise OffloadError(
                        f"the database {self.where} refused the operation "
                        f"({type(exc).__name__}: {self._said(exc)}); nothing of it was written",
                        self.where,
                    ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def write(self, work: Callable[[Connection], _T]) -> _T:
        """Run `work` as one write transaction: all of it or none.

        Raises:
            OffloadError: the database refused it (a lock waited on past the timeout, the
                server unreachable, the connection lost while committing: said so).
        """
        return await asyncio.to_thread(self._run, work, b"BEGIN")

    async def read(self, work: Callable[[Connection], _T]) -> _T:
        """Run `work` on one snapshot of the database.

        Raises:
            OffloadError: the database cannot be read.
        """
        return await asyncio.to_thread(
            self._run, work, b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        )

    async def wait_for_change(self, timeout: float) -> bool:
        """Return at the first NOTIFY of a write committed since the last call (they wait on
        the listening connection between calls), or after `timeout` seconds. The first call
        starts listening; a listener whose connection was lost is opened again at the next.

        Returns:
            True when a write was notified; False when the time ran out.
        """
        return await asyncio.to_thread(self._wait, timeout)

    def _wait(self, timeout: float) -> bool:
        import psycopg

        with self._listening:
            try:
                if self._listener is None or self._listener.closed or self._listener.broken:
                    self._listener = psycopg.connect(
                        self._url,
                        autocommit=True,
                        connect_timeout=max(2, math.ceil(self.timeout)),
                        application_name="ctxoffload-watch",
                    )
                    self._listener.execute(f"LISTEN {CHANNEL}".encode())
                told = False
                for _ in self._listener.notifies(timeout=timeout, stop_after=1):
                    told = True
                return told
            except psycopg.Error as exc:
                if self._listener is not None:
                    self._listener.close()
                    self._listener = None
                raise OffloadError(
                    f"cannot follow the database {self.where}: {self._said(exc)}", self.where
                ) from None

    def close(self) -> None:
        """Close the connections (opened again on the next call)."""
        with self._lock:
            self._drop()
        with self._listening:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    def __del__(self) -> None:
        # A lease released after its workspace was dropped opens the connection again:
        # closed here, not left for psycopg to warn about.
        for name in ("_connection", "_listener"):
            connection = getattr(self, name, None)
            if connection is not None:
                connection.close()


if TYPE_CHECKING:  # mypy checks that the PostgreSQL side is what the store asks for
    _connection: type[Connection] = PostgresConnection
    _database: type[Database] = PostgresDatabase

"""SQLite under the SQL store: a `sqlite:///` URL's file (`sqlite_path`), its connection as
the store's `Connection`, and `SqliteDatabase`, which runs each transaction in a worker
thread on one connection (WAL, `synchronous=FULL`), migrating its tables on first use.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable
from typing import TypeVar

from .._secrets import masked_url
from ..exceptions import ConfigError, OffloadError
from ._sql_schema import Connection, migrate

__all__ = [
    "SqliteConnection",
    "SqliteDatabase",
    "sqlite_path",
]

_T = TypeVar("_T")


def sqlite_path(url: str) -> str:
    """The file a `sqlite:///` URL names, made absolute (SQLAlchemy's spelling:
    `sqlite:///relative.db`, `sqlite:////absolute/path.db`).

    Raises:
        ConfigError: not a `sqlite:///` URL of a file (a host, a query, `:memory:`, empty).
    """
    scheme, sep, rest = url.partition("://")
    shown = masked_url(url)  # a password in a URL is never printed
    if scheme.lower() != "sqlite" or not sep:
        raise ConfigError(
            f"{shown!r} is not a sqlite:/// URL: pass sqlite:///path/to/file.db (or a "
            "PostgreSQL database: postgresql://user@host/database)"
        )
    if not rest.startswith("/"):
        raise ConfigError(
            f"{shown!r} names a host: a SQLite database is a file, sqlite:///path/to/file.db"
        )
    path = rest[1:]
    if "?" in path or "#" in path:
        raise ConfigError(f"{shown!r} has a query or a fragment: pass the file alone")
    if not path or path == ":memory:" or path.endswith("/") or "\x00" in path:
        raise ConfigError(
            f"{shown!r} names no file: pass sqlite:///path/to/file.db (a database in memory "
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

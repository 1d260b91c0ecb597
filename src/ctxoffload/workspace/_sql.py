"""SqlWorkspace: the workspace in a SQL database (DESIGN.md section 16): SQLite, one file, or
PostgreSQL, shared by replicas on many machines."""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from .._disk.ids import validate_session_id
from .._disk.read import reference_text
from .._disk.scope import SessionScoped
from .._secrets import masked_url
from ..exceptions import ConfigError
from ._collected import CollectedWorkspace
from ._lease import LEASE_FILE, LeaseTerm, SessionLease, holder_record, lease_ttl, took_over
from ._postgres import SCHEMES as POSTGRES_SCHEMES
from ._postgres import PostgresDatabase, is_postgres_url, postgres_url
from ._sql_collector import SqlCollector
from ._sql_payloads import payload_place
from ._sql_store import SqlStore
from ._sqlite import SqliteDatabase, sqlite_path
from ._transfer import Uploads

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._local import LocalWorkspace
    from ._objectstore import ObjectStoreWorkspace
    from ._protocol import GarbageCollector, Workspace
    from ._sql_schema import Database
    from ._store import SessionCollector

__all__ = ["SqlWorkspace"]


class SqlWorkspace(Uploads, CollectedWorkspace):
    """A workspace in a SQL database: SQLite, one file that every process on the machine
    shares, or PostgreSQL, which replicas on many machines share (a `Workspace` and a
    `GarbageCollector`).

    The same behaviour as `LocalWorkspace` (batches, events, state, leases, forks, gc,
    isolation, data/ by content hash), with every write one transaction: a batch is whole
    or absent whatever kills its writer, and writers in several processes get consecutive,
    global line numbers. The database is opened on first use and its tables created, or
    migrated forward from an older version, then. A SQLite file runs in WAL mode (readers
    never block the writer) with `synchronous=FULL` (a write is on disk before it returns).
    On PostgreSQL (psycopg 3: `pip install 'ctxoffload[sql]'`), each write takes its
    session's advisory lock, so writers to other sessions do not wait. data/ payloads are
    rows too by default: one database to back up, written in the same transactions as the
    rest; or kept in a folder or a bucket (`payloads`), the rows naming them.

    References look like `sqlite:////abs/path/agents.db/sessions/<id>/tool_result-c1.txt` or
    `postgresql://agent@db.internal/agents/sessions/<id>/tool_result-c1.txt`: the URL
    without its password, which no reference, event or message ever holds.
    An agent reads them through `retrieve_offloaded_content` (file tools cannot open them);
    people through the `ctxoffload` commands (`--workdir sqlite:///agents.db`) or a copy in
    the on-disk layout (`download`).

    A session's lease is a row whose expiry is judged on the database's clock, renewed
    every third of its time to live; a holder whose process ended (on this machine) frees it
    at once, one on another machine at its expiry.

    Args:
        url: `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` (SQLAlchemy's
            spelling; the file and its folder are created on first use), or
            `postgresql://user:password@host:port/database` (also `postgres://`; over a
            unix socket `postgresql://user@/database?host=/socket/dir`; a schema of its own
            with `options=-csearch_path%3Dname`): libpq's URL, so `PGPASSWORD`,
            ~/.pgpass and `sslmode` work as for `psql`.
        timeout: seconds a write waits for another process's write to the same database
            (SQLite) or session (PostgreSQL) to finish, and to connect; past it,
            `OffloadError` and the content stays in the caller's context.
        isolate_sessions: keep sessions apart, as `LocalWorkspace(isolate_sessions=True)`
            does.
        create: create the database's tables (and a SQLite file) where missing; False: a
            reader that writes nothing refuses a database without them with `ConfigError`.
        payloads: where data/ payloads (images, files, by content hash) are written: None
            (the default), rows of the database; a folder (a path, or a `LocalWorkspace`),
            its `data/<sha256>.<ext>` files written as a `LocalWorkspace` writes them
            (atomic, no link followed); or a bucket (`s3://bucket/prefix`, or an
            `ObjectStoreWorkspace` for an endpoint and credentials). The row of each names
            where it is, and gc removes an unreferenced one from there. Give the database a
            folder or prefix of its own: its gc treats every data/ file there as its own.
            Tool results and logs stay rows.

    Raises:
        ConfigError: the URL names no SQLite file and is no PostgreSQL URL, `timeout` is
            not a positive number, or `payloads` names no folder or bucket.
        ImportError: a PostgreSQL URL without psycopg installed (the message says what to
            install).
    """

    SCHEMES: ClassVar[tuple[str, ...]] = ("sqlite", *POSTGRES_SCHEMES)
    """The URL schemes it takes, SQLite's and PostgreSQL's two spellings."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        isolate_sessions: bool = False,
        create: bool = True,
        payloads: str | os.PathLike[str] | LocalWorkspace | ObjectStoreWorkspace | None = None,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigError(f"timeout={timeout!r} must be a positive number of seconds")
        self.isolate_sessions = isolate_sessions
        self.path: str | None = None
        """The SQLite file; None on PostgreSQL."""
        self._database: Database
        if is_postgres_url(url):
            self.url = postgres_url(url)
            self._database = PostgresDatabase(url, self.url, timeout=float(timeout), create=create)
        elif url.partition("://")[0].lower() == "sqlite" or "://" not in url:
            self.path = sqlite_path(url)
            self.url = f"sqlite:///{self.path}"
            self._database = SqliteDatabase(self.path, timeout=float(timeout), create=create)
        else:
            raise ConfigError(
                f"{masked_url(url)!r} is no database URL: pass sqlite:///path/to/file.db or "
                "postgresql://user@host/database"
            )
        self.payloads: str | None = None
        """The folder or bucket URL data/ payloads are written to (None for the database)."""
        place = None
        if payloads is not None:
            place = payload_place(payloads)
            self.payloads = place.location
        self._sql = self._files = self._imports = SqlStore(self._database, self.url, place)
        weakref.finalize(self, self._database.close)

    def __repr__(self) -> str:
        if self.payloads is not None:
            return f"SqlWorkspace(url={self.url!r}, payloads={self.payloads!r})"
        return f"SqlWorkspace(url={self.url!r})"

    async def initialize(self) -> None:
        """Open the database, creating it or migrating its tables forward (idempotent).

        Raises:
            OffloadError: the file cannot be opened or written.
            ConfigError: it was written by a newer ctxoffload.
        """
        await self._database.read(lambda connection: None)

    def close(self) -> None:
        """Close the database connection (it opens again on the next call)."""
        self._database.close()

    @property
    def notifies(self) -> bool:
        """Whether the database tells a follower of each write (PostgreSQL's LISTEN/NOTIFY:
        `wait_for_change` returns at once); on SQLite a follower polls."""
        return isinstance(self._database, PostgresDatabase)

    async def wait_for_change(self, timeout: float) -> bool:
        """Return once a session may have been written (a write committed since the last
        call, in any process), or after `timeout` seconds: what `ctxoffload watch` awaits
        between looks.

        Returns:
            True when the database said so (PostgreSQL); False when the time ran out (on
            SQLite, always: it tells nobody, so the wait is the poll interval).

        Raises:
            OffloadError: the database cannot be followed (the server out of reach).
        """
        return await self._sql.wait_for_change(timeout)

    def _collector(self) -> SessionCollector:
        return SqlCollector(self._database, self._sql)

    async def acquire_lease(
        self, session_id: str, *, agent: str | None = None, ttl: float | None = None
    ) -> SessionLease:
        """Take the session's lease: a row of the `leases` table, expiring `ttl` seconds
        (default 60) after its latest renewal on the database's clock.

        It is renewed every third of `ttl` while the event loop that took it runs, and given
        up by `release()`. A lease past its expiry, or whose holder's process on this
        machine has ended (the kernel says so), is taken over, naming its last holder in
        the log. Taking and renewing happen under the database's write lock, so two takers
        cannot both win. Until `release()`, this object's `write_state` of the session
        writes only while the lease row still holds this lease (one statement): once
        another writer took it over, it raises `SessionBusyError`.

        Raises:
            SessionBusyError: a live holder has it, named in the message.
            OffloadError: the database cannot be reached within the timeout.
        """
        sid = validate_session_id(session_id)
        ttl = lease_ttl(ttl)
        where = f"{self._sql.reference(sid, LEASE_FILE)} (a row of the leases table)"
        holder = holder_record(agent, ttl)
        since = LeaseTerm.now()  # (before the request: the database's expiry is after it)
        previous, expired = await self._sql.take_lease(sid, holder, ttl, where)
        if previous:
            took_over(
                sid,
                previous,
                "it expired without being renewed" if expired else "it was never released",
            )
        store, token = self._sql, holder["token"]

        async def renew() -> dict[str, Any] | None:
            return await store.renew_lease(sid, token, ttl)

        async def release() -> None:
            await store.release_lease(sid, token)

        return self._fenced_lease(
            sid, holder, where, release=release, renew=renew, ttl=ttl, since=since
        )

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """The bytes behind a reference, with the media type a data/ payload was stored
        with (else the name's extension's).

        Raises:
            InvalidReference: unknown, outside the workspace, or out of reach.
        """
        data = await self.read_reference(reference)
        return data, await self._sql.media_type(reference_text(reference))

    async def session_facts(
        self, logs: Sequence[str], small: Sequence[str], reduce: Callable[[bytes], Any]
    ) -> list[Any]:
        """What a list of sessions shows of every session, read without a copy in the on-disk
        layout, one record a session (attributes session, updated, sizes, newlines, bodies,
        reduced): each file's and log's size as `download` would write it, the latest write,
        each log's newlines, the files named in `small` whole, and what `reduce` makes of
        each log named in `logs` (one session's log in memory at a time). This is how
        `ctxoffload ls --workdir sqlite:///...` lists a database.

        Raises:
            OffloadError: the database cannot be read.
        """
        return await self._sql.session_facts(logs, small, reduce)

    async def download(
        self,
        folder: str | os.PathLike[str],
        *,
        session: str | None = None,
        data: bool = True,
        check: bool = False,
    ) -> list[str]:
        """Copy the workspace, or one session, into a folder in the on-disk layout.

        Each log's rows become one file (`sessions/<id>/context.jsonl`, events.jsonl), line
        for line, so line numbers in references hold in the copy; other files and (with
        `data`) data/ payloads are written as they are. The folder is then readable with the
        `LocalWorkspace` read side, the `ctxoffload` commands and ordinary tools (`grep -n`,
        `jq`): this is how `ctxoffload ... --workdir sqlite:///...` reads a database. A file
        already there is never overwritten, and no link in the folder is followed.

        Args:
            folder: an empty or missing folder to fill.
            session: only this session (data/ is still copied unless `data` is False).
            data: copy the data/ payloads too.
            check: report a log whose line numbers have a gap.

        Returns:
            The problems found in the logs (with `check`): one line each, naming the log.

        Raises:
            InvalidSessionId: before any I/O.
            OffloadError: the database cannot be read, or a folder in `folder` is a planted
                link.
            FileExistsError: a file to write is there already (a link too).
        """
        root = os.fspath(folder)
        sessions = [session] if session is not None else await self.list_sessions()
        return await self._sql.download(root, sessions, data=data, check=check)


if TYPE_CHECKING:  # mypy checks that SqlWorkspace is what it is declared to be
    _workspace: type[Workspace] = SqlWorkspace
    _scoped: type[SessionScoped] = SqlWorkspace
    _collector: type[GarbageCollector] = SqlWorkspace

"""The commands on a workspace in object storage (`--workdir s3://bucket/prefix`) or in a
database (`--workdir sqlite:///path/to/agents.db` or `postgresql://user@host/db`:
`SqlWorkspace`, the same way).

A bucket cannot be scanned like a folder, so the commands that read (ls, show, cat, grep,
stats, verify) first copy what they need into a private temporary folder in the on-disk
layout, with `ObjectStoreWorkspace.download`: each log's segments become one file, line for
line, so every line number and reference means the same as in the bucket. The commands then
run unchanged on that copy, and each path they print is shown as the object's URI. The copy
is removed when the command ends. `gc` acts on the bucket itself. `ls` on a database copies
nothing: it reads the rows (`_view.stored_session_rows`), and `show` without a session finds
the newest there and copies that session alone.

The store is opened as `ObjectStoreWorkspace(url)`: endpoint, region and credentials come
from the usual environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, ...), and `CTXOFFLOAD_DEADLINE` (seconds,
default 30) bounds each request, retries included. A database is opened as
`SqlWorkspace(url, payloads=$CTXOFFLOAD_PAYLOADS)`: the folder or bucket its data/ payloads
are kept in, when not in the database.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "BucketCopies",
    "BucketCopy",
    "is_database_url",
    "open_database",
    "open_store",
    "payloads_place",
]


class BucketCopy:
    """A local copy of (part of) a bucket's workspace."""

    def __init__(self, url: str, folder: Path, store: Any, problems: list[str]) -> None:
        self.url = url
        self.folder = folder
        self.store = store
        self.problems = problems


def is_database_url(url: str) -> bool:
    """Whether a --workdir names a database (`sqlite:///...`, `postgresql://...`) rather
    than a bucket."""
    return url.lower().startswith(("sqlite:", "postgresql:", "postgres:"))


def open_store(url: str) -> Any:
    """`ObjectStoreWorkspace(url)`, or `SqlWorkspace(url)` for a `sqlite:///` or
    `postgresql://` URL, with one clear line for what goes wrong."""
    import os

    from ..exceptions import CliError, ConfigError

    if is_database_url(url):
        return open_database(url)
    from ._schemes import check_scheme

    check_scheme(url)

    text = os.environ.get("CTXOFFLOAD_DEADLINE", "30")
    try:
        deadline = float(text)
    except ValueError:
        deadline = float("nan")
    try:
        from ..workspace import ObjectStoreWorkspace

        if not 0 < deadline <= ObjectStoreWorkspace.MAX_DEADLINE:  # NaN and infinity too
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise CliError(
                f"CTXOFFLOAD_DEADLINE={shown!r} is not a number of seconds from 0 to "
                f"{ObjectStoreWorkspace.MAX_DEADLINE:.0f} (a day)"
            )
        return ObjectStoreWorkspace(url, deadline=deadline)
    except ImportError as exc:
        from .._secrets import masked_url

        raise CliError(f"{masked_url(url)}: {exc}") from None
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def payloads_place() -> str | None:
    """Where a database's data/ payloads are kept, for the commands: `$CTXOFFLOAD_PAYLOADS`
    (a folder or a bucket URL, as `SqlWorkspace(payloads=...)` takes), else None (rows)."""
    import os

    return os.environ.get("CTXOFFLOAD_PAYLOADS") or None


def open_database(url: str) -> Any:
    """`SqlWorkspace(url)` on a database that holds a workspace: a command that reads never
    creates one (a mistyped path or database name would otherwise read as an empty
    workspace).

    Raises:
        CliError: the URL names no SQLite file or PostgreSQL database, there is no file
            there, the server cannot be reached, or the database holds no workspace.
    """
    import contextlib
    import os
    import urllib.parse

    from ..exceptions import CliError, ConfigError, OffloadError
    from ..workspace import SqlWorkspace

    try:
        store = SqlWorkspace(url, create=False, payloads=payloads_place())
    except (ConfigError, ImportError) as exc:
        raise CliError(str(exc)) from None
    if store.path is None:  # PostgreSQL: connect and check the tables, creating nothing
        import asyncio

        try:
            asyncio.run(store.initialize())
        except (ConfigError, OffloadError) as exc:
            raise CliError(f"--workdir {store.url!r}: {exc}") from None
        return store
    if not os.path.isfile(store.path):
        raise CliError(f"--workdir {url!r}: no database at {store.path}")
    import sqlite3

    # Read-only: a command that reads adds no table to another program's database.
    try:
        with contextlib.closing(
            sqlite3.connect(f"file:{urllib.parse.quote(store.path)}?mode=ro", uri=True)
        ) as db:
            ours = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
    except sqlite3.Error as exc:
        raise CliError(f"--workdir {url!r}: {store.path} cannot be read: {exc}") from None
    if ours is None:
        raise CliError(
            f"--workdir {url!r}: {store.path} is no ctxoffload workspace (it has no "
            "schema_version table)"
        )
    return store


class BucketCopies:
    """The copies of buckets one run of a command made, by local folder: `main` makes one
    for each run and removes what it holds when the command ends (`remove_all`); a command
    reaches it through its `Workdir`, and `shown` through `showing` (`_output.py`).

    Cheap to make: nothing is imported until a bucket is copied.
    """

    def __init__(self) -> None:
        self._copies: dict[str, BucketCopy] = {}

    def copy(
        self, url: str, *, session: str | None = None, data: bool = True, check: bool = False
    ) -> BucketCopy:
        """Copy the workspace at `url` (or one session of it) into a temporary folder.

        Raises:
            CliError: the store cannot be opened or read, the session id is hostile, or
                there is no such session.
        """
        import asyncio
        import tempfile
        from pathlib import Path

        from .._disk.layout import SESSIONS_DIR
        from ..exceptions import CliError, ConfigError, InvalidSessionId, OffloadError

        if session is not None:
            from .._disk.ids import validate_session_id

            try:
                validate_session_id(session)  # before any request
            except InvalidSessionId as exc:
                raise CliError(str(exc)) from None
        store = open_store(url)
        # Resolved: the workspace resolves its workdir, and `display` matches paths by prefix
        # (on macOS /tmp is a link to /private/tmp).
        folder = Path(tempfile.mkdtemp(prefix="ctxoffload-bucket-")).resolve()
        copy = BucketCopy(store.url, folder, store, [])
        self._copies[str(folder)] = copy
        try:
            if session is not None:
                sessions = asyncio.run(store.list_sessions())
                if session not in sessions:
                    from ._session_name import said_session

                    raise CliError(
                        f"no session {said_session(session)} in {store.url!r}: `ctxoffload ls` "
                        "lists the sessions"
                    )
            copy.problems = asyncio.run(
                store.download(folder, session=session, data=data, check=check)
            )
        except InvalidSessionId as exc:
            raise CliError(str(exc)) from None
        except (OffloadError, ConfigError) as exc:  # an error, not "nothing found": exit 2
            raise CliError(str(exc)) from None
        (folder / SESSIONS_DIR).mkdir(exist_ok=True)
        return copy

    def display(self, path: str) -> str:
        """A path for people: inside a copy, the object's URI; else the path itself."""
        if not self._copies:  # (every file `ctxoffload grep` prints in a folder comes here)
            return path
        for local, copy in list(self._copies.items()):
            if path == local:
                return copy.url
            if path.startswith(local + "/"):
                return copy.url + path[len(local) :]
        return path

    def as_uris(self, text: str) -> str:
        """A message for people with every path into a copy written as the object's URI (an
        error names the file the user asked for, not a temporary folder that is gone when
        the command ends)."""
        import os

        for local, copy in list(self._copies.items()):
            for form in {os.path.realpath(local), local}:
                text = text.replace(form, copy.url)
        return text

    def local_reference(self, reference: str) -> str:
        """A reference into a copied bucket (its URI) as the path of the copy's file."""
        for local, copy in list(self._copies.items()):
            if reference.startswith(copy.url + "/"):
                return local + reference[len(copy.url) :]
        return reference

    def problems(self, folder: str) -> list[str]:
        """What copying the bucket into `folder` found wrong (`PATH: problem` each), for
        `ctxoffload verify`; nothing when `folder` is no copy of a bucket."""
        copy = self._copies.get(folder)
        return list(copy.problems) if copy is not None else []

    def remove(self, folder: str) -> None:
        """Delete one copy (`ctxoffload ui` replaces its copy as it polls)."""
        import shutil

        if self._copies.pop(folder, None) is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def remove_all(self) -> None:
        """Delete every copy (when the command ends)."""
        if not self._copies:
            return  # nothing copied: no `shutil` to import (bz2, lzma) at every command's end
        import shutil

        while self._copies:
            local, _ = self._copies.popitem()
            shutil.rmtree(local, ignore_errors=True)

"""Where a `SqlWorkspace` keeps its data/ payloads when not in the database: a folder (a
`LocalWorkspace`'s data/) or a bucket (an `ObjectStoreWorkspace`'s), by composition: the
payloads are written and read through that workspace's own store (`Payloads`, read_reference),
so the rules of each place (atomic, no link followed; conditional uploads) hold unchanged,
and the database's `data` row names the place (`location`) with its body NULL.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from .._disk.layout import DATA_DIR, is_data_name
from ..exceptions import ConfigError, InvalidReference
from ._datastore import data_name
from ._gc import DATA_GRACE_SECONDS, data_files

if TYPE_CHECKING:
    from .._disk.payloads import StoreData
    from ._local import LocalWorkspace
    from ._objectstore import ObjectStoreWorkspace
    from ._sql_schema import Connection, Database
    from ._store import Payloads

__all__ = ["PayloadPlace", "SqlPayloads", "payload_place"]


class PayloadPlace:
    """A folder or a bucket holding data/ payloads for a database (`payload_place`).

    Args:
        workspace: the workspace whose data/ holds them.
    """

    def __init__(self, workspace: LocalWorkspace | ObjectStoreWorkspace) -> None:
        from ._local import LocalWorkspace

        self.workspace = workspace
        self.folder: str | None = None
        if isinstance(workspace, LocalWorkspace):
            self.folder = str(workspace.workdir)
            self.location = self.folder
        else:
            self.location = workspace.url
        """The place as a `data` row names it: a folder's absolute path, or a bucket URL."""

    def __repr__(self) -> str:
        return f"PayloadPlace({self.location!r})"

    def payloads(self) -> contextlib.AbstractAsyncContextManager[Payloads]:
        """The payloads of one offload, written by the place's own store (a folder: each
        as met, data/ held shared against its gc until the offload ends; a bucket: uploaded
        before the line, checked after it)."""
        return self.workspace._files.payloads()

    def where(self, name: str) -> str:
        """Where the payload `name` is (a path, or an object's URL)."""
        return f"{self.location}/{DATA_DIR}/{name}"

    async def read(self, name: str) -> bytes:
        """The payload `name`'s bytes, read by the place's reader (no link followed).

        Raises:
            InvalidReference: nothing readable is there, naming where it should be.
        """
        try:
            return await self.workspace.read_reference(self.where(name))
        except InvalidReference as exc:
            raise InvalidReference(
                f"data/{name} is kept outside the database, at {self.where(name)}, and "
                f"nothing readable is there ({exc}): restore that file or object"
            ) from exc

    @contextlib.contextmanager
    def held_for_gc(self) -> Iterator[None]:
        """Hold the place against writers while gc removes from it: a folder's data/
        exclusively (its writers hold it shared from their first payload until their
        line is written); a bucket, nothing (its writers check after their line)."""
        if self.folder is None:
            yield
            return
        with contextlib.ExitStack() as stack:
            try:
                data_fd = stack.enter_context(
                    self.workspace._disk.tree(DATA_DIR, create=False)  # type: ignore[union-attr]
                )
            except FileNotFoundError:
                data_fd = None  # no data/ yet: nothing to remove there
            if data_fd is not None:
                fcntl.flock(data_fd, fcntl.LOCK_EX)
            yield

    async def listing(self) -> dict[str, tuple[int, float]]:
        """The payloads in the place, by name: (size, last written or re-used), for gc to find
        those no row names (a copy written when the row was already in the database, or by a
        writer whose transaction then failed). Call it under `held_for_gc`."""
        if self.folder is None:
            from ._bucket_keys import data_objects

            objects = await data_objects(self.workspace._client)  # type: ignore[union-attr]
            return {
                info.key.rsplit("/", 1)[-1]: (info.size, info.last_modified.timestamp())
                for info in objects
            }

        def scan() -> dict[str, tuple[int, float]]:
            try:
                with self.workspace._disk.tree(DATA_DIR, create=False) as data_fd:  # type: ignore[union-attr]
                    files = data_files(data_fd)
            except FileNotFoundError:
                return {}
            return {
                name: (st.st_size, st.st_mtime) for name, st in files.items() if is_data_name(name)
            }

        return await asyncio.to_thread(scan)

    def remove(self, names: Sequence[str], loop: asyncio.AbstractEventLoop) -> None:
        """Remove the payloads `names` (those missing are skipped), from a worker thread
        inside gc's write transaction (a bucket's deletes run on `loop`)."""
        if not names:
            return
        if self.folder is None:
            client = self.workspace._client  # type: ignore[union-attr]
            keys = [f"{DATA_DIR}/{name}" for name in names]
            asyncio.run_coroutine_threadsafe(client.delete(keys), loop).result()
            return
        try:
            with self.workspace._disk.tree(DATA_DIR, create=False) as data_fd:  # type: ignore[union-attr]
                for name in names:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=data_fd)
        except FileNotFoundError:
            return


def payload_place(where: object) -> PayloadPlace:
    """The place `SqlWorkspace(payloads=...)` names: a folder (a path, or a
    `LocalWorkspace`), or a bucket (`s3://bucket/prefix` and the other bucket URLs, or an
    `ObjectStoreWorkspace` for an endpoint or credentials of its own).

    Raises:
        ConfigError: it names neither.
    """
    from ._local import LocalWorkspace
    from ._objectstore import ObjectStoreWorkspace

    if isinstance(where, LocalWorkspace | ObjectStoreWorkspace):
        return PayloadPlace(where)
    if isinstance(where, os.PathLike):
        where = os.fspath(where)
    if not isinstance(where, str) or not where or "\x00" in where:
        raise ConfigError(
            f"payloads={where!r} names no place: pass a folder, a bucket URL "
            "(s3://bucket/prefix), or None to keep payloads in the database"
        )
    if "://" in where:
        if where.partition("://")[0].lower() == "file":
            return PayloadPlace(LocalWorkspace(where.partition("://")[2]))
        return PayloadPlace(ObjectStoreWorkspace(where))
    return PayloadPlace(LocalWorkspace(where))


class SqlPayloads:
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

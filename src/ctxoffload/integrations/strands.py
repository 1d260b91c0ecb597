"""Strands Agents: `WorkspaceStorage`, Strands' two storage protocols on a ctxoffload workspace.

`WorkspaceStorage` works on a `LocalWorkspace`, an `ObjectStoreWorkspace` or an
`InMemoryWorkspace`, and answers two protocols.

Strands' `ContextOffloader` plugin hands each block of an oversized tool result to a storage
with `store(key, content, content_type) -> reference` and reads it back with
`retrieve(reference) -> (content, content_type)`:

- text (`text/plain`) becomes `sessions/<id>/tool_result-<key>.txt`, the same file ctxoffload
  writes for its own truncations: whole, never overwritten (a second result under one key
  gets `.2.txt`), recorded in events.jsonl, readable with Read / Grep and `ctxoffload grep`;
- anything else (JSON, images, documents) goes to the content-addressed `data/<sha256>.<ext>`,
  stored once however often it is offloaded, its media type kept in the extension (and, in
  a bucket, in the object's `Content-Type`), and a `data` event in the session's events.jsonl
  names it, so `gc` keeps it as long as the session (the model holds only the reference).

The plugin prefers this protocol when a storage has both, and deletes entries only from its
unified backends, so every reference the model was given keeps working.

The unified `strands.storage.Storage` (`write`, `read`, `delete`, `list`, `search`), which
Strands' `SnapshotSessionManager`, `FileMemoryStore` and context stash use, is a key-value
store over the same workspace:

- keys follow the rules of Strands' own backends (`'/'` runs collapse, leading and trailing
  `'/'` go; an empty key, a backslash or a `'..'` segment is a `StorageError`); any other
  text is a key (NUL, any Unicode, any length), mapped to a name that cannot leave the
  workspace;
- a value is stored in `data/` by its sha256 (like a payload above); a small
  `sessions/<id>.storage.<key's safe characters>.<16 hex of its sha256>/state.json` names
  it, replaced atomically on every write and removed by `delete`, so readers see the old
  value or the new one, whole;
- `list(prefix)` returns the full keys that start with the prefix, sorted; `search(query)`
  is Strands' default keyword scoring over keys and values;
- to the workspace's own tools each key is a session: `ctxoffload ls` lists it, `gc` with
  `older_than` removes the keys not written for that long, and the bytes of a deleted or
  replaced value leave data/ at the first `gc` that finds them unreferenced (after an
  hour's grace).

`storage.sync` has blocking twins of the five methods for code that is not async
(`SyncWorkspaceStorage`). Importing this module does not import Strands; the unified
methods import it on first use.

Example::

    from strands import Agent
    from strands.session import SnapshotSessionManager
    from strands.vended_plugins.context_offloader import ContextOffloader
    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.strands import WorkspaceStorage

    storage = WorkspaceStorage(LocalWorkspace("ws"), session_id="run-1")
    agent = Agent(
        model=...,
        tools=[...],
        plugins=[ContextOffloader(storage=storage)],
        session_manager=SnapshotSessionManager("chat-1", storage=storage),
    )
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import re
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from .._disk.layout import DATA_DIR, is_data_name
from .._doors.checks import arguments_checked, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import fresh_session, given_session
from .._doors.stores import BlockStore
from .._loop import run_private
from ..exceptions import ConfigError, CtxOffloadError, InvalidReference, InvalidSessionId
from ..workspace import Workspace

__all__ = ["OffloadingConversationManager", "SyncWorkspaceStorage", "WorkspaceStorage"]  # noqa: F822

T = TypeVar("T")

_TOOL_NAME = "strands"
_STORAGE_DOOR = DOORS["strands-storage"]
_INSTALL_HINT = "Strands Agents is not installed: pip install 'ctxoffload[strands]'"

# The unified Storage's entries: each key is a session named `<session_id>.storage.<slug>.<16
# hex>`, whose state.json maps the key to the data/ reference of its value. Session names
# are at most 128 characters; a session id of at most 80 leaves the slug 22 or more.
_ENTRY_INFIX = ".storage."
_MAX_SESSION_NAME = 128
_DIGEST_HEX = 16
_MAX_SESSION_ID = _MAX_SESSION_NAME - len(_ENTRY_INFIX) - (1 + _DIGEST_HEX) - 22
# state.json is {"strands_storage": {key: reference}}: the key is an object's name, not a
# value, because `ctxoffload verify` checks string values as references and a key may look
# like one (`sessions/x/state.json`).
_STATE_FIELD = "strands_storage"
# One output character per input character, so a key prefix maps to a name prefix and
# `list` can skip the entries that cannot match without reading them.
_UNSAFE_CHARACTER = re.compile(r"[^A-Za-z0-9._-]")
_SLASH_RUN = re.compile(r"/+")
_ENTRY_END = re.compile(rf"\.[0-9a-f]{{{_DIGEST_HEX}}}\Z")
# state.json reads in flight at once while listing (one GET each on a bucket).
_LIST_CONCURRENCY = 16


def _strands(module: str) -> Any:
    """`strands` or one of its modules, imported on first use (mypy need not know it).

    Raises:
        ConfigError: Strands is not installed (with the command that installs it).
    """
    try:
        return importlib.import_module(f"strands{module}")
    except ImportError as exc:
        raise ConfigError(_INSTALL_HINT) from exc


@contextlib.contextmanager
def _failing_as(storage_error: Any, action: str) -> Iterator[None]:
    """What the workspace fails with inside, raised as Strands' `StorageError`: `cannot
    {action}: {the failure}`."""
    try:
        yield
    except (OSError, CtxOffloadError) as exc:
        raise storage_error(f"cannot {action}: {exc}") from exc


def _shown(text: str, limit: int = 60) -> str:
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


@arguments_checked
class WorkspaceStorage:
    """Strands' storages on a ctxoffload workspace: `ContextOffloader`'s and the unified one.

    `store` / `retrieve` are the `ContextOffloader` protocol; `write` / `read` / `delete` /
    `list` / `search` are `strands.storage.Storage` (see the module docstring for both);
    `sync` has blocking twins of the unified methods.

    Args:
        workspace: a `Workspace`: a `LocalWorkspace`, `ObjectStoreWorkspace` or
            `InMemoryWorkspace` (a custom one needs every method `Workspace` declares).
        session_id: the session whose folder holds the text results (a plain name, checked
            now); None: a new session for this storage (logged once). The unified keys live
            in sessions named after it, so storages with different session ids on one
            workspace see different keys. The unified methods need it to be at most 80
            characters.
        isolate: `retrieve` refuses a reference of another session (its folder, or a
            data/ file its record does not name), as a `KeyError`, whatever the
            workspace's `isolate_sessions`; the default, since a storage is bound to one
            session. Its sub-agents' sessions and fork origin stay readable. False reads
            anything in the workspace.

    Raises:
        InvalidSessionId: `session_id` is not a plain name.
        ConfigError: `workspace` is not a `Workspace` (the message names what it lacks).
    """

    def __init__(
        self, workspace: Workspace, session_id: str | None = None, *, isolate: bool = True
    ) -> None:
        self.workspace = checked_workspace(workspace, _STORAGE_DOOR)
        self.session_id = given_session(session_id) or fresh_session(
            _STORAGE_DOOR, "no session_id was given to the storage"
        )
        self._blocks = BlockStore(
            self.workspace, _STORAGE_DOOR, self.session_id, tool_name=_TOOL_NAME, isolate=isolate
        )

    @property
    def isolate(self) -> bool:
        """Whether `retrieve` refuses a reference of another session."""
        return self._blocks.isolate

    @isolate.setter
    def isolate(self, isolate: bool) -> None:
        self._blocks.isolate = isolate

    def __repr__(self) -> str:
        return f"WorkspaceStorage({self.workspace!r}, session_id={self.session_id!r})"

    async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
        """Store one block and return its reference (a path, or an `s3://` URI).

        A block stored in data/ is named by a `data` event in the session's events.jsonl,
        which `gc` reads: the model holds only the reference, and the file lives as long as
        the session does.

        Raises:
            OffloadError: the workspace refused the write (disk full, store down); Strands
                then keeps the whole result in the context.
        """
        return await self._blocks.store(key, bytes(content), content_type)

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """The bytes and media type behind a reference `store` returned.

        Raises:
            KeyError: the reference names nothing in the workspace (or lies outside it),
                as Strands' own storages do; or, with `isolate`, it is another session's
                (the `KeyError`'s cause says so).
        """
        try:
            return await self._blocks.retrieve(reference)
        except InvalidReference as exc:
            raise KeyError(reference) from exc

    # -- strands.storage.Storage ----------------------------------------------------------

    @property
    def sync(self) -> SyncWorkspaceStorage:
        """Blocking twins of `write`, `read`, `delete`, `list` and `search` for sync code."""
        return SyncWorkspaceStorage(self)

    @property
    def _ephemeral(self) -> object:
        # Strands marks storage that a restart empties with this sentinel (its stash then
        # keeps entries inline in a session snapshot); of the workspaces, only in-memory is.
        from ..workspace import InMemoryWorkspace

        if not isinstance(self.workspace, InMemoryWorkspace):
            return None
        try:
            return importlib.import_module("strands.storage.storage")._EPHEMERAL
        except (ImportError, AttributeError):
            return None

    async def write(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing any value it had.

        The bytes go to data/ first, then the key's state.json is replaced in one step, so a
        reader sees the old value or the new one, never part of either; of writers racing on
        one key, one whole value wins.

        Raises:
            strands.types.exceptions.StorageError: the key is refused (see the module
                docstring) or the workspace refused the write (the old value, if any, is
                kept).
            InvalidSessionId: `session_id` is longer than 80 characters.
            ConfigError: Strands is not installed.
        """
        storage_error = self._unified()
        normalized = _normalized_key(key, storage_error)
        name = self._entry_name(normalized)
        with _failing_as(storage_error, f"write storage key {_shown(key)}"):
            reference = str(await self.workspace.store_bytes(bytes(data), None))
            await self.workspace.write_state(name, {_STATE_FIELD: {normalized: reference}})

    async def read(self, key: str) -> bytes | None:
        """The bytes last written under `key`, or None if there are none.

        Raises:
            strands.types.exceptions.StorageError: the key is refused, the workspace failed,
                or the value's bytes are gone from data/ (removed by hand, or evicted by an
                `InMemoryWorkspace(evict_after_turns=N)`).
            InvalidSessionId: `session_id` is longer than 80 characters.
            ConfigError: Strands is not installed.
        """
        storage_error = self._unified()
        normalized = _normalized_key(key, storage_error)
        with _failing_as(storage_error, f"read storage key {_shown(key)}"):
            state = await self.workspace.read_state(self._entry_name(normalized))
        entry = _entry_in(state)
        if entry is None or entry[0] != normalized:
            return None
        return await self._value(key, entry[1], storage_error)

    async def _value(self, key: str, reference: str, storage_error: Any) -> bytes:
        try:
            data, _ = await self.workspace.read_bytes(reference)
            return bytes(data)
        except InvalidReference as exc:
            first: CtxOffloadError | OSError = exc
        except (OSError, CtxOffloadError) as exc:
            raise storage_error(f"cannot read storage key {_shown(key)}: {exc}") from exc
        # A LocalWorkspace's references are absolute paths and a bucket's are URIs: a
        # workspace moved to another folder or bucket still holds data/<name> inside it.
        name = reference.rsplit("/", 1)[-1]
        moved = f"{DATA_DIR}/{name}"
        if is_data_name(name) and reference != moved:
            try:
                data, _ = await self.workspace.read_bytes(moved)
                return bytes(data)
            except (OSError, CtxOffloadError):
                pass
        raise storage_error(
            f"the value of storage key {_shown(key)} is gone from the workspace: {first}"
        ) from first

    async def delete(self, key: str) -> None:
        """Remove `key` and its value; a key with no value is not an error.

        The key is gone at once. Its bytes stay in data/ until the workspace's `gc` finds
        no reference to them (another key or a session may hold the same bytes).

        Raises:
            strands.types.exceptions.StorageError: the key is refused, or the workspace failed.
            InvalidSessionId: `session_id` is longer than 80 characters.
            ConfigError: Strands is not installed.
        """
        storage_error = self._unified()
        normalized = _normalized_key(key, storage_error)
        with _failing_as(storage_error, f"delete storage key {_shown(key)}"):
            await self.workspace.purge_session(self._entry_name(normalized))

    async def list(self, query: str = "") -> builtins.list[str]:
        """The keys that start with the prefix `query`, sorted; `""` lists every key.

        The prefix is normalised as Strands' backends do (`'/'` runs collapse, leading
        `'/'` go, a trailing one stays). Costs one listing of the workspace's sessions and
        one state.json read per key whose safe characters match the prefix.

        Raises:
            strands.types.exceptions.StorageError: the prefix has a backslash or a `'..'`
                segment, or the workspace failed.
            InvalidSessionId: `session_id` is longer than 80 characters.
            ConfigError: Strands is not installed.
        """
        import asyncio

        storage_error = self._unified()
        prefix = _normalized_prefix(query, storage_error)
        entries = self._entry_prefix()
        wanted = entries + _slug(prefix)[: self._slug_budget()]
        limit = asyncio.Semaphore(_LIST_CONCURRENCY)

        async def key_of(name: str) -> str | None:
            async with limit:
                entry = _entry_in(await self.workspace.read_state(name))
            # A name that the key does not map to is not an entry of this storage (a
            # session of another storage whose id shares the prefix, or a planted one).
            if entry is None or self._entry_name(entry[0]) != name:
                return None
            return entry[0]

        with _failing_as(storage_error, f"list storage keys under {_shown(query)}"):
            names = [
                name
                for name in await self.workspace.list_sessions()
                if name.startswith(wanted) and _ENTRY_END.search(name[len(entries) :])
            ]
            keys = await asyncio.gather(*(key_of(name) for name in names))
        return sorted(key for key in keys if key is not None and key.startswith(prefix))

    async def search(self, query: str) -> builtins.list[Any]:
        """Keys whose key words and value share words with `query`, best first.

        Strands' default `KeywordSearchStrategy` (distinct query words present, stop words
        ignored, values read as UTF-8 with replacement); each result carries the value.
        Reads every key's value, so it suits thousands of keys, not millions.

        Returns:
            `strands.storage.storage.StorageSearchResult` items.

        Raises:
            strands.types.exceptions.StorageError: the workspace failed while listing.
            InvalidSessionId: `session_id` is longer than 80 characters.
            ConfigError: Strands is not installed.
        """
        self._unified()
        keyword = _strands(".storage.search.keyword")
        return builtins.list(await keyword.KeywordSearchStrategy().search(self, query))

    def _unified(self) -> Any:
        """Check that the unified methods can run here; return Strands' `StorageError`."""
        self._entry_prefix()
        return _strands(".types.exceptions").StorageError

    def _entry_prefix(self) -> str:
        if len(self.session_id) > _MAX_SESSION_ID:
            raise InvalidSessionId(
                f"session_id {_shown(self.session_id)} is {len(self.session_id)} characters: "
                f"the strands.storage methods need at most {_MAX_SESSION_ID}, because each "
                "key is a session named after it; pass a shorter session_id"
            )
        return f"{self.session_id}{_ENTRY_INFIX}"

    def _slug_budget(self) -> int:
        return _MAX_SESSION_NAME - len(self._entry_prefix()) - 1 - _DIGEST_HEX

    def _entry_name(self, normalized_key: str) -> str:
        """The session that holds a key: its safe characters, then a digest of all of it."""
        import hashlib  # not at import: importing this module stays free

        raw = normalized_key.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()[:_DIGEST_HEX]
        return f"{self._entry_prefix()}{_slug(normalized_key)[: self._slug_budget()]}.{digest}"


class SyncWorkspaceStorage:
    """Blocking twins of `WorkspaceStorage`'s `strands.storage` methods, for sync code.

    Each call runs the async method to completion on a new event loop in the calling thread
    (`asyncio.run`, about 0.2 ms on top of the work). Called on a thread whose event loop is
    running (inside an `async def`, or a plain callback that loop runs) it does nothing and
    raises RuntimeError: waiting there would stall that loop and everything it serves, and
    deadlock if the work needed the loop. Await the async method there instead, or call
    this one from a worker thread (`asyncio.to_thread`; a Strands sync tool runs in one).

    Args:
        storage: the `WorkspaceStorage` to call.

    Example::

        storage = WorkspaceStorage(LocalWorkspace("ws"), session_id="run-1")
        storage.sync.write("notes/today.md", b"# Today")
        assert storage.sync.read("notes/today.md") == b"# Today"
    """

    def __init__(self, storage: WorkspaceStorage) -> None:
        self.storage = storage

    def __repr__(self) -> str:
        return f"SyncWorkspaceStorage({self.storage!r})"

    def write(self, key: str, data: bytes) -> None:
        """`WorkspaceStorage.write`, blocking."""
        _run_blocking("write", lambda: self.storage.write(key, data))

    def read(self, key: str) -> bytes | None:
        """`WorkspaceStorage.read`, blocking."""
        return _run_blocking("read", lambda: self.storage.read(key))

    def delete(self, key: str) -> None:
        """`WorkspaceStorage.delete`, blocking."""
        _run_blocking("delete", lambda: self.storage.delete(key))

    def list(self, query: str = "") -> builtins.list[str]:
        """`WorkspaceStorage.list`, blocking."""
        return _run_blocking("list", lambda: self.storage.list(query))

    def search(self, query: str) -> builtins.list[Any]:
        """`WorkspaceStorage.search`, blocking."""
        return _run_blocking("search", lambda: self.storage.search(query))


def _run_blocking(method: str, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run `call()` to completion here, unless this thread's event loop is running."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_private(call())
    # Checked before call() makes the coroutine, so none is left never awaited.
    raise RuntimeError(
        f"WorkspaceStorage.sync.{method}() was called on the thread of a running event loop, "
        f"which waiting would stall: use `await storage.{method}(...)` there, or call "
        f"storage.sync.{method} from another thread (asyncio.to_thread)"
    )


def _normalized_key(key: object, storage_error: Any) -> str:
    """`key` as Strands' path-based backends normalise it, or their refusal as StorageError."""
    if not isinstance(key, str):
        raise storage_error(f"storage key {key!r} is a {type(key).__name__}: pass a str")
    if "\\" in key:
        raise storage_error(
            f"storage key {_shown(key)} has a backslash: Strands' storages refuse it; use '/'"
        )
    normalized = _SLASH_RUN.sub("/", key).strip("/")
    if not normalized:
        raise storage_error(f"storage key {_shown(key)} is empty once its '/' are removed")
    if ".." in normalized.split("/"):
        raise storage_error(
            f"storage key {_shown(key)} has a '..' segment: Strands' storages refuse it; "
            "name the value without '..'"
        )
    return normalized


def _normalized_prefix(prefix: object, storage_error: Any) -> str:
    """A `list` prefix as Strands' backends normalise it (a trailing '/' stays)."""
    if not isinstance(prefix, str):
        raise storage_error(
            f"storage prefix {prefix!r} is a {type(prefix).__name__}: pass a str prefix"
        )
    if "\\" in prefix:
        raise storage_error(
            f"storage prefix {_shown(prefix)} has a backslash: Strands' storages refuse it; use '/'"
        )
    normalized = _SLASH_RUN.sub("/", prefix).lstrip("/")
    if ".." in normalized.split("/"):
        raise storage_error(
            f"storage prefix {_shown(prefix)} has a '..' segment: Strands' storages refuse it"
        )
    return normalized


def _slug(text: str) -> str:
    return _UNSAFE_CHARACTER.sub("_", text)


def _entry_in(state: object) -> tuple[str, str] | None:
    """The (key, reference) a unified entry's state.json holds, or None if it holds none."""
    if not isinstance(state, dict):
        return None
    entry = state.get(_STATE_FIELD)
    if not isinstance(entry, dict) or len(entry) != 1:
        return None
    ((key, reference),) = entry.items()
    if not isinstance(key, str) or not isinstance(reference, str):
        return None
    return key, reference


def __getattr__(name: str) -> Any:
    # `OffloadingConversationManager` subclasses Strands' ConversationManager, so it is built
    # (and Strands imported) on first use of the name, never at import.
    if name == "OffloadingConversationManager":
        from ._strands_manager import OffloadingConversationManager

        globals()[name] = OffloadingConversationManager
        return OffloadingConversationManager
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""`WorkspaceBackend`: deepagents' `BackendProtocol` on a ctxoffload workspace.

deepagents is imported with this module: `ctxoffload.integrations.deepagents` imports it
only on first use of `WorkspaceBackend`, which subclasses deepagents' `BackendProtocol`.

A file of the route is a tool_result file of the run's session (see the public module's
docstring); its versions are never overwritten, and the session's events name them in order,
so the events are the index: the last `tool_result` event recorded for a path names its
current version.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from .._disk.events import DataFile, EventKind
from .._doors.checks import arguments_checked, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session, given_session
from .._doors.opening import record_door
from .._doors.recent import RecentKeys
from .._loop import run_private
from ..exceptions import ConfigError, CtxOffloadError
from ..workspace import Workspace

__all__ = ["WorkspaceBackend"]

try:
    _protocol: Any = importlib.import_module("deepagents.backends.protocol")
    _utils: Any = importlib.import_module("deepagents.backends.utils")
except ImportError as exc:  # pragma: no cover - exercised where deepagents is absent
    raise ConfigError("deepagents is not installed: pip install 'ctxoffload[deepagents]'") from exc

_T = TypeVar("_T")

TOOL_RESULTS = "/large_tool_results/"
HISTORY = "/conversation_history/"
# A path the model or deepagents names: longer ones are refused, not hashed into a name.
_MAX_PATH = 1024
_BINARY = "application/octet-stream"


@dataclass(frozen=True)
class _Version:
    """The current version of one file of the route: the stored parts it is made of (a
    whole version, then the parts appended to it), its size and when it last changed."""

    parts: tuple[str, ...]
    size: int
    modified_at: str
    binary: bool


def _blocking(call: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run `call()` to completion from sync code, with this thread's context (the LangGraph
    config that names the session): here when no event loop runs in this thread, else on a
    worker thread, so a running loop is never re-entered."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_private(call())
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(context.run, run_private, call()).result()


def _blocking_twin(method: Callable[..., Coroutine[Any, Any, _T]]) -> Callable[..., _T]:
    """The sync method of deepagents' protocol that runs the async `method` (`aread` ->
    `read`), with its signature: deepagents reads it to see which arguments a backend takes
    (`max_count`)."""

    @functools.wraps(method)
    def twin(self: Any, *args: Any, **kwargs: Any) -> _T:
        return _blocking(lambda: method(self, *args, **kwargs))

    twin.__name__ = method.__name__.removeprefix("a")
    twin.__qualname__ = twin.__qualname__.rsplit(".", 1)[0] + "." + twin.__name__
    return twin


@arguments_checked
class WorkspaceBackend(_protocol.BackendProtocol):  # type: ignore[misc]
    """A deepagents backend whose files are a ctxoffload session's, for one route.

    Route it through deepagents' `CompositeBackend` under the prefix it was made for
    (`WorkspaceBackend.routes` makes both), which hands it paths with the prefix stripped.

    Args:
        workspace: a `LocalWorkspace`, `ObjectStoreWorkspace` or `InMemoryWorkspace`.
        route: the `CompositeBackend` prefix this backend serves, e.g.
            `"/large_tool_results/"`; it names the files' tool in the session's events, so
            two routes on one workspace never see each other's files.
        session_id: the session (a plain name, checked now) of calls outside a LangGraph
            run or in a run without a `thread_id`; None: a new session of this backend's
            own for those (logged once). Inside a run with one, the session is the run's
            `thread_id`, mapped by the one rule every door follows (docs/guides/hosts.md).

    Raises:
        InvalidSessionId: `session_id` is not a plain name.
        ConfigError: `workspace` is not a `Workspace` (a path: pass `LocalWorkspace(path)`;
            a workdir that is a file), or `route` is not `/name/`.
    """

    def __init__(
        self,
        workspace: Workspace,
        route: str = TOOL_RESULTS,
        *,
        session_id: str | None = None,
    ) -> None:
        self.workspace = checked_workspace(workspace, _DOOR)
        if not (isinstance(route, str) and len(route) > 2 and route[0] == route[-1] == "/"):
            raise ConfigError(f"route {route!r} is not a CompositeBackend prefix like '/name/'")
        self.route = route
        self.session_id = given_session(session_id)
        # The sessions this backend (and the other routes made with it) recorded a `door`
        # event in: one per session and process, at its first write (the most recent kept:
        # a server's threads come and go).
        self._announced = RecentKeys()
        self._tool = f"deepagents{route}"
        self._appended = f"{self._tool} (appended)"

    @classmethod
    def routes(
        cls, workspace: Workspace, *, session_id: str | None = None
    ) -> dict[str, WorkspaceBackend]:
        """The `routes=` of a `CompositeBackend` that puts deepagents' evicted tool results
        and summarised history on `workspace` (both in the same session)."""
        first = cls(workspace, TOOL_RESULTS, session_id=session_id)
        if first.session_id is None:  # one new session for both routes
            session_id = first.session_id = fresh_session(
                _DOOR, "a call outside a run with a thread_id, and no session_id given"
            )
        second = cls(workspace, HISTORY, session_id=session_id)
        second._announced = first._announced
        return {TOOL_RESULTS: first, HISTORY: second}

    def __repr__(self) -> str:
        return (
            f"WorkspaceBackend({self.workspace!r}, {self.route!r}, session_id={self.session_id!r})"
        )

    # -- the session and the index ------------------------------------------------------------

    def _session(self) -> str:
        """The session this call's files belong to: the LangGraph run's `thread_id`, else
        the `session_id` given at construction (else this backend's own new one)."""
        thread = self._thread()
        if thread is not None:
            return conversation_session(thread)
        if self.session_id is None:
            self.session_id = fresh_session(
                _DOOR, "a call outside a run with a thread_id, and no session_id given"
            )
        return self.session_id

    @staticmethod
    def _thread() -> object:
        """The LangGraph run's `thread_id`, or None (outside a run, or a run without)."""
        try:
            config = importlib.import_module("langgraph.config").get_config()
        except (ImportError, RuntimeError):  # outside a run
            return None
        thread = (config.get("configurable") or {}).get("thread_id")
        return None if thread is None or thread == "" else thread

    async def _announce(self, session: str) -> None:
        """Record the door's `door` event at the first write to `session` (per process)."""
        if session not in self._announced:
            self._announced.add(session)
            await record_door(self.workspace, _DOOR, session, self._thread())

    async def _index(self, session: str) -> dict[str, _Version]:
        """Each file of this route in the session (key: its path without the leading '/'),
        at its last version, from the session's events."""
        found: dict[str, _Version] = {}
        for event in await self.workspace.read_events(session):
            kind, tool = event.get("kind"), event.get("tool_name")
            if kind == EventKind.TOOL_RESULT and tool in (self._tool, self._appended):
                key, binary = str(event.get("tool_id")), False
            elif kind == EventKind.DATA and str(event.get("key", "")).startswith(self._tool):
                key, binary = str(event["key"])[len(self._tool) :], True
            else:
                continue
            parts: tuple[str, ...] = (str(event.get("reference")),)
            size = int(event.get("bytes") or 0)
            earlier = found.get(key)
            if tool == self._appended and earlier is not None and not earlier.binary:
                parts, size = earlier.parts + parts, earlier.size + size
            found[key] = _Version(parts, size, str(event.get("time") or ""), binary)
        return found

    async def _content(self, version: _Version) -> bytes:
        if version.binary:
            data, _ = await self.workspace.read_bytes(version.parts[0])
            return bytes(data)
        parts = [await self.workspace.read_reference(part) for part in version.parts]
        return b"".join(parts)

    async def _current(self, session: str, key: str) -> tuple[_Version | None, bytes | None]:
        """A file's current version (None: no such file) and, if it is text, its bytes."""
        version = (await self._index(session)).get(key)
        if version is None or version.binary:
            return version, None
        return version, await self._content(version)

    async def _store(self, session: str, key: str, data: bytes, current: bytes | None) -> None:
        """Store a new version of a file whose current text is `current` (None: no file,
        or bytes).

        Text that extends the current text (how deepagents adds a section to its history:
        the whole old text plus the new) stores only what it adds, as a part appended to
        the current version; other text becomes a whole version. Either is a tool_result
        file of the session, never overwritten. Bytes that are not UTF-8 go to data/,
        named by a `data` event.
        """
        await self._announce(session)
        try:
            # A text's lone surrogates come encoded as they are (`surrogatepass`): it is text.
            text = data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            reference = str(await self.workspace.store_bytes(data, _BINARY))
            stored = DataFile(
                reference=reference, bytes=len(data), media_type=_BINARY, key=self._tool + key
            )
            await self.workspace.record_event(session, stored.kind, **stored.fields())
            return
        if current == data:
            return
        name = self._tool
        if current and data.startswith(current):
            text, name = data[len(current) :].decode("utf-8", "surrogatepass"), self._appended
        await self.workspace.offload_tool_result(session, {"id": key, "name": name, "output": text})

    # -- BackendProtocol, async ------------------------------------------------------------------

    async def als(self, path: str) -> Any:
        """The files and folders directly under `path`."""
        where = _folder(path or "/")
        if where is None:
            return _protocol.LsResult(error=_invalid(path))
        entries: dict[str, Any] = {}
        for key, version in sorted((await self._index(self._session())).items()):
            if where and not key.startswith(where + "/"):
                continue
            rest = key[len(where) + 1 :] if where else key
            head, _, tail = rest.partition("/")
            name = f"/{where}/{head}" if where else f"/{head}"
            if tail:
                entries.setdefault(name, {"path": name + "/", "is_dir": True})
            else:
                entries[name] = _info(name, version)
        return _protocol.LsResult(entries=list(entries.values()))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> Any:
        """A window of a file's lines, raw (deepagents numbers them)."""
        key = _key(file_path)
        if key is None:
            return _protocol.ReadResult(error=_invalid(file_path))
        version = (await self._index(self._session())).get(key)
        if version is None:
            return _protocol.ReadResult(error=f"Error: File '{file_path}' not found")
        data = await self._content(version)
        if version.binary:
            import base64

            encoded = base64.standard_b64encode(data).decode("ascii")
            return _protocol.ReadResult(file_data={"content": encoded, "encoding": "base64"})
        file_data = {"content": data.decode("utf-8", "replace"), "encoding": "utf-8"}
        return _utils.slice_read_response(file_data, offset, limit)

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> Any:
        """Lines holding `pattern` (literal text), in the files under `path`."""
        where = _folder(path or "/")
        if where is None:
            return _protocol.GrepResult(error=_invalid(str(path)))
        files = {}
        for key, version in (await self._index(self._session())).items():
            if version.binary or (where and key != where and not key.startswith(where + "/")):
                continue
            text = (await self._content(version)).decode("utf-8", "replace")
            files["/" + key] = {"content": text, "encoding": "utf-8"}
        return _utils.grep_matches_from_files(files, pattern, path, glob, max_count=max_count)

    async def aglob(self, pattern: str, path: str | None = None) -> Any:
        """The files under `path` whose path matches `pattern`, newest first."""
        where = _folder(path or "/")
        if where is None:
            return _protocol.GlobResult(error=_invalid(str(path)))
        try:
            matches = _utils.compile_grep_include_glob(pattern)
        except _utils.InvalidGlobPatternError as exc:
            return _protocol.GlobResult(error=str(exc))
        found = []
        for key, version in (await self._index(self._session())).items():
            if not where:
                relative = key
            elif key.startswith(where + "/"):
                relative = key[len(where) + 1 :]
            elif key == where:
                relative = key.rsplit("/", 1)[-1]
            else:
                continue
            if matches(relative):
                found.append(_info("/" + key, version))
        found.sort(key=lambda info: info["modified_at"], reverse=True)
        return _protocol.GlobResult(matches=found)

    async def awrite(self, file_path: str, content: str) -> Any:
        """Store `content` as the file's new version (earlier versions stay in the session)."""
        key = _key(file_path)
        if key is None:
            return _protocol.WriteResult(error=_invalid(file_path))
        session = self._session()
        try:
            _, current = await self._current(session, key)
            await self._store(session, key, content.encode("utf-8", "surrogatepass"), current)
        except (OSError, CtxOffloadError) as exc:
            return _protocol.WriteResult(error=f"Error: cannot write '{file_path}': {exc}")
        return _protocol.WriteResult(path=file_path)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> Any:
        """Replace `old_string` in the file and store the result as its new version."""
        key = _key(file_path)
        if key is None:
            return _protocol.EditResult(error=_invalid(file_path))
        session = self._session()
        version, current = await self._current(session, key)
        if version is None:
            return _protocol.EditResult(error=f"Error: File '{file_path}' not found")
        if current is None:
            return _protocol.EditResult(
                error="Error: Cannot edit binary files with text replacements."
            )
        text = current.decode("utf-8", "surrogatepass")
        edited = _utils.perform_string_replacement(text, old_string, new_string, replace_all)
        if isinstance(edited, str):
            return _protocol.EditResult(error=edited)
        text, occurrences = edited
        try:
            await self._store(session, key, text.encode("utf-8", "surrogatepass"), current)
        except (OSError, CtxOffloadError) as exc:
            return _protocol.EditResult(error=f"Error: cannot edit '{file_path}': {exc}")
        return _protocol.EditResult(path=file_path, occurrences=int(occurrences))

    async def adelete(self, file_path: str) -> Any:
        """Refused: the workspace keeps every version a run stored, as its events name them;
        `ctxoffload gc` removes whole sessions."""
        return _protocol.DeleteResult(
            error=f"Error: '{file_path}' is kept in a ctxoffload workspace, which never deletes "
            "one file (ctxoffload gc removes whole sessions)"
        )

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[Any]:
        """Store each file as a new version: text as a tool_result file, bytes in data/."""
        session = self._session()
        answers = []
        for path, data in files:
            key = _key(path)
            error: str | None = None
            if key is None:
                error = _protocol.INVALID_PATH
            else:
                try:
                    _, current = await self._current(session, key)
                    await self._store(session, key, bytes(data), current)
                except (OSError, CtxOffloadError) as exc:
                    error = f"cannot store: {exc}"
            answers.append(_protocol.FileUploadResponse(path=path, error=error))
        return answers

    async def adownload_files(self, paths: list[str]) -> list[Any]:
        """Each file's current version, whole, as bytes."""
        index = await self._index(self._session())
        answers = []
        for path in paths:
            key = _key(path)
            version = index.get(key) if key is not None else None
            if key is None:
                answers.append(_protocol.FileDownloadResponse(path=path, error="invalid_path"))
            elif version is None:
                answers.append(_protocol.FileDownloadResponse(path=path, error="file_not_found"))
            else:
                content = await self._content(version)
                answers.append(_protocol.FileDownloadResponse(path=path, content=content))
        return answers

    # -- BackendProtocol, sync: the async methods run to completion here ---------------------

    ls = _blocking_twin(als)
    read = _blocking_twin(aread)
    grep = _blocking_twin(agrep)
    glob = _blocking_twin(aglob)
    write = _blocking_twin(awrite)
    edit = _blocking_twin(aedit)
    delete = _blocking_twin(adelete)
    upload_files = _blocking_twin(aupload_files)
    download_files = _blocking_twin(adownload_files)


def _key(path: object) -> str | None:
    """A file's path under the route as the name it is stored by (no leading '/'), or None
    for a path that cannot name one: not a str, relative, a NUL or backslash, a '.' or '..'
    segment, longer than 1024 characters, or a folder."""
    where = _folder(path)
    if not where or not isinstance(path, str) or path.endswith("/"):
        return None
    return where


def _folder(path: object) -> str | None:
    """A folder's path under the route without its '/' at either end ('' for the root), or
    None for a path that cannot be one (see `_key`)."""
    if not isinstance(path, str) or not path.startswith("/") or len(path) > _MAX_PATH:
        return None
    if "\x00" in path or "\\" in path:
        return None
    parts = [part for part in path.split("/") if part]
    if any(part in (".", "..") for part in parts):
        return None
    return "/".join(parts)


def _invalid(path: str) -> str:
    shown = path if len(path) <= 80 else f"{path[:80]}... ({len(path)} characters)"
    return (
        f"Error: invalid path {shown!r}: use an absolute path without '..', '.', NUL or '\\', "
        f"at most {_MAX_PATH} characters"
    )


def _info(path: str, version: _Version) -> dict[str, Any]:
    return {"path": path, "is_dir": False, "size": version.size, "modified_at": version.modified_at}


_DOOR = DOORS["deepagents"]

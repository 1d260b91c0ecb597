"""LocalWorkspace: the on-disk workspace of DESIGN.md section 3."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._payloads import (
    as_message_list,
    context_payload,
    count_lines,
    offload_block,
    render_tool_output,
    tool_output_of,
)
from ..exceptions import InvalidReference, OffloadError
from ..references import ContextRef
from ._datastore import fsync_dir, store_bytes
from ._ids import tool_file_stem, validate_session_id
from ._jsonl import JsonlAppender, dumps_line, read_jsonl

__all__ = ["LocalWorkspace"]

logger = logging.getLogger("ctxoffload")

CONTEXT_FILE = "context.jsonl"
EVENTS_FILE = "events.jsonl"
STATE_FILE = "state.json"


def now_iso() -> str:
    """The current UTC time, ISO-8601 with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _same_content(path: Path, data: bytes) -> bool:
    try:
        if path.stat().st_size != len(data):
            return False
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest()
    except FileNotFoundError:
        return False


class LocalWorkspace:
    """A workspace directory that holds everything offloaded from an agent's context.

    Implements the `Offloader` protocol. Every public method is async and does its file
    work in one worker-thread hop. References are paths in the form `workdir` was given:
    a relative workdir gives relative paths, an absolute one absolute paths.

    Args:
        workdir: the workspace root; created on first use.
        fsync: flush every write to stable storage before returning (the default). Turn
            off only where losing the last writes on a power cut is acceptable.

    Example:
        ```python
        ws = LocalWorkspace(workdir="./agent_workspace")
        await ws.initialize()
        path = await ws.offload_tool_result("run-42", result_block)
        ```
    """

    def __init__(
        self, workdir: str | os.PathLike[str] = "./agent_workspace", *, fsync: bool = True
    ):
        self.workdir = Path(workdir)
        self.fsync = fsync
        self._jsonl = JsonlAppender(fsync=fsync)

    def __repr__(self) -> str:
        return f"LocalWorkspace(workdir={str(self.workdir)!r})"

    # -- layout ---------------------------------------------------------------------------

    @property
    def sessions_dir(self) -> Path:
        """`{workdir}/sessions`."""
        return self.workdir / "sessions"

    @property
    def data_dir(self) -> Path:
        """`{workdir}/data`, the content-addressed store."""
        return self.workdir / "data"

    def session_dir(self, session_id: str) -> Path:
        """`{workdir}/sessions/{session_id}` (validated; not created)."""
        return self.sessions_dir / validate_session_id(session_id)

    def context_path(self, session_id: str) -> Path:
        """The session's context.jsonl."""
        return self.session_dir(session_id) / CONTEXT_FILE

    def events_path(self, session_id: str) -> Path:
        """The session's events.jsonl."""
        return self.session_dir(session_id) / EVENTS_FILE

    def state_path(self, session_id: str) -> Path:
        """The session's state.json (the agent's live context, written by `Agent`)."""
        return self.session_dir(session_id) / STATE_FILE

    async def initialize(self) -> None:
        """Create `sessions/`, `data/` and `skills/`. Idempotent; offloading works without it.

        Raises:
            OffloadError: a directory cannot be created.
        """
        await asyncio.to_thread(self._initialize)

    def _initialize(self) -> None:
        for sub in ("sessions", "data", "skills"):
            self._mkdir(self.workdir / sub)

    def _mkdir(self, path: Path) -> None:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OffloadError(
                f"cannot create directory {path}: {exc.strerror or exc}", str(path)
            ) from exc

    # -- writing --------------------------------------------------------------------------

    def _store(self, raw: bytes, media_type: str | None) -> str:
        try:
            return str(store_bytes(self.data_dir, raw, media_type, fsync=self.fsync))
        except OSError as exc:
            raise OffloadError(
                f"cannot write to {self.data_dir}: {exc.strerror or exc}", str(self.data_dir)
            ) from exc

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> ContextRef:
        """Append messages, oldest first, to `sessions/{session_id}/context.jsonl`.

        All messages of one call land as consecutive lines in one write, even with other
        writers (tasks or processes) appending to the same session at the same time.

        Args:
            session_id: a plain name (see `InvalidSessionId`).
            msgs: ctxoffload `Msg`s, OpenAI / Anthropic message dicts, or pydantic models.

        Returns:
            The path of context.jsonl, as a `ContextRef` carrying the lines written.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: a message cannot be serialised; nothing was written.
            OffloadError: the disk refused the write; the file is as it was before.
        """
        validate_session_id(session_id)
        return await asyncio.to_thread(self._offload_context, session_id, as_message_list(msgs))

    def _offload_context(self, session_id: str, msgs: list[Any]) -> ContextRef:
        path = self.context_path(session_id)
        # Serialise (and store payloads) before touching the log, so bad input leaves the
        # log untouched.
        payload = context_payload(msgs, self._store, dumps_line)
        if not payload:
            return ContextRef(str(path), 0, -1)
        self._mkdir(path.parent)
        first, last = self._append(path, payload)
        self._event(
            session_id,
            kind="context",
            reference=str(path),
            bytes=len(payload),
            messages=len(msgs),
            lines=[first, last],
        )
        return ContextRef(str(path), first, last)

    def _append(self, path: Path, payload: bytes) -> tuple[int, int]:
        try:
            return self._jsonl.append(path, payload)
        except OSError as exc:
            raise OffloadError(
                f"cannot append to {path}: {exc.strerror or exc}", str(path)
            ) from exc

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Write the whole text of one tool result to `sessions/{id}/tool_result-{tool_id}.txt`.

        The file holds the entire output, so line numbers in it match what the agent saw.
        A file is never overwritten: the same id with the same content returns the existing
        file; the same id with other content gets `tool_result-{tool_id}.2.txt`, `.3`, ...

        Args:
            session_id: a plain name.
            tool_result: a `ToolResultBlock`, an OpenAI `tool` message, an Anthropic
                `tool_result` block, or a pydantic model with `id` and `output`.

        Returns:
            The path of the file.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: not a tool result, or a payload is not valid base64.
            OffloadError: the disk refused the write; no partial file is left.
        """
        validate_session_id(session_id)
        return await asyncio.to_thread(self._offload_tool_result, session_id, tool_result)

    def _offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        found = tool_output_of(tool_result)
        data = render_tool_output(found.output, self._store)
        session_dir = self.session_dir(session_id)
        self._mkdir(session_dir)
        stem = tool_file_stem(found.tool_id)
        path = self._write_unique(session_dir, f"tool_result-{stem}", data)
        self._event(
            session_id,
            kind="tool_result",
            reference=str(path),
            bytes=len(data),
            lines=count_lines(data),
            tool_id=found.tool_id,
            tool_name=found.name,
        )
        return str(path)

    def _write_unique(self, directory: Path, stem: str, data: bytes) -> Path:
        tmp = directory / f".tmp-{stem}-{uuid.uuid4().hex}"
        first = directory / f"{stem}.txt"
        try:
            with open(tmp, "xb") as f:
                f.write(data)
                if self.fsync:
                    f.flush()
                    os.fsync(f.fileno())
            n = 1
            while True:
                path = first if n == 1 else directory / f"{stem}.{n}.txt"
                try:
                    # link() never replaces an existing file, which makes "never overwritten"
                    # hold against concurrent writers too.
                    os.link(tmp, path)
                    break
                except FileExistsError:
                    if _same_content(path, data):
                        break
                    n += 1
            if self.fsync:
                fsync_dir(directory)
            return path
        except OSError as exc:
            raise OffloadError(f"cannot write {first}: {exc.strerror or exc}", str(first)) from exc
        finally:
            tmp.unlink(missing_ok=True)

    async def offload_data_block(self, block: Any) -> Any:
        """Store a block's base64 payload as `data/{sha256}.{ext}`, once.

        Args:
            block: a `DataBlock`, an OpenAI / Anthropic content-part dict, or a pydantic
                block with a `source` of type base64 (AgentScope's `DataBlock`).

        Returns:
            The same kind of block with a URL source whose url is the stored file's path.
            A block that already points elsewhere is returned unchanged.

        Raises:
            InvalidContent: malformed base64 or an unsupported block.
            OffloadError: the disk refused the write.
        """
        return await asyncio.to_thread(offload_block, block, self._store)

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one line to the session's events.jsonl (used by the compressor)."""
        session_dir = self.session_dir(session_id)

        def record() -> None:
            # The session may have no directory yet (nothing offloaded so far).
            self._mkdir(session_dir)
            self._event(session_id, kind=kind, **fields)

        await asyncio.to_thread(record)

    def _event(self, session_id: str, *, kind: str, **fields: Any) -> None:
        # An event is a record of what happened, not content: failing to write one must not
        # undo the offload it describes.
        line = dumps_line({"time": now_iso(), "kind": kind, **fields})
        path = self.events_path(session_id)
        try:
            self._jsonl.append(path, line)
        except OSError as exc:
            logger.warning("could not record a %s event in %s: %s", kind, path, exc)

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        """Atomically replace the session's state.json (the agent's live context)."""
        validate_session_id(session_id)
        return await asyncio.to_thread(self._write_state, session_id, state)

    def _write_state(self, session_id: str, state: dict[str, Any]) -> str:
        path = self.state_path(session_id)
        self._mkdir(path.parent)
        tmp = path.with_name(f".tmp-state-{uuid.uuid4().hex}")
        try:
            with open(tmp, "xb") as f:
                f.write(dumps_line(state))
                if self.fsync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise OffloadError(f"cannot write {path}: {exc.strerror or exc}", str(path)) from exc
        finally:
            tmp.unlink(missing_ok=True)
        return str(path)

    # -- reading --------------------------------------------------------------------------

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions in this workspace, sorted."""
        return await asyncio.to_thread(self._list_sessions)

    def _list_sessions(self) -> list[str]:
        try:
            return sorted(
                p.name
                for p in self.sessions_dir.iterdir()
                if p.is_dir() and not p.name.startswith(".")
            )
        except FileNotFoundError:
            return []

    async def read_context(self, session_id: str) -> list[Any]:
        """Every message offloaded for a session, oldest first, as the JSON written.

        A torn last line (a writer killed mid-write) is skipped, not an error.
        """
        path = self.context_path(session_id)
        return await asyncio.to_thread(read_jsonl, path)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events.jsonl entries, oldest first."""
        path = self.events_path(session_id)
        return await asyncio.to_thread(read_jsonl, path)

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        """The session's saved live context, or None if there is none."""
        path = self.state_path(session_id)
        rows = await asyncio.to_thread(read_jsonl, path)
        return rows[0] if rows else None

    async def list_files(self, session_id: str) -> list[str]:
        """The paths of the session's tool_result files, sorted by name."""
        session_dir = self.session_dir(session_id)

        def scan() -> list[str]:
            try:
                return sorted(str(p) for p in session_dir.glob("tool_result-*.txt"))
            except FileNotFoundError:
                return []

        return await asyncio.to_thread(scan)

    def resolve_reference(self, reference: str) -> Path:
        """The file a reference names, checked to lie inside the workspace.

        Accepts a reference as returned (relative to the current directory or absolute) or
        a path relative to the workdir.

        Raises:
            InvalidReference: it points outside the workspace or names no file.
        """
        if not isinstance(reference, str) or not reference or "\x00" in reference:
            raise InvalidReference(f"reference {reference!r} is not a path in this workspace")
        root = self.workdir.resolve()
        ref = str(reference)
        if ref.startswith("file://"):
            ref = ref[len("file://") :]
        candidates = [Path(ref)]
        if not Path(ref).is_absolute():
            candidates.append(self.workdir / ref)
        for candidate in candidates:
            real = candidate.resolve()
            if real != root and root not in real.parents:
                continue
            if real.is_file():
                return real
        raise InvalidReference(
            f"reference {reference!r} names no file inside the workspace {str(self.workdir)!r}: "
            "pass a path this workspace returned"
        )

    async def read_reference(self, reference: str) -> bytes:
        """The bytes behind a reference this workspace returned.

        Raises:
            InvalidReference: unknown, or outside the workspace.
        """

        def read() -> bytes:
            return self.resolve_reference(reference).read_bytes()

        return await asyncio.to_thread(read)

    async def purge_session(self, session_id: str) -> bool:
        """Delete a session's directory. data/ is shared between sessions and kept.

        Returns:
            Whether there was anything to delete.
        """
        session_dir = self.session_dir(session_id)

        def purge() -> bool:
            if not session_dir.exists():
                return False
            # Rename first so a concurrent reader sees the whole session or none of it.
            doomed = session_dir.with_name(f".purge-{session_dir.name}-{time.time_ns()}")
            os.replace(session_dir, doomed)
            shutil.rmtree(doomed)
            return True

        return await asyncio.to_thread(purge)

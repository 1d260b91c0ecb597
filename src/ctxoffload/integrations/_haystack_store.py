"""`WorkspaceResultStore`: Haystack's `ToolResultStore` on a ctxoffload workspace, and the
read-back tools as Haystack tools (`Tool`).

Haystack's `ToolResultOffloadHook` (an Agent's `after_tool` hook) and its
`ToolResultOffloadCompactor` hand a store each result they take out of the conversation with
`write(key=..., content=...)` and put the reference it returns in its place; `read(reference)`
gives the content back. Here a text goes whole to the session's `tool_result-<key>.txt` and
bytes (an image, a file) to data/, as every door stores them (`_doors/stores.py`).
"""

from __future__ import annotations

import asyncio
import importlib
import mimetypes
from collections.abc import Awaitable, Callable
from typing import Any

from .._doors.checks import arguments_checked, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import fresh_session, given_session
from .._doors.stores import BlockStore
from .._loop import LoopThread
from ..agent import as_tool
from ..exceptions import ConfigError, InvalidReference
from ..messages import Msg
from ..text import message_text
from ..workspace import LocalWorkspace, Workspace, writing_as
from ._reading import read_back

__all__ = ["INSTALL_HINT", "WorkspaceResultStore"]

INSTALL_HINT = "Haystack is not installed: pip install 'ctxoffload[haystack]'"

try:
    _Tool: Any = importlib.import_module("haystack.tools").Tool
except ImportError as exc:  # pragma: no cover - exercised where Haystack is absent
    raise ConfigError(INSTALL_HINT) from exc


@arguments_checked
class WorkspaceResultStore:
    """A Haystack `ToolResultStore` that keeps every result it is given in a ctxoffload
    workspace, whole, in one session.

    - `write(key=..., content=text)` stores the text whole as
      `sessions/<session>/tool_result-<key>.txt` (never overwritten: a second result under
      one key gets a new name) and returns its path, which Haystack puts in the conversation;
      bytes (an image, a file) go to the workspace's data/ under their sha256, named by a
      `data` event of the session (`supports_binary_content` is True).
    - `read(reference)` gives back what `write` stored: text as a `str`, bytes as `bytes`; a
      reference outside the workspace, or (with `isolate`) of another session, is refused.
    - `tools` are Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content`, as Haystack tools (`Tool`) for the agent to read stored results
      back.

    The session is the store's `session_id`, else a new one per store (logged at INFO): a
    Haystack Agent names no conversation, so give each conversation a store of its own, per
    run through `hook_context={RESULT_STORE_CONTEXT_KEY: store}` as Haystack advises.

    Args:
        workspace: where results go (a `Workspace`; a path is refused: pass
            `LocalWorkspace(path)`).
        session_id: the session (a plain name); None for a new one.
        isolate: `read` refuses a reference of another session.
        max_output_chars: longest answer of a reading tool.

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), or
            `max_output_chars` is not a positive int.
        InvalidSessionId: `session_id` is not a plain name.

    Example::

        store = WorkspaceResultStore(LocalWorkspace("ws"), session_id="nightly")
        hook = ToolResultOffloadHook(store, {"*": OffloadOverChars(12_000)})
        agent = Agent(chat_generator=..., tools=[fetch_logs, *store.tools],
                      hooks={"after_tool": [hook]})
    """

    supports_binary_content = True

    def __init__(
        self,
        workspace: Workspace,
        *,
        session_id: str | None = None,
        isolate: bool = True,
        max_output_chars: int = 20_000,
    ) -> None:
        self.workspace = checked_workspace(workspace, _DOOR)
        self.session_id = given_session(session_id) or fresh_session(
            _DOOR, "no session_id was given to the store"
        )
        self.max_output_chars = checked_positive(max_output_chars, "max_output_chars")
        self.blocks = BlockStore(
            self.workspace, _DOOR, self.session_id, tool_name=_TOOL_NAME, isolate=isolate
        )
        self.loop = LoopThread("ctxoffload-haystack")
        self._tools: list[Any] | None = None

    def __repr__(self) -> str:
        return f"WorkspaceResultStore({self.workspace!r}, session_id={self.session_id!r})"

    def write(self, *, key: str, content: str | bytes) -> str:
        """Store one result whole under `key` and return its reference (a path, or a
        bucket's URI).

        Raises:
            OffloadError: the workspace refused the write (Haystack then keeps the whole
                result in the conversation and logs a warning).
        """
        if isinstance(content, str):
            # Haystack's key carries the content's extension (`3_fetch_call_1.txt`); the
            # file is named `tool_result-<key without it>.txt`.
            stem = key[: -len(".txt")] if key.endswith(".txt") else key
            named = _tool_of(stem)
            return self.loop.run(self.blocks.store(stem, content, "text/plain", tool_name=named))
        media_type, _ = mimetypes.guess_type(key)
        return self.loop.run(self.blocks.store(key, bytes(content), media_type))

    def read(self, reference: str) -> str | bytes:
        """What `write` stored under `reference`: a text result as `str`, bytes as `bytes`.

        Raises:
            ValueError: the reference names nothing in the workspace, lies outside it, or
                (with `isolate`) is another session's.
        """
        try:
            data, media_type = self.loop.run(self.blocks.retrieve(reference))
        except InvalidReference as exc:
            raise ValueError(f"cannot read {reference!r}: {exc}") from exc
        if media_type.startswith("text/"):
            # A text written with lone surrogates (which UTF-8 cannot carry) is kept as
            # their code points, and given back as they were.
            for errors in ("strict", "surrogatepass"):
                try:
                    return data.decode("utf-8", errors)
                except UnicodeDecodeError:
                    continue
        return data

    @property
    def tools(self) -> list[Any]:
        """The read-back tools, as Haystack tools (`Tool`) (`Agent(tools=[..., *store.tools])`)."""
        if self._tools is None:
            reading = read_back(self.workspace, self.max_output_chars, session_id=self.session_id)
            self._tools = [_as_tool(function, self) for function in reading.functions]
        return self._tools

    def to_dict(self) -> dict[str, Any]:
        """The store as Haystack serialises a pipeline's parts (a `LocalWorkspace` only).

        Raises:
            ConfigError: the workspace is not on a local folder.
        """
        if not isinstance(self.workspace, LocalWorkspace):
            raise ConfigError(
                f"a WorkspaceResultStore on a {type(self.workspace).__name__} cannot be "
                "serialised: only one on a LocalWorkspace can (its folder is its settings)"
            )
        return {
            "type": f"ctxoffload.integrations.haystack.{type(self).__qualname__}",
            "init_parameters": {
                "workdir": str(self.workspace.workdir),
                "session_id": self.session_id,
                "isolate": self.blocks.isolate,
                "max_output_chars": self.max_output_chars,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkspaceResultStore:
        """The store `to_dict` described, on a `LocalWorkspace` of its folder."""
        parameters = dict(data.get("init_parameters", {}))
        workdir = parameters.pop("workdir")
        return cls(LocalWorkspace(workdir), **parameters)


_DOOR = DOORS["haystack"]
_TOOL_NAME = "haystack"
"""What the `tool_result` files' events name as the tool (the key says which tool it was)."""


def _tool_of(key: str) -> str:
    """The tool a Haystack key names, so `show` says `fetch_logs`, not `haystack`: its hook
    keys a result `{step}_{tool}_{call id}`, its compactor `compacted_{tool}_{uuid hex}`.
    A tool's name and a call's id may both hold `_`, so the call id is known by its shape
    (a provider's `call_...`, `toolu_...`, `tooluse_...`, Haystack's own `call{n}`, a uuid's
    hex), then `_{n}` for one block of several; a key of any other shape names no tool
    ("": the store's own name)."""
    import re

    call = r"(?:call|toolu|tooluse)_?[A-Za-z0-9-]+|[0-9a-f]{32}"
    found = re.fullmatch(rf"(?:\d+|compacted)_(?P<tool>.+?)_(?:{call})(?:_\d+)?", key)
    return found["tool"] if found else ""


def _as_tool(function: Callable[..., Awaitable[Any]], store: WorkspaceResultStore) -> Any:
    """A read-back function as a Haystack `Tool`, run on the store's loop (Haystack runs a
    sync tool on a worker thread in an async run)."""
    spec = as_tool(function)

    def run(**arguments: Any) -> str:
        async def call() -> Any:
            with writing_as(_DOOR.name, store.session_id):
                return await function(**arguments)

        answer = store.loop.run(call())
        return answer if isinstance(answer, str) else message_text(Msg(role="user", content=answer))

    async def run_async(**arguments: Any) -> str:
        return await asyncio.to_thread(run, **arguments)

    return _Tool(
        name=spec.name,
        description=spec.description,
        parameters=spec.parameters,
        function=run,
        async_function=run_async,
    )

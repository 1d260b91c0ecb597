"""`OffloadingMemory`: ctxoffload as a LlamaIndex memory.

A LlamaIndex agent reads its memory (`memory.aget()`) before each step and adds the run's own
steps (its scratchpad) after; it puts the run's messages into the memory when the run ends.
So the door is a `Memory` whose `aget` returns the projection of the whole history it keeps
(`Projector`: past the trigger the older messages as a summary, stored first in the session's
context.jsonl; the same bytes on every read), whose puts keep a big tool message as its head
and a notice (the whole text stored first), and whose tool wrapper stores a big tool output
before it enters the run's scratchpad. Its chat store keeps every message; LlamaIndex's own
waterfall (`token_limit`, memory blocks) is replaced by the projection.
"""

from __future__ import annotations

import hashlib
import importlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from .._doors.answers import answers_run
from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session, given_host_id
from .._doors.runs import HostRuns
from .._doors.summaries import SummaryWriter
from .._loop import LoopLock
from .._tokens.counters import fits_by_size
from ..agent import as_tool
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError, InvalidContent
from ..messages import Msg, ToolResultBlock
from ..tokens import TokenCounter
from ..workspace import Workspace, writing_as
from ._call_arguments import cut_arguments, openai_call_with
from ._llama_index_messages import INSTALL_HINT, message_text, read_message, to_llama_index
from ._llama_index_summary import TAKES, llama_index_summary_model
from ._reading import read_back

__all__ = ["OffloadingMemory"]

try:
    _Memory: Any = importlib.import_module("llama_index.core.memory").Memory
    _SQLAlchemyChatStore: Any = importlib.import_module(
        "llama_index.core.storage.chat_store.sql"
    ).SQLAlchemyChatStore
    _MessageStatus: Any = importlib.import_module(
        "llama_index.core.storage.chat_store.base_db"
    ).MessageStatus
    _tools: Any = importlib.import_module("llama_index.core.tools")
    _types: Any = importlib.import_module("llama_index.core.base.llms.types")
    _PrivateAttr: Any = importlib.import_module("llama_index.core.bridge.pydantic").PrivateAttr
    _create_schema: Any = importlib.import_module(
        "llama_index.core.tools.utils"
    ).create_schema_from_function
except ImportError as exc:  # pragma: no cover - exercised where LlamaIndex is absent
    raise ConfigError(INSTALL_HINT) from exc

_DEFAULT_TOKEN_LIMIT = 30_000
"""LlamaIndex's own default `token_limit`: the window when neither the config nor the caller
names one."""


@arguments_checked
class OffloadingMemory(_Memory):  # type: ignore[misc]
    """A LlamaIndex `Memory` that keeps every message, gives the agent the projection of its
    history, and stores big tool outputs whole, in a ctxoffload workspace.

    - `aget` (what the agent reads before each step) returns the projection of the history:
      past the config's trigger, the older messages as a summary naming where they are (they
      go to the session's context.jsonl first); the same bytes on every read. Each read is
      recorded (`ctxoffload show SESSION --step N` rebuilds what it gave).
    - A tool message put into the memory whose text is over the config's `tool_result_limit`
      is kept as its head and a notice naming the file that holds it whole; the chat store
      is as lean as what the agent reads.
    - `offload_tools(tools)` wraps an agent's tools so that a big output is stored whole
      (`sessions/<session>/tool_result-<tool>-<digest>.txt`) before it enters the run's
      steps; `tools` gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content` as LlamaIndex `FunctionTool` objects; with `memory=True`, the
      memory tool too.

    The session is the memory's `session_id`, mapped by the one rule every door follows
    (docs/guides/hosts.md); a memory given none gets a new session of its own. A memory holds
    its session's lease from its first use to `aclose()` (or until it is dropped): a second
    memory of the same session meanwhile (another process, another object) is refused with
    `SessionBusyError`. LlamaIndex's own waterfall (`token_limit`, memory blocks) is
    replaced by the projection: memory blocks are refused.

    Build it with `OffloadingMemory.from_defaults(workspace, session_id=..., ...)`.

    Args:
        workspace: where offloaded content goes (a `Workspace`; a path is refused).
        config: when to truncate and when to summarise; its `context_window` is the window
            (else the memory's `token_limit`).
        summary_model: the LlamaIndex `LLM` that writes summaries (the agent's `llm`, or a
            cheaper one), asked with LlamaIndex's function-calling structured output where
            it calls tools; or a ctxoffload `ChatModel`. Left out, summaries are extractive:
            a LlamaIndex agent never hands its LLM to its memory. False: extractive too.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).
        **data: the `Memory`'s fields (`session_id`, `sql_store`, `token_limit`, ...).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, `max_output_chars` is not a positive int, or memory blocks
            were given.
        InvalidSessionId: never: a `session_id` that is no plain name is mapped.

    Example::

        memory = OffloadingMemory.from_defaults(
            LocalWorkspace("ws"), session_id="nightly",
            config=ContextConfig(context_window=128_000),
        )
        agent = FunctionAgent(tools=[*memory.offload_tools([fetch_logs]), *memory.tools], llm=llm)
        await agent.run("check the nightly job", memory=memory)
    """

    _workspace: Any = _PrivateAttr(default=None)
    _config: Any = _PrivateAttr(default=None)
    _session: str = _PrivateAttr(default="")
    _projector: Any = _PrivateAttr(default=None)
    _runs: Any = _PrivateAttr(default=None)
    _writer: str = _PrivateAttr(default="")
    _begun: bool = _PrivateAttr(default=False)
    _mirror: Any = _PrivateAttr(default=None)
    _pending: Any = _PrivateAttr(default=None)
    _tools: Any = _PrivateAttr(default=None)
    _schemas: Any = _PrivateAttr(default=None)
    # Puts, sets and the first read of the store, one at a time: the in-process history is
    # the store's, in the store's order, however many tasks put at once.
    _order: Any = _PrivateAttr(default_factory=LoopLock)

    def __init__(
        self,
        workspace: Workspace,
        *,
        config: ContextConfig | None = None,
        summary_model: Any = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
        **data: Any,
    ) -> None:
        checked = checked_workspace(workspace, _DOOR)
        context = checked_config(config)
        checked_positive(max_output_chars, "max_output_chars")
        window = context.context_window
        summaries = SummaryWriter(
            summary_model, adapt=lambda llm: llama_index_summary_model(llm, window), takes=TAKES
        )
        data.setdefault("token_limit", context.context_window or _DEFAULT_TOKEN_LIMIT)
        given_host_id(data.get("session_id"))
        if data.get("session_id") is None:
            data["session_id"] = fresh_session(_DOOR, "the memory was given no session_id")
        super().__init__(**data)
        if self.memory_blocks:
            raise ConfigError(
                "OffloadingMemory keeps the whole history and summarises it itself, so memory "
                "blocks would never be fed: leave memory_blocks out (or use LlamaIndex's "
                "Memory for them)"
            )
        self._workspace = checked
        self._config = context
        self._session = conversation_session(self.session_id)
        reading = read_back(
            checked, max_output_chars, config=context, memory=memory, session_id=self._session
        )
        self._projector = Projector(
            checked,
            self._session,
            config=context,
            # The agent's LLM is never the memory's to see: the one given, else the extract.
            model=summaries.model(),
            context_window=context.context_window or self.token_limit,
            reader_tools=reading.readers,
            reading="memory",  # the agent reads its memory: its record says so, not "model call"
        )
        self._runs = HostRuns(checked, _DOOR)
        self._writer = uuid.uuid4().hex
        self._tools = [_as_function_tool(function) for function in reading.functions]
        # The schemas of the tools this memory gave the agent: every step sends them, so they
        # count against the window.
        self._schemas = [tool.metadata.to_openai_tool() for tool in self._tools]

    @classmethod
    def from_defaults(
        cls,
        workspace: Workspace,
        *,
        session_id: str | None = None,
        config: ContextConfig | None = None,
        summary_model: Any = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
        chat_history: list[Any] | None = None,
        chat_store: Any = None,
        table_name: str = "llama_index_memory",
        async_database_uri: str | None = None,
        async_engine: Any = None,
        db_schema: str | None = None,
        tokenizer_fn: Callable[[str], list[Any]] | None = None,
    ) -> OffloadingMemory:
        """An `OffloadingMemory` on `workspace`, its chat kept in `chat_store` (any LlamaIndex
        `AsyncDBChatStore`), else in LlamaIndex's SQLAlchemy store (`async_database_uri`;
        in memory without one), as `Memory.from_defaults` keeps it.

        Args:
            workspace: where offloaded content goes.
            session_id: the conversation (LlamaIndex's key in the chat store, and the
                ctxoffload session, mapped by the one rule); None for a new one.
            config: when to truncate and when to summarise.
            summary_model: the LlamaIndex `LLM` that writes summaries (see the class).
            max_output_chars: longest answer of a reading tool.
            memory: give the agent the memory tool too.
            chat_history: messages the memory starts with (replacing what the store holds).
            chat_store: the chat store; the SQLAlchemy parameters below are then ignored.
            table_name: the SQLAlchemy store's table.
            async_database_uri: the SQLAlchemy store's database.
            async_engine: the SQLAlchemy store's engine.
            db_schema: the SQLAlchemy store's schema.
            tokenizer_fn: LlamaIndex's tokenizer (its own token estimates).
        """
        store = chat_store or _SQLAlchemyChatStore(
            table_name=table_name,
            async_database_uri=async_database_uri,
            async_engine=async_engine,
            db_schema=db_schema,
        )
        data: dict[str, Any] = {"sql_store": store, "session_id": session_id}
        if tokenizer_fn is not None:
            data["tokenizer_fn"] = tokenizer_fn
        made = cls(
            workspace,
            config=config,
            summary_model=summary_model,
            max_output_chars=max_output_chars,
            memory=memory,
            **data,
        )
        made._pending = (
            _chat_messages(chat_history, "chat_history") if chat_history is not None else None
        )
        return made

    @property
    def workspace(self) -> Workspace:
        """Where offloaded content goes."""
        return self._workspace  # type: ignore[no-any-return]

    @property
    def session(self) -> str:
        """The ctxoffload session of this memory's conversation."""
        return self._session

    @property
    def tools(self) -> list[Any]:
        """Read, Grep, Glob and the retrieval tool (and the memory tool), as LlamaIndex
        `FunctionTool` objects."""
        return list(self._tools)

    # -- reading ------------------------------------------------------------------------------

    async def aget(self, input: Any = None, **block_kwargs: Any) -> list[Any]:
        """The projection of the history: what the agent reads before a step."""
        await self._ready()
        projected = await self._projector.project(self._mirror.msgs, tools=self._schemas)
        return _back(projected, self._mirror.by_id)

    # -- writing ------------------------------------------------------------------------------

    async def aput(self, message: Any) -> None:
        """Keep `message` (a big tool message as its head and a notice).

        Raises:
            InvalidContent: `message` is no LlamaIndex `ChatMessage`.
        """
        await self.aput_messages([_chat_message(message, "message")])

    async def aput_messages(self, messages: list[Any]) -> None:
        """Keep `messages` (a big tool message as its head and a notice), after what was put
        before, in the order the puts came, however many tasks put at once.

        Raises:
            InvalidContent: `messages` is not a list of LlamaIndex `ChatMessage` objects.
        """
        messages = _chat_messages(messages, "messages")
        await self._ready()
        async with self._order():
            kept = [await self._kept_message(message) for message in messages]
            await self.sql_store.add_messages(self.session_id, kept, status=_MessageStatus.ACTIVE)
            self._mirror.extend(kept)

    async def aset(self, messages: list[Any]) -> None:
        """Replace the history with `messages` (a big tool message as its head and a notice).

        Raises:
            InvalidContent: `messages` is not a list of LlamaIndex `ChatMessage` objects.
        """
        messages = _chat_messages(messages, "messages")
        await self._begin()
        async with self._order():
            kept = [await self._kept_message(message) for message in messages]
            await self.sql_store.set_messages(self.session_id, kept, status=_MessageStatus.ACTIVE)
            mirror = _History()
            mirror.extend(kept)
            self._mirror = mirror

    async def areset(self, status: Any = None) -> None:
        """Forget the history in the chat store (what the workspace stored stays)."""
        await self._begin()
        await super().areset(status=status)
        self._mirror = None

    async def _manage_queue(self) -> None:
        """LlamaIndex's waterfall is replaced by the projection: nothing is archived."""

    async def aclose(self) -> None:
        """Give the session up (another memory of it may be used then)."""
        if self._begun:
            self._begun = False
            await self._runs.aend(self._session, self._writer)

    # -- the tools ----------------------------------------------------------------------------

    def offload_tools(self, tools: Sequence[Any]) -> list[Any]:
        """`tools` (LlamaIndex tools or plain functions) wrapped so that a big output is stored
        whole in this memory's session and the agent's step gets its head and a notice.

        A `FunctionTool` stays one (LlamaIndex still gives it the workflow's `Context` where
        it asks for one); any other tool is wrapped as an `AsyncBaseTool`.
        """
        wrapped = [self._offloading(tool) for tool in tools]
        self._schemas.extend(tool.metadata.to_openai_tool() for tool in wrapped)
        return wrapped

    def _offloading(self, tool: Any) -> Any:
        if not isinstance(tool, _tools.types.BaseTool):
            tool = _tools.FunctionTool.from_defaults(tool)
        if isinstance(tool, _tools.FunctionTool):
            return _OffloadingFunctionTool(tool, self)
        return _OffloadingTool(tool, self)

    async def kept_output(self, output: Any) -> Any:
        """A tool's `ToolOutput` as the agent should get it: itself when it fits (or holds
        more than text), else its head and a notice, the whole text stored first."""
        await self._ready()
        block = _oversized(output, self._projector.counter, self._config.tool_result_limit)
        if block is None:
            return output
        with writing_as(_AGENT, self._session):
            kept = await self._projector.offload_tool_result(block)
        return _with_output(output, block, kept)

    def kept_output_sync(self, output: Any) -> Any:
        """`kept_output` for a tool called from synchronous code."""
        block = _oversized(output, self._projector.counter, self._config.tool_result_limit)
        if block is None:
            return output
        if not self._begun:
            self._runs.begin(self._session, self._writer, conversation=self.session_id)
            self._begun = True
        kept = self._projector.offload_tool_result_sync(block)
        return _with_output(output, block, kept)

    # -- the history --------------------------------------------------------------------------

    async def _begin(self) -> None:
        """Take the session's lease at this memory's first use."""
        if not self._begun:
            await self._runs.abegin(self._session, self._writer, conversation=self.session_id)
            self._begun = True

    async def _ready(self) -> None:
        """The lease taken and the history read (once: while this memory holds the lease, it
        is the only writer of its conversation)."""
        await self._begin()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            await self.aset(pending)
        if self._mirror is None:
            async with self._order():  # (a put of another task waits: it extends this)
                if self._mirror is None:
                    stored = await self.sql_store.get_messages(
                        self.session_id, status=_MessageStatus.ACTIVE
                    )
                    mirror = _History()
                    mirror.extend(stored)
                    self._mirror = mirror

    async def _kept_message(self, message: Any) -> Any:
        """A tool message over the limit as its head and a notice (stored whole first)."""
        role = str(getattr(message.role, "value", message.role))
        if role not in ("tool", "function"):
            return message
        text = message_text(message)
        if fits_by_size(self._projector.counter, text, self._config.tool_result_limit):
            return message
        kwargs = message.additional_kwargs or {}
        call_id = str(kwargs.get("tool_call_id") or _digest_id("tool", text))
        block = ToolResultBlock(id=call_id, name=str(kwargs.get("name") or ""), output=text)
        with writing_as(_AGENT, self._session):
            kept = await self._projector.offload_tool_result(block)
        if kept.output == text or not isinstance(kept.output, str):
            return message
        return message.model_copy(update={"blocks": _with_text(message.blocks, kept.output)})


class _History:
    """The history a memory keeps, as it holds the lease: each `ChatMessage` with its `Msg`
    (read once), so a read costs what is new, not the history."""

    def __init__(self) -> None:
        self.msgs: list[Msg] = []
        self.by_id: dict[str, tuple[Any, Msg]] = {}
        self.names: dict[str, str] = {}  # each tool call's name, by its id (`read_message`)

    def extend(self, messages: Sequence[Any]) -> None:
        for position, message in enumerate(messages, start=len(self.msgs)):
            msg = read_message(position, message, self.names)
            self.msgs.append(msg)
            self.by_id[msg.id] = (message, msg)


class _OffloadingFunctionTool(_tools.FunctionTool):  # type: ignore[misc]
    """A `FunctionTool` whose big outputs are stored whole by its memory: built on the
    wrapped tool's own function, so LlamaIndex sees the same signature (and gives a tool
    that asks for the workflow's `Context` its context); the wrapped tool does the call."""

    def __init__(self, tool: Any, memory: OffloadingMemory) -> None:
        super().__init__(fn=tool.real_fn, metadata=tool.metadata)
        self._wrapped = tool
        self._memory = memory

    def call(self, *args: Any, **kwargs: Any) -> Any:
        with writing_as(_AGENT, self._memory.session):
            output = self._wrapped.call(*args, **kwargs)
        if answers_run(self._wrapped):  # (a `return_direct` tool: its output is the answer)
            return output
        return self._memory.kept_output_sync(output)

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        with writing_as(_AGENT, self._memory.session):
            output = await self._wrapped.acall(*args, **kwargs)
        if answers_run(self._wrapped):
            return output
        return await self._memory.kept_output(output)


class _OffloadingTool(_tools.types.AsyncBaseTool):  # type: ignore[misc]
    """Any other LlamaIndex tool, its big outputs stored whole by its memory."""

    def __init__(self, tool: Any, memory: OffloadingMemory) -> None:
        self._wrapped = _tools.types.adapt_to_async_tool(tool)
        self._memory = memory

    @property
    def metadata(self) -> Any:
        return self._wrapped.metadata

    def call(self, input: Any) -> Any:
        with writing_as(_AGENT, self._memory.session):
            output = self._wrapped.call(input)
        if answers_run(self._wrapped):  # (a `return_direct` tool: its output is the answer)
            return output
        return self._memory.kept_output_sync(output)

    async def acall(self, input: Any) -> Any:
        with writing_as(_AGENT, self._memory.session):
            output = await self._wrapped.acall(input)
        if answers_run(self._wrapped):
            return output
        return await self._memory.kept_output(output)


_DOOR = DOORS["llama-index"]
_AGENT = _DOOR.name
"""Who the events of the memory's tools are written by."""


_DESCRIPTION_CHARS = 1024
"""The longest tool description LlamaIndex sends (OpenAI's limit for a function's, which
LlamaIndex enforces for every tool it turns into a schema)."""


def _as_function_tool(function: Callable[..., Any]) -> Any:
    """A read-back tool as a LlamaIndex `FunctionTool`: its arguments described in the schema
    (LlamaIndex reads only `name (type): ...` from a docstring), and its description whole
    lines of the docstring's text up to `_DESCRIPTION_CHARS`."""
    described = as_tool(function)
    arguments = described.parameters.get("properties", {})
    schema = _create_schema(
        described.name,
        function,
        param_descriptions={
            name: str(spec.get("description", "")) for name, spec in arguments.items()
        },
    )
    kept: list[str] = []
    for line in described.description.splitlines():
        if sum(len(k) + 1 for k in kept) + len(line) > _DESCRIPTION_CHARS:
            break
        kept.append(line)
    return _tools.FunctionTool.from_defaults(
        async_fn=function, description="\n".join(kept).strip(), fn_schema=schema
    )


def _digest_id(name: str, text: str) -> str:
    """A call id for an output LlamaIndex gives no id (its tools are not told theirs): the
    tool and a digest of the output, the same in every process."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name}-{digest}"


def _oversized(output: Any, counter: TokenCounter, limit: int) -> ToolResultBlock | None:
    """A tool output as a ctxoffload block of its text (its text blocks joined, as LlamaIndex
    joins them) when that may be over the limit; its media are left to `_with_text`."""
    texts = [block.text for block in output.blocks if isinstance(block, _types.TextBlock)]
    if not texts:
        return None  # media alone: the agent's LLM reads those blocks as they are
    text = "\n".join(texts)
    if fits_by_size(counter, text, limit):
        return None
    name = str(output.tool_name)
    return ToolResultBlock(
        id=_digest_id(name, text), name=name, output=text, is_error=bool(output.is_error)
    )


def _with_output(output: Any, given: ToolResultBlock, kept: ToolResultBlock) -> Any:
    """`output` saying what the workspace kept of it (its raw output too: a workflow's
    context keeps the run's tool calls)."""
    if kept.output == given.output or not isinstance(kept.output, str):
        return output
    return _tools.ToolOutput(
        blocks=_with_text(output.blocks, kept.output),
        tool_name=output.tool_name,
        raw_input=output.raw_input,
        raw_output=kept.output,
        is_error=output.is_error,
        exception=output.exception,
    )


def _chat_messages(messages: Any, where: str) -> list[Any]:
    """`messages` as a list, each a LlamaIndex `ChatMessage` (`_chat_message`).

    Raises:
        InvalidContent: it is no list of them (a string, an OpenAI dict, None).
    """
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise InvalidContent(
            f"{where} is a {type(messages).__name__}; pass a list of LlamaIndex ChatMessage"
        )
    return [_chat_message(m, f"{where}[{i}]") for i, m in enumerate(messages)]


def _chat_message(message: Any, where: str) -> Any:
    """`message`, a LlamaIndex `ChatMessage`.

    Raises:
        InvalidContent: it is something else, named by `where`.
    """
    if not isinstance(message, _types.ChatMessage):
        raise InvalidContent(
            f"{where} is a {type(message).__name__}; pass a LlamaIndex ChatMessage "
            "(llama_index.core.llms.ChatMessage)"
        )
    return message


def _with_text(blocks: Sequence[Any], text: str) -> list[Any]:
    """`blocks` with their text, every text block of them, said by one text block where the
    first was (the head and notice of the text stored whole); an image, an audio, a document
    stays where it was."""
    out: list[Any] = []
    for block in blocks:
        if not isinstance(block, _types.TextBlock):
            out.append(block)
        elif not any(isinstance(b, _types.TextBlock) for b in out):
            out.append(_types.TextBlock(text=text))
    return out


def _back(projected: Sequence[Msg], by_id: dict[str, tuple[Any, Msg]]) -> list[Any]:
    """The `ChatMessage` objects for a projection: the original wherever it kept a message as it
    was, a copy holding the cut text where it cut a tool message, new messages for a
    summary."""
    out: list[Any] = []
    for msg in projected:
        known = by_id.get(msg.id)
        if known is None:
            out.extend(to_llama_index([msg]))
            continue
        original, read = known
        if msg is read or msg.content == read.content:
            out.append(original)
        else:
            out.append(_cut_copy(original, read, msg))
    return out


def _cut_copy(original: Any, read: Msg, msg: Msg) -> Any:
    """`original` saying what a projection cut its `Msg` (`read`) to (`msg`): its blocks made
    again, and OpenAI's copy of its calls (`additional_kwargs["tool_calls"]`, as LlamaIndex's
    OpenAI integration keeps them, which it sends over the blocks) with the arguments the
    projection cut (a call that wrote a whole file); a call kept only there is not made a
    block too (it would be sent twice)."""
    (made,) = to_llama_index([msg])
    kwargs = original.additional_kwargs or {}
    raw = kwargs.get("tool_calls")
    if not isinstance(raw, list) or not raw:
        return original.model_copy(update={"blocks": made.blocks})
    own = {block.tool_call_id for block in original.blocks if block.block_type == "tool_call"}
    blocks = [
        block
        for block in made.blocks
        if block.block_type != "tool_call" or block.tool_call_id in own
    ]
    arguments = cut_arguments(read, msg)
    calls = [openai_call_with(call, arguments) for call in raw]
    return original.model_copy(
        update={"blocks": blocks, "additional_kwargs": {**kwargs, "tool_calls": calls}}
    )

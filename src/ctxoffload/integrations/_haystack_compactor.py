"""`WorkspaceCompactor`: a Haystack `Compactor` that keeps what it takes out.

Haystack's `CompactionHook` (an Agent's `before_llm` hook) measures the conversation before each
chat-generator call and, past `compact_at` of the window, asks its compactor for a shorter
conversation near `target_tokens`. This one runs ctxoffload's compaction: the older messages
are appended to the store's session's context.jsonl first, then replaced by one summary message
naming those lines and the files their results were stored in; the newest turns stay as they
were (the same `ChatMessage` objects), a tool call never without its result.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from ..compression import Compressor, ContextConfig
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ChatModel
from ..workspace import writing_as
from ._call_arguments import cut_arguments
from ._haystack_messages import CallIds, read_message, result_parts
from ._haystack_store import INSTALL_HINT, WorkspaceResultStore
from ._haystack_summary import summary_writer
from ._reading import readers_for

__all__ = ["WorkspaceCompactor"]

try:
    _ChatMessage: Any = importlib.import_module("haystack.dataclasses").ChatMessage
except ImportError as exc:  # pragma: no cover - exercised where Haystack is absent
    raise ConfigError(INSTALL_HINT) from exc


class WorkspaceCompactor:
    """A Haystack `Compactor` (for its `CompactionHook`) that stores the messages it takes out
    of the conversation in the store's session before they leave.

    Each compaction appends the older messages to `sessions/<session>/context.jsonl`, then puts
    one user message in their place: ctxoffload's five-field summary (written by
    `summary_model`, else extracted: Haystack's `CompactionHook` hands its compactor the
    messages only, never the Agent's chat generator, so none is seen unless given), naming
    those lines and every file their results were stored in, which the agent reads back with
    the store's tools. What stays is the newest
    turns within about half of `target_tokens` (the rest is the summary's), the same
    `ChatMessage` objects, the system prompt and the latest user request among them. If the
    messages cannot be stored, nothing leaves (it returns None, as a compactor that declines).

    Args:
        store: the `WorkspaceResultStore` whose workspace and session it writes (so a
            result offloaded by the hook and the messages compacted later are one session).
        summary_model: the chat generator that writes summaries (a component whose `run`
            takes `messages`, such as the Agent's own `OpenAIChatGenerator`; asked with JSON
            instructions, and OpenAI's `response_format` for an `OpenAIChatGenerator`), or a
            ctxoffload `ChatModel`; None or False: the extractive summary.
        config: the summary's prompt and template (`ContextConfig`); its window and
            thresholds are Haystack's to decide (`CompactionHook`'s).

    Raises:
        ConfigError: `store` is no `WorkspaceResultStore`, `config` no `ContextConfig`, or
            `summary_model` none of the above.

    Example::

        store = WorkspaceResultStore(LocalWorkspace("ws"), session_id="nightly")
        hook = CompactionHook(WorkspaceCompactor(store), context_window=128_000)
        agent = Agent(chat_generator=..., tools=[*store.tools], hooks={"before_llm": [hook]})
    """

    def __init__(
        self,
        store: WorkspaceResultStore,
        *,
        summary_model: ChatModel | Any | None = None,
        config: ContextConfig | None = None,
    ) -> None:
        if not isinstance(store, WorkspaceResultStore):
            raise ConfigError(
                f"store is a {type(store).__name__}, not a WorkspaceResultStore: pass "
                "WorkspaceCompactor(WorkspaceResultStore(workspace, session_id=...))"
            )
        if config is not None and not isinstance(config, ContextConfig):
            raise ConfigError(
                f"config is a {type(config).__name__}, not a ContextConfig: pass "
                "config=ContextConfig(summary_template=...) or leave it out"
            )
        self.store = store
        self.config = config or ContextConfig()
        self._summaries = summary_writer(summary_model, self.config.context_window)
        self.summary_model = self._summaries.model()
        self._compressor = Compressor(
            self.config,
            model=self.summary_model,
            offloader=store.workspace,
            session_id=store.session_id,
            context_window=self.config.context_window or _NO_WINDOW,
            reader_tools=readers_for(store.workspace, self.config),  # the store's tools
        )
        # Per ChatMessage of the conversation (by `id`, holding it): the `Msg` it was read
        # as; what left the conversation is forgotten at each compaction.
        self._read: dict[int, tuple[Any, Msg]] = {}
        self._calls = CallIds()

    def compact(
        self, messages: list[Any], target_tokens: int, token_counter: Any
    ) -> list[Any] | None:
        """A shorter conversation for `messages` (a new list), or None when nothing left.

        Args:
            messages: the conversation, oldest first (Haystack's `ChatMessage` objects).
            target_tokens: the size Haystack aims at.
            token_counter: Haystack's counter (ctxoffload counts with its own).
        """
        return self.store.loop.run(self._compact(messages, target_tokens))

    async def compact_async(
        self, messages: list[Any], target_tokens: int, token_counter: Any
    ) -> list[Any] | None:
        """`compact` on a worker thread, so the store's writes never block the event loop."""
        return await asyncio.to_thread(self.compact, messages, target_tokens, token_counter)

    def to_dict(self) -> dict[str, Any]:
        """The compactor as Haystack serialises a pipeline's parts (its store's settings;
        a summary model is not serialised).

        Raises:
            ConfigError: a summary model was given, or the store cannot be serialised.
        """
        if self.summary_model is not None:
            raise ConfigError(
                "a WorkspaceCompactor with a summary_model cannot be serialised: build it in code"
            )
        parameters: dict[str, Any] = {"store": self.store.to_dict()}
        if self._summaries.opted_out:
            parameters["summary_model"] = False
        return {
            "type": f"ctxoffload.integrations.haystack.{type(self).__qualname__}",
            "init_parameters": parameters,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkspaceCompactor:
        """The compactor `to_dict` described."""
        parameters = data["init_parameters"]
        store = WorkspaceResultStore.from_dict(parameters["store"])
        return cls(store, summary_model=False if parameters.get("summary_model") is False else None)

    async def _compact(self, messages: list[Any], target_tokens: int) -> list[Any] | None:
        store = self.store
        await store.blocks.announce()
        self._calls.name_calls(messages)
        msgs = [self._msg(message) for message in messages]
        origin = {msg.id: message for msg, message in zip(msgs, messages, strict=True)}
        # What stays is the newest turns within `reserve_ratio` of the window: a window that
        # makes that half of Haystack's target leaves the other half to the summary.
        reserve = max(1, target_tokens // 2)
        window = max(2, int(reserve / self.config.reserve_ratio))
        config = self.config.model_copy(update={"context_window": window})
        with writing_as(store.blocks.door.name, store.session_id):
            result = await self._compressor.maybe_compress(msgs, force=True, config=config)
        read = dict(zip((m.id for m in msgs), msgs, strict=True))
        out: list[Any] = []
        for msg in result.messages:
            message = origin.get(msg.id)
            if message is None:  # the summary (or the artifact index): a new user message
                # Its meta keeps what makes it a summary to the next compaction, in this
                # process or in one that loads the saved messages (Haystack sends no meta).
                kept = {"id": msg.id, "metadata": msg.metadata}
                message = _ChatMessage.from_user(msg.text, meta={_SUMMARY: kept})
                self._read[id(message)] = (message, msg)
            elif msg is not read[msg.id] and msg.content != read[msg.id].content:
                # Cut to fit (a tool's result, a long text: stored whole first): what was
                # cut goes back, not the message whole, which was over the window.
                message = self._cut(message, read[msg.id], msg)
            out.append(message)
        changed = len(out) < len(messages) or any(
            a is not b for a, b in zip(out, messages, strict=False)
        )
        self._keep_only(out if changed else messages)
        return out if changed else None

    def _keep_only(self, messages: list[Any]) -> None:
        """Forget the readings of messages no longer in the conversation (Haystack hands
        each compaction the conversation the last one returned, and what it added)."""
        held = {id(m) for m in messages}
        self._read = {k: v for k, v in self._read.items() if k in held}
        self._calls.keep_only(messages)

    def _cut(self, message: Any, given: Msg, msg: Msg) -> Any:
        """`message` (read as `given`) saying what the compressor cut it to (`msg`): a tool's
        result its head and notice, a user's or a system's text its head and notice, a call's
        long arguments theirs (a call that wrote a whole file); any other message as it
        was."""
        result = getattr(message, "tool_call_result", None)
        results = msg.tool_results
        arguments = cut_arguments(given, msg) if message.tool_calls else {}
        if arguments:
            made = self._with_arguments(message, arguments)
        elif result is not None and len(results) == 1:
            output = results[0].output
            text = output if isinstance(output, str) else _texts(output)
            made = _ChatMessage.from_tool(
                tool_result=result_parts(result.result, text),
                origin=result.origin,
                error=result.error,
                meta=message.meta,
            )
        elif not results and message.text is not None and len(message.texts) == 1:
            role = str(getattr(message.role, "value", message.role))
            if role == "user":
                made = _ChatMessage.from_user(msg.text, meta=message.meta)
            elif role == "system":
                made = _ChatMessage.from_system(msg.text, meta=message.meta)
            else:
                return message
        else:
            return message
        self._read[id(made)] = (made, msg)
        return made

    def _with_arguments(self, message: Any, arguments: dict[str, dict[str, Any]]) -> Any:
        """`message` with the arguments `arguments` holds for its calls (by the id each is
        read with), every other part as it was (made again through Haystack's own dict form,
        which keeps each part in its place)."""
        ids = iter([self._calls.of(call) for call in message.tool_calls])
        data = message.to_dict()
        for part in data["content"]:
            call = part.get("tool_call") if isinstance(part, dict) else None
            if isinstance(call, dict):
                call_id = next(ids)
                if call_id in arguments:
                    call["arguments"] = arguments[call_id]
        return _ChatMessage.from_dict(data)

    def _msg(self, message: Any) -> Msg:
        """A `ChatMessage` as a `Msg` (read once per message object: Haystack hands the same
        objects to every compaction)."""
        known = self._read.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        ours = _ours(message)
        msg = ours if ours is not None else read_message(message, self._calls)
        self._read[id(message)] = (message, msg)
        return msg


def _texts(output: list[Any]) -> str:
    """The text of a cut result's parts (its head and the notice naming the file)."""
    return "\n".join(block.text for block in output if getattr(block, "type", None) == "text")


def _ours(message: Any) -> Msg | None:
    """A summary this compactor wrote, as the `Msg` it was (None: not one)."""
    kept = getattr(message, "meta", {}).get(_SUMMARY)
    if not isinstance(kept, dict) or not isinstance(kept.get("id"), str):
        return None
    metadata = kept.get("metadata")
    return Msg(
        id=kept["id"],
        role="user",
        content=str(message.text or ""),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


_SUMMARY = "ctxoffload_summary"
"""The meta key of a summary message a `WorkspaceCompactor` put in the conversation."""

_NO_WINDOW = 1_000_000
"""A window for the compressor's own checks; every compaction gives the one it works to."""

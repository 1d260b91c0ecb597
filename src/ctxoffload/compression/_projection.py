"""The projection engine: what the model should see of a history a host keeps itself.

LangChain, LangGraph, pydantic-ai and the OpenAI Agents SDK own the conversation and send it
whole on every model call; a middleware may change what the model is sent, never what the host
keeps. `Projector.project(history)` returns the messages to send: each tool result over the
limit replaced by its head and a notice naming the file that holds it whole, and, once the
context passes the trigger, the older messages replaced by a summary (they are appended to
`context.jsonl` first). The decisions are kept and re-applied, so the same history projects to
the same messages (equal objects, byte-identical once serialised: the provider's prompt cache
holds), a history with one more message changes only the tail, and a process restarted on the
same session projects the same way on every call: each decision (a summary, a provider's
compaction, a message sent cut) is an event of the session, taken from its event by the
process that made it as by any after it (`_decisions.py`); a tool result over the limit is
cut again, to the same file and the same head; and what the next compaction decides from
(the files stored since the last one, what the model was last sent) is read back from the
record (`Compressor.resume`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._depth import STORE_DEPTH, depth_error, text_form, too_deep
from .._disk.compact_requests import CompactRequests
from .._disk.events import CompactRequest, Projection, is_event
from .._disk.ids import validate_session_id
from .._disk.records import Event
from .._loop import CallerLoop, LoopLock, LoopThread
from .._message_log import InlinePayloads, ModelCalls
from ..exceptions import ConfigError, InvalidContent
from ..formats import to_msgs
from ..messages import Msg, ToolResultBlock
from ..tokens import get_token_counter
from ._compressor import Compressor
from ._decisions import Cover, Decisions, cut_record
from ._managers import asked_config, compact_event
from ._notes import is_summary_message
from ._provider_compaction import (
    absorb,
    is_provider_note,
    leading_system,
    newest_compaction,
    note_position,
)

if TYPE_CHECKING:
    from ..model import ChatModel
    from ..tokens import TokenCounter
    from ..workspace import Workspace
    from ._config import ContextConfig
    from ._result import CompressionResult
    from ._tool_names import ReaderTools

__all__ = ["Projector"]

_T = TypeVar("_T")

_HASHED = "sha256:"
"""The start of the key of a message known by its content (it has no id of its own)."""


class Projector:
    """Projects the whole history a host sends on every model call to what the model sees.

    Args:
        workspace: where offloaded content goes, and the session's record (its events hold
            the summary decisions a restarted process re-applies).
        session_id: the session (a host's thread or conversation id).
        config: when to truncate and when to compact (`ContextConfig`).
        model: the model that writes summaries; without one, an extractive summary.
        counter: the token counter (default: the one for the config's model).
        context_window: the model's window in tokens (default: the config's).
        reader_tools: the tools the host's agent was given to read offloaded content back,
            named in every notice, placeholder and summary (`ReaderTools.among` of them); they
            take precedence over `config.reader_tools`.
        reading: what the host reads through `project` when it is not a model call (a
            LlamaIndex agent's memory: `"memory"`): each record then says `memory read`,
            and the same history read again `memory read again`, never a retry.

    Raises:
        InvalidSessionId: `session_id` is not a plain name.

    Example::

        projector = Projector(LocalWorkspace("./agent_workspace"), "thread-42")
        to_send = await projector.project(history)   # every call, the whole history
    """

    def __init__(
        self,
        workspace: Workspace,
        session_id: str,
        *,
        config: ContextConfig | None = None,
        model: ChatModel | None = None,
        counter: TokenCounter | None = None,
        context_window: int | None = None,
        reader_tools: ReaderTools | None = None,
        reading: str | None = None,
    ) -> None:
        self._reading = {} if reading is None else {"reading": reading}
        self._compressor = Compressor(
            config,
            model=model,
            offloader=workspace,
            session_id=session_id,
            counter=counter or get_token_counter(None),
            context_window=context_window,
            reader_tools=reader_tools,
        )
        # Whether the counter is settled: given, or picked for the host's model, or used by a
        # projection (a counter changed later would count the whole history again).
        self._counter_settled = counter is not None
        self._settling = threading.Lock()  # `use_model` may run on the host's thread
        self._workspace = workspace
        self._session_id = validate_session_id(session_id)
        # Per message key: the input it was read from and what is sent for it.
        self._seen: dict[str, tuple[Any, Msg, Msg]] = {}
        # Per message object given (by `id`, holding it so the id stays its own): how it is
        # read and its key.
        self._keys: dict[int, tuple[Any, Msg | Mapping[str, Any], str]] = {}
        # What it decided (summaries, a provider's compaction, cuts), each as its event
        # says: taken back from the session's record by a restarted process, and from the
        # event it writes by this one (`_decisions.py`).
        self._decisions = Decisions()
        # What each call was sent, recorded as the Agent records its own model calls, so
        # `ctxoffload show --step N` rebuilds it: the step (numbered over the session) and
        # the keys of the history last projected (the same history again is a retry).
        # The record of a call (its messages, then the call) is written in one append.
        self._held: list[Event] = []
        self._calls = ModelCalls(self._hold, prepare=InlinePayloads(workspace).moved_out)
        self._last_sent: list[Msg] = []
        self._left_out: frozenset[str] = frozenset()
        self._loaded = False
        # The compactions asked for from outside (`ctxoffload compact`), served at the next
        # projection; each look reads only what events.jsonl gained.
        self._requests = CompactRequests(workspace, session_id)
        self._lock = LoopLock()  # one step at a time, on whichever loop runs it
        self._loop: CallerLoop | LoopThread | None = None

    @property
    def session_id(self) -> str:
        """The session projected."""
        return self._session_id

    @property
    def counter(self) -> TokenCounter:
        """The counter this projector counts with."""
        return self._compressor.counter

    @property
    def left_out(self) -> frozenset[str]:
        """The ids of the history's messages the latest projection did not send.

        Each was stored in the session before it left (in context.jsonl; an earlier summary,
        folded into the new one, in the session's record), and a summary or a provider's
        compaction stands for it. What a host that keeps what was sent may drop."""
        return self._left_out

    def use_model(self, model_name: str | None) -> TokenCounter:
        """Count with the counter for `model_name` (`get_token_counter`): for a host whose
        model is known only at its first call. Only the first call that names a model, before
        any projection, picks it; a counter given to the projector always stays, and so does
        the one a projection has counted with (its counts are cached message by message; a
        new counter would count the whole history again).

        Args:
            model_name: the host's model (`claude-sonnet-4-5`, `anthropic:claude-...`,
                `openai/gpt-4o`, Bedrock's `us.anthropic.claude-...`); None or empty
                changes nothing.

        Returns:
            The counter in use after the call.
        """
        with self._settling:
            if model_name and not self._counter_settled:
                self._counter_settled = True
                self._compressor.count_with(get_token_counter(model_name))
            return self._compressor.counter

    def use_summary_model(self, model: ChatModel | None) -> None:
        """Have `model` write this projector's summaries from its next compaction on: for a
        host whose agent's model is known only at its first call (None: the extractive
        summary). What was summarised before stays as it was.

        Args:
            model: the summary model, or None.
        """
        if self._compressor.model is not model:
            self._compressor.model = model

    async def project(
        self,
        history: Sequence[Msg | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        force: bool = False,
        summary_model: ChatModel | None = None,
    ) -> list[Msg]:
        """The messages the model should be sent for `history`, the host's whole history.

        Args:
            history: every message, oldest first, as ctxoffload `Msg` objects or OpenAI /
                Anthropic message dicts (read with `to_msgs`). A message is known across
                calls (and processes) by its `id` where it has one, else by a hash of its
                content, which then names it (its `id` in what is sent and stored).
            tools: the tool schemas sent with the call (they count against the window).
            force: summarise now, even below the trigger: the provider said the projection
                is over its window (`is_context_overflow`); later calls re-apply it. A
                compaction asked for from outside (`ctxoffload compact`,
                `request_compaction`) is served the same way at the next call, as if the
                context filled the window, and answered with a `compact` event.
            summary_model: the model that writes the summaries from this call on, in place
                of the one the projector was built with (a host's agent model, known only
                at its call); None keeps the one it has.

        Returns:
            `Msg` objects: the ones given (converted from dicts once) where nothing changed,
            and the same replacement objects on every call where something did.

        Raises:
            InvalidContent: `history` is not a list of messages, or holds an item that is
                no message (None, a number, text), one nested deeper than a message may be
                (108 levels), or one `to_msgs` cannot read, named by its index.
        """
        if isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Sequence):
            raise InvalidContent(
                f"Projector.project takes the whole history as a list of messages, got one "
                f"{type(history).__name__}: pass a list of ctxoffload Msgs or OpenAI / "
                "Anthropic message dicts"
            )
        async with self._lock():
            if summary_model is not None:
                self.use_summary_model(summary_model)
            # The call's events (a compaction's, its answer to a request) are written with
            # its record, in one append (`_record`); on an error, before it is raised.
            self._compressor.hold_events()
            try:
                return await self._project(history, tools, force)
            finally:
                left = self._compressor.held_events()
                if left:
                    await self._compressor.events(left)

    def project_sync(
        self,
        history: Sequence[Msg | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        force: bool = False,
        summary_model: ChatModel | None = None,
    ) -> list[Msg]:
        """`project` for a host that calls from synchronous code: run on this projector's own
        event loop, by the calling thread (`CallerLoop`; with `background_compaction`, on a
        thread of the projector's own, started on the first call), so the workspace's locks
        and the projector's state stay on one loop whichever thread calls."""
        return self._run_sync(
            self.project(history, tools=tools, force=force, summary_model=summary_model)
        )

    async def report_usage(self, input_tokens: int) -> bool:
        """Fold the input tokens the provider reported for the latest projection back in: the
        next call's count starts from them and adds only what the history gained since
        (`ContextTokenTracker.anchor`), so the trigger is decided on the provider's count,
        not on the counter's estimate of a model it cannot count exactly.

        Args:
            input_tokens: the whole request's input tokens (with Anthropic, the cache reads
                and writes included); 0 or less (a reply that reports none) changes
                nothing: an earlier report, and what was counted since, stays the count, as
                for the `Agent`.

        Returns:
            Whether the report was taken (not when nothing was projected yet, when none was
            reported, or when it is below a quarter of the counter's own count: a partial
            figure, which also drops an earlier report).
        """
        async with self._lock():
            if not self._last_sent or input_tokens <= 0:
                return False
            return self._compressor.tracker.anchor(input_tokens, self._last_sent)

    def report_usage_sync(self, input_tokens: int) -> bool:
        """`report_usage` for synchronous code, on the loop `project_sync` uses."""
        if input_tokens <= 0:  # nothing reported: nothing to take, and no hop to the loop
            return False
        return self._run_sync(self.report_usage(input_tokens))

    def release(self) -> None:
        """The host's run is over: let go of what only that run needed (the whole text of
        each result cut at its last call, the counts of long texts; see
        `Compressor.release`). A door keeps a projector per conversation between runs; what
        it holds then is the conversation's record and the history's readings, not its
        outputs, and the next run projects as it would have."""
        self._compressor.release()

    async def offload_tool_result(
        self,
        block: ToolResultBlock,
        *,
        message: Msg | None = None,
        config: ContextConfig | None = None,
    ) -> ToolResultBlock:
        """One tool result as the host should keep it: `block` when it fits, else its head
        and the notice naming the file that holds it whole (the Compressor's truncation).

        For a host whose tool hook may replace a result before it enters the history (so
        the whole text never reaches the host's own store); `project` leaves a result cut
        here as it is.

        Args:
            block: the tool result.
            message: the history message holding `block` alone, as `project` will be given
                it (the same `id`), for a host that sends the whole result on while its
                store keeps the cut (the OpenAI Agents SDK's run and its session): `project`
                then sends this cut for that message, not cutting (and storing) it again.
            config: a one-off configuration for this result: a host that passes on only what
                fits a limit of its own (CrewAI's own compaction) gives a smaller
                `tool_result_limit` here (the same `block` given again under a smaller one
                is cut again from the file it went to the first time: stored once).
        """
        async with self._lock():
            cut = await self._compressor.process_tool_result(block, config=config)
            if message is not None and message.content == [block]:
                sent = message.model_copy(update={"content": [cut]})
                self._seen[_key(message)] = (message, message, sent)
            return cut

    def offload_tool_result_sync(
        self, block: ToolResultBlock, *, config: ContextConfig | None = None
    ) -> ToolResultBlock:
        """`offload_tool_result` for synchronous code, on the loop `project_sync` uses."""
        return self._run_sync(self.offload_tool_result(block, config=config))

    def _run_sync(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._loop is None:
            # Run by the calling thread, unless a background summary must go on between
            # calls: then on a loop thread of the projector's own.
            if self._compressor.config.background_compaction:
                self._loop = LoopThread("ctxoffload-projector", inline_io=True)
            else:
                self._loop = CallerLoop("ctxoffload-projector")
        return self._loop.run(coro)

    # -- the steps --------------------------------------------------------------------------

    async def _project(
        self,
        history: Sequence[Msg | Mapping[str, Any]],
        tools: Sequence[dict[str, Any]],
        force: bool,
    ) -> list[Msg]:
        """`project`'s work, under its lock."""
        started = time.perf_counter()
        with self._settling:
            self._counter_settled = True
        await self._load()
        items, keys = self._read_history(history)
        system = leading_system(items)
        cover = self._cover_for(keys, system)
        holder = newest_compaction(items)
        summarised: Cover | None = None
        if holder is not None and holder > system:
            if cover is not None and cover.start + cover.count > holder:
                holder = None  # a summary made since stands for the item too
            else:
                summarised, cover = cover, None  # the item stands for all it did
        else:
            holder = None
        skip = range(system, holder) if holder is not None else None
        sent = await self._each(items, keys, cover, skip, self._own())
        # A summarised message is None in `sent`: the summary stands where they were.
        out = [m for m in sent[:system] if m is not None]
        if cover is not None:
            out += cover.messages
        if holder is not None:
            out += await self._beside_provider(items, keys, sent, system, holder, summarised)
        else:
            out += [m for m in sent[system:] if m is not None]
        asked = await self._requests.look()
        instructions = CompactRequests.instructions_of(asked)
        result = await self._compressor.maybe_compress(
            out,
            tools=tools,
            force=force or bool(asked),
            config=self._asked_config(out, tools, instructions) if asked else None,
            remember=False,
        )
        # A compaction asked for from outside runs on a window assumed for it (the
        # context's own size): its cuts of new messages would be cuts to that.
        cuts = {} if asked else await self._adopt_cuts(keys, sent, result.messages, system)
        if result.compressed:
            out = await self._decide(keys, sent, out, result.messages, system, cover)
        elif cuts:
            out = [cuts.get(m.id, m) for m in out]
        if asked:
            await self._answer(result, instructions, asked)
        await self._check_window(out, tools, result.tokens_after)
        self._compressor.remember_sent(out, out)
        self._last_sent = out
        self._left_out = _left_out(items, out)
        self._forget_dropped(history, items, keys)
        await self._record(keys, out, tools, started)
        return out

    async def _check_window(
        self, out: list[Msg], tools: Sequence[dict[str, Any]], counted: int
    ) -> None:
        """Report what is sent when it is still over the window (the newest turn alone
        over it: its tool calls' arguments, a pinned message), or refuse it with
        `over_window="refuse"` (`Compressor.check_window`). Counted again exactly only when
        the compression's count of it is over the window."""
        compressor = self._compressor
        try:
            window = compressor.window()
        except ConfigError:
            return
        if counted <= window:
            return
        await compressor.check_window(out, compressor.count(out, tools))

    async def _load(self) -> None:
        """Read the session's decisions back (a restarted process): every summary, provider
        compaction and cut its record holds, applied as this process applies its own
        (`Decisions.read`).

        The record is read as `show` reads it: a line that is no event, or an event of a
        shape this version does not read (a newer release's, a damaged line), is skipped;
        the latest decision that reads is re-applied, and none at all sends the history."""
        if self._loaded:
            return
        self._loaded = True
        events = [e for e in await self._workspace.read_events(self._session_id) if is_event(e)]
        self._calls.remember(events)
        self._decisions.read(events)
        self._compressor.resume(events)

    async def _decided(self, record: Event) -> None:
        """Make a decision: write its event (with the call's record) and take it from there,
        as a restarted process takes it from the session's record."""
        await self._compressor.event(record)
        self._decisions.take(record.to_json())

    async def _record(
        self, keys: list[str], sent: list[Msg], tools: Sequence[dict[str, Any]], started: float
    ) -> None:
        """Record what this call sends: each message not recorded yet in its form, then a
        `model_call` event naming them in order (outcome `projected`: the host makes the call
        and keeps its answer), all in one append. The same history projected again is the
        same step's next attempt (a retry after the provider refused it)."""
        window = self._compressor.window()
        await self._calls.record(
            sent,
            keys=keys,
            summary=next((m.id for m in sent if is_summary_message(m)), None),
            tokens_counted=self._compressor.count(sent, tools),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            outcome="projected",
            context_window=window,
            trigger_tokens=self._compressor.config.trigger_tokens(window),
            **self._reading,
        )
        held, self._held = [*self._compressor.held_events(), *self._held], []
        await self._compressor.events(held)

    async def _hold(self, record: Event) -> None:
        """Keep an event of the call's record, written with the call (`_record`)."""
        self._held.append(record)

    def _asked_config(
        self, out: list[Msg], tools: Sequence[dict[str, Any]], instructions: str | None
    ) -> ContextConfig:
        """The config of a compaction asked for from outside: as if the context filled the
        window (as the Agent's `compact`), with the requests' instructions."""
        compressor = self._compressor
        tokens = compressor.count(out, tools)
        return asked_config(
            compressor.config,
            window=max(1, min(compressor.window(), tokens)),
            instructions=instructions,
        )

    async def _answer(
        self, result: CompressionResult, instructions: str | None, asked: list[CompactRequest]
    ) -> None:
        """Answer the requests served with one `compact` event, whatever came of them."""
        if not result.compressed:
            result.reason = f"nothing to compact: {result.reason}"
        await self._compressor.event(compact_event(result, instructions, asked))

    def _read_history(
        self, history: Sequence[Any]
    ) -> tuple[list[Msg | Mapping[str, Any]], list[str]]:
        """Each item of `history` as the projection reads it, and its key across calls.

        Raises:
            InvalidContent: an item is no message, or nests too deeply (`_read_item`).
        """
        items: list[Msg | Mapping[str, Any]] = []
        keys: list[str] = []
        for index, item in enumerate(history):
            read, key = self._read_item(item, index)
            items.append(read)
            keys.append(key)
        return items, keys

    def _read_item(self, item: Any, index: int) -> tuple[Msg | Mapping[str, Any], str]:
        """An item of the history as the projection reads it (a `Msg` or a message dict as
        given; any other message `to_msgs` reads, such as a pydantic model shaped like a
        message, converted) and its key (`_key`): found once per object, as a host re-sends
        the same objects.

        Raises:
            InvalidContent: the item is no message (None, a number, text), or nests deeper
                than a message may (`_depth.STORE_DEPTH`: hashing a dict for its key walks
                it), named by its index.
        """
        known = self._keys.get(id(item))
        if known is not None and known[0] is item:
            return known[1], known[2]
        read: Msg | Mapping[str, Any]
        if isinstance(item, Msg):
            read = item
        elif isinstance(item, Mapping):
            if too_deep(item, STORE_DEPTH):
                raise depth_error(f"Projector.project: history[{index}]", STORE_DEPTH)
            read = item
        else:
            read = _read(item, index)
        key = _key(read)
        self._keys[id(item)] = (item, read, key)
        return read, key

    def _cover_for(self, keys: list[str], system: int) -> Cover | None:
        """The summary decision, where the history still holds what it summarised."""
        cover = self._decisions.cover
        if cover is None:
            return None
        end = cover.start + cover.count
        if cover.start == system and end <= len(keys) and keys[end - 1] == cover.last_key:
            return cover
        return None

    def _own(self) -> dict[str, Msg]:
        """The messages this projector wrote (the summary, a provider compaction's note) by
        key: a host that keeps what it was sent gives them back as its own objects, which
        lose their marks on the way (LangChain keeps no metadata)."""
        own = list(self._decisions.cover.messages) if self._decisions.cover is not None else []
        if self._decisions.provider is not None:
            own.append(self._decisions.provider.note)
        return {f"id:{msg.id}": msg for msg in own}

    async def _each(
        self,
        history: Sequence[Msg | Mapping[str, Any]],
        keys: list[str],
        cover: Cover | None,
        skip: range | None = None,
        own: Mapping[str, Msg] | None = None,
    ) -> list[Msg | None]:
        """What is sent for each message: read once, truncated once; None for a message a
        summary or a provider's compaction item stands for (`skip`; not read at all, as a
        restarted process need not). A message of the projector's own (`own`) given back
        with the same text is sent as the projector's object, its marks intact; one sent cut
        (`Decisions.cut_for`, in this process or an earlier one) is sent as it was cut."""
        if skip is None:
            skip = range(cover.start, cover.start + cover.count) if cover is not None else range(0)
        sent: list[Msg | None] = []
        for i, (item, key) in enumerate(zip(history, keys, strict=True)):
            if i in skip:
                sent.append(None)
                continue
            known = self._seen.get(key)
            if known is not None and _same(known[0], item):
                sent.append(known[2])
                continue
            msg = item if isinstance(item, Msg) else _read(item, i, key)
            mine = own.get(key) if own else None
            if mine is not None and _says_same(mine, msg):
                self._seen[key] = (item, mine, mine)
                sent.append(mine)
                continue
            projected = self._decisions.cut_for(key, msg)
            if projected is None:
                projected = await self._compressor.process_message(msg)
            self._seen[key] = (item, msg, projected)
            sent.append(projected)
        return sent

    async def _beside_provider(
        self,
        history: Sequence[Msg | Mapping[str, Any]],
        keys: list[str],
        sent: list[Msg | None],
        system: int,
        holder: int,
        summarised: Cover | None,
    ) -> list[Msg]:
        """What is sent from a provider's compaction item on: the item's turn, the note,
        the rest. The first time the item is seen (in this process or, through the session's
        events, an earlier one), the messages before it are appended to context.jsonl and
        the note is written; later calls send the same note object.

        Messages stored already are not stored again: those an earlier item replaced (its
        note stands for them) and those a summary stands for (`summarised`); the newest of
        those notes carries its index on into the new one."""
        rest = [m for m in sent[holder:] if m is not None]
        cut = self._decisions.provider
        if cut is None or cut.key != keys[holder]:
            start, notes = system, list(summarised.messages) if summarised is not None else []
            if summarised is not None:
                start = summarised.start + summarised.count
            if cut is not None and cut.key in keys[start:holder]:
                start, notes = keys.index(cut.key, start, holder), [cut.note]
            before = [
                item if isinstance(item, Msg) else _read(item, i, keys[i])
                for i, item in enumerate(history[start:holder], start=start)
            ]
            done = await absorb(
                self._compressor, [*notes, *before], rest[0], rest[1:], item_key=keys[holder]
            )
            if done is None:  # not stored: nothing may leave
                return [*notes, *before, *rest]
            # (Its event is written by `absorb`; taken from it, as a restarted process would.)
            self._decisions.take(done.event.to_json())
            cut = self._decisions.provider
            if cut is None or cut.key != keys[holder]:  # (its own event always reads)
                return [*notes, *before, *rest]
        at = note_position(rest, 0)
        return [*rest[:at], cut.note, *rest[at:]]

    async def _adopt_cuts(
        self, keys: list[str], sent: list[Msg | None], now: Sequence[Msg], system: int
    ) -> dict[str, Msg]:
        """Keep the cuts a compaction made to messages it kept (a new message's long text,
        a new result, a call's long arguments, cut to fit the reserve, each stored whole
        first): recorded in the session (a `projection_cut` event) and taken from there, so
        that `sent`, every later call and a restarted process send the cut, not the message
        as it was. By message id, the cuts made."""
        given = {m.id: i for i, m in enumerate(sent) if m is not None and i >= system}
        made: list[tuple[int, Msg, Msg]] = []
        for msg in now:
            i = given.get(msg.id)
            if i is None:
                continue
            before, known = sent[i], self._seen.get(keys[i])
            if before is None or known is None or before is msg or before.content == msg.content:
                continue
            made.append((i, known[1], msg))
        if not made:
            return {}
        await self._decided(cut_record((keys[i], read, msg) for i, read, msg in made))
        cuts: dict[str, Msg] = {}
        for i, read, msg in made:
            cut = self._decisions.cut_for(keys[i], read) or msg  # (its own event always reads)
            sent[i] = cuts[cut.id] = cut
            item = self._seen[keys[i]][0]
            self._seen[keys[i]] = (item, read, cut)
        return cuts

    def _forget_dropped(
        self, history: Sequence[Any], items: list[Msg | Mapping[str, Any]], keys: list[str]
    ) -> None:
        """Forget the messages a host dropped from its history (bounded memory)."""
        if len(self._seen) > 2 * len(keys) + 64:
            current = set(keys)
            self._seen = {k: v for k, v in self._seen.items() if k in current}
            self._decisions.keep_only(current)
        if len(self._keys) > 2 * len(keys) + 64:
            self._keys = {
                id(item): (item, read, key)
                for item, read, key in zip(history, items, keys, strict=True)
            }

    async def _decide(
        self,
        keys: list[str],
        sent: list[Msg | None],
        given: list[Msg],
        now: list[Msg],
        system: int,
        cover: Cover | None,
    ) -> list[Msg]:
        """Keep what a compaction decided: which of the history's messages its summary
        stands for, recorded in the session for a restarted process.

        The note after a provider's compaction item is no message of the history: the
        messages kept are counted back to it, and it goes with the summary (which now stands
        for the item too), so that what it names stays in the context."""
        kept = 0
        while (
            kept < len(now) - system
            and kept < len(given) - system
            and now[-1 - kept].id == given[-1 - kept].id
            and not is_provider_note(now[-1 - kept])
        ):
            kept += 1
        count = len(keys) - system - kept
        if count <= 0 or (cover is not None and count < cover.count):
            return now  # the summary stands for no more of the history than before
        summary = tuple(now[system : len(now) - kept])
        decision = Cover(system, count, keys[system + count - 1], summary)
        await self._decided(
            Projection(
                start=system,
                covers=count,
                last_key=decision.last_key,
                messages=[m.model_dump(mode="json", exclude_none=True) for m in summary],
            )
        )
        if (
            self._decisions.cover is not None
            and self._decisions.cover.last_key == decision.last_key
        ):
            summary = self._decisions.cover.messages
        else:  # (its own event always reads)
            self._decisions.cover = decision
        tail = [m for m in sent[system + count :] if m is not None]
        return [*now[:system], *summary, *tail]


def _same(seen: Msg | Mapping[str, Any], item: Msg | Mapping[str, Any]) -> bool:
    """Whether `item` says what `seen` said: the same object, an equal dict, or a `Msg` that
    differs at most in its timestamp (a host that converts its history to `Msg`s anew on
    every call makes new ones, each stamped when it was made)."""
    if seen is item or seen == item:
        return True
    if not (isinstance(seen, Msg) and isinstance(item, Msg)):
        return False
    return {**seen.__dict__, "timestamp": None} == {**item.__dict__, "timestamp": None}


def _says_same(mine: Msg, given: Msg) -> bool:
    """Whether a message a host gave back is the projector's own `mine`: the same role and
    text (a host may rebuild the object and drop its metadata, never its text)."""
    return mine.role == given.role and mine.text == given.text


def _left_out(history: Sequence[Msg | Mapping[str, Any]], out: Sequence[Msg]) -> frozenset[str]:
    """The ids of the messages of `history` that `out` does not send (under their own id)."""
    sent = {msg.id for msg in out}
    ids = (item.id if isinstance(item, Msg) else item.get("id") for item in history)
    return frozenset(i for i in ids if isinstance(i, str) and i and i not in sent)


def _read(item: Mapping[str, Any], index: int, key: str | None = None) -> Msg:
    """One message of a host's history as a `Msg`; one without an id of its own is named
    by its `key` (`_key`: a hash of its content), the same in every process, so a restarted
    process records it, stores it (once) and knows it as sent under the same id.

    Raises:
        InvalidContent: naming the message by its index in the history.
    """
    try:
        msg = to_msgs([item])[0]
    except InvalidContent as exc:
        problem = " ".join(str(exc).split()).removeprefix("objs[0] ")
        raise InvalidContent(f"Projector.project: history[{index}] {problem}") from None
    if key is not None and key.startswith(_HASHED):
        msg = msg.model_copy(update={"id": key[len(_HASHED) :][:32]})
    return msg


def _key(item: Msg | Mapping[str, Any]) -> str:
    """A message's key across calls: its id where the host gave one, else a content hash."""
    if isinstance(item, Msg):
        return f"id:{item.id}"
    given = item.get("id") if isinstance(item, Mapping) else None
    if isinstance(given, str) and given:
        return f"id:{given}"
    try:
        text = json.dumps(item, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):  # keys json cannot sort or write (`{1: "a", "b": 2}`)
        text = text_form(item)
    return _HASHED + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

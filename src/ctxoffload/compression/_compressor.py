"""The Compressor: truncates big tool results and compresses history when the context is full.

```python
compressor = Compressor(config, model=summary_model, offloader=ws, session_id="run-42")
block = await compressor.process_tool_result(block)        # after each tool call
result = await compressor.maybe_compress(context)          # before each model call
context = result.messages
```

A thin front over two jobs that share one `RunServices` (settings, counter, offloader,
session, events, summary state, what the model has seen; `_services.py`): truncation, per
tool result (`_truncator.py`), and compaction of the history (`_compaction.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._disk import events
from .._disk.records import Event
from .._emit import EventCallback
from .._tokens.counters import forget_long_counts
from ..exceptions import ConfigError, ContextOverflowError
from ..formats import read_messages
from ..messages import Msg, ToolResultBlock
from ..model import ChatModel
from ..tokens import ContextTokenTracker, TokenCount, TokenCounter
from ..workspace import Offloader
from ._compaction import Compaction
from ._config import ContextConfig
from ._notes import is_context_note
from ._persisted import Persisted
from ._protect import Protected, is_pinned
from ._provider_compaction import absorb_in_context
from ._result import CompressionResult
from ._resume import take_up
from ._services import RunServices, RunSettings
from ._split import SplitStrategy
from ._stored_outputs import WholeOutput
from ._summary_message import Artifact
from ._summary_model import Summary
from ._tool_names import ReaderTools
from ._truncate import Truncation
from ._truncator import Truncator

__all__ = ["Compressor"]


class Compressor:
    """Decides when and what to compress, and does it without losing anything.

    Args:
        config: thresholds, prompt and template.
        model: the summary model; None gives extractive summaries only.
        offloader: where content goes before it leaves the context; None means truncated
            and compressed content is dropped (and the context says so).
        session_id: the workspace session; generated when not given.
        counter: the token counter; by default the exact one for `model`.
        context_window: the window of the model whose context is managed, used when
            `config.context_window` is not set (the summary model's window is the last
            resort).
        reader_tools: the names of the agent's tools for reading offloaded content back,
            written into every notice; they take precedence over `config.reader_tools`.
            Change them later with `set_reader_tools`.
        on_event: called with each event (truncation, compression, summary) as it is
            written; a plain function or `async def`. One that raises is logged and ignored.
        reader_names: the exact names of the tools whose results read offloaded content
            back (`reads_back`); the `Agent` gives those it marks as readers. None (the
            default): ctxoffload's reader tool names and those of `reader_tools`.

    Which messages are fresh: `maybe_compress` remembers the ids of the messages it
    returned; the messages after the last of those, from the model's latest message on,
    are the ones the model has not seen yet, together with the turn they belong to (the
    assistant's call). On the first call, the newest turn is fresh. Fresh messages are
    never compressed (see `maybe_compress`).
    """

    def __init__(
        self,
        config: ContextConfig | None = None,
        *,
        model: ChatModel | None = None,
        offloader: Offloader | None = None,
        session_id: str | None = None,
        counter: TokenCounter | None = None,
        context_window: int | None = None,
        reader_tools: ReaderTools | None = None,
        on_event: EventCallback | None = None,
        reader_names: Collection[str] | None = None,
    ) -> None:
        settings = RunSettings(
            config or ContextConfig(),
            model=model,
            context_window=context_window,
            host_readers=reader_tools,
            reader_names=frozenset(reader_names) if reader_names is not None else None,
            window_model=model,
        )
        self._services = RunServices(
            settings,
            offloader=offloader,
            session_id=session_id,
            counter=counter,
            on_event=on_event,
        )
        self._truncator = Truncator(self._services)
        self._compaction = Compaction(self._services, self._truncator)

    # -- settings and services ----------------------------------------------------------------

    @property
    def config(self) -> ContextConfig:
        """Thresholds, prompt and template (the settings' `ContextConfig`)."""
        return self._services.settings.config

    @config.setter
    def config(self, config: ContextConfig) -> None:
        self._services.settings = self._services.settings.over(config)

    @property
    def model(self) -> ChatModel | None:
        """The summary model; None gives extractive summaries only."""
        return self._services.settings.model

    @model.setter
    def model(self, model: ChatModel | None) -> None:
        # A host door learns the agent's model at its first call, after the compressor was
        # made: from the next summary on, that model writes them (None: the extract).
        self._services.settings = replace(self._services.settings, model=model)

    @property
    def offloader(self) -> Offloader | None:
        """Where content goes before it leaves the context."""
        return self._services.offloader

    @property
    def session_id(self) -> str:
        """The workspace session."""
        return self._services.session_id

    @session_id.setter
    def session_id(self, session_id: str) -> None:
        self._services.session_id = session_id

    @property
    def counter(self) -> TokenCounter:
        """The token counter."""
        return self._services.counter

    @property
    def tracker(self) -> ContextTokenTracker:
        """The incremental counter of the context's messages (`count`)."""
        return self._services.tracker

    def count_with(self, counter: TokenCounter) -> None:
        """Count with `counter` from now on: for a host whose model is known only at its first
        call. The tracker starts anew (its cached counts and any reported usage were the old
        counter's), so every message is counted once more at the next count: call it before
        the first count, as `Projector.use_model` does.

        Args:
            counter: the counter for the model in use (`get_token_counter`).
        """
        self._services.count_with(counter)

    @property
    def on_event(self) -> EventCallback | None:
        """Called with each event as it is written."""
        return self._services.on_event

    @on_event.setter
    def on_event(self, on_event: EventCallback | None) -> None:
        self._services.on_event = on_event

    def set_reader_tools(self, reader_tools: ReaderTools | None) -> None:
        """Name the tools the agent has for reading offloaded content back (see `ReaderTools`).

        The `Agent` calls this with the names it registered; notices written from now on
        name them.
        """
        self._services.settings = replace(self._services.settings, host_readers=reader_tools)

    def reader_tools(self, config: ContextConfig | None = None) -> ReaderTools | None:
        """The reader tools notices name: those given to the compressor, else the config's."""
        return self._services.settings.over(config).readers

    def reads_back(self, tool_name: str | None, config: ContextConfig | None = None) -> bool:
        """Whether `tool_name`'s results read offloaded content back: such a result is never
        offloaded or cut again (that would loop), and is cleared without a copy (calling the
        tool again reads it anew).

        The names given as `reader_names` when they were (an `Agent` gives the tools it marks
        as readers, so a tool of yours called `Read` is not one); else ctxoffload's reader
        tool names (`READER_TOOL_NAMES`) and those `reader_tools` gives.
        """
        return self._services.settings.over(config).reads_back(tool_name)

    def window(self, config: ContextConfig | None = None) -> int:
        """The context window in tokens that thresholds are computed against."""
        return self._services.settings.over(config).window()

    # -- state ----------------------------------------------------------------------------

    @property
    def summary(self) -> Summary | None:
        """The latest summary, if history has been compressed."""
        return self._services.state.summary

    @property
    def artifacts(self) -> list[Artifact]:
        """Files offloaded so far, newest first."""
        return self._services.state.newest_artifacts()

    @property
    def context_reference(self) -> str | None:
        """The reference compressed messages went to, as the offloader's `offload_context`
        returned it last (a resumed session's is taken from its summary); None before any."""
        return self._services.state.reference

    @property
    def compressions(self) -> int:
        """How many times history has been compressed."""
        return self._services.state.compressions

    def count(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = ()) -> int:
        """Tokens `messages` (+ tool schemas) cost, counted incrementally.

        The messages counted for the first time are also scanned for the artifact index
        then (their paths, URLs, commands and ids), once each as they are counted once each,
        with no second pass over the context: a compaction finds what leaves already
        scanned instead of scanning it all at once.
        """
        return self._services.count(messages, tools)

    def count_until(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = (), *, limit: float
    ) -> TokenCount:
        """Tokens `messages` (+ tool schemas) cost, counted exactly only until past `limit`.

        The newest messages are counted first; once the count passes `limit`, the older ones
        are estimated instead of tokenized, and the result says so with its bounds
        (`ContextTokenTracker.count_past`): whether the context is over `limit` is exact
        either way. Below `limit` every message is counted. The messages counted for the
        first time are scanned for the artifact index, as `count` scans them.
        """
        return self._services.count_until(messages, tools, limit=limit)

    # -- truncation (post-tool) -----------------------------------------------------------

    async def process_tool_result(
        self,
        block: ToolResultBlock | Mapping[str, Any] | Msg,
        *,
        config: ContextConfig | None = None,
    ) -> ToolResultBlock:
        """Offload and truncate one tool result if it is over `tool_result_limit`.

        Args:
            block: a `ToolResultBlock`, or what the workspace takes: an OpenAI `tool`
                message, an Anthropic `tool_result` block, a `Msg` holding one result.
            config: a one-off configuration for this call.

        Returns:
            The block to put in the context, always a ctxoffload `ToolResultBlock`: the
            result itself when it fits or could not be offloaded, else a copy whose output
            is the head plus a marker naming the file. A result cut since the previous call,
            given again (under a smaller limit: a host that passes on less), is cut again
            from that file: stored and recorded once.

        Raises:
            InvalidContent: `block` is not a tool result (one line, naming `to_msgs`).
        """
        settings = self._services.settings.over(config)
        return await self._truncator.process_tool_result(block, settings)

    async def process_message(self, msg: Msg, *, config: ContextConfig | None = None) -> Msg:
        """`process_tool_result` for every tool result in a message."""
        return await self._truncator.process_message(msg, self._services.settings.over(config))

    def release(self) -> None:
        """Let go of what this compressor holds for the run that just ended alone: the whole
        text of each result it cut since the previous call (cut again, one is read back from
        the file it went to) and the counts its counter keeps of long texts (with the texts).
        For a compressor kept between runs (a door's, per conversation): nothing is lost, the
        next run projects as it would have."""
        self._truncator.release()
        forget_long_counts(self._services.counter)

    async def truncated(
        self, block: ToolResultBlock, done: Truncation, **extra: Any
    ) -> ToolResultBlock:
        """Record a truncation made by a manager (artifact trail, event); its block."""
        return await self._truncator.truncated(block, done, **extra)

    async def cut_to_fit(
        self, messages: Sequence[Msg], tokens: int, *, config: ContextConfig | None = None
    ) -> list[Msg]:
        """`messages` with their tool results and long texts cut so that together they fit
        `tokens`: each gets an equal share, never less than a floor of a few hundred tokens,
        and is stored whole before its head and a notice naming the file replace it (a
        result cut before is cut again from the file it went to); then, if they are still
        over, the long strings among the arguments of calls that have their results there
        (a call that wrote a whole file). A pinned message is never cut; a message that
        changes nothing is returned itself.

        Args:
            messages: the messages to fit, oldest first.
            tokens: what they may cost together.
            config: a one-off configuration for this call.
        """
        settings = self._services.settings.over(config)
        return await self._truncator.fit_fresh(list(messages), tokens, settings, calls_over=tokens)

    async def cut_calls_to_fit(
        self, messages: Sequence[Msg], tokens: int, *, config: ContextConfig | None = None
    ) -> list[Msg]:
        """`messages` with the long arguments of their calls that have their results there
        (a call that wrote a whole file) cut so that together they fit `tokens`, as
        `cut_to_fit` cuts them once the results are cut: each stored whole first, its head
        and a notice naming the file kept. Results and texts stay as they are; so do a
        pinned message and a call still to run. A message that changes nothing is returned
        itself.

        Args:
            messages: the messages to fit, oldest first.
            tokens: what they may cost together.
            config: a one-off configuration for this call.
        """
        settings = self._services.settings.over(config)
        given = list(messages)
        answered = {b.id for m in given for b in m.tool_results}
        return await self._truncator.cut_calls(given, tokens, settings, answered)

    # -- compression (pre-model) ------------------------------------------------------------

    async def maybe_compress(
        self,
        messages: Sequence[Msg | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        force: bool = False,
        config: ContextConfig | None = None,
        summary_model: ChatModel | None = None,
        split: SplitStrategy | None = None,
        remember: bool = True,
    ) -> CompressionResult:
        """Compress older history if the context is over the trigger (a no-op below it).

        The system prompt (a leading `system` message) is never compressed. An earlier
        summary message is replaced by the new summary, into which it is folded. The newest
        messages within `reserve_ratio x window` stay verbatim, never separating a tool call
        from its result; the latest user request always stays.

        Five steps: check (is it due), split (what leaves, what stays), persist, summarise,
        assemble. Persist before drop: if offloading the older messages fails, nothing is
        removed (a warning is logged and `reason` says so).

        Args:
            messages: the whole context, oldest first: ctxoffload `Msg` objects, or OpenAI /
                Anthropic message dicts (read with `to_msgs`).
            tools: the tool schemas sent with each call (they count against the window).
            force: compress even below the trigger.
            config: a one-off configuration for this call.
            summary_model: the model that writes this summary, instead of the compressor's.
            split: which older messages stay: `SplitByTokens()` (the default, the newest
                within the reserve) or `SplitByCount(summary_ratio, preserve_recent)`.
            remember: note the returned messages as sent to the model (what makes the next
                call's newest turn fresh); a `ContextPipeline` notes once, after all its
                managers.

        Returns:
            The result; its `messages` are always ctxoffload `Msg` objects (convert them back with
            `to_openai` / `to_anthropic`).

        Raises:
            InvalidContent: a message `to_msgs` cannot read (one line, naming `to_msgs`).
        """
        context = read_messages(messages, caller="Compressor.maybe_compress")
        result = await self._compaction.compress(
            context,
            self._services.settings.over(config),
            tools=tools,
            force=force,
            summary_model=summary_model,
            split=split,
        )
        if remember:
            self._note_call(context, result.messages)
        return result

    async def persist(
        self, messages: Sequence[Msg], *, on_failure: str = "not compressing"
    ) -> Persisted:
        """Persist: append `messages` to the session's context.jsonl before they leave.

        The offloader is asked first; the file and the lines written are remembered, so the
        next summary names them. If it raises, a warning is logged (`could not offload N
        messages, <on_failure>: <error>`) and the caller keeps the messages in the context.

        Args:
            messages: the messages about to leave the context, oldest first.
            on_failure: what the caller does instead, for the warning.

        Returns:
            Where the messages went (nowhere without an offloader), or why they could not go.
        """
        return await self._services.persist(messages, on_failure=on_failure)

    async def index_note(
        self,
        note: Msg,
        leaving: Sequence[Msg],
        persisted: Persisted,
        *,
        earlier: Mapping[str, Any],
        summary_text: str,
        kept: Sequence[Msg],
        config: ContextConfig | None = None,
    ) -> tuple[Msg, dict[str, Any]]:
        """`note` (a manager's note standing where `leaving` left the context) followed by
        the artifact index of what left, as a summary is; the `artifacts` event written.

        Args:
            note: the note, marked (`metadata["ctxoffload"]`); its text is not changed.
            leaving: the messages that left, as `persist` stored them at `persisted`.
            persisted: what `persist` returned.
            earlier: the mark of the note this one replaces (its index is checked again).
            summary_text: the text of a summary the context keeps, if any.
            kept: the messages that stay.
            config: the configuration in force (its index budget).

        Returns:
            The note with the index, and the fidelity fields for the manager's event
            (`artifacts`, `recoverable`).
        """
        return await self._compaction.index_note(
            note,
            leaving,
            persisted,
            self._services.settings.over(config),
            earlier=earlier,
            summary_text=summary_text,
            kept=kept,
        )

    # -- beside a provider's own compaction ----------------------------------------------

    async def keep_provider_compaction(self, messages: Sequence[Msg]) -> list[Msg]:
        """The context after the newest compaction item of the model's provider it holds
        (Anthropic's `compaction` block, the Responses API's `compaction` item), with
        nothing the provider dropped lost.

        The provider no longer reads the messages before its item. They are appended to the
        session's context.jsonl first; then they leave the context, which goes on from the
        item, and a note is put right after the item's turn (after the tool results that
        answer its calls), naming the file and lines that hold them, followed by the
        artifact index of what left. A `provider_compaction` event records the span and the
        note. The `Agent` calls this after each model reply.

        Args:
            messages: the context, oldest first; a leading system prompt stays.

        Returns:
            The new context; `messages` (as a new list) when there is no item with messages
            before it (none, or absorbed already), or when they could not be stored (then
            nothing leaves: a warning is logged).
        """
        context, _ = await absorb_in_context(self, messages)
        return context

    # -- the summary made in the background (`background_compaction`) ---------------------

    async def start_background(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] = (),
        config: ContextConfig | None = None,
        summary_model: ChatModel | None = None,
        split: SplitStrategy | None = None,
    ) -> bool:
        """Start the summary of what would leave the context, in the background, when
        `background_compaction` is on and the context is past `trigger_ratio -
        background_lead` of the window (but below the trigger) and none is under way.

        What would leave is stored first (persist before drop); nothing leaves the context
        now. The next compression applies the summary if it still fits (see
        `_background.py`). `maybe_compress` calls this below the trigger, and a pipeline
        run after its managers.

        Returns:
            Whether a background summary started.
        """
        return await self._compaction.start_background(
            messages,
            self._services.settings.over(config),
            tools=tools,
            summary_model=summary_model,
            split=split,
        )

    @property
    def background(self) -> str | None:
        """None when no background summary is under way, else `running` or `ready`."""
        return self._compaction.background

    async def aclose(self) -> None:
        """Cancel a summary under way in the background and wait for it to end. Nothing is
        half-written: its messages were stored before it started, and a summary is written
        only when applied. Safe to call more than once."""
        await self._compaction.aclose()

    # -- the messages the model has not seen ------------------------------------------------

    def unseen_ids(self, messages: Sequence[Msg]) -> set[str]:
        """Ids of the messages the model has not seen yet, with their whole turn.

        The newest turn on the first call; later, what arrived since the messages last
        noted as sent (see `remember_sent`), from the model's latest message on.
        """
        return self._services.fresh_ids(
            [m for m in messages if m.role != "system" and not is_context_note(m)]
        )

    def note_request(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] | None, model: ChatModel
    ) -> None:
        """Note what the agent is sending its model: a later summary request to the same
        model (`same_model`) is this request plus one instruction, so that the provider's
        prompt cache serves its prefix. The `Agent` calls this before each model call."""
        self._compaction.note_request(messages, tools, model)

    def remember_sent(self, given: Sequence[Msg], sent: Sequence[Msg]) -> None:
        """Note that `sent` (made from `given`) is what the model will be sent next."""
        self._note_call(given, sent)

    def _note_call(self, given: Sequence[Msg], sent: Sequence[Msg]) -> None:
        """Remember what a call returned, so the next one knows what is fresh; the
        truncations of results no longer fresh are forgotten."""
        fresh = self._services.note_sent(given, sent)
        self._truncator.keep_recent(
            {block.id for m in sent if m.id in fresh for block in m.tool_results}
        )

    def record_offload(self, reference: str, line_span: tuple[int, int] | None) -> None:
        """Note messages moved to `reference` (by `persist`, or by someone else), so the
        next summary names those lines too."""
        self._services.state.record_offload(reference, line_span)

    def note_artifact(self, artifact: Artifact) -> None:
        """Add a file to the artifact trail the next summary lists."""
        self._services.state.artifacts.append(artifact)

    def note_earlier_artifacts(self, artifacts: Sequence[Artifact]) -> None:
        """Put files stored before this object existed (read back from the session's record
        by a restarted process), oldest first, before the ones it noted itself."""
        state = self._services.state
        state.artifacts[:0] = artifacts

    def resume(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Take up a session that an earlier process wrote, from its record (its events,
        oldest first), so that this one goes on as an unbroken run would: the one resume
        path of a `Projector`'s first call and of an `Agent` resumed from its saved state.

        The files the record says were stored whole since its latest compaction are noted
        before the ones this object noted itself (the next summary lists them as an unbroken
        run's would; the latest summary's own files come back with it when it is adopted),
        and what the latest model calls were sent is noted as sent (the messages after them
        are the fresh ones, as they would be for the run that made those calls).
        """
        taken = take_up(events)
        self.note_earlier_artifacts(taken.stored)
        if taken.latest:
            self._services.resume_sent(taken.before, taken.latest)

    def note_stored_output(self, tool_id: str, kept: str, whole: WholeOutput) -> None:
        """The context keeps `kept` for call `tool_id`, whose whole output was stored as
        `whole` (a post_tool manager's cut or offload); see `whole_output`."""
        self._services.stored_outputs.note(tool_id, kept, whole)

    async def whole_output(self, result: ToolResultBlock) -> WholeOutput | None:
        """Where the whole output is when `result`'s output is a stand-in ctxoffload left
        for it (a head and a notice, an offload's preview), known from this run or the
        session's record, never from the text; None for any other output. A manager that
        would store the output again names this instead."""
        return await self._services.stored_outputs.whole_of(result.id, result.output)

    async def check_window(
        self, context: Sequence[Msg], tokens: int, *, config: ContextConfig | None = None
    ) -> None:
        """Report a context of `tokens` still over the window once what may leave has left
        (what never leaves is more than it holds): an `over_window` event naming the sizes
        (and a WARNING), or, with `over_window="refuse"`, a `ContextOverflowError` instead of
        a request the provider would refuse.

        Raises:
            ContextOverflowError: the context is over the window and the config refuses it.
        """
        try:
            window = self.window(config)
        except ConfigError:
            return
        if tokens <= window:
            return
        settings = self._services.settings.over(config)
        count = self.tracker.count_message
        refuse = settings.config.over_window == "refuse"
        protected = Protected.of(context)
        system = sum(count(m) for m in context if m.role == "system")
        notes = sum(count(m) for m in context if is_context_note(m))
        pinned = sum(count(m) for m in context if protected.is_pinned(m))
        tools = self.tracker.tools_tokens
        others = len(context) - sum(
            1 for m in context if m.role == "system" or is_context_note(m) or is_pinned(m)
        )
        over = events.OverWindow(
            tokens=tokens,
            window=window,
            system_tokens=system,
            tools_tokens=tools,
            summary_tokens=notes,
            pinned_tokens=pinned,
            messages=others,
            # What is left: the kept messages, the newest turn among them, the reply priming.
            messages_tokens=max(0, tokens - system - notes - pinned - tools),
            action="refused" if refuse else "sent",
        )
        await self.event(over)
        if refuse:
            said = over.sentence()
            kept: list[object] = [*context]
            raise ContextOverflowError(
                f"{said}: unpin messages, shorten the system prompt or the tools, or give the "
                'model\'s real window; ContextConfig(over_window="warn") sends it anyway',
                messages=kept,
            )

    async def event(self, record: Event) -> None:
        """Write an event to the session's events.jsonl, log it and pass it to `on_event`."""
        await self._services.event(record)

    async def events(self, records: Sequence[Event]) -> None:
        """Write events as `event` does, in order, in one append where the workspace can
        (`EventBatches`)."""
        await self._services.events(records)

    def hold_events(self) -> None:
        """Keep back the events this compressor writes from now on (a compaction's, a cut's)
        until `held_events` takes them, to be written with the caller's own in one append.
        What is stored before it leaves (context.jsonl and its `context` event, a tool
        result's file) is still written before anything leaves."""
        self._services.hold_events()

    def held_events(self) -> list[Event]:
        """The events kept back since `hold_events`, in order; from now on they are written
        at once again."""
        return self._services.held_events()

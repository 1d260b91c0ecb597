"""`PipelineRun`: one session's run of a pipeline's context managers, and the protocol a
context manager follows."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..._depth import text_form
from ..._disk import events
from ...exceptions import ConfigError, PinError
from ...formats import read_messages, read_tool_result
from ...messages import Msg, ToolCallBlock, ToolResultBlock
from ...text import defuse
from ...tokens import TokenCount
from ...workspace import ModelCallClock
from .._compressor import Compressor
from .._config import ContextConfig
from .._notes import is_context_note
from .._persisted import spans_field
from .._protect import Protected, is_pinned, pinned_copy, unpinned_copy
from .._result import CompressionResult
from ._activation import Activation

__all__ = ["ContextManager", "Managers", "PipelineRun"]


@runtime_checkable
class ContextManager(Protocol):
    """One strategy of a pipeline.

    `HOOKS` names where it may run; the method for a hook it does not list is never called
    (managers define it anyway, returning their input). `activation` says when it runs.
    """

    HOOKS: ClassVar[frozenset[str]]
    activation: Activation

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context to send, given the context about to be sent.

        Args:
            messages: the context, oldest first, as the managers before this one left it.
            run: the session's run: its compressor (counter, offloader, session, events)
                and this manager's state (`run.state(self)`).

        Returns:
            The context to pass on; `messages` itself when nothing changes.
        """
        ...

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """The tool result to put in the context, given the one the tool returned.

        Args:
            result: the tool result, as the managers before this one left it.
            run: the session's run (see `pre_llm`).

        Returns:
            The result to pass on; `result` itself when nothing changes.
        """
        ...


class Managers(Protocol):
    """What a run takes from its pipeline: the managers of each hook and the shared settings
    (a `ContextPipeline` is one)."""

    @property
    def post_tool(self) -> tuple[ContextManager, ...]:
        """The managers run on each tool result, in order."""
        ...

    @property
    def pre_llm(self) -> tuple[ContextManager, ...]:
        """The managers run on the context before each model call, in order."""
        ...

    @property
    def config(self) -> ContextConfig:
        """The settings the managers share (window, summary prompt, reader tools...)."""
        ...


def asked_config(
    config: ContextConfig, *, window: int | None = None, instructions: str | None = None
) -> ContextConfig:
    """`config` for one compaction asked for (or a reactive run): with `window` as the
    context window (the context's own size makes a compaction "as if full": a summary keeps
    `reserve_ratio` of what is there now) and `instructions` added to the summary request.
    The one home of that wording, for the Agent's pipeline and the projection engine alike.
    """
    update: dict[str, Any] = {}
    if window is not None:
        update["context_window"] = window
    if instructions:
        update["compression_prompt"] = (
            f"{config.compression_prompt}\n\nThe agent asked for this compaction, with these "
            f"instructions on what to focus on and keep:\n{defuse(instructions)}"
        )
    return config.model_copy(update=update) if update else config


def compact_event(
    result: CompressionResult,
    instructions: str | None,
    requests: Sequence[events.CompactRequest] = (),
) -> events.Compact:
    """The `compact` event of a compaction asked for: what it changed, and the requests
    from outside it answers (whatever came of it)."""
    answered: dict[str, Any] = {}
    if requests:
        answered = {
            "requests": [r.request for r in requests],
            "requested_by": [r.by for r in requests],
        }
    if result.compressed:
        answered.update(
            messages=result.compressed_messages,
            reference=result.reference,
            lines=list(result.line_span) if result.line_span else None,
            **spans_field(result.spans),
        )
    return events.Compact(
        instructions=instructions,
        changed=result.compressed,
        reason=result.reason,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        **answered,
    )


class PipelineRun:
    """One session's run of a `ContextPipeline` (see `ContextPipeline.bind`).

    Attributes:
        pipeline: the pipeline.
        compressor: the engine every manager works through (counter, offloader, session,
            events, summary state).
        model_calls: model calls so far (each non-reactive `pre_llm` with `model_call`).
        reactive: whether the `pre_llm` in progress runs after an overflow.
        protected: the messages no manager may touch in the `pre_llm` in progress (the
            system prompt, the latest user request, the pins and their turns), computed
            once when it starts.
        clock: the time source of `Activation(idle_seconds_exceed=...)`, in seconds from
            any origin (`time.monotonic`); a replay sets it to the transcript's own times.
    """

    def __init__(self, pipeline: Managers, compressor: Compressor) -> None:
        self.pipeline = pipeline
        self.compressor = compressor
        # One holder of the settings: the compressor's, made the pipeline's here, so that
        # what a manager asks the run and what the compressor does on its own never differ.
        compressor.config = pipeline.config
        self.model_calls = 0
        self.reactive = False
        self.tools: Sequence[dict[str, Any]] = ()
        self._window_override: int | None = None
        self._reasons: list[str] = []
        self._compression: CompressionResult | None = None
        self._state: dict[int, dict[str, Any]] = {}
        self.protected = Protected(frozenset(), frozenset())
        # Ids pinned through this run, marked again on each context given to pre_llm (an
        # integration hands over its framework's messages, which do not keep our metadata).
        self._pinned: set[str] = set()
        self._unpinned: set[str] = set()
        self._last_context: list[Msg] = []
        self._instructions: str | None = None
        self._compacted_at: int | None = None
        self._compacting = False
        self.clock: Callable[[], float] = time.monotonic
        # When the last model call's context was handed over (`clock`), and how long before
        # that the one before it was: what `idle_seconds_exceed` compares.
        self._last_call_at: float | None = None
        self._idle: float | None = None

    # -- what managers use ------------------------------------------------------------------

    def config(self, base: ContextConfig | None = None) -> ContextConfig:
        """`base` (by default the shared settings, the compressor's), with the shrunk window
        of a reactive run and the instructions of a compaction asked for."""
        return asked_config(
            base or self.compressor.config,
            window=self._window_override,
            instructions=self._instructions,
        )

    @property
    def window(self) -> int | None:
        """The context window in effect, or None when no window is known."""
        try:
            return self.compressor.window(self.config())
        except ConfigError:
            return None

    @property
    def assumed_window(self) -> int | None:
        """The window assumed for the `pre_llm` in progress when it is a reactive run or a
        compaction asked for (smaller than the model's: what was sent did not fit), else
        None."""
        return self._window_override

    def state(self, manager: ContextManager) -> dict[str, Any]:
        """A manager's own state in this run (a pipeline may be shared by several runs)."""
        return self._state.setdefault(id(manager), {})

    def clearable(self, messages: Sequence[Msg]) -> list[bool]:
        """For each message of `messages`, whether a manager may take content out of it in
        place (clear thinking, tool outputs): never out of a pinned message, nor out of the
        turn the model has not seen yet."""
        unseen = self.compressor.unseen_ids(messages)
        return [not self.protected.is_pinned(m) and m.id not in unseen for m in messages]

    def report(self, reason: str, compression: CompressionResult | None = None) -> None:
        """Say what a manager did, for the `CompressionResult` of this `pre_llm`."""
        self._reasons.append(reason)
        if compression is not None:
            self._compression = compression

    def _count_model_call(self) -> None:
        """One more model call: counted here, and told to an offloader that is a
        `ModelCallClock` (an `InMemoryWorkspace` evicts by turns)."""
        self.model_calls += 1
        offloader = self.compressor.offloader
        if isinstance(offloader, ModelCallClock):
            offloader.note_model_call()

    # -- pins ---------------------------------------------------------------------------------

    @property
    def pinned_ids(self) -> frozenset[str]:
        """The ids of the messages pinned through this run (`pin`), not unpinned since."""
        return frozenset(self._pinned)

    def pinned_tokens(self, messages: Sequence[Msg]) -> int:
        """Tokens the pinned messages of `messages` (with the turns holding them) cost."""
        protected = Protected.of(messages)
        return sum(
            self.compressor.tracker.count_message(m) for m in messages if protected.is_pinned(m)
        )

    def _marked(self, messages: Sequence[Msg]) -> list[Msg]:
        """`messages` with this run's pins and unpins applied by id."""
        if not self._pinned and not self._unpinned:
            return list(messages)
        return [
            pinned_copy(m, "api")
            if m.id in self._pinned
            else unpinned_copy(m)
            if m.id in self._unpinned
            else m
            for m in messages
        ]

    async def pin(
        self, message_id: str, messages: Sequence[Msg] | None = None, *, by: str = "api"
    ) -> list[Msg]:
        """Pin a message: no manager moves, summarises, clears or cuts it from now on.

        A pinned message that would leave the context stays right after the summary (or the
        window note), with the other pins, oldest first; a tool call and its results are
        pinned together. Pins count against the window, and together they may take at most
        `pin_ratio` of it (`ContextConfig`, 0.3 by default).

        Args:
            message_id: the id of the message to pin, or of a tool call in the context (the
                model sees those): the message holding the call is pinned. See
                `message_named` for which message an id names.
            messages: the context holding it; the one last given to `pre_llm` when None.
            by: who pinned it, for the record ("api", or "agent" for the `pin_context` tool).

        Returns:
            The context with the message marked as pinned (its metadata).

        Raises:
            PinError: the message is not in the context, the id names calls in several
                messages, the message is a summary or window note, or the pins would take
                more than `pin_ratio` of the window; nothing was pinned.
        """
        context = self._marked(self._last_context if messages is None else messages)
        index = _named(context, message_id)
        if is_context_note(context[index]):
            raise PinError(
                f"message {message_id!r} is ctxoffload's own note (a summary or a window note), "
                "which each compaction replaces: pin a message of the conversation, or keep "
                "what matters in it as a text (the pin_context tool's text=)"
            )
        # The refusal names what was asked for: a tool call's id is the one the model knows.
        asked = f"message {message_id!r}"
        if message_id != context[index].id:
            asked = f"tool call {message_id!r} (message {context[index].id!r})"
        message_id = context[index].id
        before = self.pinned_tokens(context)
        marked = list(context)
        marked[index] = pinned_copy(context[index], by)
        after = self.pinned_tokens(marked)
        window = self.window
        ratio = self.config().pin_ratio
        if window is not None and after > ratio * window:
            raise PinError(
                f"pinning {asked} would bring the pins to {after:,} tokens, "
                f"{after / window:.0%} of the {window:,}-token window, over pin_ratio {ratio}: "
                "unpin another message first, pin a shorter one (or the few lines that "
                "matter, as text), or raise ContextConfig(pin_ratio=...)"
            )
        self._pinned.add(message_id)
        self._unpinned.discard(message_id)
        self._last_context = marked
        await self._pin_event(
            events.Pin, message_id, context[index].role, by, (before, after), marked, window
        )
        return marked

    def message_named(self, message_id: str, messages: Sequence[Msg] | None = None) -> Msg:
        """The message of the context that a pin of `message_id` names.

        A message's own id (`Msg.id`) names it. Otherwise the id of a tool call names the
        message holding that call (the call and its results are one turn), and, when no
        call has it, the id of a tool result names the message holding the result. Some
        servers give the calls of every turn the same ids (`call_0`, `call_1`, ...): an id
        held by several messages names none of them, and the refusal lists them, newest
        first, each by its message id (the id to pin instead) and the calls it holds.

        Args:
            message_id: a message's id, or a tool call's (or result's) id.
            messages: the context; the one last given to `pre_llm` when None.

        Raises:
            PinError: no message of the context holds the id, or several do.
        """
        context = self._last_context if messages is None else messages
        return context[_named(context, message_id)]

    async def _pin_event(
        self,
        kind: type[events.Pin],
        message_id: str,
        role: str,
        by: str,
        tokens: tuple[int, int],
        marked: Sequence[Msg],
        window: int | None,
    ) -> None:
        """Record a pin or unpin: which message, who, and the pins' tokens before and after."""
        await self.compressor.event(
            kind(
                message_id=message_id,
                role=role,
                by=by,
                pinned_tokens_before=tokens[0],
                pinned_tokens_after=tokens[1],
                pinned_messages=sum(1 for m in marked if is_pinned(m)),
                window=window,
            )
        )

    async def unpin(
        self, message_id: str, messages: Sequence[Msg] | None = None, *, by: str = "api"
    ) -> list[Msg]:
        """Unpin a message: managers may move it again.

        Args:
            message_id: the id of a pinned message.
            messages: the context holding it; the one last given to `pre_llm` when None.
            by: who unpinned it, for the record.

        Returns:
            The context with the message's pin removed.

        Raises:
            PinError: no pinned message of that id is in the context.
        """
        context = self._marked(self._last_context if messages is None else messages)
        index = next(
            (i for i, m in enumerate(context) if m.id == message_id and is_pinned(m)), None
        )
        if index is None:
            raise PinError(
                f"message {message_id!r} is not pinned in the context: unpin the id of a "
                "pinned message (is_pinned(msg) says which are)"
            )
        before = self.pinned_tokens(context)
        marked = list(context)
        marked[index] = unpinned_copy(context[index])
        after = self.pinned_tokens(marked)
        self._pinned.discard(message_id)
        self._unpinned.add(message_id)
        self._last_context = marked
        await self._pin_event(
            events.Unpin,
            message_id,
            context[index].role,
            by,
            (before, after),
            marked,
            self.window,
        )
        return marked

    # -- compaction asked for ---------------------------------------------------------------

    async def compact(
        self,
        messages: Sequence[Msg | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        instructions: str | None = None,
        requests: Sequence[events.CompactRequest] = (),
    ) -> CompressionResult:
        """Run the `pre_llm` managers now, whatever their activation rules (a compaction the
        agent asked for, `compact_context`), as if the context filled the window (a summary
        keeps `reserve_ratio` of what the context holds now).

        At most one per model call: a second one before the next `pre_llm` changes nothing
        and says so (`compacted_since_model_call`). When nothing would leave the context,
        nothing is done and the reason says "nothing to compact". A compaction that changed
        the context is a `compact` event with the instructions and the tokens before and
        after; one that serves `requests` is one whatever came of it, naming them.

        Args:
            messages: the whole context, oldest first.
            tools: the tool schemas sent with the calls.
            instructions: what the summary should focus on and keep; added to the summary
                request.
            requests: the `compact_request` events this compaction serves (asked for from
                outside, `request_compaction`): its `compact` event answers them.

        Returns:
            The context to go on with, whether it changed, and why.
        """
        context = self._marked(read_messages(messages, caller="PipelineRun.compact"))
        if self._compacted_at == self.model_calls:
            tokens = self.compressor.count(context, tools)
            return CompressionResult(
                context,
                False,
                "already compacted since the last model call: one compaction per model call",
                tokens,
                tokens,
            )
        # Taken before the managers run: a second call made in the same step (the tools of
        # one step run concurrently) is refused, not run twice.
        self._compacted_at = self.model_calls
        self._instructions = instructions
        # As if the context filled the window: a summary keeps `reserve_ratio` of what is
        # there now, however far below the trigger it is.
        tokens = self.compressor.count(context, tools)
        full = max(1, min(self.window or tokens, tokens))
        self._compacting = True
        try:
            result = await self.pre_llm(
                context, tools=tools, reactive=True, window=full, model_call=False
            )
        finally:
            self._instructions = None
            self._compacting = False
        if not result.compressed:
            result.reason = f"nothing to compact: {result.reason}"
            if not requests:
                return result
        await self.compressor.event(compact_event(result, instructions, requests))
        return result

    @property
    def compacted_since_model_call(self) -> bool:
        """Whether a compaction asked for (`compact`) ran since the last model call: at most
        one does."""
        return self._compacted_at == self.model_calls

    # -- the hooks --------------------------------------------------------------------------

    def _holds(self, manager: ContextManager, messages: Sequence[Msg], idle: float | None) -> bool:
        rule = manager.activation
        if rule.is_always:
            return True
        counted = sum(1 for m in messages if m.role != "system")
        return rule.holds(
            messages=counted,
            tokens=self._count(messages, self.tools).tokens,
            window=self.window,
            idle=idle,
        )

    def _count(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]) -> TokenCount:
        """What `messages` cost, counted exactly as far as a rule of the `pre_llm` managers
        or the trigger decides (`Compressor.count_until`): past the highest of those
        thresholds, the older messages are estimated, and every rule still reads "over"."""
        return self.compressor.count_until(messages, tools, limit=self._decisive_tokens())

    def _decisive_tokens(self) -> float:
        """The highest token count a `pre_llm` rule or the trigger compares with; infinite
        (count everything) when one of them needs the window and it is unknown."""
        window = self.window
        limits: list[float] = []
        for manager in self.pipeline.pre_llm:
            rule = manager.activation
            if rule.tokens_exceed is not None:
                limits.append(rule.tokens_exceed)
            if rule.ratio_exceed is not None:
                limits.append(rule.ratio_exceed * window if window is not None else math.inf)
        limits.append(self.config().trigger_ratio * window if window is not None else math.inf)
        return max(limits)

    async def pre_llm(
        self,
        messages: Sequence[Msg | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        reactive: bool = False,
        window: int | None = None,
        model_call: bool = True,
    ) -> CompressionResult:
        """Run the `pre_llm` managers on the context about to be sent.

        A context they leave over the window is reported (an `over_window` event and a
        WARNING log line naming the sizes), or refused with `ContextOverflowError` under
        `ContextConfig(over_window="refuse")`.

        Args:
            messages: the whole context, oldest first (`Msg` objects or OpenAI / Anthropic dicts).
            tools: the tool schemas sent with the call (they count against the window).
            reactive: the model reported an overflow: every manager runs, rules ignored.
            window: the window to assume in a reactive run (smaller than the model says).
            model_call: a model call follows (counted for `SlidingWindow(per_turn=N)` and
                for an `InMemoryWorkspace`'s turn-based eviction).

        Returns:
            The context to send (always `Msg` objects), whether anything changed, and why.

        Raises:
            ContextOverflowError: the context is still over the window and the config says
                `over_window="refuse"`; its `messages` is the context to go on with (any
                compaction made is in it).
        """
        context = self._marked(read_messages(messages, caller="PipelineRun.pre_llm"))
        self.protected = Protected.of(context)
        self.tools = tools
        self.reactive = reactive
        self._window_override = window if reactive else None
        self._reasons = []
        self._compression = None
        now = self.clock()
        self._idle = None if self._last_call_at is None else now - self._last_call_at
        if model_call and not reactive:
            self._count_model_call()
            self._last_call_at = now
        before = self._count(context, tools)
        current = list(context)
        try:
            for manager in self.pipeline.pre_llm:
                if not reactive and not self._holds(manager, current, self._idle):
                    continue
                current = await manager.pre_llm(current, self)
        finally:
            self._window_override = None
            self.reactive = False
        if not reactive and self._compression is None:
            # Past the background threshold, the next summary starts now (when asked for).
            await self.compressor.start_background(current, tools=tools, config=self.config())
        self.compressor.remember_sent(context, current)
        self._last_context = current
        changed = len(current) != len(context) or any(
            a is not b for a, b in zip(current, context, strict=False)
        )
        found = self._compression
        after = self.compressor.count(current, tools)
        if not self._compacting:
            # A compaction the agent asked for sends nothing: the request after it is checked.
            await self._check_window(current, after)
        return CompressionResult(
            current,
            changed,
            "; ".join(self._reasons) or "below trigger",
            before.tokens,
            after,
            reference=found.reference if found else None,
            line_span=found.line_span if found else None,
            spans=found.spans if found else (),
            summary=found.summary if found else None,
            summary_source=found.summary_source if found else None,
            compressed_messages=found.compressed_messages if found else 0,
            tokens_before_exact=before.exact,
            tokens_before_bounds=before.bounds,
        )

    async def _check_window(self, context: list[Msg], tokens: int) -> None:
        """Report a context of `tokens` still over the window once the managers have run
        (what never leaves is more than it holds), or refuse it (`over_window`)."""
        await self.compressor.check_window(context, tokens, config=self.config())

    async def post_tool(
        self,
        result: ToolResultBlock | Mapping[str, Any] | Msg,
        *,
        messages: Sequence[Msg] = (),
        tools: Sequence[dict[str, Any]] = (),
    ) -> ToolResultBlock:
        """Run the `post_tool` managers on one tool result.

        Args:
            result: the result as the tool returned it (or an OpenAI / Anthropic form).
            messages: the context it joins, for activation rules.
            tools: the tool schemas, for activation rules.

        Returns:
            The result to put in the context.
        """
        block = read_tool_result(result, caller="PipelineRun.post_tool")
        self.tools = tools
        for manager in self.pipeline.post_tool:
            if not manager.activation.is_always:
                context = [*messages, Msg(role="tool", content=[block])]
                last = self._last_call_at
                idle = None if last is None else self.clock() - last
                if not self._holds(manager, context, idle):
                    continue
            block = await manager.post_tool(block, self)
        return block


_LISTED = 5
"""How many messages a refusal of an ambiguous call id lists."""


def _named(context: Sequence[Msg], message_id: str) -> int:
    """The index of the message `message_id` names (see `PipelineRun.message_named`).

    Raises:
        PinError: no message holds the id, or several hold it as a call (or a result).
    """
    for i, m in enumerate(context):
        if m.id == message_id:
            return i
    for kind in ("call", "result"):
        holding = [
            i
            for i, m in enumerate(context)
            if any(b.id == message_id for b in (m.tool_calls if kind == "call" else m.tool_results))
        ]
        if len(holding) == 1:
            return holding[0]
        if holding:
            raise PinError(_ambiguous(message_id, [context[i] for i in reversed(holding)], kind))
    raise PinError(
        f"message {_shown(message_id)} is not in the context: pin the id of a message the "
        "context holds (Msg.id), or the id of a tool call in it"
    )


def _shown(message_id: str) -> str:
    """`message_id` quoted, cut when it is too long to be any id (a model may send anything)."""
    if len(message_id) <= _ID_SHOWN:
        return repr(message_id)
    return f"{message_id[:_ID_SHOWN]!r}… ({len(message_id):,} characters)"


_ID_SHOWN = 100


def _ambiguous(call_id: str, holding: Sequence[Msg], kind: str) -> str:
    """The refusal of a call id that several messages hold (newest first in `holding`)."""
    listed = []
    for msg in holding[:_LISTED]:
        blocks = msg.tool_calls if kind == "call" else msg.tool_results
        held = ", ".join(
            _call_text(b.name, b.input) if isinstance(b, ToolCallBlock) else f"result of {b.name}"
            for b in blocks
            if b.id == call_id
        )
        listed.append(f"{msg.id!r} ({held})")
    more = len(holding) - _LISTED
    tail = f", and {more} older" if more > 0 else ""
    return (
        f"the id {call_id!r} names tool {kind}s in {len(holding)} messages of the context "
        "(the server gave several calls the same id), so it does not say which to pin: pin "
        f"one by its message id instead, newest first: {'; '.join(listed)}{tail}"
    )


def _call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """`name {arguments as JSON}`, the arguments cut to a few dozen characters."""
    shown = text_form(arguments, limit=_ARGUMENTS_SHOWN)
    if len(shown) > _ARGUMENTS_SHOWN:
        shown = shown[: _ARGUMENTS_SHOWN - 1] + "…"
    return f"{name} {shown}"


_ARGUMENTS_SHOWN = 60

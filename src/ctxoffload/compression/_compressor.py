"""The Compressor: truncates big tool results and compresses history when the context is full.

```python
compressor = Compressor(config, model=summary_model, offloader=ws, session_id="run-42")
block = await compressor.process_tool_result(block)        # after each tool call
result = await compressor.maybe_compress(context)          # before each model call
context = result.messages
```

`maybe_compress` runs five named steps: check (is compression due), split (what leaves and
what stays; a `SplitStrategy` decides how much older history stays), persist (to the
offloader first; on failure nothing leaves), summarise (the model's summary, or an
extractive one), assemble (the summary message, then the messages kept). The summary
message's state and text live in `_summary_message.py`, which messages are fresh here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._disk import events
from .._disk.records import Event
from ..exceptions import ConfigError
from ..formats import read_messages, read_tool_result
from ..messages import Msg, TextBlock, ToolResultBlock
from ..model import ChatModel, model_label
from ..references import ContextRef
from ..tokens import ContextTokenTracker, TokenCount, TokenCounter, get_token_counter
from ..workspace import LineReader, Offloader, ReferenceReader
from ._artifacts import (
    ArtifactCache,
    ArtifactIndex,
    FoundArtifact,
    events_file,
    find_artifacts,
    scan_messages,
)
from ._background import Pending
from ._cache_request import LastRequest, same_model, summarize_from_cache
from ._config import CHARS_PER_TOKEN, RESULT_FLOOR, ContextConfig
from ._events import EventCallback, emit_event
from ._notes import is_context_note, is_summary_message, is_window_note
from ._persisted import Persisted, spans_text
from ._protect import is_pinned
from ._split import Split, SplitByTokens, SplitStrategy
from ._summarize import SummaryOutcome, summarize
from ._summary_message import Artifact, SummaryState
from ._summary_model import Summary
from ._tool_names import READER_TOOL_NAMES, ReaderTools
from ._truncate import (
    Truncation,
    rendered_text,
    truncate_text,
    truncate_tool_result,
)
from ._turns import is_user_request, turn_start

__all__ = [
    "FRESH_PREVIEW_FLOOR",
    "CompressionResult",
    "Compressor",
    "Persisted",
]

FRESH_PREVIEW_FLOOR = RESULT_FLOOR
"""The fewest tokens a fresh tool result (or a fresh message's text) is cut down to when the
messages the model has not seen yet exceed the reserve on their own: room for the notice
that names the file and a few lines. Fresh content is never cut below this, so a turn with
many results may stay above the reserve (it still leaves the context only after the model
has seen it)."""

logger = logging.getLogger("ctxoffload")


@dataclass
class CompressionResult:
    """What `Compressor.maybe_compress` did.

    Attributes:
        messages: the context to send next (unchanged when nothing was compressed).
        compressed: whether older messages were replaced by a summary.
        reason: why, in a few words ("below trigger", "compressed", "offload failed", ...).
        tokens_before: tokens of the context given: exact, or, when the count stopped past
            the trigger (`ContextTokenTracker.count_past`), an estimate.
        tokens_after: tokens of `messages`.
        reference: where the compressed messages went (context.jsonl), if anywhere.
        line_span: the lines of that file this compression's messages are on, from the
            first to the last.
        spans: those lines exactly, as runs of consecutive lines: more than one when some
            were in the file already (a run killed in the middle of a compression, resumed),
            with other messages between; `spans_text()` spells them.
        summary: the new summary.
        summary_source: "model" or "extractive".
        compressed_messages: how many messages left the context.
        tokens_before_exact: whether `tokens_before` is an exact count.
        tokens_before_bounds: when it is an estimate, the least and the most the exact
            count can be (see `TokenCount`); None when it is exact.
    """

    messages: list[Msg]
    compressed: bool
    reason: str
    tokens_before: int
    tokens_after: int
    reference: str | None = None
    line_span: tuple[int, int] | None = None
    summary: Summary | None = None
    summary_source: str | None = None
    compressed_messages: int = 0
    tokens_before_exact: bool = True
    tokens_before_bounds: tuple[int, int] | None = None
    spans: tuple[tuple[int, int], ...] = ()

    def spans_text(self) -> str:
        """The lines the compressed messages are on, as text: `"1-40, 52-60"`, or `""`."""
        return spans_text(self.spans)


@dataclass
class _Plan:
    """What the split step decided: the parts of the context and the reserve."""

    system: Msg | None
    earlier_summary: Msg | None
    earlier_note: Msg | None
    split: Split
    reserve: int

    @property
    def older(self) -> list[Msg]:
        """The messages that leave, oldest first."""
        return self.split.older

    @property
    def kept(self) -> list[Msg]:
        """The messages that stay verbatim, oldest first."""
        return self.split.kept

    @property
    def pinned(self) -> Msg | None:
        """The latest user request, kept right after the summary, when it was among the
        older messages."""
        return self.split.pinned


def _context(system: Msg | None, summary: Msg | None, split: Split) -> list[Msg]:
    """A context in its order: system prompt, summary, the pins that would have left (oldest
    first), the latest user request if it would have left, the messages kept."""
    head = [m for m in (system, summary) if m is not None] + split.pins
    return head + ([split.pinned] if split.pinned else []) + split.kept


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
        self.config = config or ContextConfig()
        self.on_event = on_event
        self.model = model
        self.offloader = offloader
        self.session_id = session_id or uuid.uuid4().hex[:16]
        self.counter = counter or get_token_counter(model.model_name if model else None)
        self.tracker = ContextTokenTracker(self.counter)
        # The artifacts of each message, found when it is first counted (`count`).
        self._scanned = ArtifactCache()
        self._context_window = context_window
        self._state = SummaryState()
        self._reader_tools = reader_tools
        self._reader_names = frozenset(reader_names) if reader_names is not None else None
        # Ids of the messages the previous call returned (None before the first call), and
        # the fresh ones among them, kept fresh until new messages arrive (a forced retry
        # after an overflow happens before the model has answered).
        self._seen: set[str] | None = None
        self._last_fresh: set[str] = set()
        # Tool results truncated since the previous call, by call id: what a fresh result
        # is cut from again when its turn must shrink.
        self._recent: dict[str, Truncation] = {}
        self._said: set[tuple[Any, ...]] = set()
        # Digests of the message texts this compressor cut (see `_truncate_user_message`).
        self._cut_texts: deque[str] = deque(maxlen=_CUT_TEXTS_KEPT)
        # What the agent last sent its model (`note_request`): the prefix a summary request
        # to the same model reuses, so that the provider's prompt cache serves it.
        self._last_request: LastRequest | None = None
        # A summary under way in the background (`background_compaction`).
        self._pending: Pending | None = None

    def set_reader_tools(self, reader_tools: ReaderTools | None) -> None:
        """Name the tools the agent has for reading offloaded content back (see `ReaderTools`).

        The `Agent` calls this with the names it registered; notices written from now on
        name them.
        """
        self._reader_tools = reader_tools

    def reader_tools(self, config: ContextConfig | None = None) -> ReaderTools | None:
        """The reader tools notices name: those given to the compressor, else the config's."""
        if self._reader_tools is not None:
            return self._reader_tools
        return (config or self.config).reader_tools

    def reads_back(self, tool_name: str | None, config: ContextConfig | None = None) -> bool:
        """Whether `tool_name`'s results read offloaded content back: such a result is never
        offloaded or cut again (that would loop), and is cleared without a copy (calling the
        tool again reads it anew).

        The names given as `reader_names` when they were (an `Agent` gives the tools it marks
        as readers, so a tool of yours called `Read` is not one); else ctxoffload's reader
        tool names (`READER_TOOL_NAMES`) and those `reader_tools` gives.
        """
        if self._reader_names is not None:
            return tool_name in self._reader_names
        readers = self.reader_tools(config)
        named = {readers.read, readers.grep, readers.retrieve} if readers is not None else set()
        return tool_name is not None and (tool_name in READER_TOOL_NAMES or tool_name in named)

    # -- state ----------------------------------------------------------------------------

    @property
    def summary(self) -> Summary | None:
        """The latest summary, if history has been compressed."""
        return self._state.summary

    @property
    def artifacts(self) -> list[Artifact]:
        """Files offloaded so far, newest first."""
        return self._state.newest_artifacts()

    @property
    def context_reference(self) -> str | None:
        """The reference compressed messages went to, as the offloader's `offload_context`
        returned it last (a resumed session's is taken from its summary); None before any."""
        return self._state.reference

    @property
    def compressions(self) -> int:
        """How many times history has been compressed."""
        return self._state.compressions

    def window(self, config: ContextConfig | None = None) -> int:
        """The context window in tokens that thresholds are computed against."""
        cfg = config or self.config
        fallback = self._context_window
        if fallback is None and self.model is not None:
            fallback = self.model.context_window
        return cfg.window(fallback)

    def count(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = ()) -> int:
        """Tokens `messages` (+ tool schemas) cost, counted incrementally.

        The messages counted for the first time are also scanned for the artifact index
        then (their paths, URLs, commands and ids), once each as they are counted once each,
        with no second pass over the context: a compaction finds what leaves already
        scanned instead of scanning it all at once.
        """
        tokens = self.tracker.count(None, None, messages, tools)
        self._scanned.note(messages, self.tracker.newly_counted)
        return tokens

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
        counted = self.tracker.count_past(None, None, messages, tools, limit=limit)
        self._scanned.note(messages, self.tracker.newly_counted)
        return counted

    async def _event(self, record: Event) -> None:
        # Written, logged (at the level its kind declares) and passed to on_event.
        await emit_event(
            self.offloader, self.session_id, self.on_event, record.kind, record.fields()
        )

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
            is the head plus a marker naming the file.

        Raises:
            InvalidContent: `block` is not a tool result (one line, naming `to_msgs`).
        """
        block = read_tool_result(block, caller="Compressor.process_tool_result")
        cfg = config or self.config
        window = self._known_window(cfg)
        done = await truncate_tool_result(
            block,
            limit=cfg.tool_result_limit,
            counter=self.counter,
            offloader=self.offloader,
            session_id=self.session_id,
            preview_tokens=self._preview_tokens(cfg, window),
            preview=cfg.preview,
            readers=self.reader_tools(cfg),
        )
        if done is None:
            return block
        return await self._truncated(block, done)

    async def _truncated(
        self, block: ToolResultBlock, done: Truncation, **extra: Any
    ) -> ToolResultBlock:
        """Remember a truncation (artifact trail, re-cuts) and record its event."""
        self._recent[block.id] = done
        if done.reference is not None:
            self._state.artifacts.append(
                Artifact(done.reference, done.total_bytes, block.name or "a tool", done.total_lines)
            )
        await self._event(
            events.Truncation(
                tool_id=block.id,
                tool_name=block.name,
                reference=done.reference,
                tokens_before=done.tokens_before,
                tokens_after=done.tokens_after,
                lines_shown=done.shown_lines,
                lines_total=done.total_lines,
                **extra,
            )
        )
        return done.block

    async def process_message(self, msg: Msg, *, config: ContextConfig | None = None) -> Msg:
        """`process_tool_result` for every tool result in a message."""
        if not msg.tool_results or isinstance(msg.content, str):
            return msg
        content = [
            await self.process_tool_result(b, config=config)
            if isinstance(b, ToolResultBlock)
            else b
            for b in msg.content
        ]
        if all(a is b for a, b in zip(content, msg.content, strict=True)):
            return msg
        return msg.model_copy(update={"content": content})

    def _known_window(self, cfg: ContextConfig) -> int | None:
        try:
            return self.window(cfg)
        except ConfigError:
            return None

    def _preview_tokens(self, cfg: ContextConfig, window: int | None) -> int:
        """The preview size in effect: the config's, kept within the reserve.

        A preview larger than the reserve could never stay beside its call when the context
        is compressed; it is cut to the reserve (at least `FRESH_PREVIEW_FLOOR`). A default
        is derived to fit (`ContextConfig.preview_budget`); a value the user chose that does
        not fit is said once.
        """
        preview = cfg.preview_budget(window)
        if window is None:
            return preview
        reserve = cfg.reserve_tokens(window)
        cap = cfg.result_room(window)
        if not cfg.misfit(window):
            return min(preview, cap)
        preview = cfg.preview_budget()
        key = (cfg.tool_result_limit, preview, window, reserve)
        if key not in self._said:
            self._said.add(key)
            logger.warning(
                "tool_result_limit %d with a %d-token preview does not fit the reserve of %d "
                "tokens (reserve_ratio %s of a %d-token window): previews of offloaded results "
                "are cut to %d tokens, and fresh results that exceed the reserve down to %d; "
                "lower tool_result_limit or preview_tokens, or raise reserve_ratio",
                cfg.tool_result_limit,
                preview,
                reserve,
                cfg.reserve_ratio,
                window,
                cap,
                FRESH_PREVIEW_FLOOR,
            )
        return cap

    async def _truncate_user_message(self, msg: Msg, limit: int) -> Msg:
        """Offload a message's text that alone exceeds `limit` tokens; keep its head.

        Used for a user request over the reserve and for the text of a fresh message that
        must shrink; tool calls and other blocks stay as they are.
        """
        text = msg.text
        # Text tokens, not message tokens: the cut text fits `limit` but the message adds its
        # overhead, and comparing that with `limit` would cut the cut text again next time.
        if self.counter.count_text(text) <= limit or not text:
            return msg
        if _cut_by_us(msg, self._cut_texts):
            # Its text is a cut this compressor (or the one before a resume) wrote: cutting
            # it again would store a copy of a notice, one more hop from the whole text.
            return msg
        owner = "user's" if msg.role == "user" else f"{msg.role}'s"
        source = f"{msg.role} message"
        reference: str | None = None
        if self.offloader is not None:
            try:
                reference = await self.offloader.offload_tool_result(
                    self.session_id,
                    ToolResultBlock(id=f"{msg.role}-{msg.id}", name=source, output=text),
                )
            except Exception as exc:
                logger.warning("could not offload a long %s, keeping it whole: %s", source, exc)
                return msg
        cut = truncate_text(
            text,
            limit=limit,
            counter=self.counter,
            reference=reference,
            what=f"the {owner} message",
            readers=self.reader_tools(),
        )
        if reference is not None:
            self._state.artifacts.append(
                Artifact(reference, cut.total_bytes, source, cut.total_lines)
            )
        others = [b for b in msg.blocks if not isinstance(b, TextBlock)]
        content: list[Any] = [TextBlock(text=cut.text), *others]
        digest = _digest(cut.text)
        self._cut_texts.append(digest)
        metadata = {**msg.metadata, TEXT_CUT: digest}
        return msg.model_copy(
            update={"content": content if others else cut.text, "metadata": metadata}
        )

    # -- compression (pre-model): check, split, persist, summarise, assemble ---------------

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

        Five steps, each a method: check (`_is_due`), `_split`, then (`_compress`)
        `persist`, `_summarise`, `_assemble`. Persist before drop: if offloading the older
        messages fails, nothing is removed (a warning is logged and `reason` says so).

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
        cfg = config or self.config
        strategy = split or SplitByTokens()
        window = self.window(cfg)
        # Counted exactly from the newest back until past the trigger: the decision and the
        # messages that stay are exact; what leaves is estimated, not tokenized.
        counted = self.count_until(context, tools, limit=cfg.trigger_ratio * window)
        if not self._is_due(counted.tokens, cfg, window, strategy, force=force):
            result = CompressionResult(
                context, False, "below trigger", counted.tokens, counted.tokens
            )
            await self.start_background(
                context, tools=tools, config=cfg, summary_model=summary_model, split=split
            )
        else:
            plan = await self._split(context, cfg, window, strategy)
            model = summary_model or self.model
            result = await self._compress(context, plan, counted, tools, cfg, window, model)
        return self._note_call(context, result, remember)

    def _is_due(
        self,
        counted: int,
        cfg: ContextConfig,
        window: int,
        strategy: SplitStrategy,
        *,
        force: bool,
    ) -> bool:
        """Check: whether the context of `counted` tokens is over `trigger_ratio x window`.

        `force` makes it due whatever it costs (a reactive run, a manager's own rules).
        When the split keeps what fits the reserve, a config whose previews cannot fit it is
        said once here too, before any tool result has been cut.
        """
        if strategy.fits_reserve:
            self._preview_tokens(cfg, window)
        return force or counted > cfg.trigger_ratio * window

    async def _split(
        self, context: list[Msg], cfg: ContextConfig, window: int, strategy: SplitStrategy
    ) -> _Plan:
        """Split: which messages leave the context and which stay.

        The system prompt and the notes (an earlier summary, a window note) are set apart,
        and the state they carry is adopted (a resumed session). The messages the model has
        not seen stay, cut to fit the reserve when they alone exceed it (`_fit_fresh`);
        `strategy` divides the older ones, never separating a tool call from its results;
        the latest user request stays verbatim unless it alone is over the reserve.
        """
        system = context[0] if context and context[0].role == "system" else None
        rest = context[1:] if system is not None else context
        earlier_summary, earlier_note = self._adopt_notes(rest, cfg, window)
        rest = [m for m in rest if not is_context_note(m)]
        reserve = int(cfg.reserve_ratio * window)
        fresh = self._fresh_ids(rest)
        fresh_from = next((i for i, m in enumerate(rest) if m.id in fresh), None)
        if fresh_from is not None:
            rest = rest[:fresh_from] + await self._fit_fresh(rest[fresh_from:], reserve, cfg)
        split = strategy.split(rest, self.tracker, reserve, fresh_from)
        await self._keep_latest_request(split, reserve)
        return _Plan(system, earlier_summary, earlier_note, split, reserve)

    def _adopt_notes(
        self, rest: Sequence[Msg], cfg: ContextConfig, window: int
    ) -> tuple[Msg | None, Msg | None]:
        """The earlier summary and window note among `rest`, their state taken over."""
        earlier_summary: Msg | None = None
        earlier_note: Msg | None = None
        for msg in rest:
            if is_summary_message(msg):
                self._state.adopt(msg, cfg.summary_budget_tokens(window) * CHARS_PER_TOKEN)
                earlier_summary = msg
            elif is_window_note(msg):
                self._state.adopt_note(msg)
                earlier_note = msg
        return earlier_summary, earlier_note

    async def _keep_latest_request(self, split: Split, reserve: int) -> None:
        """Cut the latest user request (pinned, or among the kept) if it alone is over the
        reserve; it stays in the context either way."""
        latest = split.pinned or next((m for m in reversed(split.kept) if is_user_request(m)), None)
        if latest is None or is_pinned(latest):
            return
        replaced = await self._truncate_user_message(latest, reserve)
        if replaced is latest:
            return
        if split.pinned is latest:
            split.pinned = replaced
        else:
            split.kept = [replaced if m is latest else m for m in split.kept]

    async def _compress(
        self,
        context: list[Msg],
        plan: _Plan,
        counted: TokenCount,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
        model: ChatModel | None,
    ) -> CompressionResult:
        """Persist the older messages, summarise them, assemble the new context.

        Nothing leaves when nothing is old enough (the notes stay, `_keep_notes`) or when
        the older messages could not be persisted (the context is returned as given).
        """
        if not plan.older:
            return self._keep_notes(plan, counted, tools)
        pending, self._pending = self._pending, None
        if pending is not None:
            ready = await self._apply_background(pending, plan, counted, tools, cfg, window)
            if ready is not None:
                return ready
        # The artifacts of what leaves that was not scanned when it was counted (a history
        # given at once) are found in a worker thread meanwhile, while the summary model is
        # waited for.
        unscanned = self._scanned.missing(plan.older)
        scanning = asyncio.ensure_future(asyncio.to_thread(scan_messages, unscanned))
        try:
            persisted = await self.persist(plan.older)
            if persisted.failure is not None:
                reason = f"offload failed: {persisted.failure}"
                return CompressionResult(
                    context,
                    False,
                    reason,
                    counted.tokens,
                    counted.tokens,
                    tokens_before_exact=counted.exact,
                    tokens_before_bounds=counted.bounds,
                )
            lines = await self._read_back(persisted, plan.older)
            outcome = await self._summarise(plan, persisted, cfg, window, model)
            self._scanned.add(unscanned, await scanning)
        finally:
            if not scanning.done():
                scanning.cancel()  # the thread finishes on its own; nothing waits for it
        return await self._assemble(plan, persisted, outcome, counted, tools, cfg, window, lines)

    def _keep_notes(
        self, plan: _Plan, counted: TokenCount, tools: Sequence[dict[str, Any]]
    ) -> CompressionResult:
        """The context when nothing is old enough to compress: the earlier summary and
        window note (the only paths back to the messages that left before) stay."""
        after = _context(plan.system, plan.earlier_summary, plan.split)
        if plan.earlier_note is not None:
            at = len(after) - len(plan.kept) - (1 if plan.pinned else 0) - len(plan.split.pins)
            after.insert(at, plan.earlier_note)
        reason = "nothing old enough to compress"
        return CompressionResult(
            after,
            False,
            reason,
            counted.tokens,
            self.count(after, tools),
            tokens_before_exact=counted.exact,
            tokens_before_bounds=counted.bounds,
        )

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
        if self.offloader is None:
            return Persisted()
        try:
            ref = await self.offloader.offload_context(self.session_id, msgs=messages)
        except Exception as exc:
            logger.warning("could not offload %d messages, %s: %s", len(messages), on_failure, exc)
            return Persisted(failure=exc)
        line_span: tuple[int, int] | None = None
        spans: tuple[tuple[int, int], ...] = ()
        if isinstance(ref, ContextRef) and ref.last_line >= ref.first_line:
            line_span = (ref.first_line, ref.last_line)
            # Only the lines its messages are on: some may have been in the log already, at
            # lines apart from the rest, with other messages (still in the context) between.
            spans = getattr(ref, "spans", None) or (line_span,)
        if spans:
            for span in spans:
                self.record_offload(str(ref), span)
        else:
            self.record_offload(str(ref), None)
        return Persisted(str(ref), line_span, spans=spans)

    async def _read_back(self, persisted: Persisted, older: Sequence[Msg]) -> dict[str, int] | None:
        """The line of the context log each message that leaves is on, read back from the
        offloader (the fidelity check: a message is recoverable when its line holds it);
        None when the offloader cannot read references back.

        An offloader that reads lines (`LineReader`) is asked for the spans' lines only, so
        a compaction reads what it wrote, not the whole log; if any message is not found
        there, the whole log is read and looked through, as without one.
        """
        reference = persisted.reference
        offloader = self.offloader
        if reference is None or not persisted.spans or not isinstance(offloader, ReferenceReader):
            return None
        try:
            if isinstance(offloader, LineReader):
                first = min(start for start, _ in persisted.spans)
                last = max(end for _, end in persisted.spans)
                raw = await offloader.read_lines(reference, first, last)
                found = _lines_of(raw.split(b"\n"), persisted.spans, older, first=first)
                if len(found) == len({m.id for m in older}):
                    return found
            raw = await offloader.read_reference(reference)
        except Exception as exc:
            logger.warning("could not read back %s to check it: %s", reference, exc)
            return {}
        return _lines_of(raw.split(b"\n"), persisted.spans, older)

    async def _summarise(
        self,
        plan: _Plan,
        persisted: Persisted,
        cfg: ContextConfig,
        window: int,
        model: ChatModel | None,
    ) -> SummaryOutcome:
        """Summarise: the model's summary of the messages that leave, with the previous
        summary folded in; an extractive one when there is no model or it fails.

        The summary, whole, is written to events.jsonl: the summary message in the context
        only ever holds the latest.
        """
        outcome, request = await self._summary_of(plan.older, cfg, window, model)
        await self._record_summary(outcome, request, persisted)
        return outcome

    async def _summary_of(
        self, older: Sequence[Msg], cfg: ContextConfig, window: int, model: ChatModel | None
    ) -> tuple[SummaryOutcome, str]:
        """The summary of `older` with the current one folded in, and how it was asked
        (`cached_prefix` or `new`): the agent's previous request as prefix when the summary
        model is the agent's own, else the usual request; extractive without a model.

        Both requests share one `summary_timeout`: the usual request has what the cache-shaped
        one left of it (a model that hangs costs the timeout once, not twice).
        """
        last = self._last_request
        timeout = cfg.summary_timeout
        if model is not None and last is not None and same_model(model, last.model):
            started = time.monotonic()
            cached = await summarize_from_cache(
                last, older, config=cfg, counter=self.counter, window=window
            )
            if cached is not None:
                return cached, "cached_prefix"
            timeout = max(0.0, timeout - (time.monotonic() - started))
        outcome = await summarize(
            older,
            model=model,
            config=cfg,
            counter=self.counter,
            previous=self._state.summary,
            artifacts=[a.describe() for a in self.artifacts],
            window=window,
            known_tokens=self.tracker.known,
            timeout=timeout,
        )
        return outcome, "new"

    async def _record_summary(
        self, outcome: SummaryOutcome, request: str, persisted: Persisted
    ) -> None:
        """Make `outcome` the current summary and write it whole to events.jsonl."""
        self._state.summary = outcome.summary
        self._state.compressions += 1
        await self._event(
            events.Summary(
                compression=self._state.compressions,
                source=outcome.source,
                request=request if outcome.source == "model" else None,
                summary=outcome.summary.model_dump(),
                reference=persisted.reference,
                lines=persisted.lines,
                **persisted.apart,
            )
        )

    async def _assemble(
        self,
        plan: _Plan,
        persisted: Persisted,
        outcome: SummaryOutcome,
        counted: TokenCount,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
        lines: dict[str, int] | None,
    ) -> CompressionResult:
        """Assemble: the system prompt, the summary message (naming context.jsonl, the line
        span and the artifact trail, within the reserve, then the artifact index), then the
        messages kept; the artifacts and compression events record it."""
        listed_in = events_file(persisted.reference)
        candidates = self._leaving_artifacts(
            plan.older, lines, self._state, scanned=self._scanned.of(plan.older)
        )
        # The index's least part (how many artifacts are cut, and where they are listed)
        # comes out of the summary's budget; the rest of the index takes what is left under
        # the trigger, up to its own budget.
        least = ArtifactIndex.least_tokens(self.counter, listed_in) if candidates else 0
        summary_msg = self._state.render(
            outcome.summary, cfg, self.counter, budget=plan.reserve - least, floor=500 - least
        )
        room = int(cfg.trigger_ratio * window) - self.count(
            _context(plan.system, summary_msg, plan.split), tools
        )
        kept = [*plan.split.pins, *([plan.pinned] if plan.pinned else []), *plan.kept]
        index = self._artifact_index(
            candidates, self._state, summary_msg.text, kept, persisted, cfg, window, room, least
        )
        summary_msg = self._state.with_index(summary_msg, index, listed_in)
        after = _context(plan.system, summary_msg, plan.split)
        tokens_after = self.count(after, tools)
        if index.left:
            await self._event(
                events.Artifacts(
                    compression=self._state.compressions,
                    reference=persisted.reference,
                    artifacts=index.listing(),
                )
            )
        recoverable = _read_back_report(plan.older, lines)
        await self._event(
            events.Compression(
                reference=persisted.reference,
                lines=persisted.lines,
                **persisted.apart,
                messages=len(plan.older),
                kept=len(plan.kept) + (1 if plan.pinned else 0) + len(plan.split.pins),
                pinned=len(plan.split.pins),
                tokens_before=counted.tokens,
                **counted.fields(),
                tokens_after=tokens_after,
                summary_source=outcome.source,
                summary_model=model_label(self.model) if outcome.source == "model" else None,
                summary_model_calls=outcome.model_calls,
                **({"summary_input": outcome.report()} if outcome.source == "model" else {}),
                artifacts=index.report(),
                recoverable=recoverable,
            )
        )
        return CompressionResult(
            after,
            True,
            "compressed",
            counted.tokens,
            tokens_after,
            reference=persisted.reference,
            line_span=persisted.line_span,
            spans=persisted.spans,
            summary=outcome.summary,
            summary_source=outcome.source,
            compressed_messages=len(plan.older),
            tokens_before_exact=counted.exact,
            tokens_before_bounds=counted.bounds,
        )

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
        cfg = config or self.config
        lines = await self._read_back(persisted, leaving)
        state = SummaryState()
        state.adopt_index(dict(earlier))
        index = self._artifact_index(
            self._leaving_artifacts(leaving, lines, state, scanned=self._scanned.of(leaving)),
            state,
            summary_text,
            kept,
            persisted,
            cfg,
            self.window(cfg),
        )
        note = state.with_index(note, index, events_file(persisted.reference))
        if index.left:
            await self._event(
                events.Artifacts(reference=persisted.reference, artifacts=index.listing())
            )
        return note, {"artifacts": index.report(), "recoverable": _read_back_report(leaving, lines)}

    def _leaving_artifacts(
        self,
        leaving: Sequence[Msg],
        lines: Mapping[str, int] | None,
        state: SummaryState,
        *,
        scanned: Sequence[Sequence[tuple[str, str]]] | None = None,
    ) -> list[FoundArtifact]:
        """The artifacts of a compaction that moves `leaving` out (a summary's, or a window
        note's), with those `state` carries from the note it replaces; `state` counts the
        messages and calls that left."""
        found, calls = find_artifacts(leaving, lines, recency=state.messages_left, scanned=scanned)
        state.messages_left += len(leaving)
        state.calls.update(calls)
        seen = {(f.kind, f.value) for f in found}
        return [f for f in state.carried if (f.kind, f.value) not in seen] + found

    def _artifact_index(
        self,
        candidates: Sequence[FoundArtifact],
        state: SummaryState,
        summary_text: str,
        kept: Sequence[Msg],
        persisted: Persisted,
        cfg: ContextConfig,
        window: int,
        room: int | None = None,
        least: int = 0,
    ) -> ArtifactIndex:
        """The artifact index of `candidates` (`_leaving_artifacts`): each checked against
        `summary_text` and the `kept` messages, within the config's index budget and half
        of `room` (the tokens left under the trigger, when the caller keeps the context under
        it), but never below `least` (what the caller set aside for the index)."""
        budget = cfg.artifact_index_budget(window)
        if room is not None:
            # Half the room under the trigger at most: the rest is for the turns to come.
            budget = min(budget, room // 2)
        return ArtifactIndex.build(
            candidates,
            state.calls,
            summary_text=summary_text,
            kept=kept,
            counter=self.counter,
            budget=max(budget, least),
            events_file=events_file(persisted.reference),
            cut_before=state.artifacts_cut,
            kept_scanned=self._scanned.of(kept),
        )

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
        cfg = config or self.config
        model = summary_model or self.model
        if not cfg.background_compaction or model is None or self._pending is not None:
            return False
        context = [m for m in messages if isinstance(m, Msg)]
        window = self.window(cfg)
        counted = self.count(context, tools)
        start = (cfg.trigger_ratio - cfg.background_lead) * window
        if not start < counted <= cfg.trigger_ratio * window:
            return False
        older = self._would_leave(context, cfg, window, split or SplitByTokens())
        if not older:
            return False
        persisted = await self.persist(older, on_failure="not starting a background summary")
        if persisted.failure is not None:
            return False
        lines = await self._read_back(persisted, older)
        previous = self._state.summary
        task = asyncio.create_task(self._summary_of(older, cfg, window, model))
        self._pending = Pending(task, older, persisted, lines, previous)
        await self._background_event("started", self._pending)
        return True

    def _would_leave(
        self, context: list[Msg], cfg: ContextConfig, window: int, strategy: SplitStrategy
    ) -> list[Msg]:
        """The messages a compression now would move out, found without changing anything
        (no fresh message is cut, no state adopted): the split's older part."""
        rest = context[1:] if context and context[0].role == "system" else context
        rest = [m for m in rest if not is_context_note(m)]
        fresh = self._fresh_ids(rest)
        fresh_from = next((i for i, m in enumerate(rest) if m.id in fresh), None)
        split = strategy.split(rest, self.tracker, int(cfg.reserve_ratio * window), fresh_from)
        return split.older

    async def _apply_background(
        self,
        pending: Pending,
        plan: _Plan,
        counted: TokenCount,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
    ) -> CompressionResult | None:
        """The compression made of the background summary, or None when it does not fit
        (the caller then compresses as usual).

        It fits when no compression came since it started and its messages are the first
        of those to drop now, all of them, or only some when the others still fit under
        the trigger (they stay verbatim, and leave with the next compression).
        """
        covered = pending.covers(plan.older)
        reason = None
        if pending.previous is not self._state.summary:
            reason = "a compression came in between"
        elif not covered:
            reason = "the messages to drop changed (a pin, another split)"
        if reason is not None:
            await pending.cancel()
            await self._background_event("stale", pending, reason=reason)
            return None
        waited = time.monotonic()
        done = pending.task.done()
        try:
            outcome, request = await pending.task
        except Exception as exc:  # summarize falls back on its own; this is a bug or a cancel
            await self._background_event("failed", pending, reason=str(exc))
            return None
        extra = plan.older[covered:]
        split = Split(
            older=pending.older,
            kept=[*extra, *plan.kept],
            pinned=plan.pinned,
            pins=plan.split.pins,
        )
        partial = _Plan(plan.system, plan.earlier_summary, plan.earlier_note, split, plan.reserve)
        if extra:
            candidate = self._state.render(outcome.summary, cfg, self.counter, budget=plan.reserve)
            after = self.count(_context(plan.system, candidate, split), tools)
            if after > cfg.trigger_ratio * window:
                await self._background_event(
                    "stale", pending, reason="more must leave than it covers"
                )
                return None
        await self._record_summary(outcome, request, pending.persisted)
        waited_ms = 0.0 if done else (time.monotonic() - waited) * 1000
        await self._background_event("applied", pending, waited_ms=round(waited_ms, 1))
        return await self._assemble(
            partial, pending.persisted, outcome, counted, tools, cfg, window, pending.lines
        )

    async def _background_event(self, status: str, pending: Pending, **fields: Any) -> None:
        await self._event(
            events.Background(
                status=status,
                messages=len(pending.older),
                reference=pending.persisted.reference,
                lines=pending.persisted.lines,
                age_ms=round((time.monotonic() - pending.started) * 1000, 1),
                **fields,
            )
        )

    @property
    def background(self) -> str | None:
        """None when no background summary is under way, else `running` or `ready`."""
        if self._pending is None:
            return None
        return "ready" if self._pending.task.done() else "running"

    async def aclose(self) -> None:
        """Cancel a summary under way in the background and wait for it to end. Nothing is
        half-written: its messages were stored before it started, and a summary is written
        only when applied. Safe to call more than once."""
        pending, self._pending = self._pending, None
        if pending is not None:
            await pending.cancel()
            await self._background_event("cancelled", pending, reason="the compressor closed")

    # -- the messages the model has not seen ------------------------------------------------

    def _fresh_ids(self, rest: Sequence[Msg]) -> set[str]:
        """Ids of the messages in `rest` the model has not seen, with their whole turn."""
        if not rest:
            return set()
        if self._seen is None:
            first = len(rest) - 1  # first call: the newest turn
        else:
            first = len(rest)
            while first > 0 and rest[first - 1].id not in self._seen:
                first -= 1
            if first == len(rest):
                # Nothing arrived since the previous call: the model has not answered it yet
                # (a retry after an overflow), so what was fresh then is fresh still.
                first = next((i for i, m in enumerate(rest) if m.id in self._last_fresh), len(rest))
            if first == len(rest):
                return set()
            # Only the newest turn is fresh: the model's last message and what came after it.
            # Messages added in bulk before it (history given at once) are history.
            last_reply = max((i for i, m in enumerate(rest) if m.role == "assistant"), default=-1)
            first = max(first, last_reply)
        return {m.id for m in rest[turn_start(rest, first) :]}

    def unseen_ids(self, messages: Sequence[Msg]) -> set[str]:
        """Ids of the messages the model has not seen yet, with their whole turn.

        The newest turn on the first call; later, what arrived since the messages last
        noted as sent (see `remember_sent`), from the model's latest message on.
        """
        return self._fresh_ids(
            [m for m in messages if m.role != "system" and not is_context_note(m)]
        )

    def note_request(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] | None, model: ChatModel
    ) -> None:
        """Note what the agent is sending its model: a later summary request to the same
        model (`same_model`) is this request plus one instruction, so that the provider's
        prompt cache serves its prefix. The `Agent` calls this before each model call."""
        self._last_request = LastRequest(tuple(messages), tuple(tools or ()), model)

    def remember_sent(self, given: Sequence[Msg], sent: Sequence[Msg]) -> None:
        """Note that `sent` (made from `given`) is what the model will be sent next."""
        self._note_call(given, CompressionResult(list(sent), False, "", 0, 0))

    def record_offload(self, reference: str, line_span: tuple[int, int] | None) -> None:
        """Note messages moved to `reference` (by `persist`, or by someone else), so the
        next summary names those lines too."""
        self._state.record_offload(reference, line_span)

    def note_artifact(self, artifact: Artifact) -> None:
        """Add a file to the artifact trail the next summary lists."""
        self._state.artifacts.append(artifact)

    async def event(self, record: Event) -> None:
        """Write an event to the session's events.jsonl, log it and pass it to `on_event`."""
        await self._event(record)

    async def truncated(
        self, block: ToolResultBlock, done: Truncation, **extra: Any
    ) -> ToolResultBlock:
        """Record a truncation made by a manager (artifact trail, event); its block."""
        return await self._truncated(block, done, **extra)

    def _note_call(
        self, given: Sequence[Msg], result: CompressionResult, remember: bool = True
    ) -> CompressionResult:
        """Remember what this call returned, so the next one knows what is fresh."""
        if not remember:
            return result
        rest = [m for m in given if m.role != "system" and not is_context_note(m)]
        fresh = self._fresh_ids(rest)
        if fresh:
            self._last_fresh = fresh
        self._seen = {m.id for m in result.messages}
        live_calls = {
            block.id
            for m in result.messages
            if m.id in self._last_fresh
            for block in m.tool_results
        }
        self._recent = {k: v for k, v in self._recent.items() if k in live_calls}
        return result

    async def _fit_fresh(self, fresh: list[Msg], reserve: int, cfg: ContextConfig) -> list[Msg]:
        """The fresh messages, their tool results and long texts cut so they fit the reserve.

        Each result (or long text) gets an equal share of the reserve, never less than
        `FRESH_PREVIEW_FLOOR` tokens; results are offloaded whole first (those truncated
        already are cut again from the file they went to).
        """
        if sum(self.tracker.count_message(m) for m in fresh) <= reserve:
            return fresh
        items = sum(len(m.tool_results) or 1 for m in fresh)
        limit = max(FRESH_PREVIEW_FLOOR, reserve // max(1, items))
        return [await self._cut_fresh(m, limit, cfg) for m in fresh]

    async def _cut_fresh(self, msg: Msg, limit: int, cfg: ContextConfig) -> Msg:
        if is_pinned(msg):
            return msg  # a pin is never cut; the pins' share of the window was checked
        if not msg.tool_results:
            if msg.role in ("user", "assistant", "tool") and msg.text:
                return await self._truncate_user_message(msg, limit)
            return msg
        if isinstance(msg.content, str):
            return msg
        content = [
            await self._cut_fresh_result(b, limit, cfg) if isinstance(b, ToolResultBlock) else b
            for b in msg.content
        ]
        if all(a is b for a, b in zip(content, msg.content, strict=True)):
            return msg
        return msg.model_copy(update={"content": content})

    async def _cut_fresh_result(
        self, block: ToolResultBlock, limit: int, cfg: ContextConfig
    ) -> ToolResultBlock:
        readers = self.reader_tools(cfg)
        earlier = self._recent.get(block.id)
        if earlier is not None and earlier.reference is not None and _result_of(block, earlier):
            if self.counter.count_text(str(block.output)) <= limit:
                return block
            cut = truncate_text(
                earlier.full_text,
                limit=limit,
                counter=self.counter,
                reference=earlier.reference,
                tool_name=block.name,
                tool_id=block.id,
                readers=readers,
                preview=cfg.preview,
                data=earlier.data,
            )
            earlier.stand_ins[:] = [*earlier.stand_ins[-7:], cut.text]
            return block.model_copy(update={"output": cut.text})
        done = await truncate_tool_result(
            block,
            limit=limit,
            counter=self.counter,
            offloader=self.offloader,
            session_id=self.session_id,
            preview=cfg.preview,
            readers=readers,
        )
        if done is None:
            return block
        return await self._truncated(block, done, reason="the newest turn exceeds the reserve")


TEXT_CUT = "ctxoffload_text_cut"
"""The metadata key of a message whose text ctxoffload cut: the sha256 of the cut text. What
says a text was cut is this record, never a notice in the text, which a user or a tool can
write; the digest makes the mark stale once the text changes."""

_CUT_TEXTS_KEPT = 256
"""How many digests of cut texts a compressor remembers, for hosts whose messages lose their
metadata between calls."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cut_by_us(msg: Msg, cut_texts: Collection[str]) -> bool:
    """Whether `msg`'s text is one ctxoffload cut (its metadata, or a digest remembered)."""
    digest = _digest(msg.text)
    return (msg.metadata or {}).get(TEXT_CUT) == digest or digest in cut_texts


def _result_of(block: ToolResultBlock, earlier: Truncation) -> bool:
    """Whether `block` is the result `earlier` cut: its stand-in (which names the file it went
    to) or the whole result again. Not another result that a model gave the same call id:
    some servers number calls per turn (`call_0` every turn), and cutting a new result from
    an old one's text would show the model the wrong output and store the new one nowhere."""
    output = block.output
    if output == earlier.block.output or output in earlier.stand_ins:
        return True
    # Known by what ctxoffload wrote, never by a notice in the text: a tool's output may
    # forge one naming the earlier file.
    return rendered_text(output) == earlier.full_text


def _lines_of(
    rows: Sequence[bytes], spans: Sequence[tuple[int, int]], older: Sequence[Msg], first: int = 1
) -> dict[str, int]:
    """The line of `rows` (a context log from its line `first` on, split at its newlines)
    holding each message of `older`, among the lines of `spans`, by message id.

    A line is first looked for the message's own `"id":"..."` pair, in the spans' order: the
    messages of one batch are on its lines in order, so each search starts one line after the
    last found. A line that does not hold the expected id that way is read as JSON (what
    another writer's line or a message laid out otherwise needs).
    """
    wanted = {m.id: m for m in older}
    expected = [m.id for m in older]
    found: dict[str, int] = {}
    at = 0  # the next message of `older` expected, in order
    end = first + len(rows) - 1  # the number of the last row
    for start, last in spans:
        for number in range(max(start, first), min(last, end) + 1):
            row = rows[number - first]
            # Looked for from the line's end: a message's id follows its content.
            if at < len(expected) and row.rfind(_id_pair(expected[at])) >= 0:
                found[expected[at]] = number
                at += 1
                continue
            try:
                value = json.loads(row)
            except ValueError:
                continue
            row_id = value.get("id") if isinstance(value, dict) else None
            if isinstance(row_id, str) and row_id in wanted:
                found[row_id] = number
                if at < len(expected) and row_id == expected[at]:
                    at += 1
    return found


def _id_pair(msg_id: str) -> bytes:
    """`"id":"..."` as a message's JSON line spells it (pydantic escapes as `json` does
    for what an id may hold; a plain id needs no escaping at all)."""
    if msg_id.isascii() and msg_id.isalnum():
        return b'"id":"' + msg_id.encode() + b'"'
    return b'"id":' + json.dumps(msg_id, ensure_ascii=False).encode()


def _read_back_report(leaving: Sequence[Msg], lines: Mapping[str, int] | None) -> dict[str, int]:
    """The `recoverable` field of a compaction's event: how many messages left and, when the
    offloader could read them back, how many were at their lines."""
    report = {"messages": len(leaving)}
    if lines is not None:
        report["verified"] = sum(1 for m in leaving if m.id in lines)
    return report

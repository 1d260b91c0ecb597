"""Compaction, a compressor's history job: when the context is over the trigger, the older
messages go to the offloader, a summary takes their place, and the newest stay.

`compress` runs five named steps: check (is compression due), split (what leaves and what
stays; a `SplitStrategy` decides how much older history stays), persist (to the offloader
first; on failure nothing leaves), summarise (the model's summary, or an extractive one),
assemble (the summary message, then the messages kept). A summary may also be made ahead, in
the background (`start_background`, see `_background.py`). The summary message's state and
text live in `_summary_message.py`; the artifact index of what leaves, in
`_compaction_index.py`; which messages are fresh, in `RunServices`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._disk import events
from .._disk.records import Event
from ..messages import Msg
from ..model import ChatModel, model_label
from ..tokens import TokenCount
from ._background import Pending
from ._cache_request import LastRequest, same_model, summarize_from_cache
from ._compaction_index import artifact_index, index_clock, leaving_artifacts
from ._compaction_plan import Plan, in_order, unchanged
from ._config import CHARS_PER_TOKEN, ContextConfig
from ._index import ArtifactIndex, IndexClock, events_file, scan_messages
from ._notes import is_context_note, is_summary_message, is_window_note
from ._persisted import Persisted, read_back_report
from ._protect import is_pinned
from ._result import CompressionResult
from ._services import RunServices, RunSettings
from ._split import Split, SplitByTokens, SplitStrategy
from ._summarize import SummaryOutcome, extract, summarize
from ._summary_message import SummaryState
from ._summary_model import Summary
from ._truncator import FRESH_PREVIEW_FLOOR, Truncator
from ._turns import is_user_request

__all__ = ["Compaction"]

INDEX_SHARE = 0.1
"""The share of `summary_timeout` kept from the summary model for the artifact index and the
assembly after it: a summary model that does not answer leaves the index that much time."""


class Compaction:
    """A compressor's compaction job, on the run's shared services.

    Args:
        services: the counter, offloader, session, settings and summary state it shares
            with truncation.
        truncator: the truncation job, which cuts the fresh turn and a long user request.
    """

    def __init__(self, services: RunServices, truncator: Truncator) -> None:
        self.services = services
        self.truncator = truncator
        # What the agent last sent its model (`note_request`): the prefix a summary request
        # to the same model reuses, so that the provider's prompt cache serves it.
        self._last_request: LastRequest | None = None
        # A summary under way in the background (`background_compaction`).
        self._pending: Pending | None = None

    async def _event(self, record: Event) -> None:
        await self.services.event(record)

    @property
    def model(self) -> ChatModel | None:
        """The summary model of the settings (a call may give another)."""
        return self.services.settings.model

    def note_request(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] | None, model: ChatModel
    ) -> None:
        """Note what the agent is sending its model (see `Compressor.note_request`)."""
        self._last_request = LastRequest(tuple(messages), tuple(tools or ()), model)

    async def compress(
        self,
        context: list[Msg],
        settings: RunSettings,
        *,
        tools: Sequence[dict[str, Any]],
        force: bool,
        summary_model: ChatModel | None,
        split: SplitStrategy | None,
    ) -> CompressionResult:
        """Compress older history if the context is over the trigger (a no-op below it; see
        `Compressor.maybe_compress`).

        Five steps, each a method: check (`_is_due`), `_split`, then (`_compress`)
        `persist`, `_summarise`, `_assemble`. Persist before drop: if offloading the older
        messages fails, nothing is removed (a warning is logged and `reason` says so).
        """
        cfg = settings.config
        # The whole compaction has `summary_timeout`: the summary model has what is left of
        # it less a share kept for the artifact index (`INDEX_SHARE`), and the index
        # searches until a share before the end (`index_clock`).
        deadline = time.monotonic() + cfg.summary_timeout
        strategy = split or SplitByTokens()
        window = settings.window()
        # Counted exactly from the newest back until past the trigger: the decision and the
        # messages that stay are exact; what leaves is estimated, not tokenized.
        counted = self.services.count_until(context, tools, limit=cfg.trigger_ratio * window)
        if not self._is_due(counted.tokens, settings, window, strategy, force=force):
            await self.start_background(
                context, settings, tools=tools, summary_model=summary_model, split=split
            )
            return CompressionResult(
                context, False, "below trigger", counted.tokens, counted.tokens
            )
        plan = await self._split(context, settings, window, strategy)
        if plan.fresh_cut:
            # What the compaction starts from is the context with its newest turn cut (the
            # cuts are stored and recorded on their own), counted as far as decides again;
            # cut, it may be under the trigger.
            cut = self._with_cuts(context, plan)
            counted = self.services.count_until(cut, tools, limit=cfg.trigger_ratio * window)
            if not self._is_due(counted.tokens, settings, window, strategy, force=force):
                reason = "below trigger once the newest turn was cut"
                return unchanged(cut, reason, counted, counted.tokens)
        model = summary_model or settings.model
        return await self._compress(
            context, plan, counted, tools, cfg, window, model, deadline=deadline
        )

    @staticmethod
    def _with_cuts(context: list[Msg], plan: Plan) -> list[Msg]:
        """The context as it was, the messages the split cut (the newest turn, the latest
        request) in their cut form."""
        split = plan.split
        changed = {m.id: m for m in [*split.older, *split.kept, *split.pins]}
        if split.pinned is not None:
            changed[split.pinned.id] = split.pinned
        return [changed.get(m.id, m) for m in context]

    def _is_due(
        self,
        counted: int,
        settings: RunSettings,
        window: int,
        strategy: SplitStrategy,
        *,
        force: bool,
    ) -> bool:
        """Check: whether the context of `counted` tokens is over `trigger_ratio x window`.

        `force` makes it due whatever it costs (a reactive run, a manager's own rules).
        When the split keeps what fits the reserve, a config whose previews cannot fit it is
        said once here too, before any tool result has been cut; not in a forced run,
        whose window is one assumed for it (a compaction asked for, a reactive retry), not
        the model's: the user's values may fit the model's window perfectly well.
        """
        if strategy.fits_reserve and not force:
            self.truncator.preview_tokens(settings, window)
        return force or counted > settings.config.trigger_ratio * window

    async def _split(
        self, context: list[Msg], settings: RunSettings, window: int, strategy: SplitStrategy
    ) -> Plan:
        """Split: which messages leave the context and which stay.

        The system prompt and the notes (an earlier summary, a window note) are set apart,
        and the state they carry is adopted (a resumed session). The messages the model has
        not seen stay, cut to fit the reserve when they alone exceed it (`_fit_fresh`);
        `strategy` divides the older ones, never separating a tool call from its results;
        the latest user request stays verbatim unless it alone is over the reserve.
        """
        cfg = settings.config
        system = context[0] if context and context[0].role == "system" else None
        rest = context[1:] if system is not None else context
        earlier_summary, earlier_note = self._adopt_notes(rest, cfg, window)
        rest = [m for m in rest if not is_context_note(m)]
        reserve = int(cfg.reserve_ratio * window)
        fresh = self.services.fresh_ids(rest)
        fresh_from = next((i for i, m in enumerate(rest) if m.id in fresh), None)
        fresh_cut = False
        if fresh_from is not None:
            # What is sent after a compaction stays under the trigger when the fresh turn
            # leaves the kept messages their reserve; past that, the calls it holds are cut.
            given = rest[fresh_from:]
            cut = await self.truncator.fit_fresh(
                given,
                reserve,
                settings,
                calls_over=cfg.calls_room(window),
            )
            fresh_cut = any(a is not b for a, b in zip(given, cut, strict=True))
            rest = rest[:fresh_from] + cut
        split = strategy.split(rest, self.services.tracker, reserve, fresh_from)
        await self._keep_latest_request(split, reserve)
        return Plan(system, earlier_summary, earlier_note, split, reserve, fresh_cut)

    def _adopt_notes(
        self, rest: Sequence[Msg], cfg: ContextConfig, window: int
    ) -> tuple[Msg | None, Msg | None]:
        """The earlier summary and window note among `rest`, their state taken over."""
        earlier_summary: Msg | None = None
        earlier_note: Msg | None = None
        for msg in rest:
            if is_summary_message(msg):
                self.services.state.adopt(msg, cfg.summary_budget_tokens(window) * CHARS_PER_TOKEN)
                earlier_summary = msg
            elif is_window_note(msg):
                self.services.state.adopt_note(msg)
                earlier_note = msg
        return earlier_summary, earlier_note

    async def _keep_latest_request(self, split: Split, reserve: int) -> None:
        """Cut the latest user request (pinned, or among the kept) if it alone is over the
        reserve; it stays in the context either way."""
        latest = split.pinned or next((m for m in reversed(split.kept) if is_user_request(m)), None)
        if latest is None or is_pinned(latest):
            return
        # A request no longer than a notice is never cut: a reserve of a few tokens (a host
        # that asks for a compaction to 0 tokens: Haystack's, once its estimate of the
        # overhead passes its target) replaced a five-word request with a notice of it.
        if self.services.counter.count_text(latest.text) <= FRESH_PREVIEW_FLOOR // 2:
            return
        replaced = await self.truncator.truncate_message(latest, reserve)
        if replaced is latest:
            return
        if split.pinned is latest:
            split.pinned = replaced
        else:
            split.kept = [replaced if m is latest else m for m in split.kept]

    async def _compress(
        self,
        context: list[Msg],
        plan: Plan,
        counted: TokenCount,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
        model: ChatModel | None,
        *,
        deadline: float,
    ) -> CompressionResult:
        """Persist the older messages, summarise them, assemble the new context, by
        `deadline` (on `time.monotonic()`'s clock).

        Nothing leaves when nothing is old enough (the notes stay, `_keep_notes`) or when
        the older messages could not be persisted (the context is returned as given).
        """
        if not plan.older:
            return self._keep_notes(plan, counted, tools)
        pending, self._pending = self._pending, None
        if pending is not None:
            ready = await self._apply_background(
                pending, plan, counted, tools, cfg, window, deadline=deadline
            )
            if ready is not None:
                return ready
        # The artifacts of what leaves that was not scanned when it was counted (a history
        # given at once) are found in a worker thread meanwhile, while the summary model is
        # waited for.
        # (Nothing to scan, the common case once each message was counted: no thread.)
        unscanned = self.services.scanned.missing(plan.older)
        scanning = (
            asyncio.ensure_future(asyncio.to_thread(scan_messages, unscanned))
            if unscanned
            else None
        )
        try:
            persisted = await self.services.persist(plan.older)
            if persisted.failure is not None:
                reason = f"offload failed: {persisted.failure}"
                return unchanged(context, reason, counted, counted.tokens)
            lines = persisted.found_at
            outcome = await self._summarise(plan, persisted, cfg, window, model, deadline)
            if scanning is not None:
                self.services.scanned.add(unscanned, await scanning)
        finally:
            if scanning is not None and not scanning.done():
                scanning.cancel()  # the thread finishes on its own; nothing waits for it
        return await self._assemble(
            plan, persisted, outcome, counted, tools, cfg, window, lines, deadline=deadline
        )

    def _keep_notes(
        self, plan: Plan, counted: TokenCount, tools: Sequence[dict[str, Any]]
    ) -> CompressionResult:
        """The context when nothing is old enough to compress: the earlier summary and
        window note (the only paths back to the messages that left before) stay."""
        after = in_order(plan.system, plan.earlier_summary, plan.split)
        if plan.earlier_note is not None:
            at = len(after) - len(plan.kept) - (1 if plan.pinned else 0) - len(plan.split.pins)
            after.insert(at, plan.earlier_note)
        reason = "nothing old enough to compress"
        return unchanged(after, reason, counted, self.services.count(after, tools))

    async def _summarise(
        self,
        plan: Plan,
        persisted: Persisted,
        cfg: ContextConfig,
        window: int,
        model: ChatModel | None,
        deadline: float,
    ) -> SummaryOutcome:
        """Summarise: the model's summary of the messages that leave, with the previous
        summary folded in; an extractive one when there is no model, it fails, or it has not
        answered by the compaction's `deadline` less what is kept for the artifact index.

        The summary, whole, is written to events.jsonl: the summary message in the context
        only ever holds the latest.
        """
        outcome, request = await self._summary_of(
            plan.older,
            cfg,
            window,
            model,
            deadline=deadline - INDEX_SHARE * cfg.summary_timeout,
            lines=persisted.found_at,
        )
        await self._record_summary(outcome, request, persisted)
        return outcome

    async def _summary_of(
        self,
        older: Sequence[Msg],
        cfg: ContextConfig,
        window: int,
        model: ChatModel | None,
        *,
        deadline: float | None = None,
        lines: Mapping[str, int] | None = None,
    ) -> tuple[SummaryOutcome, str]:
        """The summary of `older` with the current one folded in, and how it was asked
        (`cached_prefix` or `new`): the agent's previous request as prefix when the summary
        model is the agent's own, else the usual request; extractive without a model.

        Both requests share one `summary_timeout` (until `deadline` on `time.monotonic()`'s
        clock when given): the usual request has what the cache-shaped one left of it (a
        model that hangs costs the timeout once, not twice). `lines` (where each message is
        in the context log) lets an extractive summary say where what it names is.
        """
        last = self._last_request
        started = time.monotonic()
        timeout = cfg.summary_timeout if deadline is None else max(0.0, deadline - started)
        if model is not None and last is not None and same_model(model, last.model):
            state = self.services.state
            max_chars = cfg.summary_budget_tokens(window) * CHARS_PER_TOKEN

            def fill() -> Summary:
                artifacts = [a.describe() for a in state.newest_artifacts()]
                return extract(older, cfg, max_chars, state.summary, artifacts, lines)

            cached = await summarize_from_cache(
                last,
                older,
                config=cfg,
                counter=self.services.counter,
                window=window,
                timeout=timeout,
                fill=fill,
            )
            if cached is not None:
                return cached, "cached_prefix"
            timeout = max(0.0, timeout - (time.monotonic() - started))
        outcome = await summarize(
            older,
            model=model,
            config=cfg,
            counter=self.services.counter,
            previous=self.services.state.summary,
            artifacts=[a.describe() for a in self.services.state.newest_artifacts()],
            window=window,
            known_tokens=self.services.tracker.known,
            timeout=timeout,
            lines=lines,
        )
        return outcome, "new"

    async def _record_summary(
        self, outcome: SummaryOutcome, request: str, persisted: Persisted
    ) -> None:
        """Make `outcome` the current summary and write it whole to events.jsonl."""
        self.services.state.summary = outcome.summary
        self.services.state.compressions += 1
        await self._event(
            events.Summary(
                compression=self.services.state.compressions,
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
        plan: Plan,
        persisted: Persisted,
        outcome: SummaryOutcome,
        counted: TokenCount,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
        lines: Mapping[str, int] | None,
        *,
        deadline: float,
    ) -> CompressionResult:
        """Assemble: the system prompt, the summary message (naming context.jsonl, the line
        span and the artifact trail, within the reserve, then the artifact index, which
        searches for the layout that names the most until a little before `deadline`), then
        the messages kept; the artifacts and compression events record it."""
        summary_msg, index = await self._summary_with_index(
            plan, persisted, outcome, tools, cfg, window, lines, index_clock(deadline, cfg)
        )
        after = in_order(plan.system, summary_msg, plan.split)
        tokens_after = self.services.count(after, tools)
        # The two records of the compaction go in one append (one write, one fsync).
        records: list[Event] = []
        if index.left:
            records.append(
                events.Artifacts(
                    compression=self.services.state.compressions,
                    reference=persisted.reference,
                    artifacts=index.listing(),
                )
            )
        recoverable = read_back_report(plan.older, lines)
        records.append(
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
                summary_origin=outcome.origin(
                    model_label(self.model) if outcome.source == "model" else None,
                    # A host's model, adapted by its door, says which door (`door`).
                    door=getattr(self.model, "door", None) if outcome.source == "model" else None,
                ),
                **({"summary_input": outcome.report()} if outcome.source == "model" else {}),
                artifacts=index.report(),
                recoverable=recoverable,
            )
        )
        await self.services.events(records)
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

    async def _summary_with_index(
        self,
        plan: Plan,
        persisted: Persisted,
        outcome: SummaryOutcome,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
        lines: Mapping[str, int] | None,
        clock: IndexClock,
    ) -> tuple[Msg, ArtifactIndex]:
        """The summary message (within the reserve), followed by the artifact index of what
        leaves (within what is left under the trigger), and that index."""
        services = self.services
        state = services.state
        listed_in = events_file(persisted.reference)
        candidates = await leaving_artifacts(services, plan.older, lines, state)
        # The index's least part (how many artifacts are cut, and where they are listed)
        # comes out of the summary's budget; the rest of the index takes what is left under
        # the trigger, up to its own budget.
        least = ArtifactIndex.least_tokens(services.counter, listed_in) if candidates else 0
        summary_msg = state.render(
            outcome.summary,
            cfg,
            services.counter,
            budget=plan.reserve - least,
            floor=500 - least,
            readers=services.settings.over(cfg).readers,
        )
        room = int(cfg.trigger_ratio * window) - services.count(
            in_order(plan.system, summary_msg, plan.split), tools
        )
        kept = [*plan.split.pins, *([plan.pinned] if plan.pinned else []), *plan.kept]
        # What the summary leaves of its own budget may name what leaves now, when the index's
        # budget cannot (`ArtifactIndex.build`'s `extra`): the summary and its index never take
        # more than their two budgets.
        spare = 0
        if cfg.artifact_index_tokens is None:
            used = services.counter.count_text(summary_msg.text)
            spare = max(0, cfg.summary_budget_tokens(window) - used)
        index = artifact_index(
            services,
            candidates,
            state,
            summary_msg.text,
            kept,
            persisted,
            cfg,
            window,
            room,
            least,
            spare,
            clock=clock,
        )
        return state.with_index(summary_msg, index, listed_in), index

    async def index_note(
        self,
        note: Msg,
        leaving: Sequence[Msg],
        persisted: Persisted,
        settings: RunSettings,
        *,
        earlier: Mapping[str, Any],
        summary_text: str,
        kept: Sequence[Msg],
    ) -> tuple[Msg, dict[str, Any]]:
        """`note` followed by the artifact index of what left (see `Compressor.index_note`)."""
        lines = persisted.found_at
        state = SummaryState()
        state.adopt_index(dict(earlier))
        index = artifact_index(
            self.services,
            await leaving_artifacts(self.services, leaving, lines, state),
            state,
            summary_text,
            kept,
            persisted,
            settings.config,
            settings.window(),
        )
        note = state.with_index(note, index, events_file(persisted.reference))
        if index.left:
            await self._event(
                events.Artifacts(reference=persisted.reference, artifacts=index.listing())
            )
        return note, {"artifacts": index.report(), "recoverable": read_back_report(leaving, lines)}

    # -- the summary made in the background (`background_compaction`) ---------------------

    async def start_background(
        self,
        messages: Sequence[Msg],
        settings: RunSettings,
        *,
        tools: Sequence[dict[str, Any]],
        summary_model: ChatModel | None,
        split: SplitStrategy | None,
    ) -> bool:
        """Start the summary of what would leave the context, in the background, when it is
        due (see `Compressor.start_background`); whether one started."""
        cfg = settings.config
        model = summary_model or settings.model
        if not cfg.background_compaction or model is None or self._pending is not None:
            return False
        context = [m for m in messages if isinstance(m, Msg)]
        window = settings.window()
        counted = self.services.count(context, tools)
        start = (cfg.trigger_ratio - cfg.background_lead) * window
        if not start < counted <= cfg.trigger_ratio * window:
            return False
        older = self._would_leave(context, cfg, window, split or SplitByTokens())
        if not older:
            return False
        persisted = await self.services.persist(
            older, on_failure="not starting a background summary"
        )
        if persisted.failure is not None:
            return False
        lines = persisted.found_at
        previous = self.services.state.summary
        task = asyncio.create_task(self._summary_of(older, cfg, window, model, lines=lines))
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
        fresh = self.services.fresh_ids(rest)
        fresh_from = next((i for i, m in enumerate(rest) if m.id in fresh), None)
        split = strategy.split(
            rest, self.services.tracker, int(cfg.reserve_ratio * window), fresh_from
        )
        return split.older

    async def _apply_background(
        self,
        pending: Pending,
        plan: Plan,
        counted: TokenCount,
        tools: Sequence[dict[str, Any]],
        cfg: ContextConfig,
        window: int,
        *,
        deadline: float,
    ) -> CompressionResult | None:
        """The compression made of the background summary, or None when it does not fit
        (the caller then compresses as usual); its index searches until a little before
        `deadline`.

        It fits when no compression came since it started and its messages are the first
        of those to drop now, all of them, or only some when the others still fit under
        the trigger (they stay verbatim, and leave with the next compression).
        """
        covered = pending.covers(plan.older)
        reason = None
        if pending.previous is not self.services.state.summary:
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
        partial = Plan(plan.system, plan.earlier_summary, plan.earlier_note, split, plan.reserve)
        if extra:
            candidate = self.services.state.render(
                outcome.summary,
                cfg,
                self.services.counter,
                budget=plan.reserve,
                readers=self.services.settings.over(cfg).readers,
            )
            after = self.services.count(in_order(plan.system, candidate, split), tools)
            if after > cfg.trigger_ratio * window:
                await self._background_event(
                    "stale", pending, reason="more must leave than it covers"
                )
                return None
        await self._record_summary(outcome, request, pending.persisted)
        waited_ms = 0.0 if done else (time.monotonic() - waited) * 1000
        await self._background_event("applied", pending, waited_ms=round(waited_ms, 1))
        return await self._assemble(
            partial,
            pending.persisted,
            outcome,
            counted,
            tools,
            cfg,
            window,
            pending.lines,
            deadline=deadline,
        )

    async def _background_event(self, status: str, pending: Pending, **fields: Any) -> None:
        await self._event(
            events.Background(
                status=status,
                messages=len(pending.older),
                reference=pending.persisted.reference,
                lines=pending.persisted.lines,
                **pending.persisted.apart,
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

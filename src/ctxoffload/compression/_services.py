"""What one compressor's jobs share: its settings, the counter, the offloader, the session,
the event writer, the summary state, and which messages the model has seen.

The `Compressor` is a front over two jobs, truncation (`_truncator.py`, per tool result) and
compaction (`_compaction.py`, the history); both work through one `RunServices`, so a
truncation's file joins the artifact trail the next summary lists, a message counted once is
scanned once, and both read the same settings (`RunSettings`: the one holder of them).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._disk.records import Event
from .._emit import EventCallback, emit_events
from .._lease_lost import logged_unless_lease_lost
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ChatModel
from ..references import ContextRef
from ..tokens import ContextTokenTracker, TokenCount, TokenCounter, get_token_counter
from ..workspace import EventLog, LineReader, Offloader, ReferenceReader
from ._config import ContextConfig
from ._index import ArtifactCache
from ._notes import is_context_note
from ._persisted import Persisted, lines_of
from ._stored_files import StoredFiles
from ._stored_outputs import StoredOutputs
from ._summary_message import SummaryState
from ._tool_names import READER_TOOL_NAMES, ReaderTools
from ._turns import turn_start

__all__ = ["RunServices", "RunSettings"]

logger = logging.getLogger("ctxoffload")


@dataclass(frozen=True)
class RunSettings:
    """The settings a compressor works under: its `ContextConfig` and the few facts the host
    gives beside it, resolved in one place.

    Every threshold, window and reader-tool question is answered here; a one-off config
    (`config=` of a call, a pipeline run's) is the same host facts over another
    `ContextConfig` (`over`), never a second copy of them.

    Attributes:
        config: the thresholds, prompt and template.
        model: the summary model.
        context_window: the window of the model whose context is managed, used when
            `config.context_window` is not set.
        host_readers: the host's tools for reading offloaded content back; they take
            precedence over `config.reader_tools`.
        reader_names: the exact names of the tools whose results read offloaded content
            back; None: ctxoffload's reader tool names and those of `readers`.
        window_model: the model whose window is the last resort for `window`: the one the
            compressor was built with, never one that writes its summaries from a later call
            on (`Compressor.model`: a door's agent model, whose window a guess may stand for).
    """

    config: ContextConfig
    model: ChatModel | None = None
    context_window: int | None = None
    host_readers: ReaderTools | None = None
    reader_names: frozenset[str] | None = None
    window_model: ChatModel | None = None

    def over(self, config: ContextConfig | None) -> RunSettings:
        """These settings with `config` as the `ContextConfig` (itself when None)."""
        return self if config is None or config is self.config else replace(self, config=config)

    @property
    def readers(self) -> ReaderTools | None:
        """The reader tools notices name: the host's, else the config's."""
        return self.host_readers if self.host_readers is not None else self.config.reader_tools

    def reads_back(self, tool_name: str | None) -> bool:
        """Whether `tool_name`'s results read offloaded content back (see
        `Compressor.reads_back`)."""
        if self.reader_names is not None:
            return tool_name in self.reader_names
        readers = self.readers
        named = {readers.read, readers.grep, readers.retrieve} if readers is not None else set()
        return tool_name is not None and (tool_name in READER_TOOL_NAMES or tool_name in named)

    def window(self) -> int:
        """The context window in tokens that thresholds are computed against."""
        fallback = self.context_window
        if fallback is None and self.window_model is not None:
            fallback = self.window_model.context_window
        return self.config.window(fallback)

    def known_window(self) -> int | None:
        """`window`, or None when no window is known."""
        try:
            return self.window()
        except ConfigError:
            return None


class RunServices:
    """The services a compressor's jobs share for one session.

    Args:
        settings: the settings (see `RunSettings`).
        offloader: where content goes before it leaves the context; None drops it.
        session_id: the workspace session; generated when not given.
        counter: the token counter; by default the exact one for the settings' model.
        on_event: called with each event as it is written.
    """

    def __init__(
        self,
        settings: RunSettings,
        *,
        offloader: Offloader | None,
        session_id: str | None,
        counter: TokenCounter | None,
        on_event: EventCallback | None,
    ) -> None:
        model = settings.model
        self.settings = settings
        self.offloader = offloader
        self.session_id = session_id or uuid.uuid4().hex[:16]
        self.counter = counter or get_token_counter(model.model_name if model else None)
        self.tracker = ContextTokenTracker(self.counter)
        self.on_event = on_event
        # The artifacts of each message, found when it is first counted (`count`).
        self.scanned = ArtifactCache()
        self.state = SummaryState()
        # The tool outputs stored whole and replaced by a stand-in (a cut, an offload).
        read_events = self._read_events if isinstance(offloader, EventLog) else None
        self.stored_outputs = StoredOutputs(read_events)
        # The files the workspace stored for the session (what this run stored, as the
        # artifact trail holds it, and the session's record): the artifact index's answer.
        self.stored_files = StoredFiles(read_events, lambda: (a.path for a in self.state.artifacts))
        # Ids of the messages the previous call returned (None before the first call), and
        # the fresh ones among them, kept fresh until new messages arrive (a forced retry
        # after an overflow happens before the model has answered).
        self.seen: set[str] | None = None
        self.last_fresh: set[str] = set()
        # The events kept back while a caller holds them (`hold_events`), to be written with
        # its own in one append.
        self._holding: list[Event] | None = None

    async def _read_events(self) -> list[Any]:
        assert isinstance(self.offloader, EventLog)
        return await self.offloader.read_events(self.session_id)

    def count_with(self, counter: TokenCounter) -> None:
        """Count with `counter` from now on, with a tracker of its own (see
        `Compressor.count_with`)."""
        self.counter = counter
        self.tracker = ContextTokenTracker(counter)

    async def event(self, record: Event) -> None:
        """Write an event: to the offloader's record, logged (INFO for truncation and
        compression), and passed to `on_event`."""
        await self.events([record])

    async def events(self, records: Sequence[Event]) -> None:
        """Write events as `event` does, in order, in one append where the offloader can;
        kept back, in order, while they are held (`hold_events`)."""
        if self._holding is not None:
            self._holding.extend(records)
            return
        pairs = [(record.kind, record.fields()) for record in records]
        await emit_events(self.offloader, self.session_id, self.on_event, pairs)

    def hold_events(self) -> None:
        """Keep back the events written from now on until `held_events`: a caller that
        writes a record of its own at the end of a step (the projector's model call) writes
        the step's events with it, in one append instead of one each."""
        if self._holding is None:
            self._holding = []

    def held_events(self) -> list[Event]:
        """The events kept back since `hold_events`, in order; events are written at once
        again from now on."""
        held, self._holding = self._holding or [], None
        return held

    # -- counting ---------------------------------------------------------------------------

    def count(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = ()) -> int:
        """Tokens `messages` (+ tool schemas) cost, counted incrementally; the messages
        counted for the first time are scanned for the artifact index (`Compressor.count`)."""
        tokens = self.tracker.count(None, None, messages, tools)
        self._scan_new(messages)
        return tokens

    def count_until(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = (), *, limit: float
    ) -> TokenCount:
        """Tokens `messages` cost, counted exactly only until past `limit`
        (`Compressor.count_until`)."""
        counted = self.tracker.count_past(None, None, messages, tools, limit=limit)
        self._scan_new(messages)
        return counted

    def _scan_new(self, context: Sequence[Msg]) -> None:
        """Scan for the artifact index the messages of `context` just counted for the first
        time, but ctxoffload's own notes: a compaction never takes its artifacts from a
        summary or a window note (what they carry is `state`'s), and a summary with its
        index is the longest message a compaction counts, twice (without and with the
        index), each a new message (0.4 ms a scan in the 8k LangChain replay)."""
        new = [m for m in self.tracker.newly_counted if not is_context_note(m)]
        self.scanned.note(context, new)

    # -- the offloader ----------------------------------------------------------------------

    async def persist(
        self, messages: Sequence[Msg], *, on_failure: str = "not compressing"
    ) -> Persisted:
        """Append `messages` to the session's context.jsonl before they leave (see
        `Compressor.persist`)."""
        if self.offloader is None:
            return Persisted()
        with logged_unless_lease_lost(
            "could not offload %d messages, %s", len(messages), on_failure
        ) as failed:
            ref = await self.offloader.offload_context(self.session_id, msgs=messages)
        if failed.error is not None:
            return Persisted(failure=failed.error)
        line_span: tuple[int, int] | None = None
        spans: tuple[tuple[int, int], ...] = ()
        if isinstance(ref, ContextRef) and ref.last_line >= ref.first_line:
            line_span = (ref.first_line, ref.last_line)
            # Only the lines its messages are on: some may have been in the log already, at
            # lines apart from the rest, with other messages (still in the context) between.
            spans = getattr(ref, "spans", None) or (line_span,)
        if spans:
            for span in spans:
                self.state.record_offload(str(ref), span)
        else:
            self.state.record_offload(str(ref), None)
        persisted = Persisted(str(ref), line_span, spans=spans)
        return replace(persisted, found_at=await self._read_back(persisted, messages))

    async def _read_back(self, persisted: Persisted, older: Sequence[Msg]) -> dict[str, int] | None:
        """The line of the context log each message persisted is on, read back from the
        offloader and matched to the messages (`lines_of`): what names a message's line
        (the artifact index, a cleared turn's mark) and the fidelity check (a message is
        recoverable when its line holds it); None when the offloader cannot read
        references back.

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
                found = lines_of(raw.split(b"\n"), persisted.spans, older, first=first)
                if len(found) == len({m.id for m in older}):
                    return found
            raw = await offloader.read_reference(reference)
        except Exception as exc:
            logger.warning("could not read back %s to check it: %s", reference, exc)
            return {}
        return lines_of(raw.split(b"\n"), persisted.spans, older)

    # -- the messages the model has not seen --------------------------------------------------

    def fresh_ids(self, rest: Sequence[Msg]) -> set[str]:
        """Ids of the messages in `rest` the model has not seen, with their whole turn."""
        if not rest:
            return set()
        if self.seen is None:
            first = len(rest) - 1  # first call: the newest turn
        else:
            first = len(rest)
            while first > 0 and rest[first - 1].id not in self.seen:
                first -= 1
            if first == len(rest):
                # Nothing arrived since the previous call: the model has not answered it yet
                # (a retry after an overflow), so what was fresh then is fresh still.
                first = next((i for i, m in enumerate(rest) if m.id in self.last_fresh), len(rest))
            if first == len(rest):
                return set()
            # Only the newest turn is fresh: the model's last message and what came after it.
            # Messages added in bulk before it (history given at once) are history.
            last_reply = max((i for i, m in enumerate(rest) if m.role == "assistant"), default=-1)
            first = max(first, last_reply)
        return {m.id for m in rest[turn_start(rest, first) :]}

    def resume_sent(self, before: set[str] | None, latest: Sequence[Msg]) -> None:
        """Take up what an earlier process's latest model calls were sent (`take_up`): the
        ids of the call before the latest (None: there was none) and the latest call's
        messages, noted as that process noted them."""
        self.seen = before
        self.note_sent(latest, latest)

    def note_sent(self, given: Sequence[Msg], sent: Sequence[Msg]) -> set[str]:
        """Remember that `sent` (made from `given`) goes to the model, so the next call
        knows what is fresh; the ids still fresh."""
        rest = [m for m in given if m.role != "system" and not is_context_note(m)]
        fresh = self.fresh_ids(rest)
        if fresh:
            self.last_fresh = fresh
        self.seen = {m.id for m in sent}
        return self.last_fresh

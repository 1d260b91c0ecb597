"""Managers for the history (pre_llm): `SlidingWindow`, `Summarization`, and `Null`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..._disk import events
from ..._disk.wording import spans_text
from ...messages import Msg, ToolResultBlock
from .._notes import NOTE_MARK, WINDOW_NOTE, is_summary_message, is_window_note
from .._split import SplitByCount, SplitByTokens, SplitStrategy, is_user_request, turns
from .._tool_names import ReaderTools, how_to_search
from ._activation import Activation, SettingError, check_int, check_ratio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ...model import ChatModel
    from .._config import ContextConfig
    from ._run import PipelineRun

__all__ = ["Null", "SlidingWindow", "Summarization"]


def _split_context(messages: list[Msg]) -> tuple[Msg | None, Msg | None, Msg | None, list[Msg]]:
    """(system prompt, summary, window note, the conversation)."""
    system = messages[0] if messages and messages[0].role == "system" else None
    rest = messages[1:] if system is not None else messages
    summary = next((m for m in rest if is_summary_message(m)), None)
    note = next((m for m in rest if is_window_note(m)), None)
    convo = [m for m in rest if not (is_summary_message(m) or is_window_note(m))]
    return system, summary, note, convo


def _window_note(
    total: int, reference: str | None, spans: list[tuple[int, int]], readers: ReaderTools | None
) -> Msg:
    """The note that stands where a `SlidingWindow` dropped `total` messages in all: the file
    and the lines that hold them, and how to search it; the same state in its mark."""
    if reference is not None:
        where = f" (lines {spans_text(spans)})" if spans else ""
        text = (
            f"[{total} earlier messages were moved out of the context into {reference}"
            f"{where}, one JSON message per line; {how_to_search(reference, readers)}.]"
        )
    else:
        text = (
            f"[{total} earlier messages were dropped from the context; no offloader was "
            "configured, so they were not kept.]"
        )
    mark = {
        "kind": WINDOW_NOTE,
        "reference": reference,
        "spans": [list(s) for s in spans],
        "dropped": total,
    }
    return Msg(role="user", content=text, metadata={NOTE_MARK: mark})


async def _cut_to_window(
    messages: list[Msg], window: int, run: PipelineRun, manager: str
) -> list[Msg]:
    """`messages` with the conversation's tool results and long texts cut so the whole
    fits `window`, then the long arguments of its answered calls (stored whole first:
    `Compressor.cut_to_fit`); the pins stay whole."""
    return await _cut_within(
        messages, window, window, run.compressor.cut_to_fit, run, f"{manager}: cut"
    )


async def _cut_over_window(messages: list[Msg], run: PipelineRun, manager: str) -> list[Msg]:
    """`messages` as a manager that keeps messages by their count left them: when they are
    still over the model's window, the long arguments of the calls among them (a call the
    model wrote with a whole file in it, kept by the count) cut to the room the newest turn
    keeps before its calls are cut (`ContextConfig.calls_room`), as a compaction cuts the
    newest turn's: each stored whole first, its head and a notice naming the file kept.
    Under the window, or with no window known, they stay as they are; so do results and
    texts (a result is the post_tool managers' to cut)."""
    window = run.window
    if window is None:
        return messages
    room = run.config().calls_room(window)
    cut = run.compressor.cut_calls_to_fit
    return await _cut_within(messages, window, room, cut, run, f"{manager}: cut the arguments of")


async def _cut_within(
    messages: list[Msg],
    window: int,
    room: int,
    cut: Callable[..., Awaitable[list[Msg]]],
    run: PipelineRun,
    said: str,
) -> list[Msg]:
    """`messages` when they fit `window`; else the conversation (the pins, summary and note
    whole) passed to `cut` with `room` less what those take, and the report `said`."""
    compressor = run.compressor
    if compressor.count(messages, run.tools) <= window:
        return messages
    system, summary, note, convo = _split_context(messages)
    head = [m for m in (system, summary, note) if m is not None]
    fitted = await cut(convo, max(0, room - compressor.count(head, run.tools)), config=run.config())
    changed = {id(old): new for old, new in zip(convo, fitted, strict=True) if new is not old}
    if not changed:
        return messages
    run.report(f"{said} {len(changed)} messages to fit the window")
    return [changed.get(id(m), m) for m in messages]


class SlidingWindow:
    """Keep the last `max_messages` messages of the conversation.

    The system prompt, a summary and this manager's note are not counted and always stay.
    The cut moves to a turn boundary so a tool result never loses its call (dropping a few
    more messages), but never into the newest turn the model has not seen, nor an
    unfinished one (keeping a few more); the latest user request and pinned messages stay,
    as in compression: after the note, the pins oldest first, then the request.
    With an offloader, the dropped messages are appended to context.jsonl first, and the
    context carries one note naming the file and its lines; if that fails, nothing is
    dropped.

    Args:
        max_messages: messages kept; at least 1.
        per_turn: when the window applies: True at every model call; an int N at every
            N-th model call (Strands' `per_turn`); False only when the model reports an
            overflow (the reactive run).
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm"})

    def __init__(
        self,
        *,
        max_messages: int = 40,
        per_turn: bool | int = True,
        activation: Activation | None = None,
    ) -> None:
        self.max_messages = check_int("max_messages", max_messages, minimum=1)
        if not isinstance(per_turn, bool):
            check_int("per_turn", per_turn, minimum=1)
        self.per_turn = per_turn
        self.activation = Activation.from_value(activation)

    def __repr__(self) -> str:
        return f"SlidingWindow(max_messages={self.max_messages}, per_turn={self.per_turn!r})"

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """Not a post_tool manager: the result unchanged."""
        return result

    def _due(self, run: PipelineRun) -> bool:
        if run.reactive or self.per_turn is True:
            return True
        if self.per_turn is False:
            return False
        return run.model_calls % int(self.per_turn) == 0

    def _boundary(self, convo: list[Msg], head: list[Msg], run: PipelineRun) -> int:
        unseen = run.compressor.unseen_ids(convo)
        cap = next((i for i, m in enumerate(convo) if m.id in unseen), len(convo))
        groups = turns(convo)
        if groups and not groups[-1][2]:
            cap = min(cap, groups[-1][0])
        target = max(len(convo) - self.max_messages, self._over_window(convo, head, run))
        starts = [start for start, _, _ in groups]
        forward = [s for s in starts if target <= s <= cap]
        if forward:
            return forward[0]
        return max((s for s in starts if s <= min(target, cap)), default=0)

    @staticmethod
    def _over_window(convo: list[Msg], head: list[Msg], run: PipelineRun) -> int:
        """In a run that assumes a window (a reactive run: what was sent did not fit), the
        first message of `convo` from which the rest fits that window beside `head`; else 0."""
        window = run.assumed_window
        if window is None:
            return 0
        count = run.compressor.tracker.count_message
        room = window - run.compressor.count(head, run.tools)
        index = len(convo)
        while index > 0 and room - count(convo[index - 1]) >= 0:
            index -= 1
            room -= count(convo[index])
        return index

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context with the oldest messages beyond `max_messages` moved out; in a run
        that assumes a window (a reactive run), more of the oldest until the rest fits it,
        then, if it still does not, the tool results and long texts left cut to fit (each
        stored whole first); in any other run, a context still over the model's window cut
        as `_cut_over_window` says."""
        if not self._due(run):
            return messages
        moved = await self._move_out(messages, run)
        if run.assumed_window is None:
            return await _cut_over_window(moved, run, "SlidingWindow")
        return await _cut_to_window(moved, run.assumed_window, run, "SlidingWindow")

    async def _move_out(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        system, summary, note, convo = _split_context(messages)
        head = [m for m in (system, summary, note) if m is not None]
        if len(convo) <= self.max_messages and self._over_window(convo, head, run) <= 0:
            return messages
        boundary = self._boundary(convo, head, run)
        if boundary <= 0:
            run.report(f"SlidingWindow: nothing can be dropped ({len(convo)} messages)")
            return messages
        dropped, pins = run.protected.split_off(convo[:boundary])
        kept = convo[boundary:]
        latest = next((m for m in reversed(convo) if is_user_request(m)), None)
        pinned = latest if latest is not None and any(m is latest for m in dropped) else None
        if pinned is not None:
            dropped = [m for m in dropped if m is not pinned]
        if not dropped:
            run.report("SlidingWindow: only pinned messages are old enough to drop")
            return messages
        compressor = run.compressor
        marker: dict[str, Any] = dict(note.metadata.get(NOTE_MARK, {})) if note else {}
        spans = [(int(a), int(b)) for a, b in marker.get("spans", [])]
        reference: str | None = marker.get("reference")
        persisted = await compressor.persist(dropped, on_failure="keeping them in the context")
        if persisted.failure is not None:
            run.report(f"SlidingWindow: offload failed: {persisted.failure}")
            return messages
        if persisted.reference is not None:
            reference = persisted.reference
        # The lines its messages are on, not first to last: some may have been in the log
        # already (a run killed mid-compression, resumed), with other messages between.
        spans.extend(span for span in persisted.spans if span not in spans)
        total = int(marker.get("dropped", 0)) + len(dropped)
        config = run.config()
        readers = compressor.reader_tools(config)
        new_note = _window_note(total, reference, spans, readers)
        # The artifacts of what left are named after the note, as after a summary.
        new_note, fidelity = await compressor.index_note(
            new_note,
            dropped,
            persisted,
            earlier=marker,
            summary_text=summary.text if summary is not None else "",
            kept=[*pins, *([pinned] if pinned is not None else []), *kept],
            config=config,
        )
        await compressor.event(
            events.Window(
                reference=reference,
                lines=persisted.lines,
                **persisted.apart,
                messages=len(dropped),
                kept=len(kept) + (1 if pinned else 0) + len(pins),
                pinned=len(pins),
                max_messages=self.max_messages,
                **fidelity,
            )
        )
        run.report(f"SlidingWindow: moved {len(dropped)} messages out")
        head = [m for m in (system, summary, new_note) if m is not None] + pins
        return head + ([pinned] if pinned is not None else []) + kept


class Summarization:
    """Summarise the oldest `summary_ratio` of the messages into the five-field summary.

    Strands' and OpenSearch's summarising manager on ctxoffload's compressor: the messages
    are appended to context.jsonl before they leave the context, the summary names that
    file, its lines and the offloaded files, and an earlier summary is folded in. The cut
    moves back to a turn boundary; the newest turn the model has not seen, an unfinished
    turn and the latest user request always stay.

    Args:
        summary_ratio: the share of the messages summarised; 0.1 to 0.8.
        preserve_recent_messages: the fewest messages kept verbatim; at least 1.
        summary_model: the model that writes the summary; the agent's summary model when
            None. In JSON, an id resolved through `models=`.
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm"})

    def __init__(
        self,
        *,
        summary_ratio: float = 0.3,
        preserve_recent_messages: int = 10,
        summary_model: ChatModel | None = None,
        activation: Activation | None = None,
    ) -> None:
        self.summary_ratio = check_ratio("summary_ratio", summary_ratio, low=0.1, high=0.8)
        self.preserve_recent_messages = check_int(
            "preserve_recent_messages", preserve_recent_messages, minimum=1
        )
        if summary_model is not None and not callable(getattr(summary_model, "generate", None)):
            raise SettingError(
                "summary_model", f"{summary_model!r} has no generate method: give a ChatModel"
            )
        self.summary_model = summary_model
        self.activation = Activation.from_value(activation)
        # The config it stands for (`from_config`): what it splits by and how it shows. The
        # settings it runs under are the run's (`PipelineRun.config`), never a copy here.
        self._config: ContextConfig | None = None

    @classmethod
    def from_config(cls, config: ContextConfig) -> Summarization:
        """The manager a `ContextConfig` stands for: past `trigger_ratio` of the window, keep
        the newest messages within `reserve_ratio` and summarise the rest (the thresholds in
        force are those of the pipeline's config, `ContextPipeline.from_config`'s `config`)."""
        manager = cls(activation=Activation(ratio_exceed=config.trigger_ratio))
        manager._config = config
        return manager

    def __repr__(self) -> str:
        if self._config is not None:
            return (
                f"Summarization(trigger_ratio={self._config.trigger_ratio}, "
                f"reserve_ratio={self._config.reserve_ratio})"
            )
        return (
            f"Summarization(summary_ratio={self.summary_ratio}, "
            f"preserve_recent_messages={self.preserve_recent_messages})"
        )

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """Not a post_tool manager: the result unchanged."""
        return result

    def split_strategy(self) -> SplitStrategy:
        """How this manager splits: by tokens (the newest within the reserve) when it stands
        for a `ContextConfig`, else by message count (`summary_ratio`,
        `preserve_recent_messages`)."""
        if self._config is not None:
            return SplitByTokens()
        return SplitByCount(self.summary_ratio, self.preserve_recent_messages)

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context with its oldest part replaced by a summary; what it keeps still over
        the model's window, cut as `_cut_over_window` says."""
        result = await run.compressor.maybe_compress(
            messages,
            tools=run.tools,
            force=True,
            config=run.config(),
            summary_model=self.summary_model,
            split=self.split_strategy(),
            remember=False,
        )
        run.report(result.reason, result)
        if run.assumed_window is not None:
            return result.messages
        return await _cut_over_window(result.messages, run, "Summarization")


class Null:
    """A manager that does nothing: a placeholder in a template, or a hook switched off.

    Args:
        activation: when the manager runs (see `Activation`); it changes nothing either way.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm", "post_tool"})

    def __init__(self, *, activation: Activation | None = None) -> None:
        self.activation = Activation.from_value(activation)

    def __repr__(self) -> str:
        return "Null()"

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context unchanged."""
        return messages

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """The result unchanged."""
        return result

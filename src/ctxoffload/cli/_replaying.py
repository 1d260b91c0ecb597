"""Replaying a transcript through a `Compressor` into a session of a workspace: what
`ctxoffload replay` reports on, and what `ctxoffload eval TRANSCRIPT` evaluates.

The transcript is fed as the agent produced it: each tool result goes through truncation as
it arrives, and before each assistant message (a model call) the context is compressed if it
is over the trigger; the session's record is written as an agent's would be, so `show --step`
rebuilds each replayed step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._disk import events
from .._disk.events import EventKind
from ._output import Progress
from ._recoverable import check_recoverable

if TYPE_CHECKING:
    from ..compression import ContextConfig
    from ..messages import Msg
    from ..model import ChatModel
    from ..tokens import TokenCounter
    from ..workspace import LocalWorkspace

__all__ = ["ReplayResult", "Step", "replay_run"]


@dataclass
class Step:
    """One model call of the replay."""

    index: int
    tokens: int  # context sent with ctxoffload
    without: int  # what the context would have held without it
    compressed: bool


@dataclass
class ReplayResult:
    """What one configuration did to one run."""

    run: str
    config: str
    session: str
    window: int
    messages: int
    steps: list[Step] = field(default_factory=list)
    truncations: int = 0  # files offloaded
    compressions: int = 0
    offloaded_messages: int = 0
    lost: list[str] = field(default_factory=list)
    context: list[Any] = field(default_factory=list, repr=False)  # the final context

    @property
    def peak(self) -> int:
        return max((s.tokens for s in self.steps), default=0)

    @property
    def peak_without(self) -> int:
        return max((s.without for s in self.steps), default=0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "config": self.config,
            "session": self.session,
            "window": self.window,
            "messages": self.messages,
            "model_calls": len(self.steps),
            "peak_tokens": self.peak,
            "peak_tokens_without": self.peak_without,
            "final_tokens": self.steps[-1].tokens if self.steps else 0,
            "final_tokens_without": self.steps[-1].without if self.steps else 0,
            "files_offloaded": self.truncations,
            "compressions": self.compressions,
            "offloaded_messages": self.offloaded_messages,
            "recoverable": not self.lost,
            "lost": self.lost,
            "steps": [
                {
                    "step": s.index,
                    "tokens": s.tokens,
                    "without": s.without,
                    "compressed": s.compressed,
                }
                for s in self.steps
            ],
        }


async def replay_run(
    messages: list[Msg],
    config: ContextConfig,
    workspace: LocalWorkspace,
    session: str,
    *,
    run_name: str,
    config_name: str,
    counter: TokenCounter,
    progress: Progress | None = None,
    summary_model: ChatModel | None = None,
) -> ReplayResult:
    """Replay one run with one config into `session` and check that nothing is lost.

    Args:
        summary_model: a `ChatModel` that writes the summaries; None for extractive ones.
    """
    from ..agent import window_parts
    from ..compression import Compressor
    from ..model import ModelResponse

    compressor = Compressor(
        config, model=summary_model, offloader=workspace, session_id=session, counter=counter
    )
    # The session says what it is, and exists even when nothing had to be offloaded. A
    # model call is replayed before each assistant message but the first of the transcript.
    replay = events.Replay(
        run=run_name,
        config_name=config_name,
        config=config.model_dump(mode="json"),
        messages=len(messages),
        model_calls=sum(m.role == "assistant" for m in messages[1:]),
    )
    await workspace.record_event(session, replay.kind, **replay.fields())
    window = compressor.window()
    # The record an Agent keeps (session_start, each message as it entered the context, each
    # model call with the ids it was sent), so that `show --step N` rebuilds a replayed step.
    recorder = await _start_record(
        workspace, session, run_name, config, window, messages, summary_model
    )
    result = ReplayResult(run_name, config_name, session, window, len(messages))
    tracker = compressor.tracker
    context: list[Any] = []
    without = 3  # the reply priming every count includes
    for msg in messages:
        if msg.role == "assistant" and context:
            step = await compressor.maybe_compress(context)
            context = step.messages
            result.compressions += step.compressed
            if step.compressed:
                result.offloaded_messages += step.compressed_messages
            result.steps.append(
                Step(len(result.steps) + 1, step.tokens_after, without, step.compressed)
            )
            await recorder.messages(context)
            await recorder.model_call(
                len(result.steps),
                context,
                step.tokens_after,
                time.monotonic(),
                response=ModelResponse(message=msg),
                window=window_parts(context, tracker.count_message, 0),  # no tool schemas
                context_window=window,
                trigger_tokens=int(config.trigger_ratio * window),
            )
        without += tracker.count_message(msg)
        kept = await compressor.process_message(msg)
        result.truncations += sum(a is not b for a, b in zip(kept.blocks, msg.blocks, strict=False))
        context.append(kept)
        await recorder.messages([kept], is_context=False)
        if progress is not None:
            progress.advance()
    # Every file written: tool results cut by truncation and user messages cut by compression.
    result.truncations = sum(
        e.get("kind") == EventKind.TOOL_RESULT for e in await workspace.read_events(session)
    )
    result.context = context
    result.lost = await check_recoverable(messages, context, workspace, session)
    return result


async def _start_record(
    workspace: LocalWorkspace,
    session: str,
    run_name: str,
    config: ContextConfig,
    window: int,
    messages: list[Msg],
    summary_model: ChatModel | None,
) -> Any:
    """A `SessionRecorder` for a replayed session, its `session_start` written: the agent is
    `replay`, the model the transcript's, the tools those its messages call."""
    from .._version import __version__
    from ..agent import SessionRecorder
    from ..model import model_label

    recorder = SessionRecorder(workspace, session)
    tools = sorted({call.name for m in messages for call in m.tool_calls})
    await recorder.emit(
        events.SessionStart(
            agent="replay",
            version=__version__,
            model=f"the transcript {run_name} (replayed, no model called)",
            summary_model=model_label(summary_model) if summary_model is not None else None,
            context_window=window,
            config=config.model_dump(mode="json"),
            tools=tools,
            restored_messages=0,
            first_step=1,
        )
    )
    return recorder

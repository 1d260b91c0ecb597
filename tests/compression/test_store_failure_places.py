"""A lost lease is never taken for a store's failure, at every place that passes a store's
failure over (`ctxoffload._lease_lost`, the one home of that rule): a write refused because
the writer's lease lapsed and was taken over raises `SessionBusyError`, while a store that
fails (a full disk) is logged with the place's own message and the run goes on as before
(a result kept whole, an event unrecorded, nothing cleared)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ContextConfig,
    Msg,
    OffloadError,
    SessionBusyError,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload._emit import emit_events
from ctxoffload._lease_lost import logged_unless_lease_lost, raised_unless_lease_lost
from ctxoffload.agent._state import SavedState
from ctxoffload.compression import ClearToolUses, Compressor, ToolOutputOffload
from ctxoffload.messages import TextBlock
from helpers import EventsOneByOne, FullDisk, pipeline_run, stops_when_taken_over

LONG = "\n".join(f"line {i}: " + "payload " * 12 for i in range(400))


def test_a_store_failure_is_logged_and_passed_over(caplog: pytest.LogCaptureFixture) -> None:
    with logged_unless_lease_lost("could not store %s, keeping it whole", "x") as failed:
        raise OffloadError("no space left on device")
    assert failed and isinstance(failed.error, OffloadError)
    assert "could not store x, keeping it whole: no space left on device" in caplog.text
    with logged_unless_lease_lost("could not store %s", "y") as fine:
        pass
    assert not fine and fine.error is None


def test_a_lost_lease_passes_through_both_helpers() -> None:
    busy = SessionBusyError("lost", "s", {"agent": "B"})
    with pytest.raises(SessionBusyError) as raised, logged_unless_lease_lost("could not store"):
        raise busy
    assert raised.value is busy
    with (
        pytest.raises(SessionBusyError) as raised,
        raised_unless_lease_lost(lambda exc: OffloadError(f"not stored: {exc}")),
    ):
        raise busy
    assert raised.value is busy


def test_a_store_failure_is_raised_as_the_place_says() -> None:
    with (
        pytest.raises(OffloadError, match="not stored: disk full") as raised,
        raised_unless_lease_lost(lambda exc: OffloadError(f"not stored: {exc}")),
    ):
        raise OSError("disk full")
    assert isinstance(raised.value.__cause__, OSError)


# -- every place, driven through a real workspace --------------------------------------------


def compressor(offloader: Any) -> Compressor:
    config = ContextConfig(context_window=20_000, tool_result_limit=300)
    return Compressor(
        config, offloader=offloader, session_id="s1", counter=get_token_counter(exact=False)
    )


def turn(i: int) -> list[Msg]:
    return [
        Msg(role="assistant", content=[ToolCallBlock(id=f"c{i}", name="probe", input={"i": i})]),
        Msg(role="tool", content=[ToolResultBlock(id=f"c{i}", name="probe", output=LONG)]),
    ]


async def batch_event(store: Any) -> None:
    await emit_events(store, "s1", None, [("note", {"text": "a note"})])


async def one_event(store: Any) -> None:
    await emit_events(EventsOneByOne(store), "s1", None, [("note", {"text": "a note"})])


async def tool_result(store: Any) -> None:
    block = ToolResultBlock(id="c1", name="probe", output=LONG)
    assert await compressor(store).process_tool_result(block) == block


async def long_message(store: Any) -> None:
    message = Msg(role="user", content=LONG)
    assert await compressor(store).cut_to_fit([message], 500) == [message]


async def argument(store: Any) -> None:
    call = Msg(role="assistant", content=[ToolCallBlock(id="c1", name="write", input={"t": LONG})])
    done = Msg(role="tool", content=[ToolResultBlock(id="c1", name="write", output="ok")])
    await compressor(store).cut_to_fit([call, done], 500)


async def context(store: Any) -> None:
    persisted = await compressor(store).persist([Msg(role="user", content="a question")])
    assert persisted.failure is not None


async def tool_output_offload(store: Any) -> None:
    run = pipeline_run(
        store, post=(ToolOutputOffload(max_tokens=200, preview_tokens=50),), window=100_000
    )
    result = ToolResultBlock(id="c1", name="query", output=[TextBlock(text=LONG)])
    assert await run.post_tool(result) is result


async def clear_tool_uses(store: Any) -> None:
    run = pipeline_run(store, ClearToolUses(keep=1), window=100_000)
    before = [Msg(role="user", content="probe all"), *turn(0), *turn(1), *turn(2)]
    result = await run.pre_llm(before)
    assert result.messages == before and "offload failed" in result.reason


async def agent_state(store: Any) -> None:
    await SavedState(store).save("s1", [Msg(role="user", content="a question")], dict)


PLACES: dict[str, tuple[Callable[[Any], Awaitable[None]], str]] = {
    "event batch": (batch_event, "could not record a note event: "),
    "event one by one": (one_event, "could not record a note event: "),
    "tool result": (tool_result, "could not offload the result of probe (call c1), keeping"),
    "long message": (long_message, "could not offload a long user message, keeping it whole: "),
    "argument": (argument, "could not offload argument 't' of call c1, keeping it whole: "),
    "context": (context, "could not offload 1 messages, not compressing: "),
    "ToolOutputOffload": (tool_output_offload, "(call c1) block by block, keeping it whole: "),
    "ClearToolUses": (clear_tool_uses, "could not store the tool outputs to clear, clearing"),
    "agent state": (agent_state, "could not save the state of session s1: "),
}


@pytest.mark.parametrize("place", list(PLACES))
async def test_a_full_disk_is_logged_and_the_run_goes_on(
    place: str, caplog: pytest.LogCaptureFixture
) -> None:
    drive, message = PLACES[place]
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        await drive(FullDisk())
    assert message in caplog.text


@pytest.mark.parametrize("place", list(PLACES))
async def test_a_writer_whose_lease_was_taken_over_stops(
    place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    drive, message = PLACES[place]
    await stops_when_taken_over(drive, message, tmp_path, monkeypatch, caplog)

"""AgentScope's offloader never takes a lost lease for a store's failure
(`ctxoffload._lease_lost`): a write refused because the reply's lease lapsed and was taken
over raises `SessionBusyError`, while a store that fails is said as each place says it (the
compressed messages not stored, the cut part not stored, a data file unrecorded)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agentscope", "agentscope")

from ctxoffload.exceptions import OffloadError  # noqa: E402
from ctxoffload.integrations.agentscope import AgentScopeOffloader  # noqa: E402
from helpers import FullDisk, stops_when_taken_over  # noqa: E402


async def context(offloader: AgentScopeOffloader) -> None:
    await offloader.offload_context("s1", [{"role": "user", "content": "a question"}])


async def cut_part(offloader: AgentScopeOffloader) -> None:
    result = {"role": "tool", "tool_call_id": "c1", "content": "the part AgentScope cut"}
    await offloader.offload_tool_result("s1", result)


async def data_file(offloader: AgentScopeOffloader) -> None:
    await offloader._record_data("s1", "file:///ws/data/x.png", "image/png")


PLACES: dict[str, tuple[Callable[[AgentScopeOffloader], Awaitable[None]], str]] = {
    "compressed messages": (context, "could not store 1 compressed messages: no space"),
    "cut part": (cut_part, "could not store the part AgentScope cut from tool result"),
    "data file": (data_file, "could not record data file file:///ws/data/x.png in session s1"),
}


@pytest.mark.parametrize("place", list(PLACES))
async def test_a_full_disk_is_said_as_the_place_says(
    place: str, caplog: pytest.LogCaptureFixture
) -> None:
    drive, message = PLACES[place]
    offloader = AgentScopeOffloader(FullDisk())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        if place == "data file":  # (stored all the same: logged, the reply goes on)
            await drive(offloader)
            said = caplog.text
        else:  # (raised: the compression is skipped, or the reply stops)
            with pytest.raises(OffloadError) as raised:
                await drive(offloader)
            said = str(raised.value)
    assert message in said


@pytest.mark.parametrize("place", list(PLACES))
async def test_a_reply_whose_lease_was_taken_over_stops(
    place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    drive, message = PLACES[place]

    async def through_offloader(workspace: Any) -> None:
        await drive(AgentScopeOffloader(workspace))

    await stops_when_taken_over(through_offloader, message, tmp_path, monkeypatch, caplog)

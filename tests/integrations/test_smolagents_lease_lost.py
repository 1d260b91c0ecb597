"""A smolagents run whose lease lapsed (the door's event loop blocked past the lease's time to
live) and was taken over by another run stops at its next write: `agent.run` raises
`SessionBusyError` naming the new holder, and nothing more of it lands among the new run's
records, while what it wrote before stays. Before, the door's renewer only logged an ERROR and
the run went on writing its events, tool results and context lines among the new holder's
(the attack report's F4, there with the process stopped by SIGSTOP; here its loop is blocked
by a summary model that makes a sync call, as a laptop's sleep or a stopped process would)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from frameworks import require_framework

require_framework("smolagents", "smolagents")

import pytest  # noqa: E402
from smolagents import Tool  # noqa: E402
from smolagents_scripted import Scripted, agent_with, answer, call  # noqa: E402

import ctxoffload.workspace._lease as lease_module  # noqa: E402
from ctxoffload import (  # noqa: E402
    ContextConfig,
    ScriptedModel,
    SessionBusyError,
    SqlWorkspace,
)
from ctxoffload.integrations.smolagents import OffloadingStepCallbacks  # noqa: E402
from helpers import SUMMARY  # noqa: E402

TTL = 0.4
"""The lease's time to live here: renewed every third of it while the door's loop runs."""

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)


class Fetch(Tool):  # type: ignore[misc]
    """Returns `{tag}-output-{n}` and a long tail; at call `wait_at`, says so (`entered`) and
    waits for `gate` (a run in the middle of a tool call)."""

    name = "fetch"
    description = "Fetch the next output."
    inputs: ClassVar[dict[str, Any]] = {}
    output_type = "string"

    def __init__(self, tag: str, wait_at: int = 0) -> None:
        super().__init__()
        self.tag, self.wait_at, self.calls = tag, wait_at, 0
        self.entered, self.gate = threading.Event(), threading.Event()

    def forward(self) -> str:
        self.calls += 1
        if self.calls == self.wait_at:
            self.entered.set()
            self.gate.wait(60)
        return f"{self.tag}-output-{self.calls} " + "payload " * 600


def test_a_run_whose_lease_was_taken_over_stops_at_its_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease_module, "DEFAULT_LEASE_TTL", TTL)
    url = f"sqlite:///{tmp_path / 'ws.db'}"
    b_fetch = Fetch("B", wait_at=2)
    b_outcome: list[object] = []

    def run_b() -> None:
        offload = OffloadingStepCallbacks(SqlWorkspace(url), config=CONFIG, session_id="s")
        calls = [call("fetch", {}, f"B_c{i}") for i in range(3)]
        agent = agent_with(Scripted([*calls, answer("B done")]), offload, b_fetch)
        b_outcome.append(agent.run("B's task"))

    b_runner = threading.Thread(target=run_b)

    def summarise_blocking(messages: Any) -> Any:
        # A sync call on the door's event loop: A's lease lapses unrenewed meanwhile, and B
        # takes the session over and is in the middle of its run when A goes on.
        if not b_runner.is_alive() and not b_outcome:
            time.sleep(TTL * 1.5)
            b_runner.start()
            assert b_fetch.entered.wait(60)
        return SUMMARY

    offload = OffloadingStepCallbacks(
        SqlWorkspace(url),
        config=CONFIG,
        session_id="s",
        summary_model=ScriptedModel(default=summarise_blocking),
    )
    calls = [call("fetch", {}, f"A_c{i}") for i in range(30)]
    agent = agent_with(Scripted([*calls, answer("A done")]), offload, Fetch("A"), max_steps=40)
    try:
        with pytest.raises(SessionBusyError, match="was not written") as refused:
            agent.run("A's task")
        assert "holds it now" in str(refused.value) and refused.value.holder
    finally:
        b_fetch.gate.set()
        if b_runner.is_alive() or b_outcome:
            b_runner.join(60)
    assert b_runner.ident is not None, "A's run was never compacted: no summary was asked"
    assert b_outcome == ["B done"]

    async def events() -> list[dict[str, Any]]:
        return await SqlWorkspace(url).read_events("s")

    record = asyncio.run(events())
    doors = [n for n, event in enumerate(record) if event["kind"] == "door"]
    assert len(doors) == 2  # A's run, then B's
    a_before = [e for e in record[: doors[1]] if "A_c" in json.dumps(e)]
    a_after = [e for e in record[doors[1] :] if "A_c" in json.dumps(e)]
    assert a_before, "what A wrote before the lapse stays"
    assert a_after == [], "A wrote after B took the session over"
    files = asyncio.run(SqlWorkspace(url).list_files("s"))
    assert any("tool_result-A_c0" in f for f in files)
    assert any("tool_result-B_c" in f for f in files)

"""`HostRuns`: one live run per conversation for a door whose host may never say a run ended.
A call in flight keeps a run live, whether the host wraps the call (`active`) or reports its
start and end as a pair (`enter` / `leave`, ADK's callbacks); a run whose host object
(`owner`) is gone is over, whatever it left in flight."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace, SessionBusyError
from ctxoffload._doors.doors import DOORS
from ctxoffload._doors.runs import HostRuns

DOOR = DOORS["google-adk"]


def runs_on(folder: Path) -> HostRuns:
    return HostRuns(LocalWorkspace(folder), DOOR, grace=0.2)


def test_a_call_entered_and_not_left_keeps_its_run_live(tmp_path: Path) -> None:
    runs = runs_on(tmp_path / "ws")
    runs.begin("s", "run-1")
    runs.enter("s", "run-1", ("tool", "call_1"))
    with pytest.raises(SessionBusyError, match="another session"):
        runs.begin("s", "run-2")
    runs.leave("s", "run-1", ("tool", "call_1"))
    runs.begin("s", "run-2")  # idle for the grace: taken for gone


def test_leaving_a_call_twice_or_one_never_entered_changes_nothing(tmp_path: Path) -> None:
    runs = runs_on(tmp_path / "ws")
    runs.begin("s", "run-1")
    runs.enter("s", "run-1", "model")
    runs.enter("s", "run-1", "model")  # a streamed response reports one call once
    runs.leave("s", "run-1", "never entered")
    with pytest.raises(SessionBusyError):
        runs.begin("s", "run-2")
    runs.leave("s", "run-1", "model")
    runs.leave("s", "run-1", "model")
    runs.begin("s", "run-2")


def test_a_run_whose_host_object_is_gone_is_over_with_calls_left_in_flight(
    tmp_path: Path,
) -> None:
    class Invocation:
        """Stands for the host's context of a run (ADK's InvocationContext)."""

    runs = runs_on(tmp_path / "ws")
    invocation = Invocation()
    runs.begin("s", "run-1", owner=invocation)
    runs.enter("s", "run-1", "model")  # cancelled mid-call: the host never reports its end
    with pytest.raises(SessionBusyError):
        runs.begin("s", "run-2")
    del invocation
    gc.collect()
    runs.begin("s", "run-2")

"""`HostRuns`: one live run per conversation for a door whose host may never say a run ended.
A call in flight keeps a run live, whether the host wraps the call (`active`) or reports its
start and end as a pair (`enter` / `leave`, ADK's callbacks); a run whose host object
(`owner`) is gone is over, whatever it left in flight."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from ctxoffload import InMemoryWorkspace, LocalWorkspace, SessionBusyError
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


@pytest.mark.parametrize("store", ["folder", "memory"])
def test_a_lease_let_go_with_its_run_but_still_referenced_is_released_for_the_next_run(
    tmp_path: Path, store: str
) -> None:
    """The host drops a run's object; the collector lets go of the run's lease unreleased,
    counting on the lease object being collected with it (its folder lock closes with its
    descriptor). When something still references that object (CI met it: the OpenAI Agents
    SDK's next `Runner.run` of the session refused as busy by the run just over, one time in
    ten), the next run of the session releases it rather than being refused by a run gone."""

    class Run:
        """Stands for the host's object of a run (the SDK's record of a `Runner.run`)."""

    workspace = LocalWorkspace(tmp_path / "ws") if store == "folder" else InMemoryWorkspace()
    runs = HostRuns(workspace, DOOR, grace=0.2)
    first = Run()
    runs.begin("s", "run-1", owner=first)
    still = runs._runs["s"].lease  # what the collector cannot see: a reference it left
    assert still is not None and still.held
    del first
    gc.collect()
    second = Run()
    runs.begin("s", "run-2", owner=second)  # not refused by the run gone
    assert not still.held
    assert runs.holds("s")
    with pytest.raises(SessionBusyError):  # the new run's lease is held, as ever
        HostRuns(workspace, DOOR, grace=0.2).begin("s", "run-3")


def test_the_sessions_announced_are_bounded_and_a_forgotten_one_is_announced_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that opens a session per run must not grow a set without end: the `door`
    events written are remembered for the most recent sessions only, and a session forgotten,
    then back, gets one more `door` event (nothing else changes, nothing is lost)."""
    import asyncio

    from ctxoffload._doors import runs as runs_module

    monkeypatch.setattr(runs_module, "ANNOUNCED_KEPT", 3)
    workspace = LocalWorkspace(tmp_path / "ws")
    runs = HostRuns(workspace, DOOR, grace=0.2)

    def doors(session: str) -> int:
        events = asyncio.run(workspace.read_events(session))
        return sum(event["kind"] == "door" for event in events)

    for number in range(6):
        runs.begin(f"s{number}", "run-1")
        runs.end(f"s{number}", "run-1")
    assert len(runs._announced) == 3
    assert [doors(f"s{number}") for number in range(6)] == [1] * 6
    runs.begin("s5", "run-2")  # remembered: no second event
    runs.end("s5", "run-2")
    runs.begin("s0", "run-2")  # forgotten: announced again
    runs.end("s0", "run-2")
    assert (doors("s5"), doors("s0")) == (1, 2)
    assert list(runs._announced) == ["s4", "s5", "s0"]


def test_past_the_sessions_kept_the_state_used_least_recently_and_idle_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A door's state per conversation (a projector, the history read) is bounded for every
    door in one place: past `SESSIONS_KEPT`, the least recently used entries whose session no
    run writes are forgotten, and a run going on keeps its state however old it is."""
    import collections

    from ctxoffload._doors import runs as runs_module

    monkeypatch.setattr(runs_module, "SESSIONS_KEPT", 2)
    runs = runs_on(tmp_path / "ws")
    runs.begin("s0", "run-1")
    kept = collections.OrderedDict((f"s{number}", f"s{number}") for number in range(4))
    assert runs.forget_idle(kept, str) == ["s1"]
    assert list(kept) == ["s0", "s2", "s3"]  # s0's run is going on
    runs.end("s0", "run-1")
    assert runs.forget_idle(kept, str) == ["s0"]
    assert runs.forget_idle(kept, str) == []


def test_each_run_that_gives_its_session_up_is_said_to_the_door(tmp_path: Path) -> None:
    """`at_run_end` hears of every run that gave its session up here (ended, taken for gone
    by the next run, idle past `release_idle`), so a door lets go of what only that run
    needed; never of a run still going."""

    ended: list[str] = []
    runs = HostRuns(LocalWorkspace(tmp_path / "ws"), DOOR, grace=0.2, at_run_end=ended.append)
    runs.begin("s", "run-1")
    runs.end("s", "run-1")
    assert ended == ["s"]
    runs.begin("s", "run-2")
    runs.begin("s", "run-3")  # run-2 idle for the grace: taken for gone
    assert ended == ["s", "s"]
    runs.end("s", "run-2")  # (no longer its run: nothing)
    assert ended == ["s", "s"]
    idle = HostRuns(
        LocalWorkspace(tmp_path / "ws"), DOOR, release_idle=0.1, at_run_end=ended.append
    )
    with idle.calling("t", "run-1"):
        time.sleep(0.3)  # a call in flight: the run is going
    assert ended == ["s", "s"]
    deadline = time.monotonic() + 5
    while ended == ["s", "s"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ended == ["s", "s", "t"]


def test_a_run_whose_host_object_is_gone_is_said_to_the_door_soon_after(
    tmp_path: Path,
) -> None:
    """A run the host cancelled ends when its object is collected (`owner`), where nothing may
    wait: the door hears of it soon after, on the runs' own loop, not at the next run this
    object begins or ends (which may never come: a door object per conversation)."""

    class Invocation:
        """Stands for the host's context of a run (ADK's InvocationContext)."""

    ended: list[str] = []
    runs = HostRuns(LocalWorkspace(tmp_path / "ws"), DOOR, grace=0.2, at_run_end=ended.append)
    invocation = Invocation()
    runs.begin("s", "run-1", owner=invocation)
    del invocation
    gc.collect()
    deadline = time.monotonic() + 60  # (a bound for a loaded machine, not a speed check)
    while not ended and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ended == ["s"]
    runs.begin("other", "run-2")
    assert ended == ["s"]  # said once


class Held:
    """A door's state for one conversation: its session and how often it let go of a run's
    outputs."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.released = 0

    def release(self) -> None:
        self.released += 1


def test_kept_state_is_made_once_released_at_each_run_end_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Kept` is the one home of a door's state per conversation between runs: made when
    first needed, the same object after, released (`Projector.release`: the whole texts of
    the outputs the run cut) whenever a run of its session gives it up, and no other
    session's; past `SESSIONS_KEPT`, the idle ones used least recently are forgotten. Before,
    each projecting door kept its own table and its own `at_run_end`, and the doors that
    kept a projector otherwise (OpenAI Agents' named filter) released nothing."""
    from ctxoffload._doors import runs as runs_module

    monkeypatch.setattr(runs_module, "SESSIONS_KEPT", 2)
    runs = runs_on(tmp_path / "ws")
    kept = runs.keep(lambda held: held.session, Held.release)
    made: list[str] = []

    def make(session: str) -> Held:
        made.append(session)
        return Held(session)

    a, forgotten = kept.get_or_make("a", lambda: make("a"))
    assert forgotten == [] and kept.get_or_make("a", lambda: make("a"))[0] is a
    assert made == ["a"]
    b, _ = kept.get_or_make("b", lambda: make("b"))
    runs.begin("a", "run-1")
    runs.begin("b", "run-2")
    runs.end("a", "run-1")
    assert (a.released, b.released) == (1, 0)  # b's run goes on
    with runs.calling("b", "run-2"):
        pass
    runs.end("b", "run-2")
    assert (a.released, b.released) == (1, 1)
    # Not usable (a new window): made anew, in its place.
    again, _ = kept.get_or_make("a", lambda: make("a"), usable=lambda held: False)
    assert again is not a and kept.get("a") is again
    _, forgotten = kept.get_or_make("c", lambda: make("c"))
    assert [held.session for held in forgotten] == ["b"]  # the least recently used
    assert "b" not in kept and len(kept) == 2

"""`LeftOut`, the door core's one way to say a door was left out of a run its tools reached:
once per door object, whatever the threads, naming the step that plugs the door in."""

from __future__ import annotations

import logging
import threading

import pytest

from ctxoffload._doors.doors import DOORS
from ctxoffload._doors.unplugged import LeftOut  # the private unit under test


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ctxoffload"]


def test_a_run_the_door_is_in_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    left_out = LeftOut(DOORS["crewai"])
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        for _ in range(3):
            left_out.check(True)
    assert said(caplog) == []


def test_runs_the_door_is_out_of_are_said_once_whatever_the_threads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    left_out = LeftOut(DOORS["google-adk"])
    start = threading.Barrier(8)

    def check() -> None:
        start.wait()
        for _ in range(50):
            left_out.check(False)

    with caplog.at_level(logging.WARNING, "ctxoffload"):
        threads = [threading.Thread(target=check) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    (warning,) = said(caplog)
    assert warning == (
        "ContextOffloadPlugin: its tools are in a run of Google ADK it is not plugged into, so "
        "nothing of that run is stored and each tool result stays whole in the context: give "
        "the runner the plugin itself: App(..., plugins=[offload]) or "
        "Runner(..., plugins=[offload])"
    )

"""A lease in a bucket expires on the store's clock alone: a taker whose clock is ahead, or a
holder whose clock is behind, never makes a live lease look expired."""

from __future__ import annotations

import json
import signal
import time

import pytest

from helpers import lease_worker_result, start_lease_worker, wait_held
from s3_server import S3Server

# Two minutes: the skew of the issue (a machine whose clock is ahead).
SKEW = 120.0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("holder_skew", "taker_skew"),
    [(0.0, SKEW), (-SKEW, 0.0)],
    ids=["taker ahead", "holder behind"],
)
def test_a_live_renewed_lease_is_never_taken_whatever_the_clocks_say(
    s3: S3Server, holder_skew: float, taker_skew: float
) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    holder = start_lease_worker(
        "hold", url, "s", "6", env={**env, "CTXOFFLOAD_TEST_CLOCK_SKEW": str(holder_skew)}
    )
    try:
        wait_held(holder)
        time.sleep(2.5)  # a renewal has happened (every ttl/3)
        taker = start_lease_worker(
            "take", url, "s", env={**env, "CTXOFFLOAD_TEST_CLOCK_SKEW": str(taker_skew)}
        )
        outcome = lease_worker_result(taker)
        assert outcome["outcome"] == "busy", outcome
        assert "agent 'holder'" in outcome["message"]
        assert "by the store's clock" in outcome["message"]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()


@pytest.mark.slow
def test_a_dead_holders_lease_is_taken_by_a_taker_whose_clock_is_behind(s3: S3Server) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    holder = start_lease_worker("hold", url, "s", "2", env=env)
    wait_held(holder)
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    # Counted, not timed: the dead lease lapses on the store's clock after its ttl, whatever
    # the taker's clock says; the deadline is a safety net.
    deadline = time.monotonic() + 120
    while True:
        taker = start_lease_worker(
            "take", url, "s", env={**env, "CTXOFFLOAD_TEST_CLOCK_SKEW": str(-SKEW)}
        )
        if lease_worker_result(taker)["outcome"] == "ok":
            break
        assert time.monotonic() < deadline, "the dead holder's lease never expired"
        time.sleep(1.0)

"""A process that writes one session, for the lease tests: run as
`python lease_worker.py MODE WORKDIR_OR_URL SESSION [IF_BUSY] [START_AT]`.

Modes:
- `agent`: an `Agent` with `if_busy` (raise or fork) answers one request whose tool sleeps
  one second (so the two racers overlap); prints one JSON line: `{"outcome": "ok",
  "session": ...}` or `{"outcome": "busy", "holder": ...}`.
- `hold`: takes the session's lease, prints `{"held": true}`, then sleeps until killed.
- `take`: tries once to take the session's lease; prints `{"outcome": "ok"}` or
  `{"outcome": "busy", "message": ...}`.

`START_AT` (a time.time() value, or `barrier=DIR/N`: see `start`) makes racers start
together. For a bucket, the S3
endpoint and keys come from the environment (`CTXOFFLOAD_TEST_S3`, a JSON object of
`ObjectStoreWorkspace` keyword arguments). `CTXOFFLOAD_TEST_CLOCK_SKEW` (seconds) puts this
process's `time.time` that far ahead (or behind, when negative): a machine whose clock is
wrong.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time


def workspace(where: str) -> object:
    if where.startswith("s3://"):
        from ctxoffload import ObjectStoreWorkspace

        return ObjectStoreWorkspace(where, **json.loads(os.environ["CTXOFFLOAD_TEST_S3"]))
    if where.startswith(("sqlite://", "postgresql://")):
        from ctxoffload import SqlWorkspace

        return SqlWorkspace(where)
    from ctxoffload import LocalWorkspace

    return LocalWorkspace(where)


async def agent(where: str, session: str, if_busy: str) -> None:
    from ctxoffload import Agent, Msg, ScriptedModel, SessionBusyError, ToolCallBlock

    async def slow_step(seconds: float) -> str:
        """Wait, holding the session.

        Args:
            seconds: how long.
        """
        await asyncio.sleep(seconds)
        return f"waited {seconds} s in {os.getpid()}"

    call = Msg(
        role="assistant",
        content=[ToolCallBlock(id=f"wait-{os.getpid()}", name="slow_step", input={"seconds": 3})],
    )
    bot = Agent(
        name=f"racer-{os.getpid()}",
        model=ScriptedModel([call, f"done by {os.getpid()}"], context_window=32_000),
        tools=[slow_step],
        offloader=workspace(where),  # type: ignore[arg-type]
        session_id=session,
        if_busy=if_busy,
    )
    try:
        async with bot:
            await bot.reply(f"request from {os.getpid()}")
    except SessionBusyError as busy:
        print(json.dumps({"outcome": "busy", "holder": busy.holder, "message": str(busy)}))
        return
    print(json.dumps({"outcome": "ok", "session": bot.session_id, "pid": os.getpid()}))


async def hold(where: str, session: str, ttl: float | None) -> None:
    ws = workspace(where)
    lease = await ws.acquire_lease(session, agent="holder", ttl=ttl)  # type: ignore[attr-defined]
    print(json.dumps({"held": True, "token": lease.holder["token"]}), flush=True)
    await asyncio.sleep(3600)


async def take(where: str, session: str) -> None:
    from ctxoffload import SessionBusyError

    ws = workspace(where)
    try:
        lease = await ws.acquire_lease(session, agent="taker")  # type: ignore[attr-defined]
    except SessionBusyError as busy:
        print(json.dumps({"outcome": "busy", "message": str(busy)}))
        return
    await lease.release()
    print(json.dumps({"outcome": "ok"}))


def skew_clock() -> None:
    skew = float(os.environ.get("CTXOFFLOAD_TEST_CLOCK_SKEW", "0"))
    if skew:
        real = time.time
        time.time = lambda: real() + skew


def start(when: str) -> None:
    """Wait for the start: a time.time() value, or `barrier=DIR/N`: the package imported
    first, then a file of this process in DIR, then wait until N racers have one there (so
    a racer slow to start on a loaded machine still races: no fixed head start to miss)."""
    if not when.startswith("barrier="):
        time.sleep(max(0.0, float(when) - time.time()))
        return
    import ctxoffload.agent  # noqa: F401  (the slow part, before the start line)

    folder, count = when.removeprefix("barrier=").rsplit("/", 1)
    with open(os.path.join(folder, f"{os.getpid()}.ready"), "w"):
        pass
    while len([n for n in os.listdir(folder) if n.endswith(".ready")]) < int(count):
        time.sleep(0.005)


def main() -> None:
    skew_clock()
    mode, where, session = sys.argv[1:4]
    extra = sys.argv[4] if len(sys.argv) > 4 else "raise"
    if len(sys.argv) > 5:
        start(sys.argv[5])
    if mode == "agent":
        asyncio.run(agent(where, session, extra))
    elif mode == "take":
        asyncio.run(take(where, session))
    else:
        asyncio.run(hold(where, session, float(extra) if extra != "raise" else None))


if __name__ == "__main__":
    main()

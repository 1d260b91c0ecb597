"""How events-24678e9.jsonl was made: run by the ctxoffload of commit 24678e9 (before event
records existed), so that tests/_disk/test_event_records.py reads lines an older release
really wrote.

    git -C REPO archive 24678e9 src | tar -x -C /tmp/old24678e9
    PYTHONPATH=/tmp/old24678e9/src python make_events_24678e9.py /tmp/oldrun > events-24678e9.jsonl

writes two sessions (`old`: an agent whose tools are truncated, a failing tool, compressions,
a pin and an unpin, a compaction, a data file; `forked`: a fork of it at step 2); the fixture
holds the shortest line of each kind of each session, as written, in their order.
"""

import asyncio
import json
import shutil
import sys

from ctxoffload import Agent, ContextConfig, LocalWorkspace, Msg, ScriptedModel, ToolCallBlock


def fetch_log(job: str) -> str:
    """Fetch the latest log of a batch job.

    Args:
        job: the job's name.
    """
    lines = [f"{i:05} INFO exported {job}-{i}" for i in range(400)]
    return "\n".join([*lines, "00400 ERROR disk quota exceeded"])


def explode(reason: str) -> str:
    """Fail.

    Args:
        reason: why.
    """
    raise RuntimeError(f"exploded: {reason}")


async def main(where: str) -> None:
    shutil.rmtree(where, ignore_errors=True)
    ws = LocalWorkspace(where)
    steps = [
        Msg(
            role="assistant",
            content=[ToolCallBlock(id=f"c{i}", name="fetch_log", input={"job": f"j{i}"})],
        )
        for i in range(12)
    ]
    steps.insert(
        1,
        Msg(
            role="assistant",
            content=[ToolCallBlock(id="x1", name="explode", input={"reason": "x"})],
        ),
    )
    model = ScriptedModel(
        [*steps, "The job failed: disk quota exceeded.", "ok"], context_window=3000
    )
    agent = Agent(
        name="analyst",
        system_prompt="Investigate failures.",
        model=model,
        tools=[fetch_log, explode],
        offloader=ws,
        session_id="old",
        context_config=ContextConfig(tool_result_limit=300),
    )
    await agent.reply("Why did the nightly job fail?")
    first = next(m for m in reversed(agent.messages) if m.role == "assistant")
    await agent.pin(first.id)
    await agent.unpin(first.id)
    await agent.reply("And now?")
    await agent.compact("keep the errors")
    await agent.aclose()
    await ws.fork_session("old", "forked", step=2)
    await ws.record_event("old", "data", reference="data/abc.png", bytes=12, media_type="image/png")


def shortest_of_each_kind(where: str) -> bytes:
    """The shortest line of each kind of each session, as written, in their order."""
    chosen: list[bytes] = []
    for session in ("old", "forked"):
        with open(f"{where}/sessions/{session}/events.jsonl", "rb") as file:
            lines = file.read().split(b"\n")[:-1]
        best: dict[str, int] = {}
        for i, line in enumerate(lines):
            kind = json.loads(line)["kind"]
            if kind not in best or len(line) < len(lines[best[kind]]):
                best[kind] = i
        chosen += [lines[i] for i in sorted(best.values())]
    return b"\n".join(chosen) + b"\n"


asyncio.run(main(sys.argv[1]))
sys.stdout.buffer.write(shortest_of_each_kind(sys.argv[1]))

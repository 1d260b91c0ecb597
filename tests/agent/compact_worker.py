"""An agent mid-run in a process of its own, for the tests of compaction asked for from outside:
run as `python compact_worker.py WORKDIR SESSION GATE OUT [STEPS]`.

An `Agent` on a `LocalWorkspace` answers one request with a long script: it calls `probe`
STEPS times (12 by default), then `wait_for_gate`, which writes `GATE.entered` and waits until
the file GATE exists, so the agent holds the session mid-run while another process asks it to
compact; then it probes twice more and answers. Its summaries come from a `ScriptedModel` that
records what it was asked. At the end it writes OUT, a JSON object: the number of messages
of each model call, whether each call held a summary, the summary requests' text, and its
pid. Killed while waiting (the tests kill it to play a holder that dies), it writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


async def main(workdir: str, session: str, gate: str, out: str, steps: int) -> None:
    from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, get_token_counter
    from ctxoffload.compression import is_summary_message
    from helpers import SUMMARY, call, probe

    async def wait_for_gate(label: str) -> str:
        """Wait until the gate opens.

        Args:
            label: the gate's name.
        """
        Path(gate + ".entered").write_text(str(os.getpid()))
        while not os.path.exists(gate):
            await asyncio.sleep(0.02)
        return f"gate {label} opened; read /src/app/config.py and /src/app/main.py next"

    script = [
        *(call(f"c{i}", "probe", i=i) for i in range(steps)),
        call("gate", "wait_for_gate", label="g"),
        call("after1", "probe", i=100),
        call("after2", "probe", i=101),
        "done",
    ]
    model = ScriptedModel(script)
    summarizer = ScriptedModel(default=SUMMARY)
    agent = Agent(
        name="worker",
        model=model,
        offloader=LocalWorkspace(workdir),
        tools=[wait_for_gate, probe],
        session_id=session,
        context_config=ContextConfig(context_window=100_000),
        counter=get_token_counter(exact=False),
        summary_model=summarizer,
    )
    async with agent:
        await agent.reply("Open the gate, then probe.")
    report = {
        "pid": os.getpid(),
        "calls": [len(c) for c in model.calls],
        "summaries": [any(is_summary_message(m) for m in c) for c in model.calls],
        "summary_requests": ["\n".join(m.text for m in c) for c in summarizer.calls],
    }
    Path(out).write_text(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
    workdir, session, gate, out = sys.argv[1:5]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 12
    asyncio.run(main(workdir, session, gate, out, steps))

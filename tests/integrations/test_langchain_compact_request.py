"""`ctxoffload compact THREAD` on a LangChain agent's session: the middleware's projection
serves the request at the agent's next model call, under the real `create_agent`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from frameworks import context_ids, require_framework

require_framework("langchain", "langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_scripted import answers, converse, scripted  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from ctxoffload import ContextConfig, LocalWorkspace  # noqa: E402
from ctxoffload.integrations.langchain import ContextOffloadMiddleware  # noqa: E402

# A window far above the run: no compaction happens unless one is asked for.
WIDE = ContextConfig(context_window=200_000)


def events(folder: Path, session: str, kind: str) -> list[dict[str, Any]]:
    path = folder / "sessions" / session / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in records if e["kind"] == kind]


def test_a_compaction_asked_from_another_process_is_served_at_the_next_call(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ws"
    model = scripted(*answers(13))
    middleware = ContextOffloadMiddleware(LocalWorkspace(folder), config=WIDE, summary_model=False)
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    converse(agent, range(12), "support-7")
    assert len(model.seen[-1]) == 23  # every message sent, nothing compacted
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "compact",
            "support-7",
            "--workdir",
            str(folder),
            "--instructions",
            "keep the batch numbers",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "the host that projects it" in done.stdout
    [asked] = events(folder, "support-7", "compact_request")
    state = converse(agent, range(12, 13), "support-7")
    assert len(model.seen[-1]) < 10  # the model was sent a summary and the newest turns
    assert state["messages"][:-1] == model.seen[-1]  # ... which state keeps
    [answer] = events(folder, "support-7", "compact")
    assert answer["requests"] == [asked["request"]] and answer["changed"] is True
    assert answer["instructions"] == "keep the batch numbers"
    config = {"configurable": {"thread_id": "support-7"}}
    held = {m.id for s in agent.get_state_history(config) for m in s.values.get("messages", [])}
    left = held - {m.id for m in state["messages"]}
    assert len(left) >= answer["messages"] > 10
    assert left <= context_ids(folder, "support-7")

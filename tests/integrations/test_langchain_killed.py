"""A LangChain agent with the middleware killed with SIGKILL in the middle of a thread: what
left its checkpointed state is all in the workspace, and the thread goes on in a new process
(the dead run's lease taken over). The lease record and the records of model calls are
written without an fsync of their own (issue 84); what leaves the context never is."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from frameworks import require_framework

require_framework("langchain", "langchain")

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_scripted import agent_on, answers, converse, scripted  # noqa: E402

from ctxoffload import LocalWorkspace  # noqa: E402

KILLED_AT = 45
"""The turn whose model call kills the process: after two compactions of the long chat."""

CHILD = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    from pathlib import Path
    from langchain_scripted import ToolCallingFakeModel, agent_on, answers, converse
    from langgraph.checkpoint.sqlite import SqliteSaver

    class Killed(ToolCallingFakeModel):
        def _generate(self, messages, *args, **kwargs):
            if len(self.seen) == int(sys.argv[3]):
                print("killing", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return super()._generate(messages, *args, **kwargs)

    model = Killed(messages=iter(answers(100)))
    with sqlite3.connect(sys.argv[1], check_same_thread=False) as connection:
        agent = agent_on(Path(sys.argv[2]), model, SqliteSaver(connection), delta=True)
        converse(agent, range(100), "t")
    """
)


def test_a_killed_run_loses_nothing_that_left_its_state_and_the_thread_goes_on(
    tmp_path: Path,
) -> None:
    pytest.importorskip(
        "langgraph.checkpoint.sqlite",
        reason="no langgraph-checkpoint-sqlite: pip install 'langgraph-checkpoint-sqlite>=3.1,<4' "
        "(.ci/run installs it beside the langchain extra)",
    )
    from langgraph.checkpoint.sqlite import SqliteSaver

    db, folder = tmp_path / "checkpoints.sqlite", tmp_path / "ws"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), str(folder), str(KILLED_AT)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout == "killing\n"
    (session,) = (folder / "sessions").iterdir()
    # The dead run's lease record names it, unreleased: written, if not synced.
    assert '"released"' not in (session / "lease.json").read_text()
    with sqlite3.connect(db, check_same_thread=False) as connection:
        saver = SqliteSaver(connection)
        agent = agent_on(folder, scripted(*answers(KILLED_AT + 1)[KILLED_AT:]), saver, delta=True)
        config = {"configurable": {"thread_id": "t"}}
        kept = {str(m.content) for m in agent.get_state(config).values["messages"]}
        rows = asyncio.run(LocalWorkspace(folder).read_context(session.name))
        stored = [json.dumps(row) for row in rows]
        # Every question and answer of the turns the checkpoint holds is in state, or in
        # context.jsonl (committed, as a reader sees it) if it left state.
        said = [f"Question {turn}: " for turn in range(KILLED_AT)] + [
            f"Answer {turn}: " for turn in range(KILLED_AT)
        ]
        left = [s for s in said if not any(text.startswith(s) for text in kept)]
        assert left, "nothing left the state: the thread was not compacted before the kill"
        assert all(any(s in line for line in stored) for s in left)
        # The thread goes on where its checkpoint is, in this process: the lease is taken.
        state = converse(agent, range(KILLED_AT, KILLED_AT + 1), "t")
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and last.content.startswith(f"Answer {KILLED_AT}: ")
    assert any(
        isinstance(m, HumanMessage) and str(m.content).startswith(f"Question {KILLED_AT}: ")
        for m in state["messages"]
    )

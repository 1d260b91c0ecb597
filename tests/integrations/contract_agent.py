"""The contract's driver for ctxoffload's own `Agent` (no host package)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, answer, call_id, run_held_in_its_tool

from ctxoffload import (
    Agent,
    ContextConfig,
    Msg,
    ScriptedModel,
    ToolCallBlock,
    get_token_counter,
)
from ctxoffload.agent import workspace_tools
from ctxoffload.readback import HasWorkdir
from ctxoffload.text import message_text

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)


class _Made:
    """The Agent door of a workspace: an `Agent` per conversation, built when it speaks."""

    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace
        self.gate: threading.Event | None = None  # a live run's tool waits for it
        self.entered = threading.Event()  # set when a run is inside its tool


class AgentDriver(DoorDriver):
    door = "agent"
    reasons: ClassVar[dict[str, str]] = {
        "identity": "the Agent is ctxoffload itself: its session_id names the session folder "
        "as given (a plain name, else InvalidSessionId); a host's id is mapped by the caller "
        "with session_id_for",
        "tokens, not characters": "this driver's Agent counts with the characters heuristic "
        "(get_token_counter(exact=False)), by which an output shorter than the limit fits; "
        "tests/test_tokens.py holds every counter's size check (fits_by_size) to its count",
    }

    def make(self, workspace: Any) -> _Made:
        # The checks run when an Agent is built: build one now, as a user's first line does.
        Agent(model=ScriptedModel([]), offloader=workspace, context_config=CONFIG)
        return _Made(workspace)

    def make_summarizing(self, workspace: Any, summary_model: object) -> Agent:
        return Agent(
            model=ScriptedModel([]),
            offloader=workspace,
            context_config=CONFIG,
            summary_model=summary_model,  # type: ignore[arg-type]
        )

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        script: list[Any] = []
        outputs: list[str] = []
        for turn in turns:
            if turn.tool_output is not None:
                call = ToolCallBlock(id=call_id(turn), name="fetch", input=turn.arguments)
                script.append(Msg(role="assistant", content=[call]))
                outputs.append(turn.tool_output)
            script.append(answer(turn))
        model = ScriptedModel(script, context_window=CONFIG.context_window)
        gate = made.gate

        def fetch(note: str = "") -> str:
            """Fetch the next output (`note`: what the caller says of it)."""
            if gate is not None:
                made.entered.set()
                gate.wait(30)
            return outputs.pop(0)

        # On a folder, the file tools as a user registers them; on a store with none the
        # Agent registers the retrieval tool itself.
        readers = workspace_tools(made.workspace) if isinstance(made.workspace, HasWorkdir) else []
        async with Agent(
            model=model,
            tools=[fetch, *readers],
            offloader=made.workspace,
            context_config=CONFIG,
            session_id=conversation,
            counter=get_token_counter(exact=False),
        ) as agent:
            for turn in turns:
                # An id a host would give the request, the same in every run of it: a long
                # request is stored under its message's id, which a resumed run and an
                # unbroken one then name alike (a random id would differ in each).
                digest = hashlib.sha256(turn.user.encode()).hexdigest()[:32]
                await agent.reply(Msg(role="user", content=turn.user, id=digest))
            kept = [r.output for m in agent.messages for r in m.tool_results]
            return Outcome(
                session=agent.session_id,
                sent=[[message_text(m) for m in call] for call in model.calls],
                kept=str(kept[-1]) if kept else "",
                tools=list(agent.tools),
            )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, _Made(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        grep = next(t for t in workspace_tools(made.workspace) if t.__name__ == "Grep")
        return str(asyncio.run(grep(pattern=pattern)))


DRIVER = AgentDriver()

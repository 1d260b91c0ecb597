"""The contract's drivers for Strands: `OffloadingConversationManager` (door "strands") and
`WorkspaceStorage` under Strands' own `ContextOffloader` (door "strands-storage"), each in a
real Strands `Agent` with a scripted model (offline).

A Strands conversation is an `Agent` (its `messages`), named by its session manager's
`session_id`: here Strands' `RepositorySessionManager` on a repository kept in a dict, the way
a user plugs in a store of their own (Strands' file store refuses an id holding a '/').
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from contract import DoorDriver, Outcome, Turn, run_held_in_its_tool, sessions_of

from ctxoffload._disk.ids import session_id_for
from ctxoffload._doors.doors import DOORS


class _Repository:
    """Strands' `SessionRepository` on dicts (built on first use: it subclasses Strands')."""

    @staticmethod
    def make() -> Any:
        from strands.session.session_repository import SessionRepository

        class DictRepository(SessionRepository):  # type: ignore[misc]
            def __init__(self) -> None:
                self.sessions: dict[str, Any] = {}
                self.agents: dict[tuple[str, str], Any] = {}
                self.messages: dict[tuple[str, str], dict[int, Any]] = {}

            def create_session(self, session: Any, **kwargs: Any) -> Any:
                self.sessions[session.session_id] = session
                return session

            def read_session(self, session_id: str, **kwargs: Any) -> Any:
                return self.sessions.get(session_id)

            def create_agent(self, session_id: str, session_agent: Any, **kwargs: Any) -> None:
                self.agents[session_id, session_agent.agent_id] = session_agent

            def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> Any:
                return self.agents.get((session_id, agent_id))

            def update_agent(self, session_id: str, session_agent: Any, **kwargs: Any) -> None:
                self.agents[session_id, session_agent.agent_id] = session_agent

            def create_message(
                self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any
            ) -> None:
                kept = self.messages.setdefault((session_id, agent_id), {})
                kept[session_message.message_id] = session_message

            def read_message(
                self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
            ) -> Any:
                return self.messages.get((session_id, agent_id), {}).get(message_id)

            def update_message(
                self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any
            ) -> None:
                self.create_message(session_id, agent_id, session_message)

            def list_messages(
                self,
                session_id: str,
                agent_id: str,
                limit: int | None = None,
                offset: int = 0,
                **kwargs: Any,
            ) -> list[Any]:
                kept = self.messages.get((session_id, agent_id), {})
                listed = [kept[k] for k in sorted(kept)][offset:]
                return listed[:limit] if limit is not None else listed

        return DictRepository()


def _model(outputs: list[str], turns: int, inputs: list[dict[str, Any]] | None = None) -> Any:
    """A scripted Strands model: each user turn with an output pending calls `fetch` once
    (with the next of `inputs` as its input, else none), then answers; it records the text of
    every request."""
    from strands_scripted import ScriptedModelBase

    class Scripted(ScriptedModelBase):  # type: ignore[misc]
        def __init__(self) -> None:
            self.seen: list[list[str]] = []
            self.calls = 0

        async def stream(
            self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any
        ) -> AsyncIterator[Any]:
            self.seen.append([json.dumps(m, default=repr) for m in messages])
            last = messages[-1]["content"] if messages else []
            answered = any("toolResult" in block for block in last)
            if outputs and not answered:
                self.calls += 1
                use = {"toolUse": {"toolUseId": f"call_{self.calls}", "name": "fetch"}}
                given = json.dumps(inputs.pop(0) if inputs else {})
                events: list[dict[str, Any]] = [
                    {"messageStart": {"role": "assistant"}},
                    {"contentBlockStart": {"start": use}},
                    {"contentBlockDelta": {"delta": {"toolUse": {"input": given}}}},
                    {"contentBlockStop": {}},
                    {"messageStop": {"stopReason": "tool_use"}},
                ]
            else:
                events = [
                    {"messageStart": {"role": "assistant"}},
                    {"contentBlockDelta": {"delta": {"text": f"answer {len(self.seen)}"}}},
                    {"contentBlockStop": {}},
                    {"messageStop": {"stopReason": "end_turn"}},
                ]
            for event in events:
                yield event

    return Scripted()


def _fetch(outputs: list[str], gate: threading.Event | None, entered: threading.Event) -> Any:
    from strands import tool

    @tool  # type: ignore[untyped-decorator]
    def fetch(note: str = "") -> str:
        """Fetch the next output (`note`: what the caller says of it)."""
        if gate is not None:
            entered.set()
            gate.wait(60)
        return outputs.pop(0)

    return fetch


def _last_result(messages: list[dict[str, Any]]) -> str:
    """The text of the last tool result in a Strands history."""
    texts = [
        part.get("text", "")
        for message in messages
        for block in message["content"]
        if "toolResult" in block
        for part in block["toolResult"]["content"]
    ]
    return texts[-1] if texts else ""


class _Made:
    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace
        self.repository: Any = None
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class StrandsManagerDriver(DoorDriver):
    door = "strands"
    module = "strands"
    extra = "strands"
    reasons = {  # noqa: RUF012 - ClassVar in the base
        "stored once": "the manager moves old turns out of agent.messages; a big tool output "
        "is stored by Strands' own ContextOffloader through WorkspaceStorage (the "
        "strands-storage door keeps this promise)",
        "same tools": "it stores no tool output (see 'stored once'); ctxoffload's Read, Grep "
        "and Glob are Strands tools through strands.tool(reading_functions(...)), held to "
        "this promise by the strands-storage door",
    }
    gaps = {  # noqa: RUF012 - ClassVar in the base
        f"readers named on a {store}": "the manager gives the agent no read-back tools, so its "
        "summaries name none it has ('your file tools'): the user adds "
        "strands.tool(reading_functions(...)) themselves"
        for store in ("folder", "memory", "bucket", "sqlite")
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.strands import OffloadingConversationManager

        OffloadingConversationManager(workspace)  # checked here, as a user builds it
        return _Made(workspace)

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from strands import Agent
        from strands.session.repository_session_manager import RepositorySessionManager

        from ctxoffload.integrations.strands import OffloadingConversationManager

        outputs = [t.tool_output for t in turns if t.tool_output is not None]
        inputs = [t.arguments for t in turns if t.tool_output is not None]
        model = _model(outputs, len(turns), inputs)
        sessions: Any = None
        if conversation is not None:
            if made.repository is None:
                made.repository = _Repository.make()
            sessions = RepositorySessionManager(
                session_id=conversation, session_repository=made.repository
            )
        # One manager per agent, as Strands gives each agent its own conversation manager.
        manager = OffloadingConversationManager(made.workspace, window_size=4, per_turn=True)
        agent = Agent(
            name="contract",
            model=model,
            tools=[_fetch(outputs, made.gate, made.entered)],
            conversation_manager=manager,
            session_manager=sessions,
            callback_handler=None,
        )
        for turn in turns:
            agent(turn.user)
        session = manager.session_id
        assert session is not None
        if conversation is not None:
            assert session == session_id_for(conversation)
        return Outcome(
            session=session, sent=model.seen, kept=_last_result(agent.messages), tools=["fetch"]
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        return _grep(made.workspace, pattern)


def _grep(workspace: Any, pattern: str) -> str:
    """ctxoffload's Grep as a Strands tool, called the way Strands calls a tool directly."""
    from strands import Agent, tool

    from ctxoffload.integrations import reading_functions

    tools = [tool(f) for f in reading_functions(workspace, 20_000)]
    agent = Agent(model=_model([], 0), tools=tools, callback_handler=None)
    result = agent.tool.Grep(pattern=pattern, record_direct_tool_call=False)
    return "\n".join(part.get("text", "") for part in result["content"])


class StrandsStorageDriver(DoorDriver):
    door = "strands-storage"
    module = "strands"
    extra = "strands"
    reasons = {  # noqa: RUF012 - ClassVar in the base
        "identity": "Strands gives a storage no conversation: the storage is built with the "
        "session it writes (session_id=, a plain name), else a new one of its own",
        "no shared default": "a storage is one session (its session_id, else a new one per "
        "storage, never a shared name); Strands gives each agent's ContextOffloader the "
        "storage it is built with: give each agent its own",
        "one writer": DOORS["strands-storage"].one_writer or "",
        "tokens, not characters": "Strands' ContextOffloader decides which result it stores, "
        "by its own estimate (max_result_tokens); the storage stores what it is given",
        "call arguments": "Strands' ContextOffloader hands the storage tool results, not "
        "the calls the model wrote (the manager door holds what is sent)",
        "readers named": "Strands' ContextOffloader writes the notice of a result it stores, "
        "in its own words, naming its own retrieve_offloaded_content, which it gives the agent",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.strands import WorkspaceStorage

        made = _Made(workspace)
        made.repository = WorkspaceStorage(workspace)  # the storage, checked here
        return made

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from strands import Agent
        from strands.vended_plugins.context_offloader import ContextOffloader

        from ctxoffload.integrations.strands import WorkspaceStorage

        storage = WorkspaceStorage(made.workspace, session_id=conversation)
        outputs = [t.tool_output for t in turns if t.tool_output is not None]
        inputs = [t.arguments for t in turns if t.tool_output is not None]
        model = _model(outputs, len(turns), inputs)
        agent = Agent(
            model=model,
            tools=[_fetch(outputs, None, made.entered)],
            plugins=[
                ContextOffloader(storage=storage, max_result_tokens=1_000, preview_tokens=100)
            ],
            callback_handler=None,
        )
        before = sessions_of(made.workspace)
        for turn in turns:
            agent(turn.user)
        assert conversation is None or storage.session_id == conversation
        assert sessions_of(made.workspace) - before <= {storage.session_id}
        return Outcome(
            session=storage.session_id,
            sent=model.seen,
            kept=_last_result(agent.messages),
            tools=list(agent.tool_names),
        )

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        return _grep(made.workspace, pattern)


DRIVER = MANAGER = StrandsManagerDriver()
STORAGE = StrandsStorageDriver()

"""The contract's driver for Haystack's `Agent` with its `ToolResultOffloadHook` storing
through `WorkspaceResultStore` and its `CompactionHook` compacting through `WorkspaceCompactor`,
as the guide builds it (Haystack's own `MockChatGenerator`, offline).

A Haystack Agent names no conversation: the application keeps the messages and gives each
conversation its store (`session_id=` the conversation's name, a plain name); without one,
each store is a new session."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, scripted

from ctxoffload._doors.doors import DOORS

LIMIT = 1_200
"""Characters past which Haystack's hook offloads a result (about 300 tokens)."""

WINDOW = 2_000
"""The window Haystack's `CompactionHook` compacts within: a conversation of a dozen turns
passes its `compact_at`, as the other doors' conversations pass their triggers."""


class _Made:
    """The workspace, and per conversation its store and the messages the application kept."""

    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace
        self.conversations: dict[str, tuple[Any, list[Any]]] = {}


class HaystackDriver(DoorDriver):
    door = "haystack"
    module = "haystack"
    extra = "haystack"
    reasons: ClassVar[dict[str, str]] = {
        "identity": "a Haystack Agent names no conversation: the application gives each one "
        "a store built with its session_id (a plain name), per run through hook_context",
        "one writer": DOORS["haystack"].one_writer,
        "tokens, not characters": "Haystack's ToolResultOffloadHook decides which result it "
        "stores, by its own rule (OffloadOverChars here: characters); the store stores what it "
        "is given",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.haystack import WorkspaceResultStore

        WorkspaceResultStore(workspace)  # checked here, as a user builds it
        return _Made(workspace)

    def make_summarizing(self, workspace: Any, summary_model: object) -> Any:
        from ctxoffload.integrations.haystack import WorkspaceCompactor, WorkspaceResultStore

        return WorkspaceCompactor(WorkspaceResultStore(workspace), summary_model=summary_model)

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from haystack.dataclasses import ChatMessage
        from haystack.hooks.compaction import CompactionHook
        from haystack.hooks.tool_result_offloading import OffloadOverChars, ToolResultOffloadHook
        from haystack.utils.experimental import ExperimentalWarning
        from haystack_scripted import Scripted, agent_with, call, returning, say

        from ctxoffload.integrations.haystack import WorkspaceCompactor, WorkspaceResultStore

        replies, outputs = scripted(turns, call, say)
        known = made.conversations.get(conversation) if conversation is not None else None
        if known is None:
            store = WorkspaceResultStore(made.workspace, session_id=conversation)
            known = (store, [])
            if conversation is not None:
                made.conversations[conversation] = known
        store, history = known
        model = Scripted(replies)
        # Both hooks, as the guide (docs/guides/haystack.md) builds the agent: the
        # compactor is what cuts a call's long arguments (Haystack's hook, past its
        # compact_at, hands it the conversation before the model call).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)  # Haystack's CompactionHook
            compaction = CompactionHook(WorkspaceCompactor(store), context_window=WINDOW)
        hooks = {
            "after_tool": [ToolResultOffloadHook(store, {"*": OffloadOverChars(LIMIT)})],
            "before_llm": [compaction],
        }
        tools = [returning("fetch", outputs), *store.tools]
        agent = agent_with(model, tools, hooks)
        for turn in turns:
            out = agent.run([*history, ChatMessage.from_user(turn.user)])
            history[:] = out["messages"]
        results = [m for m in history if m.tool_call_result is not None]
        return Outcome(
            session=store.session_id,
            sent=[[text for _, text in sent] for sent in model.seen],
            kept=str(results[-1].tool_call_result.result) if results else "",
            tools=[tool.name for tool in tools],
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        raise NotImplementedError  # "one writer" is a reasoned skip
        yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        store, _ = made.conversations[conversation]
        (grep,) = [tool for tool in store.tools if tool.name == "Grep"]
        return str(grep.invoke(pattern=pattern))


DRIVER = HaystackDriver()

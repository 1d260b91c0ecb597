"""Haystack: `WorkspaceResultStore`, a `ToolResultStore` on a ctxoffload workspace, and
`WorkspaceCompactor`, a `Compactor` that keeps what it takes out.

Haystack's `ToolResultOffloadHook` and `ToolResultOffloadCompactor` write a tool result to a
store and put its reference in the conversation; with `WorkspaceResultStore` the result goes
whole to the session's `tool_result-<key>.txt` (bytes to data/), readable with `ctxoffload`
and with the store's `tools` (Read, Grep, Glob, `retrieve_offloaded_content` as Haystack
`Tool` objects). Haystack's `CompactionHook` with `WorkspaceCompactor(store)` appends the
messages it takes out to the session's context.jsonl before it puts one summary in their
place.

Example::

    from haystack.components.agents import Agent
    from haystack.hooks.compaction import CompactionHook
    from haystack.hooks.tool_result_offloading import OffloadOverChars, ToolResultOffloadHook
    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.haystack import WorkspaceCompactor, WorkspaceResultStore

    store = WorkspaceResultStore(LocalWorkspace("ws"), session_id="nightly")
    agent = Agent(
        chat_generator=generator,
        tools=[fetch_logs, *store.tools],
        hooks={
            "after_tool": [ToolResultOffloadHook(store, {"*": OffloadOverChars(12_000)})],
            "before_llm": [CompactionHook(WorkspaceCompactor(store), context_window=128_000)],
        },
    )

Importing this module does not import Haystack; each name does, on first use
(`pip install 'ctxoffload[haystack]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["WorkspaceCompactor", "WorkspaceResultStore"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # Each name needs Haystack (its Tool, its ChatMessage), so it is imported on first use of
    # the name, never at import.
    value: Any
    if name == "WorkspaceResultStore":
        from ._haystack_store import WorkspaceResultStore as value
    elif name == "WorkspaceCompactor":
        from ._haystack_compactor import WorkspaceCompactor as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

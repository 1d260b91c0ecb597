"""LangChain v1: `ContextOffloadMiddleware` for `langchain.agents.create_agent`,
`DeltaAgentState`, and the converters between LangChain messages and ctxoffload's.

The middleware stores a big tool result whole in the workspace before it enters LangGraph
state (so no checkpoint holds it), and sends each model call the projection of the history
(`ctxoffload.compression.Projector`): big results as head + notice, older turns as a summary
past the trigger, the same bytes on every call. State keeps what the model is sent, once
what left it is stored (`full_state=True`: every message). Its `tools` read offloaded
content back. `DeltaAgentState` checkpoints `messages` as deltas.

Example::

    from langchain.agents import create_agent
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.langchain import ContextOffloadMiddleware

    offload = ContextOffloadMiddleware(
        LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
    )
    agent = create_agent(model, tools=[fetch_logs, *offload.tools], middleware=[offload])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "nightly"}})

Importing this module does not import LangChain; each name does, on first use
(`pip install 'ctxoffload[langchain]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = [  # noqa: F822
    "ContextOffloadMiddleware",
    "DeltaAgentState",
    "from_langchain",
    "to_langchain",
]


def __getattr__(name: str) -> Any:
    # Each name needs LangChain (the middleware subclasses its AgentMiddleware), so it is
    # imported on first use of the name, never at import.
    value: Any
    if name == "ContextOffloadMiddleware":
        from ._langchain_middleware import ContextOffloadMiddleware as value
    elif name == "DeltaAgentState":
        from ._langchain_state import DeltaAgentState as value
    elif name == "from_langchain":
        from ._langchain_messages import from_langchain as value
    elif name == "to_langchain":
        from ._langchain_messages import to_langchain as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

"""pydantic-ai: the `ContextOffload` capability, and the converters between pydantic-ai's
`ModelMessage` objects and ctxoffload's messages.

The capability stores a big tool result whole in the workspace (the run's history keeps its
head and a notice), and sends each model request the projection of the history
(`ctxoffload.compression.Projector`): big results as head + notice, older turns as a summary
past the trigger, the same bytes on every request. Its toolset reads offloaded content back.

Example::

    from pydantic_ai import Agent
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.pydantic_ai import ContextOffload

    offload = ContextOffload(LocalWorkspace("ws"), config=ContextConfig(context_window=128_000))
    agent = Agent(model, tools=[fetch_logs], capabilities=[offload])
    agent.run_sync("check the nightly job", conversation_id="nightly")

Importing this module does not import pydantic-ai; each name does, on first use
(`pip install 'ctxoffload[pydantic-ai]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ContextOffload", "from_pydantic_ai", "to_pydantic_ai"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # Each name needs pydantic-ai (the capability subclasses its AbstractCapability), so it is
    # imported on first use of the name, never at import.
    value: Any
    if name == "ContextOffload":
        from ._pydantic_ai_capability import ContextOffload as value
    elif name == "from_pydantic_ai":
        from ._pydantic_ai_messages import from_pydantic_ai as value
    elif name == "to_pydantic_ai":
        from ._pydantic_ai_messages import to_pydantic_ai as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

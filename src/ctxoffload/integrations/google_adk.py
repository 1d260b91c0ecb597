"""Google ADK: `ContextOffloadPlugin`, an ADK plugin, and the converters between
`google.genai.types.Content` and ctxoffload's messages.

The plugin stores a big tool result whole in the workspace before it becomes an event of the
ADK session (the session keeps its head and a notice), and sends each model request the
projection of its contents (`ctxoffload.compression.Projector`): older turns as a summary past
the trigger, the same bytes on every request. Its `tools` read offloaded content back.

Example::

    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.google_adk import ContextOffloadPlugin

    offload = ContextOffloadPlugin(
        LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
    )
    agent = LlmAgent(name="ops", model="gemini-2.5-flash", tools=[fetch_logs, *offload.tools])
    runner = InMemoryRunner(agent=agent, app_name="ops", plugins=[offload])

Importing this module does not import ADK; each name does, on first use
(`pip install 'ctxoffload[google-adk]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ContextOffloadPlugin", "from_genai", "to_genai"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # Each name needs ADK (the plugin subclasses its BasePlugin; the converters make
    # google.genai types), so it is imported on first use of the name, never at import.
    value: Any
    if name == "ContextOffloadPlugin":
        from ._google_adk_plugin import ContextOffloadPlugin as value
    elif name == "from_genai":
        from ._google_adk_messages import from_genai as value
    elif name == "to_genai":
        from ._google_adk_messages import to_genai as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

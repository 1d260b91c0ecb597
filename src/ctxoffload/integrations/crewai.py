"""CrewAI: `ContextOffloadHooks`, ctxoffload as CrewAI's tool-call and LLM-call hooks.

CrewAI keeps an agent's conversation in its executor's `messages` (OpenAI-format dicts) and
sends that list on every LLM call. Its hooks see each tool result before it joins the list
(`after_tool_call`: a big one is stored whole in the workspace and replaced by its head and a
notice) and the list itself before each LLM call (`before_llm_call`: it becomes the projection,
older turns as a summary naming context.jsonl past the trigger). Its `tools` read offloaded
content back, as CrewAI tools (`BaseTool`).

Example::

    from crewai import Agent, Crew, Task
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.crewai import ContextOffloadHooks

    offload = ContextOffloadHooks(
        LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
    )
    agent = Agent(role="ops", goal="...", backstory="...", tools=[fetch_logs, *offload.tools])
    with offload:  # the hooks are registered meanwhile
        Crew(agents=[agent], tasks=[Task(..., agent=agent)]).kickoff()

Importing this module does not import CrewAI; each name does, on first use
(`pip install 'ctxoffload[crewai]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ContextOffloadHooks"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # The hooks register with CrewAI and their tools subclass its BaseTool, so the name is
    # imported on first use, never at import.
    value: Any
    if name == "ContextOffloadHooks":
        from ._crewai_hooks import ContextOffloadHooks as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

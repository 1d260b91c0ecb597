"""smolagents: `OffloadingStepCallbacks`, ctxoffload as an agent's step callbacks.

smolagents keeps the run in the agent's memory (`agent.memory.steps`) and rebuilds every model
call from it. Its step callbacks see each finished step, with the agent, before the next model
call: there a big observation is stored whole in the workspace and the step keeps its head and
a notice; past the config's trigger the older steps go to the session's context.jsonl and are
replaced in the memory by one summary step naming that file; and what the step's model call
was sent is recorded, so `ctxoffload show --step N` rebuilds it. Its `tools` read offloaded
content back, as smolagents tools (`Tool`).

Example::

    from smolagents import ToolCallingAgent
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.smolagents import OffloadingStepCallbacks

    offload = OffloadingStepCallbacks(
        LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
    )
    agent = ToolCallingAgent(
        tools=[fetch_logs, *offload.tools], model=model, step_callbacks=offload
    )
    agent.run("Did the nightly job finish?")

Importing this module does not import smolagents; each name does, on first use
(`pip install 'ctxoffload[smolagents]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ContextSummaryStep", "OffloadingStepCallbacks"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # Each name needs smolagents (the summary step subclasses its MemoryStep), so it is
    # imported on first use of the name, never at import.
    value: Any
    if name == "OffloadingStepCallbacks":
        from ._smolagents_callbacks import OffloadingStepCallbacks as value
    elif name == "ContextSummaryStep":
        from ._smolagents_steps import ContextSummaryStep as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

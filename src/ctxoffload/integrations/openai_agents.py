"""The OpenAI Agents SDK: `OffloadingInputFilter`, a `RunConfig.call_model_input_filter` that
stores big tool outputs whole and sends each model call the projection of its input items.

The SDK sends a model the whole run on every call; its own compaction runs only with
Responses-API models, and its `ToolOutputTrimmer` cuts what it trims. The filter works on
what every model is sent (Chat-Completions models too): each `function_call_output` over the
config's `tool_result_limit` goes whole to the workspace and reaches the model as its head and
a notice naming the file; past the trigger the older items reach it as a summary (they go to
the session's context.jsonl first). The run's own items are never changed, and the same items
project to the same bytes on every call. `tools` reads offloaded content back.
`WorkspaceSession` keeps the conversation's items in the same workspace, append-only, so a
run resumes from the folder in a new process; its `input_filter()` is the filter of the same
conversation.

Example::

    from agents import Agent, RunConfig, Runner
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.openai_agents import OffloadingInputFilter

    offload = OffloadingInputFilter(
        LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
    )
    agent = Agent(name="ops", model=model, tools=[fetch_logs, *offload.tools])
    Runner.run_sync(agent, "...", run_config=RunConfig(call_model_input_filter=offload))

Importing this module does not import the SDK; `tools` does
(`pip install 'ctxoffload[openai-agents]'`).
"""

from __future__ import annotations

from ._openai_agents_filter import OffloadingInputFilter
from ._openai_agents_session import WorkspaceSession

__all__ = ["OffloadingInputFilter", "WorkspaceSession"]

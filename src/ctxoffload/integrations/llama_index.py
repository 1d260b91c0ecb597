"""LlamaIndex: `OffloadingMemory`, a LlamaIndex `Memory` on a ctxoffload workspace, and the
converters between LlamaIndex `ChatMessage` objects and ctxoffload's messages.

The memory keeps every message of the conversation, gives the agent the projection of its
history at each read (`ctxoffload.compression.Projector`: older turns as a summary past the
trigger, the same bytes on every read), and keeps a big tool output as its head and a notice,
the whole text stored in the workspace first (its `offload_tools` wrap the agent's tools, so a
big output never enters a run whole). Its `tools` read offloaded content back.

Example::

    from llama_index.core.agent.workflow import FunctionAgent
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.llama_index import OffloadingMemory

    memory = OffloadingMemory.from_defaults(
        LocalWorkspace("ws"), session_id="nightly", config=ContextConfig(context_window=128_000)
    )
    agent = FunctionAgent(tools=[*memory.offload_tools([fetch_logs]), *memory.tools], llm=llm)
    await agent.run("check the nightly job", memory=memory)

Importing this module does not import LlamaIndex; each name does, on first use
(`pip install 'ctxoffload[llama-index]'`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["OffloadingMemory", "from_llama_index", "to_llama_index"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # Each name needs LlamaIndex (the memory subclasses its Memory), so it is imported on first
    # use of the name, never at import.
    value: Any
    if name == "OffloadingMemory":
        from ._llama_index_memory import OffloadingMemory as value
    elif name == "from_llama_index":
        from ._llama_index_messages import from_llama_index as value
    elif name == "to_llama_index":
        from ._llama_index_messages import to_llama_index as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value

"""A small ReAct agent wiring the workspace, the offloader and compression together.

Every name is imported on first use; `OpenAIChatModel` needs the `openai` extra. The
read-back tools (`FileToolbox`, `workspace_tools`, `resolve_in_roots`, `retrieval_tool`)
are built in `ctxoffload.readback`; they are importable from here too, where agents
register them."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..model import ChatModel, ModelResponse, ScriptedModel, Usage
    from ..readback import FileToolbox, resolve_in_roots, retrieval_tool, workspace_tools
    from ._agent import Agent
    from ._openai_model import OpenAIChatModel
    from ._record import SessionRecorder, StepRecord, window_parts
    from ._subagent import MAX_SUBAGENT_DEPTH
    from ._tools import Tool, as_tool

__all__ = [
    "MAX_SUBAGENT_DEPTH",
    "Agent",
    "ChatModel",
    "FileToolbox",
    "ModelResponse",
    "OpenAIChatModel",
    "ScriptedModel",
    "SessionRecorder",
    "StepRecord",
    "Tool",
    "Usage",
    "as_tool",
    "resolve_in_roots",
    "retrieval_tool",
    "window_parts",
    "workspace_tools",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "ChatModel": "..model",
        "ModelResponse": "..model",
        "ScriptedModel": "..model",
        "Usage": "..model",
        "FileToolbox": "..readback",
        "resolve_in_roots": "..readback",
        "retrieval_tool": "..readback",
        "workspace_tools": "..readback",
        "Agent": "._agent",
        "StepRecord": "._record",
        "Tool": "._tools",
        "as_tool": "._tools",
        "OpenAIChatModel": "._openai_model",
        "SessionRecorder": "._record",
        "window_parts": "._record",
        "MAX_SUBAGENT_DEPTH": "._subagent",
    },
)

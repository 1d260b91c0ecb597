"""A small ReAct agent wiring the workspace, the offloader and compression together.

Every name is imported on first use; `OpenAIChatModel` needs the `openai` extra."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..model import ChatModel, ModelResponse, ScriptedModel, Usage
    from ..offloader._tool import retrieval_tool
    from ._agent import Agent, StepRecord
    from ._file_tools import FileToolbox, resolve_in_roots, workspace_tools
    from ._openai_model import OpenAIChatModel
    from ._tools import Tool, as_tool

__all__ = [
    "Agent",
    "ChatModel",
    "FileToolbox",
    "ModelResponse",
    "OpenAIChatModel",
    "ScriptedModel",
    "StepRecord",
    "Tool",
    "Usage",
    "as_tool",
    "resolve_in_roots",
    "retrieval_tool",
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
        "retrieval_tool": "..offloader._tool",
        "Agent": "._agent",
        "StepRecord": "._agent",
        "FileToolbox": "._file_tools",
        "resolve_in_roots": "._file_tools",
        "workspace_tools": "._file_tools",
        "Tool": "._tools",
        "as_tool": "._tools",
        "OpenAIChatModel": "._openai_model",
    },
)

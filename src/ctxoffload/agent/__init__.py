"""A small ReAct agent wiring the workspace, the offloader and compression together.

`OpenAIChatModel` needs the `openai` extra and is imported only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model import ChatModel, ModelResponse, ScriptedModel, Usage
from ..offloader import retrieval_tool
from ._agent import Agent, StepRecord
from ._file_tools import FileToolbox, resolve_in_roots, workspace_tools
from ._tools import Tool, as_tool

if TYPE_CHECKING:
    from ._openai_model import OpenAIChatModel

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


def __getattr__(name: str) -> Any:
    # Lazy: importing the OpenAI adapter must not happen on `import ctxoffload.agent`.
    if name == "OpenAIChatModel":
        from ._openai_model import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

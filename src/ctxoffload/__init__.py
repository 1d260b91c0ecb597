"""ctxoffload: keep LLM agents inside their context window without losing anything."""

from .exceptions import (
    ConfigError,
    ContextOverflowError,
    CtxOffloadError,
    InvalidContent,
    InvalidReference,
    InvalidSessionId,
    ModelError,
    OffloadError,
    SummaryError,
    TokenizerUnavailable,
    ToolError,
)
from .messages import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)
from .model import ChatModel, ModelResponse, ScriptedModel, Usage
from .offloader import Offloader
from .references import ContextRef
from .workspace import InMemoryWorkspace, LocalWorkspace

__version__ = "0.1.0"

__all__ = [
    "Base64Source",
    "ChatModel",
    "ConfigError",
    "ContextRef",
    "ContextOverflowError",
    "CtxOffloadError",
    "DataBlock",
    "InMemoryWorkspace",
    "InvalidContent",
    "InvalidReference",
    "InvalidSessionId",
    "LocalWorkspace",
    "ModelError",
    "ModelResponse",
    "Msg",
    "OffloadError",
    "Offloader",
    "ScriptedModel",
    "SummaryError",
    "TextBlock",
    "ThinkingBlock",
    "TokenizerUnavailable",
    "ToolCallBlock",
    "ToolError",
    "ToolResultBlock",
    "URLSource",
    "Usage",
    "__version__",
]

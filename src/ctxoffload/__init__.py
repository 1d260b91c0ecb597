"""ctxoffload: keep LLM agents inside their context window without losing anything."""

from .agent import Agent
from .compression import CompressionResult, Compressor, ContextConfig, ReaderTools, Summary
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
    from_anthropic,
    from_openai,
    to_anthropic,
    to_msg,
    to_msgs,
    to_openai,
)
from .model import ChatModel, ModelResponse, ScriptedModel, Usage
from .offloader import Offloader
from .references import ContextRef
from .tokens import ContextTokenTracker, TokenCounter, get_token_counter
from .workspace import InMemoryWorkspace, LocalWorkspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .workspace import ObjectStoreWorkspace

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Base64Source",
    "ChatModel",
    "CompressionResult",
    "Compressor",
    "ConfigError",
    "ContextConfig",
    "ContextOverflowError",
    "ContextRef",
    "ContextTokenTracker",
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
    "ObjectStoreWorkspace",
    "OffloadError",
    "Offloader",
    "ReaderTools",
    "ScriptedModel",
    "Summary",
    "SummaryError",
    "TextBlock",
    "ThinkingBlock",
    "TokenCounter",
    "TokenizerUnavailable",
    "ToolCallBlock",
    "ToolError",
    "ToolResultBlock",
    "URLSource",
    "Usage",
    "__version__",
    "from_anthropic",
    "from_openai",
    "get_token_counter",
    "to_anthropic",
    "to_msg",
    "to_msgs",
    "to_openai",
]


def __getattr__(name: str) -> object:
    # ObjectStoreWorkspace is imported on first use, so `import ctxoffload` never loads the
    # object-store client.
    if name == "ObjectStoreWorkspace":
        from .workspace import ObjectStoreWorkspace

        return ObjectStoreWorkspace
    raise AttributeError(f"module 'ctxoffload' has no attribute {name!r}")

"""ctxoffload: keep LLM agents inside their context window without losing anything.

Every public name is imported from its module on first use (`_lazy.py`), so `import ctxoffload`
and the `ctxoffload` command start without loading pydantic, the tokenizer or any client.
"""

from ._lazy import lazy_exports
from ._version import __version__
from .exceptions import (
    ConfigError,
    ContextOverflowError,
    CtxOffloadError,
    InvalidContent,
    InvalidReference,
    InvalidSessionId,
    ModelError,
    OffloadError,
    PinError,
    SessionBusyError,
    SummaryError,
    TokenizerUnavailable,
    ToolError,
)

# `typing` itself costs ~8 ms at start-up; type checkers treat this name as theirs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._overflow import is_context_overflow
    from .agent import Agent
    from .compression import (
        Activation,
        CompressionResult,
        Compressor,
        ContextConfig,
        ContextPipeline,
        ReaderTools,
        Summary,
    )
    from .formats import (
        from_anthropic,
        from_converse,
        from_openai,
        to_anthropic,
        to_converse,
        to_msg,
        to_msgs,
        to_openai,
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
    from .references import ContextRef
    from .tokens import ContextTokenTracker, TokenCounter, get_token_counter
    from .workspace import (
        InMemoryWorkspace,
        LocalWorkspace,
        ObjectStoreWorkspace,
        Offloader,
        SqlWorkspace,
        Workspace,
    )


__all__ = [
    "Activation",
    "Agent",
    "Base64Source",
    "ChatModel",
    "CompressionResult",
    "Compressor",
    "ConfigError",
    "ContextConfig",
    "ContextOverflowError",
    "ContextPipeline",
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
    "PinError",
    "ReaderTools",
    "ScriptedModel",
    "SessionBusyError",
    "SqlWorkspace",
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
    "Workspace",
    "__version__",
    "from_anthropic",
    "from_converse",
    "from_openai",
    "get_token_counter",
    "is_context_overflow",
    "to_anthropic",
    "to_converse",
    "to_msg",
    "to_msgs",
    "to_openai",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "Agent": ".agent",
        "Activation": ".compression",
        "ContextPipeline": ".compression",
        "CompressionResult": ".compression",
        "Compressor": ".compression",
        "ContextConfig": ".compression",
        "ReaderTools": ".compression",
        "Summary": ".compression",
        "Base64Source": ".messages",
        "DataBlock": ".messages",
        "Msg": ".messages",
        "TextBlock": ".messages",
        "ThinkingBlock": ".messages",
        "ToolCallBlock": ".messages",
        "ToolResultBlock": ".messages",
        "URLSource": ".messages",
        "from_anthropic": ".formats",
        "from_converse": ".formats",
        "from_openai": ".formats",
        "to_anthropic": ".formats",
        "to_converse": ".formats",
        "to_msg": ".formats",
        "to_msgs": ".formats",
        "to_openai": ".formats",
        "ChatModel": ".model",
        "ModelResponse": ".model",
        "ScriptedModel": ".model",
        "Usage": ".model",
        "is_context_overflow": "._overflow",
        "Offloader": ".workspace",
        "Workspace": ".workspace",
        "ContextRef": ".references",
        "ContextTokenTracker": ".tokens",
        "TokenCounter": ".tokens",
        "get_token_counter": ".tokens",
        "InMemoryWorkspace": ".workspace",
        "LocalWorkspace": ".workspace",
        "ObjectStoreWorkspace": ".workspace",
        "SqlWorkspace": ".workspace",
    },
)

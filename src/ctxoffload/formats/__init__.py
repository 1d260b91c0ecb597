"""Conversion between ctxoffload messages and the wire formats: one module per format.

`openai` (chat completions), `anthropic` (messages) and `converse` (Bedrock Converse, which
Strands Agents keeps its history in); `to_msg` / `to_msgs` detect the format of each message.
`responses` (OpenAI Responses input items) and `claude_code` (Claude Code's session transcript)
are read from their own modules.
The message model (`ctxoffload.messages`) imports none of these.
"""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._detect import read_messages, read_tool_result, to_msg, to_msgs
    from .anthropic import from_anthropic, to_anthropic
    from .converse import from_converse, to_converse
    from .openai import from_openai, to_openai

__all__ = [
    "from_anthropic",
    "from_converse",
    "from_openai",
    "read_messages",
    "read_tool_result",
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
        "read_messages": "._detect",
        "read_tool_result": "._detect",
        "to_msg": "._detect",
        "to_msgs": "._detect",
        "from_anthropic": ".anthropic",
        "to_anthropic": ".anthropic",
        "from_converse": ".converse",
        "to_converse": ".converse",
        "from_openai": ".openai",
        "to_openai": ".openai",
    },
)

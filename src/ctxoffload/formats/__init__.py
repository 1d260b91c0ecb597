"""Conversion between ctxoffload messages and the wire formats: one module per format.

`openai` (chat completions), `anthropic` (messages), `converse` (Bedrock Converse, which
Strands Agents keeps its history in) and `claude_code` (Claude Code's session transcript);
`to_msg` / `to_msgs` detect the format of each message.
The message model (`ctxoffload.messages`) imports none of these.
"""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._detect import read_messages, read_tool_result, to_msg, to_msgs
    from .anthropic import from_anthropic, to_anthropic
    from .claude_code import from_claude_code
    from .converse import from_converse, to_converse
    from .openai import from_openai, to_openai

__all__ = [
    "from_anthropic",
    "from_claude_code",
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
        "from_claude_code": ".claude_code",
        "from_converse": ".converse",
        "to_converse": ".converse",
        "from_openai": ".openai",
        "to_openai": ".openai",
    },
)

"""Adapters that plug ctxoffload into other agent frameworks; none imports its framework
until it is used.

`ctxoffload.integrations.agentscope`: `AgentScopeOffloader`, AgentScope 2.x's offloader on a
workspace, with the middleware that stores whole tool results and keeps a failing workspace
from aborting a reply, and the retrieval tool as an AgentScope tool.

`ctxoffload.integrations.strands`: `WorkspaceStorage` (Strands' `ContextOffloader` storage and
its unified `strands.storage.Storage`, with blocking twins in `.sync`) and
`OffloadingConversationManager` (a Strands conversation manager on ctxoffload's pipeline).

`ctxoffload.integrations.langchain`: `ContextOffloadMiddleware`, LangChain v1's `create_agent`
middleware that stores big tool results whole and sends each model call the projection of the
history, and the converters between LangChain messages and ctxoffload's.

`ctxoffload.integrations.deepagents`: `WorkspaceBackend`, a deepagents backend on a workspace,
routed through deepagents' `CompositeBackend` for its evicted tool results and history.

`ctxoffload.integrations.openai_agents`: `OffloadingInputFilter`, the OpenAI Agents SDK's
`RunConfig.call_model_input_filter` that stores big tool outputs whole and sends each model
call the projection of its input items.

`ctxoffload.integrations.claude`: `OffloadingHooks`, Claude Code's PostToolUse and PreCompact
hooks as the Claude Agent SDK's `HookMatcher` callbacks (the same work as `ctxoffload hook`),
and `WorkspaceSessionStore`, the SDK's `SessionStore` on a workspace.
"""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._host_models import chat_model_of
    from ._reading import reading_functions

# The read-back tools every host gets, as plain async functions: the one list the adapters and
# the MCP proxy (`ctxoffload.mcp`) build their tools from; and any door's model as a
# ctxoffload `ChatModel` (`ctxoffload eval` asks it).
__all__ = ["chat_model_of", "reading_functions"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {"chat_model_of": "._host_models", "reading_functions": "._reading"},
)

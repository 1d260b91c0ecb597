"""`DeltaAgentState`: LangChain's `AgentState` whose messages LangGraph checkpoints as deltas.

LangGraph keeps `messages` in a channel whose whole value is serialised again into every
checkpoint that changes it, so a thread's checkpoints grow with the square of its length.
On a `DeltaChannel` (LangGraph's, in beta) a checkpoint stores only the messages written at
that step, and a whole copy every `snapshot_frequency` updates; deepagents' own state does
the same. With `ContextOffloadMiddleware`, which keeps in state only what the model is sent,
the copies are as small as the request too.

LangChain is imported with this module: `ctxoffload.integrations.langchain` imports it only
on first use of `DeltaAgentState`.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

from ..exceptions import ConfigError
from ._langchain_messages import INSTALL_HINT

__all__ = ["DeltaAgentState"]

try:
    _AgentState: Any = importlib.import_module("langchain.agents").AgentState
    _AnyMessage: Any = importlib.import_module("langchain_core.messages").AnyMessage
except ImportError as exc:  # pragma: no cover - exercised where LangChain is absent
    raise ConfigError(INSTALL_HINT) from exc
try:
    _DeltaChannel: Any = importlib.import_module("langgraph.channels").DeltaChannel
    # LangGraph's reducer for a DeltaChannel of messages (experimental, as DeltaChannel is):
    # what `add_messages` does (ids, RemoveMessage, REMOVE_ALL_MESSAGES), batch by batch.
    _reducer: Any = importlib.import_module("langgraph.graph.message")._messages_delta_reducer
except (ImportError, AttributeError) as exc:  # pragma: no cover - an older LangGraph
    raise ConfigError(
        "DeltaAgentState needs LangGraph's DeltaChannel, which this LangGraph lacks: "
        "pip install -U 'langgraph>=1.2.12,<2'"
    ) from exc


class DeltaAgentState(_AgentState):  # type: ignore[misc]
    """`AgentState` with `messages` on LangGraph's `DeltaChannel`: each checkpoint stores the
    messages written at its step, not the whole history again.

    Pass it as `create_agent(..., state_schema=DeltaAgentState)`, or subclass it to add
    fields of your own. A thread checkpointed with LangChain's default state reads on with it
    (the channel takes the last whole list as its start).
    """

    messages: Annotated[list[_AnyMessage], _DeltaChannel(_reducer)]

"""Any door's model as a ctxoffload `ChatModel`, where ctxoffload takes a model of its own
(`ctxoffload.eval.evaluate`): the host's model object, adapted by its door's summary adapter
(DESIGN §18), the door found by the package the object's class comes from. Nothing of a host
is imported until a model of it is given.
"""

from __future__ import annotations

import importlib

from .._doors.summaries import SummaryWriter, is_chat_model
from ..exceptions import ConfigError
from ..model import ChatModel

__all__ = ["chat_model_of"]

# The package a host's model classes come from (a prefix of the class's module), and its
# door's adapter: `summary_writer(model, window)` or `<door>_summary_model(model, window)`.
_ADAPTERS = (
    ("langchain_core", "._langchain_summary", "summary_writer"),
    ("pydantic_ai", "._pydantic_ai_summary", "summary_writer"),
    ("strands", "._strands_summary", "summary_writer"),
    ("agents", "._openai_agents_summary", "summary_writer"),
    ("haystack", "._haystack_summary", "summary_writer"),
    ("haystack_integrations", "._haystack_summary", "summary_writer"),
    ("google.adk", "._google_adk_summary", "adk_summary_model"),
    ("crewai", "._crewai_summary", "crewai_summary_model"),
    ("llama_index", "._llama_index_summary", "llama_index_summary_model"),
    ("smolagents", "._smolagents_summary", "smolagents_summary_model"),
    ("agentscope", "._agentscope_summary", "agentscope_summary_model"),
)

_TAKES = (
    "a ctxoffload ChatModel (OpenAIChatModel for any OpenAI-compatible endpoint) or a "
    "model object of a host ctxoffload has a door for (a LangChain chat model, a pydantic-ai "
    "Model, a Strands Model, an OpenAI Agents SDK Model, a Haystack chat generator, an ADK "
    "model, a CrewAI LLM, a LlamaIndex LLM, a smolagents Model, an AgentScope chat model)"
)


def chat_model_of(model: object, *, tools: bool = False, what: str = "the model") -> ChatModel:
    """`model` as a ctxoffload `ChatModel`: itself when it is one, else its host's object
    adapted by the door of the package its class comes from.

    Args:
        model: a ctxoffload `ChatModel`, or a host's model object.
        tools: the model will be offered tools (`ctxoffload eval`'s read mode): a door whose
            adapter sends text only is refused now, before any call.
        what: what the model is, in a refusal's words ("the judge").

    Raises:
        ConfigError: `model` is neither, or its door's adapter refuses it, or sends text
            only where `tools` are needed; each names what would do.
    """
    if is_chat_model(model):
        return model  # type: ignore[return-value]
    door = _door_of(model)
    if door is None:
        raise ConfigError(f"{what} is a {type(model).__name__}, not {_TAKES}")
    module, function = door
    try:
        adapt = getattr(importlib.import_module(module, __package__), function)
        made = adapt(model, None)
    except ImportError as exc:  # (its framework is not importable here, its class notwithstanding)
        raise ConfigError(
            f"{what} is a {type(model).__name__} of {type(model).__module__}, whose framework "
            f"cannot be imported: {exc}"
        ) from exc
    adapted = made.fixed if isinstance(made, SummaryWriter) else made
    if adapted is None:
        raise ConfigError(f"{what} is a {type(model).__name__}, not {_TAKES}")
    if tools and not getattr(adapted, "asks_with_tools", True):
        named = getattr(adapted, "door", "host")
        reason = getattr(adapted, "text_only_reason", "")
        why = f" ({reason})" if reason else ""
        raise ConfigError(
            f"the {named} door's adapter asks a {type(model).__name__} for text only{why} "
            "and offers it no tools, which eval's read mode needs: give a model of the same "
            "provider that calls functions, or an OpenAIChatModel (--model URL/NAME)"
        )
    return adapted


def _door_of(model: object) -> tuple[str, str] | None:
    """The adapter (module, function) of the first class of `model`'s that a door's host
    defines, subclasses first (a provider's LangChain model is a `langchain_core` one)."""
    for cls in type(model).__mro__:
        where = cls.__module__
        for package, module, function in _ADAPTERS:
            if where == package or where.startswith(package + "."):
                return module, function
    return None

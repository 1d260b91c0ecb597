"""What a host calls its model, for the counter of that model's family (`Projector.use_model`).

Each host names its model in its own place: a LangChain chat model in `model_name`, `model` or
`model_id` (Bedrock), pydantic-ai's `Model.model_name`, the OpenAI Agents SDK's `Model.model`
(a string, or a wrapped model), Strands' `model.config["model_id"]`, AgentScope's
`model_name`. `model_name_of` reads whichever the object has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["model_name_of"]

_NAME_FIELDS = ("model_name", "model_id", "model")

# A wrapper holds the model it wraps in `model` (the Agents SDK's, ctxoffload's retrying one):
# followed this many times at most.
_DEPTH = 3


def model_name_of(model: Any) -> str | None:
    """The name `model` goes by: `model` itself when it is a string, else the first string
    among its `model_name`, `model_id` and `model`, its `config`'s `model_id` (a mapping, or
    what `get_config()` returns), or the name of the model it wraps (`model`); None when
    none is known.

    Args:
        model: a host's model object or model name, or None.
    """
    for _ in range(_DEPTH):
        if isinstance(model, str):
            return model.strip() or None
        if model is None:
            return None
        nested = None
        for field in _NAME_FIELDS:
            value = getattr(model, field, None)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if field == "model" and value is not None and value is not model:
                nested = value
        config = getattr(model, "config", None)
        getter = getattr(model, "get_config", None)
        if not isinstance(config, Mapping) and callable(getter):
            try:
                config = getter()
            except Exception:  # a host's getter that fails names no model
                config = None
        if isinstance(config, Mapping) and isinstance(config.get("model_id"), str):
            return str(config["model_id"]).strip() or None
        model = nested
    return None

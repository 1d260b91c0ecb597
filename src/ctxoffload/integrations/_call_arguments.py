"""The arguments a projection cut among a message's tool calls (a call that wrote a whole file:
`Truncator.cut_calls` stores each long string whole and keeps its head and a notice), by call
id, and OpenAI's wire copy of a call carrying them.

A door that sends the host's own message wherever it thinks only the text changed takes from
here which calls' arguments to replace, and replaces them in its host's shape: otherwise the
model is sent the whole file the projection counted as cut.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..messages import Msg

__all__ = ["cut_arguments", "openai_call_with"]


def cut_arguments(given: Msg, projected: Msg) -> dict[str, dict[str, Any]]:
    """The arguments `projected` holds for each tool call of `given` (the same message as
    read from the host) whose arguments it changed, by call id; empty when it changed none."""
    before = {call.id: call.input for call in given.tool_calls}
    return {
        call.id: call.input
        for call in projected.tool_calls
        if call.id in before and before[call.id] != call.input
    }


def openai_call_with(call: Any, arguments: Mapping[str, dict[str, Any]]) -> Any:
    """An OpenAI tool call (`{"id", "function": {"name", "arguments"}}`, or the openai SDK's
    object for one, as a host keeps OpenAI's copy of a call) with the arguments `arguments`
    holds for its id, as JSON text; `call` itself when they hold none for it."""
    if isinstance(call, dict):
        function = call.get("function")
        if call.get("id") not in arguments or not isinstance(function, dict):
            return call
        text = json.dumps(arguments[call["id"]], ensure_ascii=False)
        return {**call, "function": {**function, "arguments": text}}
    sdk_function: Any = getattr(call, "function", None)
    if getattr(call, "id", None) not in arguments or sdk_function is None:
        return call
    text = json.dumps(arguments[call.id], ensure_ascii=False)
    # (The openai SDK's objects are pydantic models.)
    made = sdk_function.model_copy(update={"arguments": text})
    return call.model_copy(update={"function": made})

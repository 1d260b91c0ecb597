"""What every door's summary adapter shares (the host's model as a `ChatModel`, DESIGN §18):
the request as turns of text, the summary schema in the form hosts take, the window the
requests are sized to, the reply with what it cost, and an overflow said as ctxoffload says it.

A summary request is a system prompt and one user message (`compression._summarize`), or the
agent's last request and one more question (`compression._cache_request`): an adapter sends
it as text turns, offers no tool, and never streams (a summary is no turn of the agent's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._overflow import is_context_overflow
from ..compression import Summary
from ..exceptions import ContextOverflowError
from ..messages import Msg
from ..model import ModelResponse, Usage
from ..text import message_text

__all__ = [
    "UNKNOWN_WINDOW",
    "overflow_of",
    "replied",
    "schema_for_host",
    "summary_turns",
    "summary_window",
]

UNKNOWN_WINDOW = 32_000
"""The window a summary model is taken to have when neither its host nor the door's config
says: it sizes the summary requests (half of it a request), so a guess too large costs an
overflow the summariser answers by halving the request and asking again, never a failure."""


def summary_turns(messages: Sequence[Msg]) -> tuple[str, list[tuple[str, str]]]:
    """The system prompt and the turns of a summary request: ("user" or "assistant", text)
    each, a tool's result as the user's text (no tool is offered to a summary call)."""
    system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
    turns = [
        ("assistant" if m.role == "assistant" else "user", message_text(m))
        for m in messages
        if m.role != "system"
    ]
    return system, [(role, text) for role, text in turns if text]


def schema_for_host(schema: dict[str, Any]) -> type[Summary] | dict[str, Any]:
    """The summary schema as a host's structured output takes it: the `Summary` model where
    it is ctxoffload's own (every host turns a pydantic model into its provider's schema),
    else the JSON schema the config gives."""
    return Summary if schema == Summary.model_json_schema() else schema


def summary_window(reported: object, configured: int | None) -> int:
    """The window a host's model writes summaries in: what the host reports, else the door's
    configured window (the agent's: a summary model is the agent's own, or one of its
    size), else `UNKNOWN_WINDOW`."""
    if isinstance(reported, int) and not isinstance(reported, bool) and reported > 0:
        return reported
    return configured if configured is not None else UNKNOWN_WINDOW


def replied(
    text: str,
    *,
    input_tokens: object = None,
    output_tokens: object = None,
    cached_input_tokens: object = None,
) -> ModelResponse:
    """A host's answer as a `ModelResponse`: its text, and the tokens the host reported
    (None where it reported none), which the session's record counts."""

    def count(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    given = count(input_tokens), count(output_tokens), count(cached_input_tokens)
    usage = (
        Usage(input_tokens=given[0] or 0, output_tokens=given[1] or 0, cached_input_tokens=given[2])
        if given[0] is not None or given[1] is not None
        else None
    )
    return ModelResponse(message=Msg(role="assistant", content=text), usage=usage)


def overflow_of(error: BaseException, model_name: str) -> ContextOverflowError | None:
    """`error` as the summariser must read it when the host's model said the request is over
    its window: a `ContextOverflowError` (the request is then halved and asked again); None
    for any other error, raised as it is (the summariser retries, then extracts)."""
    if not is_context_overflow(error):
        return None
    return ContextOverflowError(f"{model_name} refused a summary request: {error}")

"""What every door's summary adapter shares: the host's answer handed back as the compressor
reads it, the window a summary model is given, and a model name fit for an error message.

A door's adapter (`SummaryWriter`'s `adapt`) asks the host's own model, in the host's own
types, for the five fields; what it answers (the object its structured output parsed, or the
text of a reply the compressor's parser reads) goes back as one `ModelResponse` whose text is
that object as JSON, with the tokens the host reported.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .._secrets import Secrets
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ModelResponse, Usage

__all__ = [
    "SUMMARY_WINDOW",
    "masked_name",
    "name_refused",
    "summary_reply",
    "summary_window",
    "unresolved",
    "usage_of",
]

logger = logging.getLogger("ctxoffload")

SUMMARY_WINDOW = 128_000
"""The window a summary model is taken to have when neither it nor the door's config says
(the compressor splits what it sends into chunks of half of it)."""


def summary_reply(answer: object, usage: Usage | None = None) -> ModelResponse:
    """The host's answer as the compressor reads a summary model's: a parsed object (a dict,
    a pydantic model) as its JSON, a text as it is (the compressor's parser reads it).

    Args:
        answer: what the host's model answered: the object its structured output parsed,
            or the reply's text.
        usage: the tokens the host reported for the call, if it did.
    """
    if isinstance(answer, BaseModel):
        text = answer.model_dump_json()
    elif isinstance(answer, Mapping):
        text = json.dumps(dict(answer), default=str)
    else:
        text = "" if answer is None else str(answer)
    return ModelResponse(message=Msg(role="assistant", content=text), usage=usage)


def summary_window(*windows: object, model_name: str = "") -> int:
    """The first of `windows` that is a positive int (the model's own, the config's, the
    agent's), else `SUMMARY_WINDOW`, said in a log record as `OpenAIChatModel` says it: a
    summary model given a window of 0 would never be sent a chunk, and every summary would
    be the extract. Where the door's config has no window either, it is the agent's too
    (the compressor's last resort), so the record names the fix."""
    for window in windows:
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            return window
    # A log record rather than warnings.warn, as for OpenAIChatModel: test suites that run
    # with warnings as errors must still be able to build a door on a fake model.
    logger.warning(
        "context window of summary model %r is unknown; assuming %d tokens. Set "
        "ContextConfig(context_window=...) to the model's window",
        model_name,
        SUMMARY_WINDOW,
    )
    return SUMMARY_WINDOW


def masked_name(name: str, text: str | None = None) -> str:
    """`text` (default: `name`) with what `name` holds of a secret masked: a model name can be
    a URL with a user part (`https://user:key@host/v1`) or carry `?api_key=...`."""
    return Secrets.of_url(name).mask(name if text is None else text)


def unresolved(name: str, host: str, takes: str, reason: BaseException) -> ConfigError:
    """The refusal of a summary model name the host cannot resolve, with the host's reason,
    neither quoting a secret the name holds.

    Args:
        name: the model name given as `summary_model`.
        host: the host's resolver, as its users know it (`init_chat_model`).
        takes: what the door takes as `summary_model`, in the refusal's words.
        reason: what the host raised.
    """
    # The host's first line: LangChain's, for one, goes on to list thirty providers and a URL.
    first = next((line.strip() for line in str(reason).splitlines() if line.strip()), "")
    said = masked_name(name, f"{type(reason).__name__}: {first}")
    return ConfigError(
        f"summary_model {masked_name(name)!r} cannot be resolved by {host} ({said}): pass "
        f"{takes}, install the provider's package and set its key, or leave summary_model "
        "out for the agent's own model (summary_model=False for the extractive summary)"
    )


def name_refused(name: str, takes: str, why: str) -> ConfigError:
    """The refusal of a model name by a door whose host takes none, naming what it takes
    and never quoting a secret the name holds.

    Args:
        name: the model name given as `summary_model`.
        takes: what the door takes as `summary_model`, in the refusal's words.
        why: why a name does not do (where the host names its models).
    """
    return ConfigError(
        f"summary_model is the string {masked_name(name)!r}, not {takes}, or a ctxoffload "
        f"ChatModel ({why}): pass one of those, leave it out for the agent's own model, or "
        "summary_model=False for the extractive summary"
    )


def usage_of(input_tokens: Any, output_tokens: Any, cached: Any = None) -> Usage | None:
    """A `Usage` of the counts a host reported, None when it reported neither."""
    if not isinstance(input_tokens, int) and not isinstance(output_tokens, int):
        return None
    return Usage(
        input_tokens=input_tokens if isinstance(input_tokens, int) else 0,
        output_tokens=output_tokens if isinstance(output_tokens, int) else 0,
        cached_input_tokens=cached if isinstance(cached, int) else None,
    )

"""What `Agent(...)` is given, checked before anything is built (each refusal a `ConfigError`
that names what to pass instead), and turned into what the agent runs with: its pipeline and
the tools it registers.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from .._depth import STORE_DEPTH, depth_error, too_deep
from .._doors.checks import checked_offloader
from .._doors.doors import DOORS
from .._doors.summaries import SummaryWriter
from ..compression import Compressor, ContextConfig, ContextPipeline, EventCallback, ReaderTools
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ChatModel, ScriptedModel
from ..readback import RETRIEVAL_TOOL_NAME, retrieval_tool
from ..tokens import TokenCounter, get_token_counter
from ..workspace import Offloader, ReferenceReader
from ._tools import Tool, as_tool, as_tools

__all__ = [
    "IF_BUSY",
    "agent_compressor",
    "agent_tools",
    "check_settings",
    "checked_request",
    "context_pipeline",
    "reader_output_chars",
    "summary_writer",
]

IF_BUSY = ("raise", "fork")
"""What `Agent(if_busy=...)` may be."""

logger = logging.getLogger("ctxoffload")


def check_settings(model: Any, max_steps: Any, if_busy: str, config: ContextConfig) -> int | None:
    """Check the agent's model, `max_steps` and `if_busy` against `config`.

    Returns:
        The model's window when it reports a usable one (the config's is used otherwise).
    """
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ConfigError(
            f"max_steps {max_steps!r} is below 1: the agent must call the model at least "
            "once; pass max_steps=30 (the default) or another positive int"
        )
    if if_busy not in IF_BUSY:
        raise ConfigError(
            f"if_busy {if_busy!r} is not one of {', '.join(map(repr, IF_BUSY))}: pass "
            "'raise' to get SessionBusyError when another writer holds the session, or "
            "'fork' to continue in a fork of its saved state"
        )
    _check_model(model, "model")
    window = _model_window(model, config)
    if window is not None and config.context_window is None:
        config.check_window(window)  # the config's own window was checked when it was built
    return window


def summary_writer(model: Any, summary_model: Any) -> SummaryWriter:
    """Who writes the agent's summaries, by the rule every door keeps (`SummaryWriter`):
    `summary_model` (a ctxoffload `ChatModel`), else `model`, or the extract for
    `summary_model=False`. A `ScriptedModel` as `model` writes none: its script is the
    agent's turns, which summary requests would eat.

    Raises:
        ConfigError: `summary_model` is no `ChatModel` (a name, True, a sync model), or is
            the agent's own `ScriptedModel`.
    """
    writer = SummaryWriter(summary_model)
    if summary_model is model and isinstance(model, ScriptedModel):
        raise ConfigError(
            "model and summary_model are the same ScriptedModel, so summary requests would "
            "play the agent's script: pass a separate ScriptedModel as summary_model, or "
            "summary_model=False (or leave it out) for extractive summaries"
        )
    if summary_model is None and isinstance(model, ScriptedModel):
        # INFO, not WARNING: a ScriptedModel is for tests and demos, where this is the
        # expected set-up, and the rule is documented.
        logger.info(
            "model is a ScriptedModel and no summary_model was given: summaries will be "
            "extractive, so that summary requests do not play the agent's script; pass "
            "summary_model=ScriptedModel(...) for model-written summaries"
        )
    return writer


def check_offloader(offloader: object) -> None:
    """Refuse an offloader that is not an `Offloader` whose three methods are `async def`
    (the one check every door makes), or a workspace on a folder that is a file."""
    if offloader is not None:
        checked_offloader(offloader, DOORS["agent"], role="offloader")


def context_pipeline(given: ContextConfig | ContextPipeline | None) -> ContextPipeline:
    """The pipeline the agent runs: the one given, or the one a `ContextConfig` stands for."""
    if given is None or isinstance(given, ContextConfig):
        return ContextPipeline.from_config(given)
    if isinstance(given, ContextPipeline):
        return given
    raise ConfigError(
        f"context_config is a {type(given).__name__}: give a ContextConfig or a ContextPipeline "
        "(ContextPipeline.from_json_file(path) loads a template)"
    )


def _check_model(model: Any, what: str) -> None:
    """Refuse a model (`what` names the argument) without an `async def generate`."""
    if model is None:
        raise ConfigError(
            f"{what} is None: pass a chat model, for example OpenAIChatModel('gpt-4o-mini') "
            "or ScriptedModel([...])"
        )
    generate = getattr(model, "generate", None)
    if not callable(generate):
        raise ConfigError(
            f"{what} {type(model).__name__} has no generate method: pass a ChatModel, an "
            "object with 'async def generate(self, messages, *, tools=None, "
            "response_schema=None)'"
        )
    if not inspect.iscoroutinefunction(generate):
        raise ConfigError(
            f"{what}: {type(model).__name__}.generate is not async: define it with 'async def "
            "generate(...)' (the agent awaits it)"
        )


def _model_window(model: Any, config: ContextConfig) -> int | None:
    """The model's window when it reports a usable one; a ConfigError when none is known."""
    window = getattr(model, "context_window", None)
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int) or window < 1
    ):
        if config.context_window is not None:
            return None  # the config's window is used; the model's is never read
        raise ConfigError(
            f"model {type(model).__name__} reports context_window {window!r}, not a positive "
            "number of tokens: give the model its real window, or pass "
            "ContextConfig(context_window=...)"
        )
    if window is None and config.context_window is None:
        raise ConfigError(
            f"model {type(model).__name__} has no context_window and the config sets none: "
            "pass ContextConfig(context_window=...) with the model's window in tokens"
        )
    return window


def reader_output_chars(config: ContextConfig) -> int:
    """The answer cap of the retrieval tool an `Agent` registers: about `tool_result_limit`.

    Three characters a token (dense text and code run three to four), between 1,000 and
    20,000 characters, so a read-back stays within what a tool result may hold.
    """
    return max(1_000, min(20_000, config.tool_result_limit * 3))


def _notice_readers(tools: dict[str, Tool]) -> ReaderTools | None:
    """The names notices should give: the reader tools registered, by what they do."""
    found = ReaderTools.among(name for name, tool in tools.items() if tool.is_reader)
    return found if found.known else None


def _check_reader_names(readers: ReaderTools | None, tools: dict[str, Tool]) -> None:
    """Refuse `ContextConfig.reader_tools` naming a tool the agent does not have: every
    notice would tell the model to call it."""
    if readers is None:
        return
    for role in ("read", "grep", "retrieve"):
        name = getattr(readers, role)
        if name is not None and name not in tools:
            have = ", ".join(tools) or "none"
            raise ConfigError(
                f"ContextConfig.reader_tools {role}={name!r} is not one of the agent's tools "
                f"({have}): notices would tell the model to call a tool it does not have; "
                "register that tool, or leave reader_tools unset (the agent names the reader "
                "tools it has)"
            )


def _checked_tools(tools: Any) -> dict[str, Tool]:
    """`Agent(tools=...)` as the agent keeps them, by name: a list of functions or `Tool`s."""
    if callable(tools) or isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        kind = "function" if inspect.isroutine(tools) else type(tools).__name__
        raise ConfigError(
            f"tools is a {kind}, not a list: pass tools=[fetch_logs, ...] (plain functions or "
            "Tool objects)"
        )
    for i, tool in enumerate(tools):
        if not isinstance(tool, Tool) and not callable(tool):
            raise ConfigError(
                f"tools[{i}] is a {type(tool).__name__} ({tool!r}), not a function: pass plain "
                "functions (sync or async) or Tool objects"
            )
    try:
        return as_tools(tools)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def agent_tools(
    tools: Any,
    offloader: Offloader | None,
    config: ContextConfig,
    *,
    include_retrieval_tool: bool,
    context_tools: Sequence[Tool],
) -> dict[str, Tool]:
    """The tools an agent registers, by name: those given; the retrieval tool when asked for,
    the offloader can read its references back and no reader tool was given; and the
    context tools asked for (`pin_context`, `compact_context`), whose names a given tool
    must not take.

    Never both readers, as at every door (`ctxoffload.integrations.reading_functions`): given Read
    and Grep (`workspace_tools`), the agent has all the retrieval tool does, and its schema
    would cost every request 216 tokens and give the model two ways to do one thing."""
    registered = _checked_tools(tools)
    if (
        include_retrieval_tool
        and isinstance(offloader, ReferenceReader)
        and RETRIEVAL_TOOL_NAME not in registered
        and _notice_readers(registered) is None
    ):
        retrieve = retrieval_tool(offloader, max_output_chars=reader_output_chars(config))
        registered[RETRIEVAL_TOOL_NAME] = as_tool(retrieve)
    for tool in context_tools:
        if tool.name in registered:
            raise ConfigError(
                f"a tool named {tool.name!r} was given and include_{tool.name.split('_')[0]}"
                "_tool=True asks for ctxoffload's: rename yours, or leave the option off"
            )
        registered[tool.name] = tool
    _check_reader_names(config.reader_tools, registered)
    return registered


def agent_compressor(
    config: ContextConfig,
    model: ChatModel,
    summaries: SummaryWriter,
    offloader: Offloader | None,
    session_id: str,
    *,
    counter: TokenCounter | None,
    window: int | None,
    on_event: EventCallback | None,
    tools: dict[str, Tool],
) -> Compressor:
    """The agent's compressor: summaries by the model `summaries` names (`summary_writer`);
    tokens counted by `counter`, else by the exact counter for `model`; notices naming the
    reader tools among `tools`."""
    return Compressor(
        config,
        model=summaries.model(None if isinstance(model, ScriptedModel) else model),
        offloader=offloader,
        session_id=session_id,
        counter=counter
        if counter is not None
        else get_token_counter(getattr(model, "model_name", None)),
        # Never None, so the compressor never asks a model without one for its window.
        context_window=window if window is not None else config.context_window,
        on_event=on_event,
        reader_tools=_notice_readers(tools),
        # A tool of the user's called `Read` reads their files, not offloaded content:
        # its results are cut and stored like any other's.
        reader_names=[name for name, tool in tools.items() if tool.is_reader],
    )


def checked_request(user_input: str | Msg, context: list[Msg]) -> Msg:
    """The user message `Agent.reply` adds to `context` for `user_input`.

    Raises:
        InvalidContent: `user_input` nests deeper than `STORE_DEPTH` levels (or contains
            itself).
    """
    user = user_input if isinstance(user_input, Msg) else Msg(role="user", content=user_input)
    if too_deep(user, STORE_DEPTH):
        # Refused before it enters the context, where it could be neither stored,
        # counted nor sent.
        raise depth_error("user_input", STORE_DEPTH)
    if any(m.id == user.id for m in context):
        # The same Msg passed again (a fixed "continue" prompt): a message is known by
        # its id, and one the model has seen is never fresh, so this request would
        # not be either. It enters the context as a new message.
        user = user.model_copy(update={"id": uuid.uuid4().hex})
    return user

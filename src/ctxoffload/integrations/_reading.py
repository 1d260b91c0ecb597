"""The read-back tools every host integration gives its agent, as plain async functions each
host wraps in its own tool type, and how the notices name them.

`read_back` is the one home of both: the functions a door gives and the `ReaderTools` its
compressor or projector is told, taken from those very functions, so what a notice, a
placeholder or a summary tells the model to call is always a tool it was given (a door on a
bucket once gave `retrieve_offloaded_content` and said "use your file tools on memory://...").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

from ..compression import ContextConfig, ReaderTools
from ..messages import Msg
from ..readback import HasWorkdir, memory_tool, retrieval_tool, workspace_tools
from ..text import message_text
from ..workspace import LocalWorkspace, ReferenceReader, Workspace, writing_as

__all__ = ["ReadBack", "read_back", "readers_for", "reading_answer", "reading_functions"]


class ReadBack(NamedTuple):
    """The read-back tools a door gives its agent, and the tools its notices name.

    Attributes:
        functions: the tools, as plain async functions (`reading_functions`).
        readers: what a compressor names in notices, placeholders and summaries
            (`Compressor(reader_tools=...)`, `Projector(reader_tools=...)`): these tools, or
            the user's own where the door's config names them (`ContextConfig.reader_tools`).
    """

    functions: list[Callable[..., Awaitable[Any]]]
    readers: ReaderTools


def read_back(
    workspace: Workspace,
    max_output_chars: int,
    *,
    config: ContextConfig | None = None,
    memory: bool = False,
    session_id: str | None = None,
) -> ReadBack:
    """The read-back tools for `workspace` (see `reading_functions`) and the `ReaderTools`
    that name them: what a door gives its agent, and what it tells its compressor the agent
    was given.

    Args:
        workspace: the workspace the tools read (and the memory tool writes in).
        max_output_chars: the longest answer of each tool.
        config: the door's config: reader tools it names (`ContextConfig.reader_tools`) are
            the user's own, given to the agent on purpose, and notices keep naming them.
        memory: add the memory tool (`memory_tool`); it needs a `LocalWorkspace`.
        session_id: the session the memory tool records a change in when the host
            declares none with `writing_as` (the host's session).

    Raises:
        ConfigError: `memory` on a workspace that is not a `LocalWorkspace`.
    """
    functions = reading_functions(workspace, max_output_chars, memory=memory, session_id=session_id)
    own = config.reader_tools if config is not None else None
    given = ReaderTools.among(f.__name__ for f in functions)
    return ReadBack(functions, own if own is not None and own.known else given)


def readers_for(workspace: Workspace, config: ContextConfig | None = None) -> ReaderTools:
    """`read_back(workspace, ..., config=config).readers`: for a door that tells its
    compressor which tools read back before (or without) building them (the memory tool,
    which reads nothing, and the answers' cap change nothing here)."""
    return read_back(workspace, _ANY_CAP, config=config).readers


_ANY_CAP = 20_000
"""The answers' cap of the tools `readers_for` builds only to name them."""


def reading_functions(
    workspace: Workspace,
    max_output_chars: int,
    *,
    memory: bool = False,
    session_id: str | None = None,
) -> list[Callable[..., Awaitable[Any]]]:
    """Read, Grep and Glob for a workspace on a local folder; the retrieval tool for one
    with no folder that reads its references back (a bucket, a database, memory); with
    `memory`, the memory tool too.

    One or the other, not both: on a folder, Read and Grep do all the retrieval tool does
    (lines from one, a search with lines around each match), and every notice names them;
    a second reader would cost every request its schema (216 tokens of o200k, a third of
    the four tools') and give the model two ways to do one thing. A host that wants it all
    the same adds `ctxoffload.readback.retrieval_tool(workspace)` to its tools.

    The memory tool is opt-in, as Anthropic's is: it is the one tool here that writes, and a
    host that did not ask for it keeps a read-only toolset (and its schema out of every
    request).

    Args:
        workspace: the workspace the tools read (and the memory tool writes in).
        max_output_chars: the longest answer of each tool.
        memory: add the memory tool (`memory_tool`); it needs a `LocalWorkspace`.
        session_id: the session the memory tool records a change in when the host
            declares none with `writing_as` (the host's session).

    Raises:
        ConfigError: `memory` on a workspace that is not a `LocalWorkspace`.
    """
    functions: list[Callable[..., Awaitable[Any]]] = []
    if isinstance(workspace, HasWorkdir):
        functions.extend(workspace_tools(workspace, max_output_chars=max_output_chars))
    elif isinstance(workspace, ReferenceReader):
        functions.append(retrieval_tool(workspace, max_output_chars=max_output_chars))
    if memory:
        functions.append(
            memory_tool(
                cast(LocalWorkspace, workspace),  # memory_tool checks it, refuses another
                session_id=session_id,
                max_output_chars=max_output_chars,
            )
        )
    return functions


async def reading_answer(
    function: Callable[..., Awaitable[Any]],
    arguments: dict[str, Any],
    *,
    writer: str,
    session: str | None,
) -> str:
    """A read-back function's answer as text, for a host whose tools return strings: the
    arguments the model left out (None) not passed, and what it changes (a memory change)
    recorded in `session` as `writer` (None: no run has begun, so nothing is recorded).

    Args:
        function: one of `reading_functions`.
        arguments: what the host's tool was called with.
        writer: who the events are written by (the door's name).
        session: the session of the host's run in progress, or the latest one.
    """
    given = {k: v for k, v in arguments.items() if v is not None}
    if session is None:
        answer = await function(**given)
    else:
        with writing_as(writer, session):
            answer = await function(**given)
    return answer if isinstance(answer, str) else message_text(Msg(role="user", content=answer))

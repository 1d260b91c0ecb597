"""Sub-agents: an `Agent` run as another agent's tool, in a session and context of its own.

`child.as_tool()` gives a tool that, each time a parent agent calls it, starts a fresh agent
with the child's settings in a new session of the PARENT's workspace
(`{parent session}--{child name}-{6 hex}`, never one the workspace holds already: see
`new_session`), runs the task there, and answers the parent with the child's final answer and
the references to what the child stored: never the child's transcript (context isolation).
Calls made in one step run at once, each in its own session; data/ is shared, being
content-addressed.

A child that fails (its model or a step raised) still hands back: the parent's tool result
is an error result saying why, naming the child's session and what it stored, so the parent's
model can read the partial work. A child that is cancelled (the parent's reply was cancelled,
Ctrl-C) is not answered for: the cancellation goes on up.

Sub-agents nest: a sub-agent with the tool of another (or of a copy of itself) may call it.
A model that keeps delegating would nest until Python's stack ran out (430 to 690 sessions
deep, then `RecursionError`); a call made `max_depth` levels down (`MAX_SUBAGENT_DEPTH`
unless `as_tool` says otherwise) starts no sub-agent and is answered with an error result.

The two records link: the parent's record gets a `subagent` event (`status` started, then
done, failed or cancelled) naming the child's session, the step and the tool call; the
child's `session_start` names its `parent` (session, step, tool call, agent).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .._disk import events
from .._disk.ids import child_prefix
from ..exceptions import ConfigError, ToolError
from ..text import SUBAGENT_FILES_MARK, SUBAGENT_MARK, defuse
from ..workspace import LocalWorkspace, Workspace, new_session
from ._tools import Tool, as_tool

__all__ = ["CALLER", "MAX_SUBAGENT_DEPTH", "Caller", "subagent_tool"]

# The most stored files an answer names one by one; the rest are counted, and the child's
# session folder (named too) holds them all.
MAX_NAMED_FILES = 20
# The most characters of a failed child's error shown in the parent's tool result and event.
MAX_ERROR_CHARS = 1000

MAX_SUBAGENT_DEPTH = 8
"""How deep sub-agents nest by default (`Agent.as_tool(max_depth=...)`): a call made by an
agent that is already this many sub-agents below the first one is answered with an error
result instead of starting another."""

# The most `max_depth` may be: each level holds dozens of Python frames, and Python's stack
# ran out between 430 and 690 levels, so a limit stays well below that.
_DEPTH_CEILING = 100

# How many sub-agents deep the code running now is: 0 in a top-level agent, 1 in its
# sub-agents, and so on. A context variable, so calls running at once each see their own, and
# the child's tool calls (tasks started inside the child's run) inherit it.
_DEPTH: ContextVar[int] = ContextVar("ctxoffload_subagent_depth", default=0)


@dataclass(frozen=True)
class Caller:
    """The agent running a tool call, and which one: set by `Agent` around each tool."""

    agent: Any  # the Agent (typed loosely: `_agent` imports this module)
    step: int
    tool_id: str


CALLER: ContextVar[Caller | None] = ContextVar("ctxoffload_caller", default=None)


def check_max_depth(max_depth: object) -> int:
    """`max_depth` as `Agent.as_tool` takes it: an int from 1 to 100.

    Raises:
        ConfigError: anything else, naming the value.
    """
    if (
        isinstance(max_depth, bool)
        or not isinstance(max_depth, int)
        or not 1 <= max_depth <= _DEPTH_CEILING
    ):
        raise ConfigError(
            f"max_depth {max_depth!r} is not a number of levels sub-agents may nest: pass an "
            f"int from 1 to {_DEPTH_CEILING} (the default is {MAX_SUBAGENT_DEPTH})"
        )
    return max_depth


def subagent_tool(template: Any, name: str | None, description: str | None, max_depth: int) -> Tool:
    """The tool `Agent.as_tool` returns (see there)."""
    tool_name = name or template.name
    max_depth = check_max_depth(max_depth)

    async def run_subagent(task: str) -> str:
        """Hand a task to a sub-agent.

        Args:
            task: What the sub-agent should do, stated fully: it sees nothing of your
                context but this text.

        Raises:
            ToolError: the sub-agent failed; the message says why and names its session
                and the files it stored (the tool result the parent's model gets).
        """
        depth = _DEPTH.get()
        if depth >= max_depth:
            # Checked before anything is made: no session, no event but the tool call's.
            raise ToolError(
                f"the sub-agent {tool_name} was not started: sub-agents nest {max_depth} deep "
                f"here already, the most this tool allows (as_tool(max_depth={max_depth})); "
                "do the task with your own tools, or answer with what you have"
            )
        caller = CALLER.get()
        parent = caller.agent if caller is not None else None
        offloader = parent.offloader if parent is not None else template.offloader
        # A child session is always new: an id drawn again (24 random bits: about 1 in 100
        # after 580 calls under one parent), or drawn by a call running at the same time,
        # would resume another child's transcript. Taken under its lease, handed to the child.
        session, lease = await new_session(
            offloader,
            child_prefix(
                parent.session_id if parent is not None else template.session_id, tool_name
            ),
            agent=template.name,
        )
        link = (
            {
                "session": parent.session_id,
                "agent": parent.name,
                "step": caller.step,
                "tool_id": caller.tool_id,
            }
            if parent is not None and caller is not None
            else None
        )
        child = template.spawn(session_id=session, offloader=offloader, parent=link, lease=lease)

        async def note(status: str, **fields: Any) -> None:
            """The parent's `subagent` event (none without a calling agent)."""
            if parent is not None and caller is not None:
                await parent._record.emit(
                    events.Subagent(
                        status=status,
                        step=parent._record.step_of(caller.step),
                        tool_id=caller.tool_id,
                        name=tool_name,
                        session=session,
                        **fields,
                    )
                )

        try:
            await note("started", task_chars=len(task))
        except BaseException:  # cancelled before the child ran: its session is let go of
            await child.aclose()
            raise
        started = time.monotonic()
        nested = _DEPTH.set(depth + 1)
        try:
            async with child:
                reply = await child.reply(task)
        except BaseException as exc:
            error = {"type": type(exc).__name__, "message": str(exc)[:MAX_ERROR_CHARS]}
            if not isinstance(exc, Exception):
                # Cancelled (CancelledError, KeyboardInterrupt): nothing to answer; the
                # record says so, and the cancellation goes on up.
                await note("cancelled", steps=len(child.steps), error=error)
                raise
            # The child's work so far is on disk: name it, so the parent's model can read
            # it back rather than start over.
            files = await _stored_files(child)
            await note("failed", steps=len(child.steps), error=error, files=len(files))
            failed = f"the sub-agent {tool_name} failed: {error['type']}: {error['message']}"
            raise ToolError(
                _hand_back(tool_name, session, failed, len(child.steps), files, child)
            ) from exc
        finally:
            _DEPTH.reset(nested)
        answer = reply.text
        files = await _stored_files(child)
        await note(
            "done",
            steps=len(child.steps),
            answer_chars=len(answer),
            files=len(files),
            duration_ms=round((time.monotonic() - started) * 1000, 3),
        )
        return _hand_back(tool_name, session, answer, len(child.steps), files, child)

    tool = as_tool(run_subagent)
    tool.name = tool_name
    tool.description = description or (
        f"Hand a task to the sub-agent {tool_name!r}"
        + (f" ({_first_line(template.system_prompt)})" if template.system_prompt else "")
        + ". It works in a context of its own and answers with its result and the paths of "
        "the files it stored, which you can read back."
    )
    return tool


async def _stored_files(child: Any) -> list[str]:
    """The references of what the child stored: its context log (when compressions wrote
    one) and its tool_result files (all the session's, from a `Workspace`; else those its
    compressor offloaded, newest first: any offloader's references, or none without one)."""
    store = child.offloader
    compressor = child.compressor
    files: list[str] = []
    if isinstance(store, Workspace):
        try:
            files = list(await store.list_files(child.session_id))
        except Exception:  # the answer matters more than the listing
            files = []
    if not files:
        files = [artifact.path for artifact in compressor.artifacts]
    if compressor.context_reference is not None:
        files.insert(0, compressor.context_reference)
    return files


def _hand_back(
    name: str, session: str, answer: str, steps: int, files: list[str], child: Any
) -> str:
    store = child.offloader
    where = f" (folder {store.session_dir(session)})" if isinstance(store, LocalWorkspace) else ""
    lines = [
        # A model's text (maybe a page's): it may not forge the lines that follow it.
        defuse(answer.strip()) or "(the sub-agent gave no answer text)",
        "",
        f"{SUBAGENT_MARK}{name} worked in session {session}{where}, {steps} "
        f"step{'' if steps == 1 else 's'}; its transcript stays there]",
    ]
    if files:
        lines.append(SUBAGENT_FILES_MARK)
        lines.extend(f"- {path}" for path in files[:MAX_NAMED_FILES])
        if len(files) > MAX_NAMED_FILES:
            lines.append(f"- ... and {len(files) - MAX_NAMED_FILES} more in that session")
    return "\n".join(lines)


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."

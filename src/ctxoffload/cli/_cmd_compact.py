"""`ctxoffload compact`: compact a session's context from outside the agent that writes it.

The request is a `compact_request` event in the session's record (`request_compaction`),
written first whatever happens next. Then the command tries to serve it itself, under the
session's lease: when nobody holds the session, it compacts the saved state (state.json) with
the session's recorded configuration and an extractive summary (no model is called), and
answers the request as an agent would. When an agent holds the session, that agent serves the
request at its next step; with `--wait` the command follows the record for the answer (and
serves the request itself if the session is let go of meanwhile). A session a host projects
(its record holds `projected` model calls and no saved state) is left to that host: its
`Projector` serves the request at the next model call.

Exit status: 0 compacted (or, without `--wait`, asked of the session's holder); 1 answered
without compacting (the reason is printed); 2 bad input (an id that is not a plain name, no
such session, instructions too long, no window known); 3 `--wait` ran out with the request
still pending (it stays pending: the holder, or the session's next writer, serves it).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from ..exceptions import CliError, ConfigError, SessionBusyError
from ._access import checked_session_id, open_backend
from ._arguments import (
    EXIT_OK,
    EXIT_PROBLEMS,
    SessionName,
    Workdir,
    add_json,
    add_workdir,
    said_session,
)
from ._commands import COMMAND_HELP
from ._output import print_json

__all__ = ["EXIT_PENDING", "register", "run"]

EXIT_PENDING = 3
"""`--wait` ran out and the request is still pending."""

# How often `--wait` looks at the record for the answer (and at the lease).
_POLL_SECONDS = 0.25


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `compact` to the command line."""
    parser = commands.add_parser(
        "compact",
        help=COMMAND_HELP["compact"],
        description=(
            "Ask the agent writing SESSION to compact its context at its next step: a "
            "compact_request event in the session's record names you (user, host, pid) and "
            "the instructions, and the agent answers with a compact event naming the request. "
            "When no agent holds the session, compact its saved state here, under its lease, "
            "with the session's recorded configuration and an extractive summary. Exit "
            "status: 0 compacted (or asked, without --wait), 1 answered without compacting, "
            "2 bad input, 3 --wait ran out with the request pending."
        ),
    )
    parser.add_argument(
        "session", metavar="SESSION", type=SessionName, help="the session to compact"
    )
    parser.add_argument(
        "--instructions",
        metavar="TEXT",
        help="what the summary should focus on and keep (added to the summary request)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="when an agent holds the session, wait this long for its answer (default: 0)",
    )
    parser.add_argument(
        "--window",
        type=int,
        metavar="TOKENS",
        help="the context window to compact to when nobody holds the session (default: "
        "the one the session recorded)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model whose tokenizer counts, when nobody holds the session (default: "
        "the one the session recorded)",
    )
    add_workdir(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the request, serve it here or wait for the holder's answer; print the outcome."""
    session = checked_session_id(args.session)
    if args.wait < 0 or args.wait != args.wait:
        raise CliError(f"--wait {args.wait} is not a number of seconds: give 0 or more")
    if args.window is not None and args.window < 1:
        raise CliError(f"--window {args.window} is not a positive number of tokens")
    workspace = open_backend(Workdir.of(args), session=session)
    outcome = asyncio.run(_compact(workspace, session, args))
    if args.json:
        print_json(outcome)
    else:
        print(outcome["text"])
    return int(outcome["exit"])


async def _compact(workspace: Any, session: str, args: argparse.Namespace) -> dict[str, Any]:
    from .._disk.compact_requests import CompactRequests, request_compaction

    if session not in await workspace.list_sessions():  # a bucket: open_backend cannot tell
        raise CliError(
            f"the workspace has no session {said_session(session)}: `ctxoffload ls` lists them"
        )
    settings = await _settings(workspace, session, args)
    projected = settings is None
    try:
        request = await request_compaction(workspace, session, args.instructions)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    follower = CompactRequests(workspace, session)
    deadline = time.monotonic() + args.wait
    holder: dict[str, Any] | None = None
    while True:
        if settings is not None:
            try:
                await _serve_here(workspace, session, settings)
            except SessionBusyError as busy:
                holder = busy.holder
        await follower.look()
        answer = follower.answers.get(request)
        if answer is not None:
            return _answered(session, request, answer.to_json())
        if time.monotonic() >= deadline:
            return _pending(session, request, holder, args.wait, projected=projected)
        await asyncio.sleep(_POLL_SECONDS)


async def _settings(
    workspace: Any, session: str, args: argparse.Namespace
) -> dict[str, Any] | None:
    """What an agent serving the request here is built with: the session's recorded
    configuration (its latest session_start), its window and model, the saved state's
    agent, system prompt and steps; `--window` and `--model` over them. None for a session
    a host projects (LangChain, pydantic-ai, the Agents SDK...): it keeps no state here to
    compact; the host's projection serves the request at its next model call."""
    from .._disk.events import EventKind

    started: dict[str, Any] = {}
    door: dict[str, Any] = {}
    projected = False
    for event in await workspace.read_events(session):
        if event.get("kind") == EventKind.SESSION_START:
            started = event
        elif event.get("kind") == EventKind.DOOR:
            door = event
        elif event.get("kind") == EventKind.MODEL_CALL and event.get("outcome") == "projected":
            projected = True
    if door and door.get("projects") is False:
        raise CliError(_not_ours(session, door))
    if door.get("projects") is True:
        return None
    state = await workspace.read_state(session) or {}
    if projected and not state.get("messages"):
        return None
    return _agent_settings(started, state, session, args)


def _not_ours(session: str, door: dict[str, Any]) -> str:
    """Why a session a door writes whose host owns the context cannot be compacted here."""
    from .._doors.doors import door_named

    known = door_named(door.get("door"))
    host = door.get("host") if isinstance(door.get("host"), str) else "its host"
    adapter = f" ({door['adapter']})" if isinstance(door.get("adapter"), str) else ""
    advice = known.compact if known is not None and known.compact else "compact it there"
    return (
        f"session {session!r} is written by {host}{adapter}, which decides what its model is "
        f"sent, so ctxoffload cannot compact it: {advice}; nothing was written"
    )


def _agent_settings(
    started: dict[str, Any], state: dict[str, Any], session: str, args: argparse.Namespace
) -> dict[str, Any]:
    from ..compression import ContextConfig

    recorded = started.get("config")
    try:
        config = ContextConfig.model_validate(recorded) if isinstance(recorded, dict) else None
    except ValueError:  # a config of another release: the defaults, the window kept below
        config = None
    config = config or ContextConfig()
    window = args.window or _positive(started.get("context_window")) or config.context_window
    if window is None:
        raise CliError(
            f"session {session!r} recorded no context window: pass --window TOKENS to compact "
            "its saved state"
        )
    config = config.model_copy(update={"context_window": window})
    saved = state.get("messages")
    messages: list[Any] = saved if isinstance(saved, list) else []
    _check_readable(messages, session)
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    system = first.get("content") if first.get("role") == "system" else None
    return {
        "config": config,
        "model": args.model or _text(started.get("model")) or _text(state.get("model")),
        "agent": _text(state.get("agent")) or _text(started.get("agent")) or "agent",
        "system_prompt": system if isinstance(system, str) else "",
        "steps": _positive(state.get("steps")) or 0,
    }


def _check_readable(messages: list[Any], session: str) -> None:
    """Refuse, before anything is written, a saved state this release cannot read: one a
    newer release wrote (a content block of a type it added), or one edited by hand.

    Raises:
        CliError: a message is not one this release reads, named by its number.
    """
    from pydantic import ValidationError

    from .._version import __version__
    from ..messages import Msg

    for number, message in enumerate(messages, 1):
        try:
            Msg.model_validate(message)
        except ValidationError as exc:
            errors = exc.errors()
            # A union's every branch says why it failed: the tag one names the block.
            tagged = [e for e in errors if "tag" in (e.get("ctx") or {})]
            error = (tagged or errors)[0]
            tag = (error.get("ctx") or {}).get("tag")
            if tag is not None:
                what = f"a content block of type {str(tag)[:80]!r}, which this ctxoffload"
                why = f"({__version__}) does not know (a newer release wrote it)"
            else:
                place = ".".join(str(part) for part in error["loc"])
                what, why = (
                    f"what this ctxoffload ({__version__}) cannot read",
                    (f"({error['msg']} at {place})"),
                )
            raise CliError(
                f"session {session!r}: message {number} of its state.json holds {what} {why}: "
                "upgrade ctxoffload to compact it (nothing was changed)"
            ) from None


async def _serve_here(workspace: Any, session: str, settings: dict[str, Any]) -> None:
    """Serve the session's pending requests under its lease, on its saved state.

    Raises:
        SessionBusyError: an agent holds the session (it serves them).
    """
    from ..agent import Agent, StepRecord
    from ..model import ScriptedModel

    config = settings["config"]
    model = ScriptedModel(
        model_name=settings["model"] or "scripted", context_window=config.context_window
    )
    agent = Agent(
        model=model,
        name=settings["agent"],
        system_prompt=settings["system_prompt"],
        offloader=workspace,
        session_id=session,
        context_config=config,
        include_retrieval_tool=False,
    )
    # state.json counts the session's steps: kept as they were.
    agent.steps = [StepRecord(step=n, context_tokens=0) for n in range(1, settings["steps"] + 1)]
    async with agent:
        await agent.serve_compact_requests()


def _answered(session: str, request: str, answer: dict[str, Any]) -> dict[str, Any]:
    from .._disk.events import event_sentence

    changed = answer.get("changed") is not False
    return {
        "session": session,
        "request": request,
        "status": "compacted" if changed else "not compacted",
        "answer": answer,
        "text": f"{session}: {event_sentence(answer)}",
        "exit": EXIT_OK if changed else EXIT_PROBLEMS,
    }


def _pending(
    session: str,
    request: str,
    holder: dict[str, Any] | None,
    waited: float,
    *,
    projected: bool = False,
) -> dict[str, Any]:
    from .._disk.wording import describe_holder

    who = describe_holder(holder) if holder is not None else "its writer"
    when = "at its next step"
    if projected:
        who, when = "the host that projects it", "at its next model call"
    after = f"no answer after {waited:g} s; " if waited > 0 else ""
    return {
        "session": session,
        "request": request,
        "status": "pending",
        "holder": holder,
        "text": (
            f"{session}: asked {who} to compact {when} (request {request}); {after}"
            f"the answer will be a compact event in `ctxoffload show {session}`"
        ),
        "exit": EXIT_PENDING if waited > 0 else EXIT_OK,
    }


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

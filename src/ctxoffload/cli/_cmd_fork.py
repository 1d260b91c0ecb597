"""`ctxoffload fork`: a new session that starts from what the model was sent at one step."""

from __future__ import annotations

import argparse

from ..exceptions import CliError, ConfigError, IncompleteRecord, InvalidSessionId
from ._access import open_backend
from ._arguments import EXIT_OK, EXIT_PROBLEMS, SessionName, Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._output import print_json, shown

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `fork` to the command line."""
    parser = commands.add_parser(
        "fork",
        help=COMMAND_HELP["fork"],
        description=(
            "Make session NEW start from exactly what the model was sent at step N of SESSION "
            "(as `show SESSION --step N` prints it), or from SESSION's saved state without "
            "--step. Nothing is copied: the fork's messages keep their references to "
            "SESSION's files and data/. An Agent(session_id=NEW) then continues from there, "
            "with another config or model if you like."
        ),
    )
    parser.add_argument("session", metavar="SESSION", type=SessionName, help="the session to fork")
    parser.add_argument("--step", type=int, metavar="N", help="the model call to start from")
    parser.add_argument(
        "--as", dest="new", metavar="NEW", required=True, help="the new session's id"
    )
    add_workdir(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Fork the session; print where the fork starts."""
    import asyncio

    workspace = open_backend(Workdir.of(args), session=args.session)
    from ..workspace import fork_session

    try:
        event = asyncio.run(fork_session(workspace, args.session, args.new, step=args.step))
    except (ConfigError, InvalidSessionId) as exc:
        raise CliError(str(exc)) from None
    except IncompleteRecord as exc:
        raise CliError(str(exc), EXIT_PROBLEMS) from None
    except LookupError as exc:
        raise CliError(str(exc).strip("'\"")) from None
    if args.json:
        print_json({"session": args.new, **event})
        return EXIT_OK
    origin = event["origin"]
    at = f"step {origin['step']}" if args.step is not None else "its saved state"
    print(
        f"forked {args.session} at {at} as {args.new}: {event['messages']} messages, "
        f"state in {shown(str(event['state']))}"
    )
    print(f"continue it with Agent(..., session_id={args.new!r}) on this workspace")
    return EXIT_OK

"""`ctxoffload purge`: remove the sessions named, with the refusals of gc (a live session
stays), from a folder, a bucket or a database."""

from __future__ import annotations

import argparse

from ..exceptions import CliError
from ._arguments import EXIT_OK, EXIT_PROBLEMS, Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._session_name import SessionName

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `purge` to the command line."""
    parser = commands.add_parser(
        "purge",
        help=COMMAND_HELP["purge"],
        description=(
            "Remove the sessions named, whole, from the workspace (a folder, a bucket or a "
            "database), as gc removes one: never a live session, one whose lease a writer "
            "holds or whose files a session not named references (a fork's origin, a "
            "sub-agent's parent or child: name them together). When one named is live, "
            "none is removed (exit 2, each said with why). data/ files stay: the next gc "
            "removes those no session names."
        ),
    )
    parser.add_argument(
        "sessions", nargs="+", metavar="SESSION", type=SessionName, help="the sessions to remove"
    )
    parser.add_argument("--dry-run", action="store_true", help="report, remove nothing")
    add_workdir(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Remove the sessions; print what was (or would be) removed, or why nothing was."""
    import asyncio
    import dataclasses

    from .._disk.ids import validate_session_id
    from ..exceptions import ConfigError, InvalidSessionId, OffloadError
    from ..workspace import GarbageCollector
    from ._access import open_backend
    from ._output import human_bytes, inert, print_json

    try:
        sessions = list(dict.fromkeys(validate_session_id(s) for s in args.sessions))
    except InvalidSessionId as exc:
        raise CliError(str(exc)) from None
    where = Workdir.of(args)
    workspace = open_backend(where, fsync=False)
    if not isinstance(workspace, GarbageCollector):
        raise CliError(
            f"this version of ctxoffload has no {type(workspace).__name__}.remove_sessions: "
            "upgrade ctxoffload"
        )
    try:
        report = asyncio.run(workspace.remove_sessions(sessions, dry_run=args.dry_run))
    except ConfigError as exc:  # a session that is not there
        raise CliError(f"--workdir {where.text!r}: {exc}") from None
    except OffloadError as exc:
        raise CliError(str(exc)) from None
    refused = not report.sessions_removed and bool(report.sessions_kept)
    if args.json:
        print_json(dataclasses.asdict(report))  # gc's report: data_removed stays empty
        return 2 if refused else (EXIT_PROBLEMS if report.sessions_kept else EXIT_OK)
    if refused:
        # `why` quotes a lease's record (an agent's name): text the workspace holds.
        reasons = "; ".join(
            f"session {inert(name)!r} "
            f"{'must stay' if 'reference' in why else 'is live'}: {inert(why)}"
            for name, why in report.sessions_kept.items()
        )
        named = any("reference" in why for why in report.sessions_kept.values())
        together = (
            "; a session another one names goes with it: name both in one purge "
            "(ctxoffload purge SESSION OTHER ...)"
            if named
            else ""
        )
        raise CliError(f"{reasons}: nothing was removed{together}")
    verb = "would remove" if report.dry_run else "removed"
    for session in report.sessions_removed:
        print(f"{verb} session {inert(session)}")
    for session, why in report.sessions_kept.items():  # written while the purge ran
        print(f"kept session {inert(session)}: {inert(why)}")
    count = len(report.sessions_removed)
    print(
        f"{verb} {count} session{'' if count == 1 else 's'}: "
        f"{human_bytes(report.bytes_freed)}{' would be' if report.dry_run else ''} freed "
        "(data/ files stay until `ctxoffload gc` finds none naming them)"
    )
    return EXIT_PROBLEMS if report.sessions_kept else EXIT_OK

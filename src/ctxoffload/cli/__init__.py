"""The `ctxoffload` command.

Each command lives in `_cmd_<name>.py`, which exposes `register(commands)` (adds its parser
to the argparse subparsers and `set_defaults(run=run)`) and `run(args) -> int`. Command
modules stay light: anything heavy is imported inside `run`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ._commands import COMMAND_HELP

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["main"]

# In the order `--help` lists them.
COMMANDS = list(COMMAND_HELP)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxoffload")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _VersionAction(argparse.Action):
    """`--version`, reading the installed version only when asked (importlib.metadata costs
    about 20 ms, a third of a plain command's start-up)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        sys.stdout.write(f"ctxoffload {_version()}\n")
        parser.exit()


def _command_at(argv: list[str]) -> int | None:
    """Where in `argv` the command is, when it is plain to see; None means "parse with the
    whole parser".

    Only global options (`--workdir DIR`) may come before the command; `--help`, `--version`
    or anything unknown there needs every command registered (to list them, or to report the
    usage error exactly as the whole parser would).
    """
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--workdir":
            index += 2
        elif token.startswith("--workdir="):
            index += 1
        else:
            return index if token in COMMANDS else None
    return None


def _columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` reports it, without `shutil`."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, sized without importing `shutil`.

    argparse builds a formatter for every option it registers, and its own sizes the help
    with `shutil`, whose import (bz2, lzma, zlib) costs ~3 ms of every command's start-up.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(
            prog, indent_increment, max_help_position, _columns() - 2 if width is None else width
        )


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error, the secrets of the arguments it quotes masked (a key given in the
        wrong place is said as every command line is, `ctxoffload._secrets`)."""
        from .._secrets import Secrets, masked_command

        unrecognized = "unrecognized arguments: "
        if message.startswith(unrecognized):
            message = unrecognized + masked_command(message[len(unrecognized) :].split(" "))
        super().error(Secrets().mask(message))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every command listed, or command `only` with all its options.

    A run registers only the command it runs, and `--help` lists the commands from their
    one-line help without importing them: importing and registering all ten costs about
    50 ms, more than the whole of a typical `grep` or `ls`.
    """
    parser = _Parser(
        prog="ctxoffload",
        description=(
            "Keep LLM agents inside their context window without losing anything; "
            "inspect the workspaces they leave on disk."
        ),
        epilog="Exit status: 0 success, 1 problems found (or no match), 2 usage or input error.",
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument(
        "--workdir",
        default=None,
        metavar="DIR",
        help=(
            "the workspace: a folder, a database URL (sqlite:///agents.db, "
            "postgresql://user@host/db) or a bucket URL (s3://bucket/prefix); watch takes no "
            "bucket, replay and mcp-proxy a folder only (default: $CTXOFFLOAD_WORKDIR, else the "
            "current directory; demo makes a new folder)"
        ),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only is None:
        # Listing the commands needs only their one-line help; a run registers its own.
        for name, text in COMMAND_HELP.items():
            commands.add_parser(name, help=text)
    else:
        # `mcp-proxy` lives in `_cmd_mcp_proxy.py`: a module name has no hyphen.
        importlib.import_module(f"{__name__}._cmd_{only.replace('-', '_')}").register(commands)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str], at: int | None) -> argparse.Namespace:
    """`argv` parsed: the global options, then the command's own arguments by its own parser.

    The command's parser takes its options and positionals in any order
    (`grep PATTERN -i SESSION`) and reports a usage error with its own usage line
    (`usage: ctxoffload grep ...`, `ctxoffload grep: error: ...`).
    """
    if at is None:
        return parser.parse_args(argv)
    args = parser.parse_args(argv[:at])
    commands: Any = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    own: argparse.ArgumentParser = commands.choices[argv[at]]
    for key, value in vars(_parse_intermixed(own, argv[at + 1 :])).items():
        setattr(args, key, value)
    args.command = argv[at]
    return args


def _parse_intermixed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`parser.parse_intermixed_args(argv)`, with everything after `--` a positional.

    Before Python 3.13 the intermixed parse drops the `--` in its first pass and then reads
    what followed it as options (`grep -- -worker-7 SESSION` failed with "unrecognized
    arguments: -worker-7"). So with a `--` this runs the same two passes itself: the options
    before `--` (positionals set aside), then the positionals, with `--` kept before the rest.
    """
    if "--" not in argv:
        return parser.parse_intermixed_args(argv)
    at = argv.index("--")
    positionals = parser._get_positional_actions()
    optionals = parser._get_optional_actions()
    saved = [(a, a.nargs, a.default, a.required) for a in positionals + optionals]
    usage = parser.usage
    try:
        if parser.usage is None:  # errors of the first pass show the positionals too
            parser.usage = parser.format_usage()[len("usage: ") :]
        for action in positionals:
            action.nargs = action.default = argparse.SUPPRESS
        args, rest = parser.parse_known_args(argv[:at])
        for action, nargs, default, _ in saved:
            action.nargs, action.default = nargs, default
        for action in optionals:
            action.required = False  # checked in the first pass
        args, extras = parser.parse_known_args([*rest, "--", *argv[at + 1 :]], args)
    finally:
        for action, nargs, default, required in saved:
            action.nargs, action.default, action.required = nargs, default, required
        parser.usage = usage
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the `ctxoffload` command line and return its exit status.

    0 on success, 1 when problems are found (or grep matches nothing), 2 on a usage or
    input error, which is reported as one line on stderr.
    """
    if argv is None:
        argv = sys.argv[1:]
    from ._output import InertStream

    # Every line any command prints goes through `inert`: nothing a workspace holds (a tool's
    # output, a file name, a run name) reaches the terminal as a control sequence.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(sys.stdout), InertStream(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    at = _command_at(argv)
    parser = build_parser(argv[at] if at is not None else None)
    try:
        args = _parse(parser, argv, at)
    except SystemExit as exc:  # --help, --version, or a usage error argparse reported
        return exc.code if isinstance(exc.code, int) else 2
    # Imported only now: `--help` and `--version` need none of it.
    from ..exceptions import CliError
    from ._arguments import EXIT_USAGE

    run = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from ._bucket import BucketCopies
    from ._output import PATHS_SHOWN_AS

    prefix = f"ctxoffload {args.command}"
    # The copies of a bucket this run makes: paths into them are printed as the bucket's
    # URIs, and they are removed when the command ends.
    copies = args.bucket_copies = BucketCopies()
    shown_as = PATHS_SHOWN_AS.set(copies.display)
    try:
        status: int = run(args)
        return status
    except CliError as exc:
        print(f"{prefix}: {copies.as_uris(str(exc))}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (`| head`) went away: not an error of ours. Point stdout at devnull so
        # the interpreter's final flush does not complain.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        from ..exceptions import CtxOffloadError

        if isinstance(exc, CtxOffloadError):
            print(f"{prefix}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, OSError):
            where = f" {exc.filename}" if exc.filename else ""
            print(f"{prefix}: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        raise
    finally:
        PATHS_SHOWN_AS.reset(shown_as)
        copies.remove_all()

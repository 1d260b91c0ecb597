"""The `ctxoffload` command line read by argparse: the whole parser, every command listed, or
one command with all its options (`build_parser`), and the reading of a command line by it
(`parse`).

`main` reads a plain `grep` command line without it (`_grep_arguments.py`); everything else,
and every help text and usage error, is read here.
"""

from __future__ import annotations

import argparse
import sys

from ._commands import COMMAND_HELP, command_at, command_module

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["build_parser", "parse"]


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

    def _split_lines(self, text: str, width: int) -> list[str]:
        """An option's help in lines of `width`, never broken inside a hyphenated word (a
        format's name, `claude-code`, or an option's, `--summary-model`)."""
        return wrapped(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """A description filled to `width`, hyphenated words whole (`sub-agent`)."""
        return "\n".join(indent + line for line in wrapped(text, width - len(indent)))


def wrapped(text: str, width: int) -> list[str]:
    """`textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)`, without
    importing `textwrap` (2 ms, a tenth of what `--help` costs over `import argparse`).

    textwrap's own steps on the words and the spaces between them: each line takes what
    fits, a space that would start a line is dropped, and so is one (or an empty piece)
    that ends it; a word longer than a line is cut to fill the line it would start.
    """
    if width <= 0:
        raise ValueError(f"invalid width {width!r} (must be > 0)")
    pieces: list[str] = []
    for word in text.split():
        pieces += (" ", word) if pieces else (word,)
    pieces.reverse()  # (the next piece last)
    lines: list[str] = []
    while pieces:
        if pieces[-1] == " " and lines:
            pieces.pop()
        line: list[str] = []
        size = 0
        while pieces and size + len(pieces[-1]) <= width:
            size += len(pieces[-1])
            line.append(pieces.pop())
        if pieces and len(pieces[-1]) > width:
            room = width - size
            line.append(pieces[-1][:room])
            pieces[-1] = pieces[-1][room:]
        if line and not line[-1].strip():
            line.pop()
        if line:
            lines.append("".join(line))
    return lines


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
        _list_commands(commands)
    else:
        command_module(only).register(commands)
    return parser


class _ListedParsers(dict):  # type: ignore[type-arg]
    """argparse's map of command name to parser when the commands are only listed: each
    parser, as bare as `add_parser(name)` would make it, is made when argparse first asks
    for it (a command line such as `--bogus grep x`, read by the whole parser).

    Making all nineteen up front cost 5-12 ms of a `--help`: each parser looks up three
    translations of argparse's own words (`gettext` searches the disk for each), where the
    listing needs the names and their help lines only.
    """

    def __init__(self, commands: Any) -> None:
        super().__init__(dict.fromkeys(COMMAND_HELP))
        self._commands = commands

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        parser = super().__getitem__(name)
        if parser is None:
            made = self._commands._parser_class(prog=f"{self._commands._prog_prefix} {name}")
            parser = self[name] = made
        return parser  # type: ignore[no-any-return]


def _list_commands(commands: Any) -> None:
    """Put every command in `commands` (argparse's subparsers) with its one-line help,
    their parsers made only when asked for (`_ListedParsers`)."""
    commands.choices = commands._name_parser_map = _ListedParsers(commands)
    for name, text in COMMAND_HELP.items():
        commands._choices_actions.append(commands._ChoicesPseudoAction(name, (), text))


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


def parse(argv: list[str]) -> argparse.Namespace | int:
    """`argv` read by the whole parser: the arguments of the command to run, or the exit
    status when there is none to run (after `--help`, `--version` or a usage error, which
    argparse has printed, or when no command is given: the help, on stderr)."""
    at = command_at(argv)
    parser = build_parser(argv[at] if at is not None else None)
    try:
        args = _parse(parser, argv, at)
    except SystemExit as exc:  # --help, --version, or a usage error argparse reported
        return exc.code if isinstance(exc.code, int) else 2
    if getattr(args, "run", None) is None:
        from ._arguments import EXIT_USAGE

        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return args

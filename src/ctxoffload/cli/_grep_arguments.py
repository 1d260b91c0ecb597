"""A plain `ctxoffload grep` command line read without argparse (`read_grep_arguments`).

Importing argparse (with `re`, `enum` and `gettext`) costs about 12 ms, a fifth of a search
of 100 MB that ripgrep runs in 25 ms, so `main` gives each command line to this reader first.
It reads only what it can read exactly as the whole parser (`_parser.py`, `_cmd_grep.register`)
does, to the same values: `grep`'s options each spelled whole, a value in the next argument
(or after `=` for a long option), one or two positionals (PATTERN, SESSION), `--workdir DIR`
before the command. For anything else it returns None and the whole parser reads the line:
`--help`, `--`, an abbreviation (`--ignore`), short options grouped or joined to their value
(`-iF`, `-C3`), an argument that begins with `-` where a value or a positional goes, a value
its option's type refuses, no pattern or a third positional. So every help text, usage
error and exit status stays the parser's.
"""

from __future__ import annotations

from ._arguments import Arguments
from ._commands import command_at

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULTS", "read_grep_arguments"]

DEFAULTS: dict[str, object] = {
    "json": False,
    "context": 0,
    "ignore_case": False,
    "fixed_strings": False,
    "events": False,
    "writers": False,
    "max_columns": 2000,
    "timeout": 30.0,
}
"""The value of each of grep's options (by its `dest`) when it is not given: the parser's
defaults too (`_cmd_grep.register`)."""

# Each spelling of an option this reader takes: its `dest`, and the type that reads its value
# (None: a flag, True when given).
_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    "--workdir": ("workdir", str),
    "--json": ("json", None),
    "-C": ("context", int),
    "--context": ("context", int),
    "-i": ("ignore_case", None),
    "--ignore-case": ("ignore_case", None),
    "-F": ("fixed_strings", None),
    "--fixed-strings": ("fixed_strings", None),
    "--events": ("events", None),
    "--writers": ("writers", None),
    "--max-columns": ("max_columns", int),
    "--timeout": ("timeout", float),
}


def read_grep_arguments(argv: list[str]) -> Arguments | None:
    """The arguments the whole parser would give for `argv` (but `run`, which `main` adds),
    when it is a plain `grep` command line (see the module); None for any other, which the
    whole parser reads."""
    at = command_at(argv)
    if at is None or argv[at] != "grep":
        return None
    values: dict[str, object] = {"workdir": None}
    for index in range(at):  # only `--workdir DIR` and `--workdir=DIR` (`command_at`)
        token = argv[index]
        if token.startswith("--workdir="):
            values["workdir"] = token[len("--workdir=") :]
        elif token != "--workdir":
            values["workdir"] = token  # the value of the `--workdir` before it
    if isinstance(values["workdir"], str) and values["workdir"].startswith("-"):
        return None
    values.update(DEFAULTS)
    positionals: list[str] = []
    tokens = iter(argv[at + 1 :])
    for token in tokens:
        if not token.startswith("-"):
            positionals.append(token)
            continue
        name, equals, value = token.partition("=")
        option = _OPTIONS.get(name)
        if option is None:
            return None
        dest, kind = option
        if kind is None:
            if equals:
                return None  # `--json=yes`: argparse's error
            values[dest] = True
            continue
        if equals and not name.startswith("--"):
            return None  # `-C=3`: left to argparse
        if not equals:
            value = next(tokens, "-")  # none left: argparse's error
        if value.startswith("-"):
            return None
        try:
            values[dest] = kind(value)
        except (TypeError, ValueError):
            return None  # argparse's error, naming the value
    if not 1 <= len(positionals) <= 2:
        return None
    from ._session_name import SessionName

    values["pattern"] = positionals[0]
    values["session"] = SessionName(positionals[1]) if len(positionals) == 2 else None
    return Arguments(command="grep", **values)

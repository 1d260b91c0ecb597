"""The arguments every `ctxoffload` command shares: the exit statuses, `--workdir` and
`--json`, the workdir they name, spelled as the user gave it (`Workdir`), and the parsed
arguments of a command line read without argparse (`Arguments`).

Kept light on purpose: `ctxoffload --help` and every command import it at start-up, so it
imports neither `typing` nor `pathlib` at module level, nor argparse (a plain `grep` is read
without it).
"""

from __future__ import annotations

import os

from ..exceptions import CliError

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    import argparse

    # Not at run time: `pathlib` imports urllib.parse and ipaddress, ~4.5 ms that `grep`
    # does without (it works on str paths); `Workdir.local` imports it when it is called.
    from pathlib import Path
    from typing import Any

    from ._bucket import BucketCopies

__all__ = [
    "DEMO_FOLDER_PREFIX",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "Arguments",
    "Workdir",
    "add_json",
    "add_workdir",
    "child_path",
    "is_store_url",
    "path_text",
]

DEMO_FOLDER_PREFIX = "ctxoffload-demo-"
"""How the folders `ctxoffload demo` makes begin (then the time: `20261126-081723`)."""

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: 128 + SIGINT, as a shell reports it


def add_workdir(
    parser: argparse.ArgumentParser, *, bucket: bool = True, database: bool | None = None
) -> None:
    """`--workdir DIR` on a command (it may also be given before the command); `bucket`:
    whether the command reads a bucket URL too; `database`: a database URL (default: as
    `bucket`)."""
    import argparse

    databases = "a database URL such as sqlite:///agents.db or postgresql://user@host/db"
    if bucket:
        where = f"a folder, a bucket URL such as s3://bucket/prefix, or {databases}"
    elif database:
        where = f"a folder or {databases}"
    else:
        where = "a folder"
    parser.add_argument(
        "--workdir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help=f"the workspace: {where} (default: $CTXOFFLOAD_WORKDIR, else the current directory)",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    """`--json`: print machine-readable JSON instead of text."""
    parser.add_argument(
        "--json", action="store_true", default=False, help="print JSON instead of text"
    )


class Arguments:
    """A command's parsed arguments, as argparse's `Namespace` holds them (`command`, `run`
    and each option's value, by the option's `dest`), for a command line read without
    argparse (`_grep_arguments.py`)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    # As a Namespace's attributes: any name, typed Any.
    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value


class Workdir:
    """The workspace a command is pointed at, read once from its arguments by its `run`
    (`Workdir.of`) and handed down instead of them.

    Attributes:
        text: as given: `--workdir` (before or after the command), else
            $CTXOFFLOAD_WORKDIR, else the current directory.
        given: whether `--workdir` was given.
        command: the command's name, for messages.
        copies: where the run keeps the copies it makes of a bucket: `main` makes one for
            each run (`args.bucket_copies`) and removes them when it ends.
    """

    __slots__ = ("command", "copies", "given", "text")

    def __init__(self, text: str, *, given: bool, command: str, copies: BucketCopies) -> None:
        self.text = text
        self.given = given
        self.command = command
        self.copies = copies

    @classmethod
    def of(cls, args: argparse.Namespace | Arguments) -> Workdir:
        """The workdir the parsed arguments of a command name."""
        given = getattr(args, "workdir", None)
        if given is not None:
            text = str(given)
        else:
            text = os.environ.get("CTXOFFLOAD_WORKDIR") or os.getcwd()
        return cls(
            text,
            given=given is not None,
            command=getattr(args, "command", ""),
            copies=args.bucket_copies,
        )

    @property
    def is_bucket(self) -> bool:
        """Whether it names object storage (`s3://...`) rather than a folder."""
        return is_store_url(self.text)

    def local(self) -> Path:
        """The folder, for a command that needs a local one.

        Raises:
            CliError: it is a bucket URL.
        """
        if self.is_bucket:
            from ._schemes import check_scheme

            check_scheme(self.text)  # a typo is said as such, not as a bucket refused
            raise CliError(
                f"--workdir {self.text!r}: `ctxoffload {self.command}` works on a local "
                "folder; the commands that read or remove sessions (ls, show, grep, ...) take a "
                "bucket or a database too"
            )
        from pathlib import Path

        return Path(self.text)


def is_store_url(text: str) -> bool:
    """Whether a --workdir names object storage (`s3://...`) rather than a folder.

    (String methods only: this runs at every command's start, and `re` is not loaded yet.)
    """
    scheme, sep, _ = text.partition("://")
    return (
        bool(sep)
        and scheme[:1].isalpha()
        and all(c.isalnum() or c in "+.-" for c in scheme)
        and scheme.lower() != "file"
    )


def path_text(text: str) -> str:
    """`str(Path(text))` without importing pathlib: `ws/./x//` -> `ws/x`, `''` -> `'.'`.

    POSIX rules, as pathlib has them: empty and `.` parts dropped, `..` kept, trailing and
    repeated slashes dropped, exactly two leading slashes kept (POSIX leaves `//` to the
    system) and more than two made one.
    """
    if os.name != "posix":  # pragma: no cover - drives and backslashes: pathlib knows them
        from pathlib import Path

        return str(Path(text))
    rest = text.lstrip("/")
    slashes = len(text) - len(rest)
    root = "" if slashes == 0 else "//" if slashes == 2 else "/"
    return root + "/".join(p for p in rest.split("/") if p and p != ".") or "."


def child_path(folder: str, name: str) -> str:
    """`str(Path(folder) / name)` for a `folder` in the form `path_text` gives and a plain
    file name (no `/`, not `.` or `..`); with an empty `name`, the prefix that each of the
    folder's names is joined to (`child_path(folder, "") + name == child_path(folder, name)`),
    made once for a folder whose many files are named."""
    if folder == ".":
        return name
    return folder + name if folder.endswith("/") else folder + "/" + name

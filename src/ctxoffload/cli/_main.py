"""`ctxoffload`'s entry (`main`): the command line read, the command run, and what each way
of failing prints and exits with.

A plain `grep` command line is read without argparse (`_grep_arguments.py`): importing it
(with `re`, `enum` and `gettext`) is about a fifth of a search of 100 MB that ripgrep runs
in 25 ms. Every other command line, and any `grep` line that reader is not sure of, is read
by the whole parser (`_parser.py`), which prints every help text and usage error.
"""

from __future__ import annotations

import sys

from ._grep_arguments import read_grep_arguments

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from argparse import Namespace

    from ._arguments import Arguments

__all__ = ["main", "run_command_line"]


def main(argv: list[str] | None = None) -> int:
    """Run the `ctxoffload` command line and return its exit status.

    0 on success, 1 when problems are found (or grep matches nothing), 2 on a usage or
    input error, which is reported as one line on stderr; 130 on Ctrl-C or SIGTERM, said as
    one line ("interrupted") once the command has cleaned up.
    """
    return run_command_line(sys.argv[1:] if argv is None else argv)


def run_command_line(argv: list[str], *, lean: bool = True) -> int:
    """`main` for `argv`; `lean=False` reads every command line with the whole parser (the
    tests hold the lean reading of `grep` to it)."""
    _fill_closed_stdin_and_stderr()
    if sys.stdout is None:
        # Python leaves sys.stdout None when descriptor 1 was closed before it started
        # (`>&-`): what a command prints could go nowhere, and its status alone would not
        # say what it did, so none runs.
        from ._arguments import EXIT_USAGE

        if sys.stderr is not None:
            sys.stderr.write(
                "ctxoffload: stdout is closed, so nothing could be printed: "
                "send it to /dev/null to discard the output\n"
            )
        return EXIT_USAGE
    from ._output import InertStream
    from ._signals import sigterm_interrupts

    # Every line any command prints goes through `inert`: nothing a workspace holds (a tool's
    # output, a file name, a run name) reaches the terminal as a control sequence.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(sys.stdout), InertStream(sys.stderr)
    try:
        with sigterm_interrupts():
            return _read_and_run(argv, lean=lean)
    except Exception as exc:
        if not _interrupted(exc):
            raise
        return _said_interrupted("ctxoffload")
    except KeyboardInterrupt:
        # Ctrl-C (or SIGTERM) before a command began, as the command line was read (argparse
        # and the commands' modules take a few hundred ms to import), or as one ended.
        return _said_interrupted("ctxoffload")
    finally:
        sys.stdout, sys.stderr = streams


def _read_and_run(argv: list[str], *, lean: bool) -> int:
    """Read the command line, then run its command."""
    plain = read_grep_arguments(argv) if lean else None
    if plain is not None:
        from ._commands import command_module

        plain.run = command_module("grep").run
        return _run(plain)
    from ._parser import parse

    args = parse(argv)
    return args if isinstance(args, int) else _run(args)


def _fill_closed_stdin_and_stderr() -> None:
    """Open /dev/null as stdin and as stderr where either was closed before Python started
    (`<&-`, `2>&-`, which leave sys.stdin or sys.stderr None): a file the command opens then
    never takes descriptor 0 or 2, where a read of stdin, or what a child process or the
    interpreter writes to descriptor 2, would reach it; stdin reads as empty, and an error
    is still told by the exit status."""
    import os

    for fd, flags, name in ((0, os.O_RDONLY, "stdin"), (2, os.O_WRONLY, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            continue  # (opened since the interpreter started: left as it is)
        except OSError:
            pass
        opened = os.open(os.devnull, flags)
        if opened != fd:  # (descriptor 1 was closed too, and lower)
            os.dup2(opened, fd)
            os.close(opened)
        mode = "r" if fd == 0 else "w"
        # (The stream is the process's own, for as long as it runs, as sys.stdin is.)
        stream = open(fd, mode, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        setattr(sys, name, stream)


def _run(args: Namespace | Arguments) -> int:
    """Run the command the arguments name; what goes wrong is said as one line on stderr."""
    from ..exceptions import CliError
    from ._arguments import EXIT_USAGE
    from ._bucket import BucketCopies
    from ._output import PATHS_SHOWN_AS

    prefix = f"ctxoffload {args.command}"
    # The copies of a bucket this run makes: paths into them are printed as the bucket's
    # URIs, and they are removed when the command ends.
    copies = args.bucket_copies = BucketCopies()
    shown_as = PATHS_SHOWN_AS.set(copies.display)
    try:
        status: int = args.run(args)
        return status
    except CliError as exc:
        print(f"{prefix}: {copies.as_uris(str(exc))}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return _said_interrupted(prefix)
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
        if _interrupted(exc):
            return _said_interrupted(prefix)
        raise
    finally:
        PATHS_SHOWN_AS.reset(shown_as)
        copies.remove_all()


def _interrupted(exc: BaseException) -> bool:
    """Whether an error came of a Ctrl-C: one that lands while a module is imported can come
    out wrapped (`RuntimeError: Error calling __set_name__`), or leave a module half made
    for the next line to trip on (an AttributeError out of argparse)."""
    return isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)


def _said_interrupted(prefix: str) -> int:
    """Say that the command was interrupted (Ctrl-C or SIGTERM); its exit status."""
    from ._arguments import EXIT_INTERRUPTED

    print(f"{prefix}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED

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

    Without `argv`, as the `ctxoffload` script and `python -m ctxoffload` call it, the
    process is the command's own: a `grep` then ends it with that status as soon as its
    output is out, where nothing is left for the interpreter to do (`_end_process`).
    """
    if argv is not None:
        return run_command_line(argv)
    status, command = _command_line(sys.argv[1:], lean=True)
    if command == "grep":
        _end_process(status)
    return status


def run_command_line(argv: list[str], *, lean: bool = True) -> int:
    """`main` for `argv`; `lean=False` reads every command line with the whole parser (the
    tests hold the lean reading of `grep` to it)."""
    return _command_line(argv, lean=lean)[0]


def _command_line(argv: list[str], *, lean: bool) -> tuple[int, str | None]:
    """`run_command_line`: the exit status, and the command that ran (None when none did:
    a usage error, `--help`, an interruption)."""
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
        return EXIT_USAGE, None
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
        return _said_interrupted("ctxoffload"), None
    except KeyboardInterrupt:
        # Ctrl-C (or SIGTERM) before a command began, as the command line was read (argparse
        # and the commands' modules take a few hundred ms to import), or as one ended.
        return _said_interrupted("ctxoffload"), None
    finally:
        sys.stdout, sys.stderr = streams


def _read_and_run(argv: list[str], *, lean: bool) -> tuple[int, str | None]:
    """Read the command line, then run its command: its exit status, and the command."""
    plain = read_grep_arguments(argv) if lean else None
    if plain is not None:
        from ._commands import command_module

        plain.run = command_module("grep").run
        return _run(plain), plain.command
    from ._parser import parse

    args = parse(argv)
    if isinstance(args, int):
        return args, None
    return _run(args), args.command


def _end_process(status: int) -> None:
    """End the process with `status` now, without the interpreter's finalization, when
    nothing is left for it to do; otherwise return, and the interpreter ends as usual.

    Finalization tears down every module and frees its objects: ~5 ms of a `ctxoffload
    grep`, whose whole run over a file of a few matches is about 60 ms against GNU grep's
    2 ms. Nothing is left to do when stdout and stderr are flushed, no atexit function is
    registered (a sitecustomize's, coverage's, logging's), `threading` was never imported
    (finalization would wait for a thread still running), no tracer or profiler runs
    (`python -m cProfile` prints its report after the program) and no interactive prompt
    is to follow (`python -i`, PYTHONINSPECT). A flush that fails (the reader went away)
    is left to the interpreter, which says so and exits 120, as it always did.
    """
    import atexit
    import os

    if (
        "threading" in sys.modules
        or atexit._ncallbacks()
        or sys.gettrace() is not None
        or sys.getprofile() is not None
        or sys.flags.inspect
        or os.environ.get("PYTHONINSPECT")
    ):
        return
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # (a stream closed: ValueError)
        return
    os._exit(status)


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

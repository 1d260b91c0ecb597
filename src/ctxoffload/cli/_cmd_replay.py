"""`ctxoffload replay`: what ctxoffload would have done to a recorded agent transcript.

The transcript is fed to a `Compressor` as the agent produced it (`_replaying.replay_run`):
each tool result goes through truncation as it arrives, and before each assistant message (a
model call) the context is compressed if it is over the trigger. The report gives, per model
call, the context tokens with ctxoffload next to the tokens the context held without it, and
ends with a check that every message and every byte that left the context can be read back from
the references still in it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from ..exceptions import CliError
from ._access import session_entry
from ._arguments import EXIT_OK, EXIT_PROBLEMS, Workdir, add_json
from ._commands import COMMAND_HELP
from ._output import Column, Progress, print_json, print_table
from ._replaying import ReplayResult, replay_run

__all__ = ["ReplayResult", "register", "replay_run", "run"]

DEFAULT_WINDOW = 32_000


RESULT_COLUMNS = (
    Column("config"),
    Column("window", right=True, keep=5),
    Column("model calls", "calls", right=True, keep=1),
    Column("peak", right=True, keep=9),
    Column("peak without", "without", right=True, keep=8),
    Column("files offloaded", "files", right=True, keep=3),
    Column("compressions", "compr.", right=True, keep=6),
    Column("messages offloaded", "msgs", right=True, keep=2),
    Column("recoverable", "recov.", keep=7),
    Column("session", fold=True, keep=4),
)
"""The columns of replay's results; on a narrow terminal they give way by `keep`."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `replay` to the command line."""
    from ._transcripts import FORMATS

    parser = commands.add_parser(
        "replay",
        help=COMMAND_HELP["replay"],
        description=(
            "Replay a recorded transcript through ctxoffload's truncation and compression "
            "(extractive summaries unless --summary-model is given), write it as a session of the "
            "workspace, and report per model call the context tokens with and without "
            "ctxoffload, the peak, offloads, compressions, and whether every byte that left "
            "the context is recoverable from the references left in it. Several --config "
            "give a side-by-side comparison. The workspace is created if --workdir does not "
            "exist yet. Exit 1 when something is not recoverable."
        ),
    )
    # Not `add_workdir`: replay writes, and only into a folder.
    parser.add_argument(
        "--workdir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help=(
            "the workspace folder to write the sessions into, created if missing (default: "
            "$CTXOFFLOAD_WORKDIR, else the current directory); a bucket URL is refused"
        ),
    )
    add_json(parser)
    parser.add_argument("transcript", type=Path, help="the transcript file")
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="N",
        help=f"context window in tokens (default: the config's, else {DEFAULT_WINDOW:,})",
    )
    parser.add_argument(
        "--config",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a ContextConfig JSON file; repeat to compare several",
    )
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        metavar="FORMAT",  # the choices, listed in the help, would take a 99-character line
        help=f"the transcript's format, one of {', '.join(sorted(FORMATS))} (read from the "
        "file when left out)",
    )
    parser.add_argument("--session", help="session id prefix (default: replay-<file>-<time>)")
    parser.add_argument(
        "--summary-model",
        metavar="MODEL",
        help=(
            "write summaries with this model on an OpenAI-compatible server ($OPENAI_BASE_URL, "
            "$OPENAI_API_KEY; needs ctxoffload[openai]) instead of extractive ones"
        ),
    )
    parser.add_argument("--base-url", metavar="URL", help="the summary model's server")
    parser.add_argument(
        "--steps", action="store_true", help="print the per-step table (default: when short)"
    )
    parser.set_defaults(run=run)


def _configs(files: list[Path], window: int | None) -> list[tuple[str, Any]]:
    """The configurations to replay with, one a file (the default one for none), each with
    the window `--window` gives, else its own, else the default window."""
    from ..compression import ContextConfig
    from ..exceptions import ConfigError

    configs: list[tuple[str, Any]] = []
    for path in files:
        try:
            configs.append((path.stem, ContextConfig.from_json_file(path)))
        except ConfigError as exc:
            raise CliError(_one_line(exc)) from exc
        except ValueError as exc:
            # What the loader may still let through (a number past Python's 4,300 digits):
            # an error in the file all the same. Depth is the loader's (`_depth.load_json`).
            what = _one_line(exc)
            raise CliError(f"context config file {str(path)!r} cannot be read: {what}") from None
    if not configs:
        configs.append(("default", ContextConfig()))
    if window is not None and window < 1:
        raise CliError(f"--window {window} is below 1: give the window in tokens")
    # The same file given twice, or two files of one name in different folders: each column
    # still needs a name of its own.
    names = [name for name, _ in configs]
    configs = [
        (f"{name}-{names[:i].count(name) + 1}" if names.count(name) > 1 else name, config)
        for i, (name, config) in enumerate(configs)
    ]
    out = []
    for name, config in configs:
        data = {
            **config.model_dump(exclude_unset=True),
            "context_window": window or config.context_window or DEFAULT_WINDOW,
        }
        try:
            out.append((name, ContextConfig.from_dict(data, source=f"config {name}")))
        except ConfigError as exc:
            raise CliError(_one_line(exc)) from exc
    return out


def _one_line(exc: Exception) -> str:
    """A multi-line error message (one line per problem) as one line for stderr."""
    lines = [line.strip().removeprefix("- ") for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return repr(exc)
    head, rest = lines[0], lines[1:]
    return head if not rest else f"{head.rstrip(':')}: " + "; ".join(rest)


def _summary_model(name: str | None, base_url: str | None) -> Any:
    """The summary model asked for with --summary-model (and --base-url), or None
    (extractive summaries)."""
    if name is None:
        if base_url is not None:
            raise CliError("--base-url needs --summary-model MODEL")
        return None
    try:
        from ..agent import OpenAIChatModel
    except ImportError as exc:  # pragma: no cover - the openai extra is in the test extra
        raise CliError(f"--summary-model needs the openai extra: {exc}") from exc
    import logging

    # Warnings said while the model is built (an unknown window) are held back, so that a
    # failure (no API key, a bad URL) is one line on stderr, and are said on success.
    held: list[logging.LogRecord] = []

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record)

    logger = logging.getLogger("ctxoffload")
    hold, propagate = Hold(), logger.propagate
    logger.addHandler(hold)
    logger.propagate = False
    try:
        model = OpenAIChatModel(name, base_url=base_url or os.environ.get("OPENAI_BASE_URL"))
    except Exception as exc:  # no openai package, no API key, a bad URL: say it, no traceback
        raise CliError(f"--summary-model {name}: {exc}") from exc
    finally:
        logger.removeHandler(hold)
        logger.propagate = propagate
    for record in held:
        logging.getLogger(record.name).handle(record)
    return model


def _prepare_workspace(where: Workdir) -> Any:
    """The workspace to write into: an existing one, an empty folder (one made for it, as
    `demo --workdir` takes), or a folder that does not exist yet.

    Raises:
        CliError: the folder holds other things and is not a workspace (the reader's
            `sessions_folder` says why).
    """
    from .._disk.read import sessions_folder
    from ..exceptions import InvalidReference
    from ..workspace import LocalWorkspace

    workdir = where.local()
    if os.path.lexists(workdir) and not _empty_folder(workdir):
        try:
            sessions_folder(str(workdir))
        except InvalidReference as exc:
            raise CliError(
                f"{exc}: pass --workdir with a workspace, an empty folder or a new one"
            ) from None
    return LocalWorkspace(workdir, fsync=False)


def _empty_folder(path: os.PathLike[str] | str) -> bool:
    """Whether `path` is a folder itself (not a link to one) with nothing in it."""
    import stat

    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    """Replay and print the report."""
    import asyncio

    from ..tokens import get_token_counter
    from ._transcripts import load_transcript

    # Everything is checked before anything is written.
    configs = _configs(args.config, args.window)
    fmt, runs = load_transcript(args.transcript, args.format)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", args.transcript.name.split(".")[0])[:60].strip("-")
    prefix = args.session or f"replay-{stem or 'transcript'}-{datetime.now():%Y%m%d-%H%M%S}"
    sessions: list[tuple[Any, str, Any, str]] = []
    for r_index, one in enumerate(runs, start=1):
        for c_index, (name, config) in enumerate(configs, start=1):
            session = prefix
            if len(runs) > 1:
                session += f"-r{r_index}"
            if len(configs) > 1:
                session += f"-c{c_index}"
            sessions.append((one, name, config, session))
    workspace = _prepare_workspace(Workdir.of(args))
    for _, _, _, session in sessions:
        if session_entry(str(workspace.workdir), session) is not None:
            raise CliError(f"session {session!r} already exists: pass another --session")
    counter = get_token_counter()
    total = sum(len(one.messages) for one, _, _, _ in sessions)

    summary_model = _summary_model(args.summary_model, args.base_url)

    async def replay_all() -> list[ReplayResult]:
        from ..exceptions import ConfigError, SessionBusyError
        from ..workspace import take_new_session

        await workspace.initialize()
        results = []
        async with contextlib.AsyncExitStack() as stack:
            # Each session taken under its lease, new: a second replay of the same --session
            # started at the same moment (both past the check above) is refused, not merged.
            for _, _, _, session in sessions:
                try:
                    lease = await take_new_session(workspace, session, agent="replay")
                except (ConfigError, SessionBusyError):
                    raise CliError(
                        f"session {session!r} already exists: pass another --session"
                    ) from None
                if lease is not None:
                    stack.push_async_callback(lease.release)
            if summary_model is not None:
                await stack.enter_async_context(summary_model)
            with Progress("replay: messages", total) as progress:
                for one, name, config, session in sessions:
                    results.append(
                        await replay_run(
                            one.messages,
                            config,
                            workspace,
                            session,
                            run_name=one.name,
                            config_name=name,
                            counter=counter,
                            progress=progress,
                            summary_model=summary_model,
                        )
                    )
        return results

    import logging

    # Each run and configuration gets a compressor of its own, and each says once what does
    # not fit in its configuration: across them, one line is enough.
    said: set[str] = set()

    def first_time(record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text in said:
            return False
        said.add(text)
        return True

    logger = logging.getLogger("ctxoffload")
    logger.addFilter(first_time)
    try:
        results = asyncio.run(replay_all())
    finally:
        logger.removeFilter(first_time)
    ok = all(not r.lost for r in results)
    if args.json:
        print_json(
            {
                "format": fmt,
                "transcript": str(args.transcript),
                "results": [r.as_dict() for r in results],
            }
        )
        return EXIT_OK if ok else EXIT_PROBLEMS
    _print_report(fmt, args, runs, configs, results)
    return EXIT_OK if ok else EXIT_PROBLEMS


def _print_report(
    fmt: str,
    args: argparse.Namespace,
    runs: list[Any],
    configs: list[tuple[str, Any]],
    results: list[ReplayResult],
) -> None:
    print(f"replay of {args.transcript} ({fmt}, {len(runs)} run{'s' if len(runs) > 1 else ''})")
    for one in runs:
        mine = [r for r in results if r.run == one.name]
        print()
        if len(runs) > 1:
            print(f"run {one.name}: {len(one.messages):,} messages")
        if args.steps or len(mine[0].steps) <= 40:
            headers = ["step", "without ctxoffload"] + [
                f"{r.config} ({r.window:,})" if len(mine) > 1 else "context tokens" for r in mine
            ]
            rows = []
            for i, step in enumerate(mine[0].steps):
                cells: list[Any] = [step.index, step.without]
                for r in mine:
                    s = r.steps[i]
                    cells.append(f"{s.tokens:,}" + (" *" if s.compressed else ""))
                rows.append(cells)
            print_table(headers, rows, right=tuple(range(len(headers))))
            if any(s.compressed for r in mine for s in r.steps):
                print("(* = compressed before this model call)")
            print()
        print_table(
            RESULT_COLUMNS,
            [
                [
                    r.config,
                    r.window,
                    len(r.steps),
                    r.peak,
                    r.peak_without,
                    r.truncations,
                    r.compressions,
                    r.offloaded_messages,
                    "yes" if not r.lost else f"NO ({len(r.lost)})",
                    r.session,
                ]
                for r in mine
            ],
        )
        for r in mine:
            if r.peak > r.window:
                print(
                    f"over the window ({r.config}): the context reached {r.peak:,} tokens in a "
                    f"{r.window:,}-token window; what never leaves it (the system prompt, the "
                    "latest request, a turn that cannot be split) is more than the window holds"
                )
            for what in r.lost[:20]:
                print(f"not recoverable ({r.config}): {what}")

"""`ctxoffload mcp-proxy`: serve an MCP server on stdin and stdout that wraps another, stores
its big tool results in the workspace and adds the tools that read them back
(`ctxoffload.mcp.McpProxy`)."""

from __future__ import annotations

import argparse

from ..exceptions import CliError, ConfigError, InvalidSessionId, SessionBusyError
from ._arguments import EXIT_OK, Workdir
from ._commands import COMMAND_HELP

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mcp-proxy` to the command line."""
    parser = commands.add_parser(
        "mcp-proxy",
        help=COMMAND_HELP["mcp-proxy"],
        description=(
            "Serve MCP on stdin and stdout (what Claude Code, Cursor and Codex start) in front "
            "of the MCP server that COMMAND starts, or the one at --url: its tools, prompts "
            "and resources pass through; a tool result over --limit tokens is stored whole in "
            "the workspace and arrives as its head and a notice naming the file; Read, Grep, "
            "Glob and retrieve_offloaded_content read it back; images, audio and embedded "
            "files over --max-bytes are stored in data/ and named. Each connection is a new "
            "session (mcp-SERVER-XXXXXX) unless --session names one."
        ),
    )
    parser.add_argument(
        "server_command",
        nargs="*",
        metavar="COMMAND",
        help="the wrapped server's command and its arguments, after `--`",
    )
    parser.add_argument(
        "--url", metavar="URL", help="the wrapped server's URL (streamable HTTP), not a command"
    )
    parser.add_argument(
        "--workdir",
        "--workspace",
        dest="workdir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="the workspace folder (default: $CTXOFFLOAD_WORKDIR, else the current directory)",
    )
    parser.add_argument(
        "--session", metavar="ID", help="record into this session (default: a new one)"
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="TOKENS",
        help="store a tool result over this many tokens (default: 3000, ContextConfig's)",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        metavar="BYTES",
        help="the most bytes of images, audio and embedded files one result carries to the "
        "client; each past it (and each image no model takes) is stored in the workspace's "
        "data/ and named instead (default: 3932160, the largest image a model takes)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="longest wait for the wrapped server, per request (default: 600)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="serve the memory tool too: files in the workspace's memories/ that outlive a "
        "session (view, create, str_replace, insert, delete, rename)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until the client goes away."""
    import asyncio
    import sys

    from ..compression import ContextConfig
    from ..mcp import McpProxy
    from ._output import raw_stream

    if bool(args.url) == bool(args.server_command):
        raise CliError(
            "give the wrapped server as a command after `--` (ctxoffload mcp-proxy -- npx -y "
            "some-server) or as --url URL, one of the two"
        )
    workdir = Workdir.of(args).local()
    try:
        config = (
            ContextConfig() if args.limit is None else ContextConfig(tool_result_limit=args.limit)
        )
    except ValueError as exc:
        raise CliError(f"--limit {args.limit}: {' '.join(str(exc).split())}") from None
    try:
        proxy = McpProxy(
            workdir,
            args.url or args.server_command,
            session_id=args.session,
            config=config,
            timeout=args.timeout,
            memory=args.memory,
            max_result_bytes=args.max_bytes,
        )
    except (ConfigError, InvalidSessionId) as exc:
        raise CliError(_session_hint(str(exc), args.session)) from None
    # MCP owns stdout: its JSON-RPC lines go out as they are, not through the terminal
    # filter `main` puts around every command's output.
    streams = sys.stdin, sys.stdout
    sys.stdout = raw_stream(sys.stdout)
    try:
        asyncio.run(proxy.serve_stdio())
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    except SessionBusyError as exc:
        raise CliError(f"--session {args.session}: {exc}") from None
    finally:
        sys.stdin, sys.stdout = streams
    return EXIT_OK


def _session_hint(message: str, session: str | None) -> str:
    if session is not None and "session_id" in message:
        return f"--session: {message}"
    if message.startswith("max_result_bytes "):
        return f"--max-bytes: {message}"
    return message

"""Read, Grep and Glob: the tools an agent uses to read back what was offloaded.

`FileToolbox` holds the roots and the caps and builds the three tools from the read-back
pieces: `_read_tool.py`, `_grep.py` and `_listing.py` do the work, confined by `_confine.py`.
Every result is capped, so reading an offloaded file can never produce a result big enough
to be offloaded again. Regexes and globs run in RE2 (linear time, the GIL released while
matching), and Grep also stops at a time bound.

The tools return text for the model: a refusal or failure is a message starting with
"Error:" that says what to do instead, so the model can correct itself.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._disk.layout import DATA_DIR, SESSIONS_DIR
from .._disk.scope import SessionScoped
from ..exceptions import ConfigError, ToolError
from ..messages import DataBlock, TextBlock
from ._answers import answering
from ._confine import real_roots
from ._grep import grep_files
from ._lines import NOTE_ROOM
from ._listing import glob_answer
from ._marks import mark_reader
from ._read_tool import read_file

__all__ = ["FileToolbox", "HasWorkdir", "workspace_tools"]

Tool = Callable[..., Awaitable[Any]]


@runtime_checkable
class HasWorkdir(Protocol):
    """A workspace on a local folder, such as `LocalWorkspace`."""

    @property
    def workdir(self) -> str | os.PathLike[str]:
        """The folder the workspace's files are in."""
        ...


class FileToolbox:
    """Read, Grep and Glob confined to a set of root directories, with capped results.

    The caps exist so that reading an offloaded file never produces a result that is
    itself offloaded: keep `max_output_chars` below the agent's `tool_result_limit`
    (which counts tokens; English text and code run about 4 characters a token).

    Args:
        roots: directories the tools may read; relative paths resolve against the first.
        max_line_chars: longest line shown; longer lines are cut with a marker saying how
            many characters were left out.
        max_output_chars: longest result of any tool, footer and notes included.
        max_glob_paths: most paths one Glob lists.
        grep_timeout: seconds one Grep may spend listing and searching files before it
            stops and reports what it found; None for no bound. Matching itself is linear
            (RE2), so the bound is about the amount of data, not the pattern.
        images: whether Read answers an image file (PNG, JPEG, GIF, WebP) with the image
            itself, for a model that takes images; False: with one line describing it.
        scope: for a workspace that keeps sessions apart: called before each tool call,
            it returns the roots of that call (the working session's reach), replacing
            `roots`; a `ToolError` it raises is the tool's answer.

    Raises:
        ConfigError: no roots, or caps that cannot hold one line plus a footer.
    """

    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]],
        *,
        max_line_chars: int = 2_000,
        max_output_chars: int = 30_000,
        max_glob_paths: int = 200,
        grep_timeout: float | None = 10.0,
        images: bool = True,
        scope: Callable[[], Awaitable[list[Path]]] | None = None,
    ) -> None:
        if isinstance(roots, (str, os.PathLike)):
            roots = [roots]
        if not roots:
            raise ConfigError("FileToolbox needs at least one root directory, got none")
        if max_line_chars < 1:
            raise ConfigError(f"max_line_chars={max_line_chars} must be at least 1")
        minimum_output = max_line_chars + 2 * NOTE_ROOM
        if max_output_chars < minimum_output:
            raise ConfigError(
                f"max_output_chars={max_output_chars} cannot hold one line of max_line_chars="
                f"{max_line_chars} plus a footer: use at least {minimum_output}, or lower "
                f"max_line_chars"
            )
        if max_glob_paths < 1:
            raise ConfigError(f"max_glob_paths={max_glob_paths} must be at least 1")
        if grep_timeout is not None and grep_timeout <= 0:
            raise ConfigError(f"grep_timeout={grep_timeout} must be positive, or None")
        self.roots = [Path(root) for root in roots]
        self.max_line_chars = max_line_chars
        self.max_output_chars = max_output_chars
        self.max_glob_paths = max_glob_paths
        self.grep_timeout = grep_timeout
        self.images = images
        self.scope = scope

    async def _roots(self) -> list[Path] | None:
        """The roots of one tool call: the scope's, or None for the toolbox's own."""
        return await self.scope() if self.scope is not None else None

    def tools(self) -> list[Tool]:
        """The three tools as async functions named `Read`, `Grep` and `Glob`.

        Their type hints and docstrings are what the agent turns into each tool's schema,
        so they are written for the model. Each runs its blocking work in a worker thread.

        Returns:
            `[Read, Grep, Glob]`, each with the attribute `ctxoffload_reader = True`.
        """
        toolbox = self

        async def Read(
            path: str, offset: int = 1, limit: int = 200, char_offset: int = 0
        ) -> str | list[TextBlock | DataBlock]:
            """Read a workspace file with numbered lines, like `cat -n`: an offloaded result,
            context.jsonl (one message per line) or an image in data/.

            Args:
                path: The file, as a notice or summary names it.
                offset: First line, from 1.
                limit: Most lines.
                char_offset: Within line `offset`, the first character to show.

            Returns:
                The lines (the last says where to go on), or "Error: ..."
            """
            roots = await toolbox._roots()
            return await asyncio.to_thread(
                toolbox.read, path, offset, limit, char_offset, roots=roots
            )

        async def Grep(
            pattern: str, path_or_glob: str = ".", context_lines: int = 0, max_matches: int = 50
        ) -> str:
            """Search workspace files for an RE2 regular expression (no backreferences or
            lookaround), line by line; a context.jsonl line matches on its message's text;
            `(?i)` ignores case.

            Args:
                path_or_glob: A file, a folder or a glob (`sessions/*/tool_result-*.txt`).
                context_lines: Lines shown around each match (at most 100).

            Returns:
                The matching lines, or "Error: ..."
            """
            roots = await toolbox._roots()
            return await asyncio.to_thread(
                toolbox.grep, pattern, path_or_glob, context_lines, max_matches, roots=roots
            )

        async def Glob(pattern: str) -> str:
            """List the workspace paths a glob matches, sorted; folders end with `/`.

            Args:
                pattern: Such as `**/*.jsonl`.

            Returns:
                One path per line, or "Error: ..."
            """
            roots = await toolbox._roots()
            return await asyncio.to_thread(toolbox.glob, pattern, roots=roots)

        return [mark_reader(answering(tool)) for tool in (Read, Grep, Glob)]

    @answering
    def read(
        self,
        path: str,
        offset: int = 1,
        limit: int = 200,
        char_offset: int = 0,
        *,
        roots: list[Path] | None = None,
    ) -> str | list[TextBlock | DataBlock]:
        """Numbered lines of a text file; blocking. See the `Read` tool for the format.

        Args:
            path: file to read; relative paths start at the first root.
            offset: first line to show, 1-based.
            limit: most lines to show.
            char_offset: when above 0, only line `offset`, from this character (0-based).
            roots: the roots of this call instead of the toolbox's (see `scope`).

        Returns:
            The numbered lines and, when lines remain, a footer naming the next offset; for
            an image, a line describing it and the image (or the line alone without
            `images`); or a message starting with "Error:".
        """
        return read_file(
            path,
            offset,
            limit,
            char_offset,
            roots=real_roots(roots or self.roots),
            max_line_chars=self.max_line_chars,
            max_output_chars=self.max_output_chars,
            images=self.images,
        )

    @answering
    def grep(
        self,
        pattern: str,
        path_or_glob: str = ".",
        context_lines: int = 0,
        max_matches: int = 50,
        *,
        roots: list[Path] | None = None,
    ) -> str:
        """Regex search through a file, a directory tree or a glob; blocking.

        See the `Grep` tool for the output format.

        Args:
            pattern: regular expression in RE2 syntax, matched against each line.
            path_or_glob: file, directory (searched recursively) or glob pattern.
            context_lines: lines of context before and after each match.
            max_matches: most matching lines shown.
            roots: the roots of this call instead of the toolbox's (see `scope`).

        Returns:
            The matching lines and notes, or a message starting with "Error:".
        """
        return grep_files(
            pattern,
            path_or_glob,
            context_lines,
            max_matches,
            roots=real_roots(roots or self.roots),
            max_line_chars=self.max_line_chars,
            max_output_chars=self.max_output_chars,
            timeout=self.grep_timeout,
        )

    @answering
    def glob(self, pattern: str, *, roots: list[Path] | None = None) -> str:
        """Paths matching a glob pattern, sorted and capped; blocking.

        Args:
            pattern: glob pattern; `**` matches any number of directories. Relative patterns
                start at the first root.
            roots: the roots of this call instead of the toolbox's (see `scope`).

        Returns:
            One path per line (directories end with `/`), relative to the first root when
            inside it; or a message starting with "Error:".
        """
        return glob_answer(
            pattern,
            real_roots(roots or self.roots),
            max_paths=self.max_glob_paths,
            max_chars=self.max_output_chars,
        )


def session_scope(workspace: Any) -> Callable[[], Awaitable[list[Path]]]:
    """The roots of a tool call on a workspace that keeps sessions apart: the working
    session's folder first (relative paths start there), the folders of its sub-agents and
    fork origin, and the data/ files their messages name (see `isolate_sessions`)."""
    from .._disk.scope import reach_of
    from .._disk.writer import current_session

    async def roots() -> list[Path]:
        session = current_session()
        if session is None:
            raise ToolError(
                "this workspace keeps sessions apart (isolate_sessions=True) and no agent "
                "session is working: call these tools from an Agent, or run them inside "
                "ctxoffload.workspace.writing_as(name, session_id)"
            )
        reach = await reach_of(workspace, session)
        base = Path(workspace.workdir)
        return [
            base / SESSIONS_DIR / session,
            *(base / SESSIONS_DIR / s for s in sorted(reach.sessions - {session})),
            *(base / DATA_DIR / name for name in sorted(reach.data)),
        ]

    return roots


def workspace_tools(
    workspace_or_roots: HasWorkdir | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    max_line_chars: int = 2_000,
    max_output_chars: int = 30_000,
    max_glob_paths: int = 200,
    grep_timeout: float | None = 10.0,
    images: bool = True,
) -> list[Tool]:
    """Read, Grep and Glob for an agent, confined to a workspace.

    Args:
        workspace_or_roots: a workspace on a local folder (one with a `workdir`, such as
            `LocalWorkspace`), one directory, or several; relative paths resolve against
            the first.
        max_line_chars: longest line shown.
        max_output_chars: longest tool result; keep it below the agent's tool_result_limit.
        max_glob_paths: most paths one Glob lists.
        grep_timeout: seconds one Grep may spend before it stops; None for no bound.
        images: Read shows an image file as the image (True), or describes it in one line
            (False, for a model that takes no images).

    Returns:
        `[Read, Grep, Glob]`, async functions with type hints and docstrings to derive
        tool schemas from.

    Raises:
        ConfigError: no roots, impossible caps, or a workspace without a local folder
            (such as `InMemoryWorkspace`: give the agent `retrieval_tool` instead).
    """
    roots: Sequence[str | os.PathLike[str]]
    scope = None
    if isinstance(workspace_or_roots, HasWorkdir):
        roots = [workspace_or_roots.workdir]
        if (
            isinstance(workspace_or_roots, SessionScoped)
            and workspace_or_roots.isolate_sessions is True
        ):
            scope = session_scope(workspace_or_roots)
    elif isinstance(workspace_or_roots, (str, os.PathLike)):
        roots = [workspace_or_roots]
    elif isinstance(workspace_or_roots, Sequence):
        roots = list(workspace_or_roots)
    else:
        raise ConfigError(
            f"workspace_tools needs a workspace with a workdir, a directory or a list of "
            f"directories, got {workspace_or_roots!r}: for a workspace with no local folder "
            f"(InMemoryWorkspace, ObjectStoreWorkspace), give the agent retrieval_tool"
        )
    toolbox = FileToolbox(
        roots,
        max_line_chars=max_line_chars,
        max_output_chars=max_output_chars,
        max_glob_paths=max_glob_paths,
        grep_timeout=grep_timeout,
        images=images,
        scope=scope,
    )
    return toolbox.tools()

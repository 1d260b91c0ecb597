"""Read, Grep and Glob: the tools an agent uses to read back what was offloaded.

Every path is confined to the toolbox's roots (normally the workspace directory): `..`
escapes, absolute paths elsewhere and symlinks whose target lies outside are refused. Every
result is capped, so reading an offloaded file can never produce a result big enough to be
offloaded again. Grep runs the regex in a child process that is killed after a time bound,
because Python's `re` cannot be interrupted in the middle of one catastrophic match.

The tools return text for the model: a refusal or failure is a message starting with
"Error:" that says what to do instead, so the model can correct itself. `resolve_in_roots`
is the one confinement check; it raises `ToolError` and is usable on its own.
"""

from __future__ import annotations

import asyncio
import codecs
import inspect
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from ..exceptions import ConfigError, ToolError

__all__ = ["FileToolbox", "resolve_in_roots", "workspace_tools"]

# A NUL byte in the first 8 KB marks a file as binary (the rule git and grep use).
_SNIFF_BYTES = 8192
# Read streams files in chunks of this size, so a 50 MB file costs 1 MB of memory.
_CHUNK_BYTES = 1 << 20
# Room kept free under max_output_chars for footers and notes.
_NOTE_ROOM = 300
_GLOB_CHARS = frozenset("*?[")

Tool = Callable[..., Awaitable[str]]


def resolve_in_roots(path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> Path:
    """Resolve `path` and refuse it unless it lies inside one of `roots`.

    Relative paths resolve against the first root; a relative path that names nothing there
    but names a file inside a root when taken from the current directory is taken that way,
    because that is the form of the references a workspace with a relative workdir returns
    (`agent_workspace/sessions/...`). Symlinks (in the path and in the roots)
    are followed before the check, so a link inside a root whose target is outside is
    refused like an absolute path outside.

    Args:
        path: the path asked for, relative or absolute; it need not exist.
        roots: the directories that may be read; at least one.

    Returns:
        The real path (symlinks resolved), inside one of the roots.

    Raises:
        ToolError: `roots` is empty, `path` contains a NUL byte or cannot be resolved, or it
            resolves outside every root.
    """
    if not roots:
        raise ToolError("no roots were given: pass at least one directory the tools may read")
    raw = os.fspath(path)
    if "\0" in raw:
        raise ToolError(f"path {_quote(raw)} contains a NUL byte: pass a plain file path")
    real_roots = [Path(root).resolve() for root in roots]
    relative = [real_roots[0] / raw, Path.cwd() / raw]
    candidates = [Path(raw)] if os.path.isabs(raw) else relative
    inside: list[Path] = []
    real = Path(raw)
    for index, candidate in enumerate(candidates):
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop on Python 3.10
            raise ToolError(
                f"path {_quote(raw)} cannot be resolved ({exc}): pass another path"
            ) from exc
        if index == 0:
            real = resolved
        if any(resolved == root or resolved.is_relative_to(root) for root in real_roots):
            inside.append(resolved)
    if inside:
        return next((p for p in inside if p.exists()), inside[0])
    allowed = ", ".join(str(root) for root in real_roots)
    raise ToolError(
        f"path {_quote(raw)} resolves to {_quote(str(real))}, which is outside the allowed roots "
        f"({allowed}): pass a path inside them; relative paths start at {real_roots[0]}"
    )


class _HasWorkdir(Protocol):
    """Anything with a workspace directory, such as `LocalWorkspace`."""

    @property
    def workdir(self) -> str | os.PathLike[str]: ...


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
        grep_timeout: seconds one Grep may run before its worker process is killed. None
            searches in this process with no bound: only for patterns you trust.

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
    ) -> None:
        if isinstance(roots, (str, os.PathLike)):
            roots = [roots]
        if not roots:
            raise ConfigError("FileToolbox needs at least one root directory, got none")
        if max_line_chars < 1:
            raise ConfigError(f"max_line_chars={max_line_chars} must be at least 1")
        minimum_output = max_line_chars + 2 * _NOTE_ROOM
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

    def tools(self) -> list[Tool]:
        """The three tools as async functions named `Read`, `Grep` and `Glob`.

        Their type hints and docstrings are what the agent turns into each tool's schema,
        so they are written for the model. Each runs its blocking work in a worker thread.

        Returns:
            `[Read, Grep, Glob]`.
        """
        toolbox = self

        async def Read(path: str, offset: int = 1, limit: int = 200) -> str:
            """Read a text file from the workspace, with line numbers like `cat -n`.

            Use it to read back an offloaded tool result or context file by the path named
            in its preview. Very long lines are cut with a marker; when more lines remain,
            the last line of the result says which offset to pass next.

            Args:
                path: File to read; a relative path starts at the workspace root.
                offset: First line to show, counting from 1.
                limit: Most lines to show.

            Returns:
                The numbered lines, or a message starting with "Error:".
            """
            return await asyncio.to_thread(toolbox.read, path, offset, limit)

        async def Grep(
            pattern: str, path_or_glob: str = ".", context_lines: int = 0, max_matches: int = 50
        ) -> str:
            """Search files in the workspace for a regular expression (Python `re` syntax).

            Lines are matched one at a time. Output lines are `path:line:text`; with
            context_lines, context lines are `path-line-text` and `--` separates hunks that
            are not adjacent. Put `(?i)` at the start of the pattern to ignore case.

            Args:
                pattern: Regular expression to search for.
                path_or_glob: File, directory (searched recursively) or glob such as
                    `sessions/*/tool_result-*.txt`; a relative path starts at the workspace root.
                context_lines: Lines of context to show before and after each match.
                max_matches: Most matching lines to show.

            Returns:
                The matching lines and notes, or a message starting with "Error:".
            """
            return await asyncio.to_thread(
                toolbox.grep, pattern, path_or_glob, context_lines, max_matches
            )

        async def Glob(pattern: str) -> str:
            """List workspace paths matching a glob pattern, sorted.

            `*` and `?` match within one path segment, `**` matches any number of
            directories, `[abc]` matches one of the characters. Directories end with `/`.

            Args:
                pattern: Glob pattern such as `sessions/*/tool_result-*.txt` or `**/*.jsonl`;
                    a relative pattern starts at the workspace root.

            Returns:
                One path per line, or a message starting with "Error:".
            """
            return await asyncio.to_thread(toolbox.glob, pattern)

        tools: list[Tool] = [Read, Grep, Glob]
        for tool in tools:
            # Read back, never offloaded again: the Agent checks this mark.
            marked: Any = tool
            marked.ctxoffload_reader = True
        return tools

    # -- Read ------------------------------------------------------------------------------

    def read(self, path: str, offset: int = 1, limit: int = 200) -> str:
        """Numbered lines of a text file; blocking. See the `Read` tool for the format.

        Args:
            path: file to read; relative paths start at the first root.
            offset: first line to show, 1-based.
            limit: most lines to show.

        Returns:
            The numbered lines and, when lines remain, a footer naming the next offset; or
            a message starting with "Error:".
        """
        try:
            return self._read(path, offset, limit)
        except ToolError as exc:
            return f"Error: {exc}"

    def _read(self, path: str, offset: int, limit: int) -> str:
        offset = _as_int("offset", offset, minimum=1)
        limit = _as_int("limit", limit, minimum=1)
        real = resolve_in_roots(path, self.roots)
        size = _regular_file_size(path, real)
        try:
            with real.open("rb") as file:
                if b"\0" in file.read(_SNIFF_BYTES):
                    raise ToolError(_binary_message(path, size))
                file.seek(0)
                shown, total = _read_window(
                    file,
                    offset,
                    limit,
                    self.max_line_chars,
                    budget=self.max_output_chars - _NOTE_ROOM,
                )
        except OSError as exc:
            raise ToolError(f"cannot read {_quote(path)}: {exc.strerror or exc}") from exc
        if total == 0:
            return f"{path} is empty (0 lines)."
        if not shown:
            raise ToolError(
                f"offset={offset} is past the end of {_quote(path)}, which has {total} lines: "
                f"call Read with an offset from 1 to {total}"
            )
        last = offset + len(shown) - 1
        text = "\n".join(shown)
        if last < total:
            capped = "" if len(shown) == limit else " (output size cap reached)"
            text += (
                f"\n… lines {offset}–{last} of {total} shown{capped}; "
                f"call Read with offset={last + 1} to continue"
            )
        return text

    # -- Grep ------------------------------------------------------------------------------

    def grep(
        self, pattern: str, path_or_glob: str = ".", context_lines: int = 0, max_matches: int = 50
    ) -> str:
        """Regex search through a file, a directory tree or a glob; blocking.

        See the `Grep` tool for the output format.

        Args:
            pattern: Python regular expression, matched against each line.
            path_or_glob: file, directory (searched recursively) or glob pattern.
            context_lines: lines of context before and after each match.
            max_matches: most matching lines shown.

        Returns:
            The matching lines and notes, or a message starting with "Error:".
        """
        try:
            return self._grep(pattern, path_or_glob, context_lines, max_matches)
        except ToolError as exc:
            return f"Error: {exc}"

    def _grep(self, pattern: str, path_or_glob: str, context_lines: int, max_matches: int) -> str:
        context_lines = _as_int("context_lines", context_lines, minimum=0)
        max_matches = _as_int("max_matches", max_matches, minimum=1)
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("pattern is empty: pass a regular expression to search for")
        try:
            re.compile(pattern)
        except (re.error, OverflowError, RecursionError, ValueError) as exc:
            raise ToolError(
                f"invalid regular expression {_quote(pattern)}: {exc}. Grep uses Python `re` "
                f"syntax; put a backslash before a literal ( ) [ ] . * + ? {{ }} | or \\"
            ) from exc
        roots = self._real_roots()
        files, outside, single_file = self._grep_targets(path_or_glob, roots)
        if not files:
            return f"No files to search in {_quote(path_or_glob)}." + _outside_note(outside)
        request: dict[str, Any] = {
            "pattern": pattern,
            "paths": [str(real) for _, real in files],
            "context_lines": context_lines,
            "max_matches": max_matches,
            "max_line_chars": self.max_line_chars,
            "sniff_bytes": _SNIFF_BYTES,
        }
        events, failure = self._run_search(request)
        names = [display for display, _ in files]
        return self._format_grep(
            events, failure, names, request, path_or_glob, single_file, outside
        )

    def _grep_targets(
        self, path_or_glob: str, roots: list[Path]
    ) -> tuple[list[tuple[str, Path]], int, bool]:
        """The files to search: (display name, real path), symlinks skipped, single file?"""
        if not isinstance(path_or_glob, str):
            raise ToolError(f"path_or_glob must be a string, got {_quote(path_or_glob)}")
        path_or_glob = path_or_glob or "."
        if _GLOB_CHARS.intersection(path_or_glob) and not _exists_in_roots(path_or_glob, roots):
            entries, outside = self._glob_entries(path_or_glob, roots)
            files = [(display, real) for display, real, is_dir in entries if not is_dir]
            return files, outside, False
        real = resolve_in_roots(path_or_glob, roots)
        if real.is_dir():
            files, outside = self._walk_files(real, roots)
            return files, outside, False
        _regular_file_size(path_or_glob, real)
        return [(self._display(real, roots), real)], 0, True

    def _walk_files(self, start: Path, roots: list[Path]) -> tuple[list[tuple[str, Path]], int]:
        """Regular files under `start`, sorted; symlinked directories are not descended."""
        files: list[tuple[str, Path]] = []
        outside = 0
        # followlinks=False: a link to a directory could lead out of the roots or into a cycle.
        for directory, dirnames, filenames in os.walk(start, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                entry = Path(directory, name)
                real = entry
                if entry.is_symlink():
                    try:
                        real = resolve_in_roots(entry, roots)
                    except ToolError:
                        outside += 1
                        continue
                if real.is_file():  # False for FIFOs and sockets, which would block a read
                    files.append((self._display(entry, roots), real))
        return files, outside

    def _run_search(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        """Run `_grep_worker` under the time bound; returns its events and a failure, if any."""
        if self.grep_timeout is None or not sys.executable:
            # No bound asked for, or no interpreter to start (an embedded Python): search here.
            events: list[dict[str, Any]] = []
            _grep_worker(request, events.append)
            return events, None
        # A fresh `python -I -S` imports only the standard library and starts in tens of
        # milliseconds; a multiprocessing child would re-import ctxoffload (pydantic, tiktoken)
        # and, on Python 3.12+, forking a process that has threads warns.
        command = [sys.executable, "-I", "-S", "-c", _worker_source()]
        try:
            completed = subprocess.run(
                command,
                input=json.dumps(request).encode("ascii"),
                capture_output=True,
                timeout=self.grep_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            # subprocess.run has killed and reaped the worker; exc.stdout holds what it
            # reported before, which is every complete event line.
            return _parse_events(exc.stdout), "timeout"
        except OSError as exc:
            raise ToolError(f"cannot start the Grep worker process: {exc}") from exc
        events = _parse_events(completed.stdout)
        if completed.returncode != 0:
            stderr = completed.stderr.decode("utf-8", "replace").strip().splitlines()
            return events, f"crash: {stderr[-1] if stderr else f'exit {completed.returncode}'}"
        return events, None

    def _format_grep(
        self,
        events: list[dict[str, Any]],
        failure: str | None,
        names: list[str],
        request: dict[str, Any],
        path_or_glob: str,
        single_file: bool,
        outside: int,
    ) -> str:
        """The tool result for the worker's events, within max_output_chars."""
        pattern, max_matches = request["pattern"], request["max_matches"]
        hits: list[tuple[int, int, str, bool]] = []
        searching: int | None = None
        searched = binary = 0
        unreadable: list[str] = []
        more = full = False
        for event in events:
            kind = event.get("kind")
            if kind == "start":
                searching = event["file"]
                searched += 1
            elif kind == "line":
                hits.append((event["file"], event["line"], event["text"], event["match"]))
            elif kind == "binary":
                binary += 1
            elif kind == "error":
                unreadable.append(f"{names[event['file']]} ({event['message']})")
            elif kind == "more":
                more = True
            elif kind == "full":
                full = True
        if single_file and binary:
            raise ToolError(
                f"{_quote(path_or_glob)} is a binary file (NUL bytes in its first 8 KB): Grep "
                f"searches text only; it is probably a data file to refer to by path"
            )
        header: list[str] = []
        if failure == "timeout" and not full:
            where = f" while searching {names[searching]}" if searching is not None else ""
            header.append(
                f"Error: Grep stopped after {self.grep_timeout:g} s{where}: the pattern "
                f"{_quote(pattern)} is too slow on this input (nested quantifiers such as (a+)+ "
                f"backtrack exponentially on long lines). Use a simpler pattern (a literal "
                f"substring, or a+ instead of (a+)+) or a narrower path_or_glob."
            )
        elif failure is not None and failure != "timeout":
            header.append(f"Error: the Grep worker failed ({failure}); results may be partial.")
        notes: list[str] = []
        if more:
            notes.append(
                f"[showing the first {max_matches} matches; more exist: narrow the pattern or "
                f"path_or_glob, or raise max_matches]"
            )
        elif full and failure == "timeout":
            notes.append(
                f"[showing the first {max_matches} matches; the search stopped before finding "
                f"out whether more exist: narrow the pattern or path_or_glob]"
            )
        if binary:
            notes.append(f"[{binary} binary file(s) skipped]")
        if unreadable:
            notes.append(f"[could not read: {', '.join(unreadable[:5])}]"[:_NOTE_ROOM])
        if outside:
            notes.append(f"[{outside} symlink(s) pointing outside the allowed roots skipped]")
        if not hits and not header:
            summary = (
                f"No matches for {_quote(pattern)} in {_quote(path_or_glob)} "
                f"({searched} file(s) searched)."
            )
            return "\n".join([summary, *notes])
        # Header and notes are always shown; the matching lines get what is left.
        budget = self.max_output_chars - _NOTE_ROOM - sum(len(line) + 1 for line in header + notes)
        body: list[str] = []
        used = shown_matches = 0
        previous: tuple[int, int] | None = None
        for file, number, text, is_match in hits:
            mark = ":" if is_match else "-"
            line = f"{names[file]}{mark}{number}{mark}{text}"
            # grep and ripgrep print `--` between hunks only when context is asked for.
            separated = (
                request["context_lines"] > 0
                and previous is not None
                and previous != (file, number - 1)
            )
            cost = len(line) + 1 + (3 if separated else 0)
            if used + cost > budget:
                notes.insert(
                    0,
                    f"[output cap of {self.max_output_chars:,} characters reached after "
                    f"{shown_matches} matches; narrow the pattern or path_or_glob, or lower "
                    f"context_lines]",
                )
                break
            if separated:
                body.append("--")
            body.append(line)
            used += cost
            previous = (file, number)
            shown_matches += is_match
        if header and body:
            header.append("Matches found before the stop:")
        return "\n".join(header + body + notes)

    # -- Glob ------------------------------------------------------------------------------

    def glob(self, pattern: str) -> str:
        """Paths matching a glob pattern, sorted and capped; blocking.

        Args:
            pattern: glob pattern; `**` matches any number of directories. Relative patterns
                start at the first root.

        Returns:
            One path per line (directories end with `/`), relative to the first root when
            inside it; or a message starting with "Error:".
        """
        try:
            return self._glob(pattern)
        except ToolError as exc:
            return f"Error: {exc}"

    def _glob(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("pattern is empty: pass a glob such as '**/*.txt'")
        roots = self._real_roots()
        entries, outside = self._glob_entries(pattern, roots)
        if not entries:
            return f"No paths match {_quote(pattern)}." + _outside_note(outside)
        budget = self.max_output_chars - 2 * _NOTE_ROOM
        lines: list[str] = []
        used = 0
        for display, _, is_dir in entries[: self.max_glob_paths]:
            line = display + ("/" if is_dir and display != "." else "")
            if used + len(line) + 1 > budget:
                break
            lines.append(line)
            used += len(line) + 1
        if len(lines) < len(entries):
            lines.append(f"[showing {len(lines)} of {len(entries):,} paths; narrow the pattern]")
        return "\n".join(lines) + _outside_note(outside)

    def _glob_entries(
        self, pattern: str, roots: list[Path]
    ) -> tuple[list[tuple[str, Path, bool]], int]:
        """Matches as (display, real path, is_dir), sorted by display, and symlinks skipped."""
        if "\0" in pattern:
            raise ToolError(f"pattern {_quote(pattern)} contains a NUL byte")
        parts = pattern.split("/")
        first_wild = next(
            (i for i, part in enumerate(parts) if _GLOB_CHARS.intersection(part)), None
        )
        if first_wild is None:
            real = resolve_in_roots(pattern, roots)
            if not os.path.lexists(real):
                return [], 0
            return [(self._display(real, roots), real, real.is_dir())], 0
        prefix = "/".join(parts[:first_wild]) or ("/" if pattern.startswith("/") else ".")
        rest = [part for part in parts[first_wild:] if part not in ("", ".")]
        if ".." in rest:
            raise ToolError(
                f"'..' may appear only before the first wildcard in {_quote(pattern)}: "
                f"write the directory out, then the wildcard"
            )
        base = resolve_in_roots(prefix, roots)
        if not base.is_dir():
            return [], 0
        matcher = re.compile(_glob_regex(rest))
        recursive = "**" in rest
        entries: list[tuple[str, Path, bool]] = []
        outside = 0
        for directory, dirnames, filenames in os.walk(base, followlinks=False):
            relative_dir = Path(directory).relative_to(base)
            depth = len(relative_dir.parts)
            dirnames.sort()
            for name in dirnames + filenames:
                if not matcher.fullmatch((relative_dir / name).as_posix()):
                    continue
                entry = Path(directory, name)
                real = entry
                if entry.is_symlink():
                    try:
                        real = resolve_in_roots(entry, roots)
                    except ToolError:
                        outside += 1
                        continue
                entries.append((self._display(entry, roots), real, real.is_dir()))
            if not recursive and depth + 1 >= len(rest):
                dirnames.clear()  # deeper paths cannot match a pattern without `**`
        entries.sort(key=lambda entry: entry[0])
        return entries, outside

    # -- shared ----------------------------------------------------------------------------

    def _real_roots(self) -> list[Path]:
        # Resolved per call, not once: the workspace directory may be created after the
        # toolbox (LocalWorkspace creates it lazily).
        return [root.resolve() for root in self.roots]

    @staticmethod
    def _display(path: Path, roots: list[Path]) -> str:
        """Relative to the first root when inside it (how Read resolves it), else absolute."""
        if path == roots[0]:
            return "."
        if path.is_relative_to(roots[0]):
            return path.relative_to(roots[0]).as_posix()
        return str(path)


def workspace_tools(
    workspace_or_roots: _HasWorkdir | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    max_line_chars: int = 2_000,
    max_output_chars: int = 30_000,
    max_glob_paths: int = 200,
    grep_timeout: float | None = 10.0,
) -> list[Tool]:
    """Read, Grep and Glob for an agent, confined to a workspace.

    Args:
        workspace_or_roots: a workspace with a `workdir` (such as `LocalWorkspace`), one
            directory, or several; relative paths resolve against the first.
        max_line_chars: longest line shown.
        max_output_chars: longest tool result; keep it below the agent's tool_result_limit.
        max_glob_paths: most paths one Glob lists.
        grep_timeout: seconds before a Grep's worker process is killed.

    Returns:
        `[Read, Grep, Glob]`, async functions with type hints and docstrings to derive
        tool schemas from.

    Raises:
        ConfigError: no roots, or impossible caps.
    """
    workdir = getattr(workspace_or_roots, "workdir", None)
    roots: Sequence[str | os.PathLike[str]]
    if workdir is not None:
        roots = [workdir]
    elif isinstance(workspace_or_roots, (str, os.PathLike)):
        roots = [workspace_or_roots]
    elif isinstance(workspace_or_roots, Sequence):
        roots = list(workspace_or_roots)
    else:
        raise ConfigError(
            f"workspace_tools needs a workspace with a workdir, a directory or a list of "
            f"directories, got {workspace_or_roots!r}"
        )
    toolbox = FileToolbox(
        roots,
        max_line_chars=max_line_chars,
        max_output_chars=max_output_chars,
        max_glob_paths=max_glob_paths,
        grep_timeout=grep_timeout,
    )
    return toolbox.tools()


# -- helpers -------------------------------------------------------------------------------


def _as_int(name: str, value: Any, *, minimum: int) -> int:
    """An integer argument from the model, which sometimes sends numbers as strings."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name}={_quote(value)} is not a whole number") from None
    if number < minimum:
        raise ToolError(f"{name}={number} must be at least {minimum}")
    return number


def _regular_file_size(shown: str, real: Path) -> int:
    """The size of `real`, or a ToolError saying why it cannot be read as a file."""
    try:
        status = real.stat()
    except FileNotFoundError:
        raise ToolError(
            f"no such file: {_quote(shown)}; call Glob to find the right path"
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot read {_quote(shown)}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(status.st_mode):
        raise ToolError(f"{_quote(shown)} is a directory: call Glob with '{shown}/*' to list it")
    if not stat.S_ISREG(status.st_mode):
        raise ToolError(f"{_quote(shown)} is not a regular file (a pipe, socket or device)")
    return status.st_size


def _binary_message(shown: str, size: int) -> str:
    return (
        f"{_quote(shown)} is a binary file ({size:,} bytes, NUL bytes in its first 8 KB): Read "
        f"shows text only. It is probably a data file (image, audio, PDF): refer to it by path"
    )


def _exists_in_roots(path: str, roots: list[Path]) -> bool:
    try:
        return resolve_in_roots(path, roots).exists()
    except ToolError:
        return False


def _quote(value: object, limit: int = 200) -> str:
    """`repr(value)` for a message, shortened so an absurd argument cannot flood the result."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _outside_note(outside: int) -> str:
    if not outside:
        return ""
    return f"\n[{outside} symlink(s) pointing outside the allowed roots skipped]"


def _format_line(number: int, text: str, cut: int) -> str:
    line = f"{number:>6}\t{text}"
    if cut:
        line += f"… [line cut: {cut:,} more characters]"
    return line


class _LineText:
    """One line read in pieces: keeps its first `limit` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._limit = limit
        self._head: list[str] = []
        self._head_chars = 0
        self._cut = 0
        self._ends_with_cr = False

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self._ends_with_cr = text.endswith("\r")
        room = max(0, self._limit - self._head_chars)
        if room:
            piece = text[:room]
            self._head.append(piece)
            self._head_chars += len(piece)
        self._cut += max(0, len(text) - room)

    def format(self, number: int) -> str:
        self.feed(b"", final=True)
        head = "".join(self._head)
        cut = self._cut
        if self._ends_with_cr:  # a CRLF line ending is not part of the line
            if cut:
                cut -= 1
            else:
                head = head[:-1]
        return _format_line(number, head, cut)


def _read_window(
    file: IO[bytes], offset: int, limit: int, max_line_chars: int, *, budget: int
) -> tuple[list[str], int]:
    """Stream `file`: format lines offset..offset+limit-1 within `budget` chars, count all.

    Returns:
        The formatted lines shown and the file's total number of lines.
    """
    shown: list[str] = []
    used = 0
    line_number = 1  # the line the next byte belongs to
    last_wanted = offset + limit - 1
    line: _LineText | None = None
    last_byte = b""
    while chunk := file.read(_CHUNK_BYTES):
        last_byte = chunk[-1:]
        position = 0
        while position < len(chunk):
            if line_number > last_wanted:
                line_number += chunk.count(b"\n", position)
                break
            if line_number < offset:
                newlines = chunk.count(b"\n", position)
                if line_number + newlines < offset:
                    line_number += newlines
                    break
                position = chunk.index(b"\n", position) + 1
                line_number += 1
                continue
            if line is None:
                line = _LineText(max_line_chars)
            end = chunk.find(b"\n", position)
            if end < 0:
                line.feed(chunk[position:])
                break
            line.feed(chunk[position:end])
            formatted = line.format(line_number)
            line = None
            if used + len(formatted) + 1 > budget:
                # Stop showing; this line's newline is counted by the branch above.
                last_wanted = line_number - 1
                continue
            shown.append(formatted)
            used += len(formatted) + 1
            line_number += 1
            position = end + 1
    if line is not None:  # a last line without a newline, inside the window
        formatted = line.format(line_number)
        if used + len(formatted) + 1 <= budget:
            shown.append(formatted)
    total = line_number if last_byte not in (b"", b"\n") else line_number - 1
    return shown, total


def _glob_regex(segments: list[str]) -> str:
    """A regex for `/`-joined relative paths matching the glob `segments`."""
    regex = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _glob_segment_regex(segment) + ("" if last else "/")
    return regex


def _glob_segment_regex(segment: str) -> str:
    """fnmatch rules within one path segment: `*` and `?` never match `/`."""
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "*":
            while index < len(segment) and segment[index] == "*":
                index += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = index
            if end < len(segment) and segment[end] in "!^":
                end += 1
            if end < len(segment) and segment[end] == "]":
                end += 1
            while end < len(segment) and segment[end] != "]":
                end += 1
            if end >= len(segment):
                out.append(re.escape(char))  # an unclosed `[` is literal, as in fnmatch
                continue
            body = segment[index:end].replace("\\", "\\\\")
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            index = end + 1
        else:
            out.append(re.escape(char))
    return "".join(out)


def _parse_events(output: bytes | str | None) -> list[dict[str, Any]]:
    """The worker's complete event lines; a line cut off by the kill is dropped."""
    if not output:
        return []
    if isinstance(output, bytes):
        output = output.decode("ascii", "replace")
    events: list[dict[str, Any]] = []
    for line in output.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _worker_source() -> str:
    """The program run by the Grep worker process: `_grep_worker` and a JSON-lines driver."""
    return "\n".join(
        [
            "from __future__ import annotations",
            "import json, sys",
            inspect.getsource(_grep_worker),
            "def _emit(event):",
            "    sys.stdout.write(json.dumps(event) + '\\n')",
            "    sys.stdout.flush()",  # flushed per event, so a killed worker loses nothing
            "_grep_worker(json.loads(sys.stdin.buffer.read()), _emit)",
        ]
    )


def _grep_worker(request: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
    """Search files line by line and report each output line through `emit`.

    Runs in the Grep worker process, whose program is built from this function's source:
    it must stay self-contained, importing only the standard library inside its body.

    Events: `start` (a file is being searched), `line` (an output line: file, line, text,
    match), `binary`, `error`, `full` (max_matches reached), `more` (a further match
    exists; the search stops), `done`.
    """
    import collections as _collections
    import re as _re

    regex = _re.compile(request["pattern"])
    context = int(request["context_lines"])
    max_matches = int(request["max_matches"])
    max_chars = int(request["max_line_chars"])
    sniff_bytes = int(request["sniff_bytes"])

    def clip(text: str, span: tuple[int, int] | None) -> str:
        """The line cut to max_chars, around the match when there is one."""
        if len(text) <= max_chars:
            return text
        start = 0
        if span is not None:
            start = max(0, min(span[0] - max_chars // 4, len(text) - max_chars))
        end = min(start + max_chars, len(text))
        return (
            ("…" if start else "")
            + text[start:end]
            + ("…" if end < len(text) else "")
            + f" [line has {len(text):,} characters; showing {start + 1:,}–{end:,}]"
        )

    matches = 0
    for index, path in enumerate(request["paths"]):
        emit({"kind": "start", "file": index})
        try:
            with open(path, "rb") as file:
                if b"\0" in file.read(sniff_bytes):
                    emit({"kind": "binary", "file": index})
                    continue
                file.seek(0)
                before: _collections.deque[tuple[int, str]] = _collections.deque(maxlen=context)
                after = 0
                for number, raw in enumerate(file, 1):
                    text = raw.decode("utf-8", "replace")
                    if text.endswith("\n"):
                        text = text[:-1]
                    if text.endswith("\r"):
                        text = text[:-1]
                    found = regex.search(text)
                    if found is not None:
                        if matches == max_matches:
                            emit({"kind": "more"})
                            return
                        for context_number, context_text in before:
                            emit(
                                {
                                    "kind": "line",
                                    "file": index,
                                    "line": context_number,
                                    "text": context_text,
                                    "match": False,
                                }
                            )
                        before.clear()
                        emit(
                            {
                                "kind": "line",
                                "file": index,
                                "line": number,
                                "text": clip(text, found.span()),
                                "match": True,
                            }
                        )
                        matches += 1
                        if matches == max_matches:
                            emit({"kind": "full"})
                        after = context
                    elif after:
                        emit(
                            {
                                "kind": "line",
                                "file": index,
                                "line": number,
                                "text": clip(text, None),
                                "match": False,
                            }
                        )
                        after -= 1
                    elif context:
                        before.append((number, clip(text, None)))
        except OSError as exc:
            emit({"kind": "error", "file": index, "message": exc.strerror or str(exc)})
    emit({"kind": "done"})

"""Read, Grep and Glob: the tools an agent uses to read back what was offloaded.

Every path is confined to the toolbox's roots (normally the workspace directory): `..`
escapes, absolute paths elsewhere and symlinks whose target lies outside are refused. A file
is opened first and the open descriptor is then checked (a regular file, inside the roots by
its real path, one link), so swapping a file for a symlink after the check reads nothing
outside; FIFOs, sockets and devices are skipped. Every result is capped, so reading an
offloaded file can never produce a result big enough to be offloaded again. Regexes and globs
run in RE2 (linear time, the GIL released while matching), and Grep also stops at a time
bound.

The tools return text for the model: a refusal or failure is a message starting with
"Error:" that says what to do instead, so the model can correct itself. `resolve_in_roots`
is the one confinement check; it raises `ToolError` and is usable on its own.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import errno
import fcntl
import os
import stat
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from ..exceptions import ConfigError, InvalidContent, ToolError
from ..messages import DataBlock, TextBlock
from ..offloader._images import MAX_IMAGE_BYTES, describe_image, image_blocks, image_media_type
from ..offloader._jsonl_text import MAX_DECODED_LINE_BYTES, is_jsonl, message_text
from ..offloader._regex import Pattern, compile_pattern, escape

__all__ = ["FileToolbox", "resolve_in_roots", "workspace_tools"]

# A NUL byte in the first 8 KB marks a file as binary (the rule git and grep use).
_SNIFF_BYTES = 8192
# Read streams files in chunks of this size, so a 50 MB file costs 1 MB of memory.
_CHUNK_BYTES = 1 << 20
# Room kept free under max_output_chars for footers and notes.
_NOTE_ROOM = 300
_GLOB_CHARS = frozenset("*?[")
# Grep shows at most this many context lines around a match: more could never fit the output
# cap, and keeping them would cost memory (context_lines=10**9 on a big log).
_MAX_CONTEXT_LINES = 100

Tool = Callable[..., Awaitable[Any]]


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
        grep_timeout: seconds one Grep may spend listing and searching files before it
            stops and reports what it found; None for no bound. Matching itself is linear
            (RE2), so the bound is about the amount of data, not the pattern.
        images: whether Read answers an image file (PNG, JPEG, GIF, WebP) with the image
            itself, for a model that takes images; False: with one line describing it.

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
        self.images = images

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
            """Read a text file from the workspace, with line numbers like `cat -n`.

            Use it to read back an offloaded tool result or context file by the path named
            in its preview. A `.jsonl` log (context.jsonl) is shown one message per numbered
            line as readable text: `[role]`, then the message's text with real newlines.
            Very long lines are cut with a marker that says how to read the rest; when more
            lines remain, the last line of the result says which offset to pass next. An
            image (PNG, JPEG, GIF, WebP), such as one offloaded to data/, is shown as the
            image itself.

            Args:
                path: File to read; a relative path starts at the workspace root.
                offset: First line to show, counting from 1.
                limit: Most lines to show.
                char_offset: To page inside one long line: show only line `offset`, from
                    this character on (counting from 0), as far as the output allows.

            Returns:
                The numbered lines, or a message starting with "Error:".
            """
            return await asyncio.to_thread(toolbox.read, path, offset, limit, char_offset)

        async def Grep(
            pattern: str, path_or_glob: str = ".", context_lines: int = 0, max_matches: int = 50
        ) -> str:
            """Search files in the workspace for a regular expression.

            The syntax is RE2: like Python `re`, but without backreferences (`\\1`) and
            lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`); matching takes linear time. Lines are
            matched one at a time. Pipes, sockets and devices are skipped. Output lines are
            `path:line:text`; with context_lines, context lines are `path-line-text` and `--`
            separates hunks that are not adjacent. Put `(?i)` at the start of the pattern to
            ignore case.

            Args:
                pattern: Regular expression to search for.
                path_or_glob: File, directory (searched recursively) or glob such as
                    `sessions/*/tool_result-*.txt`; a relative path starts at the workspace root.
                context_lines: Lines of context to show before and after each match (at
                    most 100).
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

    def read(
        self, path: str, offset: int = 1, limit: int = 200, char_offset: int = 0
    ) -> str | list[TextBlock | DataBlock]:
        """Numbered lines of a text file; blocking. See the `Read` tool for the format.

        Args:
            path: file to read; relative paths start at the first root.
            offset: first line to show, 1-based.
            limit: most lines to show.
            char_offset: when above 0, only line `offset`, from this character (0-based).

        Returns:
            The numbered lines and, when lines remain, a footer naming the next offset; for
            an image, a line describing it and the image (or the line alone without
            `images`); or a message starting with "Error:".
        """
        try:
            return self._read(path, offset, limit, char_offset)
        except ToolError as exc:
            return f"Error: {exc}"

    def _read(
        self, path: str, offset: int, limit: int, char_offset: int = 0
    ) -> str | list[TextBlock | DataBlock]:
        offset = _as_int("offset", offset, minimum=1)
        limit = _as_int("limit", limit, minimum=1)
        char_offset = _as_int("char_offset", char_offset, minimum=0)
        roots = self._real_roots()
        real = resolve_in_roots(path, roots)
        fd = _open_verified(path, real, roots)
        budget = self.max_output_chars - _NOTE_ROOM
        try:
            with os.fdopen(fd, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                head = file.read(_SNIFF_BYTES)
                media_type = image_media_type(head)
                if media_type is not None:
                    return self._read_image(file, path, size, media_type)
                if b"\0" in head:
                    raise ToolError(_binary_message(path, size))
                file.seek(0)
                if char_offset:
                    return _read_line_slice(file, path, offset, char_offset, budget)
                window = _read_jsonl_window if is_jsonl(str(path)) else _read_window
                shown, total = window(file, offset, limit, self.max_line_chars, budget=budget)
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

    def _read_image(
        self, file: IO[bytes], path: str, size: int, media_type: str
    ) -> str | list[TextBlock | DataBlock]:
        if size > MAX_IMAGE_BYTES:
            raise ToolError(
                f"{_quote(path)} is an image ({media_type}) of {size:,} bytes, more than the "
                f"{MAX_IMAGE_BYTES:,} a model accepts in one request: refer to it by its path"
            )
        file.seek(0)
        data = file.read(MAX_IMAGE_BYTES + 1)
        if not self.images:
            return describe_image(data, media_type, path) + (
                " (this agent's model takes no images: refer to the file by its path)"
            )
        return image_blocks(data, media_type, path)

    # -- Grep ------------------------------------------------------------------------------

    def grep(
        self, pattern: str, path_or_glob: str = ".", context_lines: int = 0, max_matches: int = 50
    ) -> str:
        """Regex search through a file, a directory tree or a glob; blocking.

        See the `Grep` tool for the output format.

        Args:
            pattern: regular expression in RE2 syntax, matched against each line.
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
        context_lines = min(_as_int("context_lines", context_lines, minimum=0), _MAX_CONTEXT_LINES)
        max_matches = _as_int("max_matches", max_matches, minimum=1)
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("pattern is empty: pass a regular expression to search for")
        try:
            regex = compile_pattern(pattern)
        except InvalidContent as exc:
            raise ToolError(str(exc)) from None
        deadline = None if self.grep_timeout is None else time.monotonic() + self.grep_timeout
        roots = self._real_roots()
        files, outside, single_file = self._grep_targets(path_or_glob, roots, deadline)
        if not files:
            return f"No files to search in {_quote(path_or_glob)}." + _outside_note(outside)
        request: dict[str, Any] = {
            "pattern": pattern,
            "context_lines": context_lines,
            "max_matches": max_matches,
        }
        events, failure = self._search(regex, files, roots, request, single_file, deadline)
        names = [display for display, _ in files]
        return self._format_grep(
            events, failure, names, request, path_or_glob, single_file, outside
        )

    def _grep_targets(
        self, path_or_glob: str, roots: list[Path], deadline: float | None
    ) -> tuple[list[tuple[str, Path]], int, bool]:
        """The files to search: (display name, real path), symlinks skipped, single file?"""
        if not isinstance(path_or_glob, str):
            raise ToolError(f"path_or_glob must be a string, got {_quote(path_or_glob)}")
        path_or_glob = path_or_glob or "."
        if _GLOB_CHARS.intersection(path_or_glob) and not _exists_in_roots(path_or_glob, roots):
            entries, outside = self._glob_entries(path_or_glob, roots, deadline)
            files = [(display, real) for display, real, is_dir in entries if not is_dir]
            return files, outside, False
        real = resolve_in_roots(path_or_glob, roots)
        if real.is_dir():
            files, outside = self._walk_files(real, roots, deadline)
            return files, outside, False
        return [(self._display(real, roots), real)], 0, True

    def _walk_files(
        self, start: Path, roots: list[Path], deadline: float | None
    ) -> tuple[list[tuple[str, Path]], int]:
        """Regular files under `start`, sorted; symlinked directories are not descended."""
        files: list[tuple[str, Path]] = []
        outside = 0
        for directory, _dirnames, filenames in _walk(start, deadline):
            for name in filenames:
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

    def _search(
        self,
        regex: Pattern,
        files: list[tuple[str, Path]],
        roots: list[Path],
        request: dict[str, Any],
        single_file: bool,
        deadline: float | None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Search each file through a verified descriptor; events as `_format_grep` reads them.

        Stops at the deadline ("timeout"), after max_matches (then looks for one more), or
        once the lines kept exceed the output cap, so memory stays bounded whatever the
        arguments.
        """
        context = int(request["context_lines"])
        max_matches = int(request["max_matches"])
        max_chars = self.max_line_chars
        events: list[dict[str, Any]] = []
        kept = 0  # characters kept in events; past the output cap, the search stops
        matches = 0

        def keep(event: dict[str, Any], name: str) -> None:
            nonlocal kept
            events.append(event)
            # At least what the line costs in the result, so past the cap the result is too.
            kept += len(event["text"]) + len(name) + len(str(event["line"])) + 3

        for index, (display, real) in enumerate(files):
            if deadline is not None and time.monotonic() > deadline:
                return events, "timeout"
            try:
                fd = _open_verified(display, real, roots)
            except _NotRegular:
                if single_file:
                    raise
                events.append({"kind": "special", "file": index})
                continue
            except ToolError as exc:
                if single_file or "no file descriptors" in str(exc):
                    raise
                events.append({"kind": "error", "file": index, "message": str(exc)})
                continue
            events.append({"kind": "start", "file": index})
            jsonl = is_jsonl(display)
            with os.fdopen(fd, "rb") as file:
                try:
                    if b"\0" in file.read(_SNIFF_BYTES):
                        events.append({"kind": "binary", "file": index})
                        continue
                    file.seek(0)
                    before: collections.deque[tuple[int, str]] = collections.deque(maxlen=context)
                    after = 0
                    for number, raw in enumerate(file, 1):
                        if deadline is not None and time.monotonic() > deadline:
                            return events, "timeout"
                        text = raw.decode("utf-8", "replace").rstrip("\n")
                        if text.endswith("\r"):
                            text = text[:-1]
                        found = regex.search(text)
                        if jsonl:
                            # Match the message's decoded text, so a string the model saw
                            # is found although the log stores it JSON-escaped; show it.
                            decoded = _decoded_match(text, regex)
                            if decoded is not None:
                                text, found = decoded
                            elif found is None:
                                text = _flattened(text)
                        if found is not None:
                            if matches == max_matches:
                                events.append({"kind": "more"})
                                return events, None
                            for context_number, context_text in before:
                                keep(
                                    _line_event(index, context_number, context_text, False), display
                                )
                            before.clear()
                            clipped = _clip(text, found.span(), max_chars)
                            keep(_line_event(index, number, clipped, True), display)
                            matches += 1
                            if matches == max_matches:
                                events.append({"kind": "full"})
                            after = context
                        elif after:
                            keep(
                                _line_event(index, number, _clip(text, None, max_chars), False),
                                display,
                            )
                            after -= 1
                        elif context:
                            before.append((number, _clip(text, None, max_chars)))
                        if kept > self.max_output_chars:
                            events.append({"kind": "capped"})  # _format_grep writes the cap note
                            return events, None
                except OSError as exc:
                    events.append(
                        {"kind": "error", "file": index, "message": exc.strerror or str(exc)}
                    )
        events.append({"kind": "done"})
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
        searched = binary = special = 0
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
            elif kind == "special":
                special += 1
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
                f"Error: Grep stopped after its time limit of {self.grep_timeout:g} s{where}: "
                f"there is too much to search. Pass a narrower path_or_glob (one file, or a "
                f"glob such as sessions/*/tool_result-*.txt)."
            )
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
        if special:
            notes.append(f"[{special} pipe(s), socket(s) or device(s) skipped]")
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
        self, pattern: str, roots: list[Path], deadline: float | None = None
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
        try:
            matcher = compile_pattern(_glob_regex(rest))
        except InvalidContent as exc:
            reason = str(exc).split(": ", 2)[-1].split(";")[0]
            raise ToolError(
                f"invalid glob {_quote(pattern)} ({reason}): use * ? ** and classes such as "
                f"[a-z] with the lower bound first; put a literal [ inside brackets: [[]"
            ) from None
        recursive = "**" in rest
        entries: list[tuple[str, Path, bool]] = []
        outside = 0
        for directory, dirnames, filenames in _walk(base, deadline):
            relative_dir = Path(directory).relative_to(base)
            depth = len(relative_dir.parts)
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
    images: bool = True,
) -> list[Tool]:
    """Read, Grep and Glob for an agent, confined to a workspace.

    Args:
        workspace_or_roots: a workspace with a `workdir` (such as `LocalWorkspace`), one
            directory, or several; relative paths resolve against the first.
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
        images=images,
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


class _NotRegular(ToolError):
    """The path names a FIFO, socket or device: skipped in a search, an error in Read."""


def _open_verified(shown: str, path: Path, roots: list[Path]) -> int:
    """Open `path` for reading, then check the open descriptor, and return it.

    The checks run on what was opened, not on the name, so a file swapped for a symlink (or
    a hard link) to an outside file between a check and the open is refused: the descriptor
    must be a regular file, whose real path (from /proc/self/fd) lies inside `roots` (where
    /proc is missing: the same device and inode as the resolved name, no symlink), with one
    link. `O_NONBLOCK` makes opening a FIFO return at once; it is cleared afterwards.

    Raises:
        ToolError: the file is missing, unreadable, outside, hard-linked, or not regular
            (`_NotRegular`); with no descriptors left, a message saying so.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ToolError(
            f"no such file: {_quote(shown)}; call Glob to find the right path"
        ) from None
    except OSError as exc:
        raise ToolError(_os_error_message(f"cannot open {_quote(shown)}", exc)) from exc
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise ToolError(
                f"{_quote(shown)} is a directory: call Glob with '{shown}/*' to list it"
            )
        if not stat.S_ISREG(status.st_mode):
            raise _NotRegular(
                f"{_quote(shown)} is not a regular file (a pipe, socket or device): it is skipped"
            )
        if not _descriptor_inside(fd, status, path, roots):
            raise ToolError(
                f"{_quote(shown)} changed while it was opened and now lies outside the allowed "
                f"roots: it was not read"
            )
        if status.st_nlink != 1:
            raise ToolError(
                f"{_quote(shown)} has {status.st_nlink} hard links, so it may be a file from "
                f"outside the workspace: it is not read"
            )
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _descriptor_inside(fd: int, status: os.stat_result, path: Path, roots: list[Path]) -> bool:
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        # No /proc: the name must still be the same file, reached without a symlink at its end.
        try:
            named = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        return (named.st_dev, named.st_ino) == (status.st_dev, status.st_ino) and any(
            path == root or path.is_relative_to(root) for root in roots
        )
    return any(real == root or real.is_relative_to(root) for root in roots)


def _os_error_message(what: str, exc: OSError) -> str:
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return (
            f"{what}: no file descriptors are left in this process ({exc.strerror}); nothing "
            f"was searched: try again when fewer files are open"
        )
    return f"{what}: {exc.strerror or exc}"


def _walk_error(error: OSError) -> None:
    """os.walk's onerror: a directory that cannot be listed is an error, not 'no files'."""
    name = error.filename if error.filename is not None else "a directory"
    raise ToolError(_os_error_message(f"cannot list {_quote(str(name))}", error))


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
        line += f"… [line cut: {cut:,} more characters]{_rest_hint(number, len(text))}"
    return line


def _rest_hint(number: int, shown: int) -> str:
    return f" (Read offset={number} char_offset={shown} shows the rest)"


def _line_text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-1]
    return text[:-1] if text.endswith("\r") else text


def _readable(text: str, jsonl: bool) -> str:
    """A line as Read shows it: a JSONL message as its readable text, anything else as is."""
    rendered = message_text(text) if jsonl else None
    return text if rendered is None else "\n".join(rendered)


def _format_message(number: int, body: str, max_chars: int) -> str:
    """One JSONL message: numbered first line, the others indented under it, cut if long."""
    head = body[:max_chars]
    cut = len(body) - len(head)
    lines = head.split("\n")
    out = f"{number:>6}\t{lines[0]}" + "".join(f"\n{'':>6}\t{line}" for line in lines[1:])
    if cut:
        out += f"… [message cut: {cut:,} more characters]{_rest_hint(number, len(head))}"
    return out


def _skip_rest_of_line(file: IO[bytes]) -> None:
    while chunk := file.readline(_CHUNK_BYTES):
        if chunk.endswith(b"\n"):
            return


def _read_jsonl_window(
    file: IO[bytes], offset: int, limit: int, max_line_chars: int, *, budget: int
) -> tuple[list[str], int]:
    """`_read_window` for a JSONL log: each line shown as its message's readable text.

    A line too long to decode (over `MAX_DECODED_LINE_BYTES`) is shown as its raw head.
    """
    shown: list[str] = []
    used = 0
    number = 0
    last_wanted = offset + limit - 1
    while raw := file.readline(MAX_DECODED_LINE_BYTES + 1):
        number += 1
        oversize = not raw.endswith(b"\n") and len(raw) > MAX_DECODED_LINE_BYTES
        if oversize:
            _skip_rest_of_line(file)
        if number < offset or number > last_wanted:
            continue
        if oversize:
            head = raw[: max_line_chars * 4].decode("utf-8", "replace")[:max_line_chars]
            formatted = _format_line(number, head, MAX_DECODED_LINE_BYTES - len(head))
        else:
            body = _readable(_line_text(raw), jsonl=True)
            formatted = _format_message(number, body, max_line_chars)
        if used + len(formatted) + 1 > budget:
            last_wanted = number - 1
            continue
        shown.append(formatted)
        used += len(formatted) + 1
    return shown, number


def _read_line_slice(file: IO[bytes], path: str, number: int, start: int, budget: int) -> str:
    """Characters `start`.. of line `number` (a JSONL message: of its readable text)."""
    jsonl = is_jsonl(str(path))
    current = 0
    while raw := file.readline(MAX_DECODED_LINE_BYTES + 1):
        current += 1
        complete = raw.endswith(b"\n") or len(raw) <= MAX_DECODED_LINE_BYTES
        if current < number:
            if not complete:
                _skip_rest_of_line(file)
            continue
        if not complete:
            # Longer than any message: page through the raw text, reading on as needed.
            text = _line_text(raw)
            while len(text) < start + budget and (more := file.readline(_CHUNK_BYTES)):
                text += _line_text(more)
                if more.endswith(b"\n"):
                    break
            total = f"more than {len(text):,}"
        else:
            text = _readable(_line_text(raw), jsonl)
            total = f"{len(text):,}"
        if start >= len(text):
            raise ToolError(
                f"char_offset={start} is past the end of line {number} of {_quote(path)}, "
                f"which has {total} characters: pass a smaller char_offset"
            )
        piece = text[start : start + budget]
        end = start + len(piece)
        note = (
            f"\n… characters {start + 1:,}–{end:,} of {total} in line {number}; call Read "
            f"with offset={number}, char_offset={end} to continue"
            if end < len(text) or not complete
            else f"\n… characters {start + 1:,}–{end:,} of line {number}: the end of the line"
        )
        return f"{number:>6}\t{piece}{note}"
    raise ToolError(
        f"offset={number} is past the end of {_quote(path)}, which has {current} lines: "
        f"call Read with an offset from 1 to {current}"
    )


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
                # Line `offset` starts in this chunk: step to it newline by newline (counting
                # the rest of the chunk again for every line skipped was quadratic: 1.6 s to
                # reach line 16,800 of a 2 MB file).
                while line_number < offset:
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
                out.append(escape(char))  # an unclosed `[` is literal, as in fnmatch
                continue
            body = segment[index:end].replace("\\", "\\\\")
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            index = end + 1
        else:
            out.append(escape(char))
    return "".join(out)


def _walk(start: Path, deadline: float | None) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk without following links, sorted; an unreadable `start`, or running out of
    file descriptors anywhere, is a ToolError rather than an empty walk."""
    top = os.fspath(start)

    def on_error(error: OSError) -> None:
        if error.filename in (top, None) or error.errno in (errno.EMFILE, errno.ENFILE):
            _walk_error(error)

    for directory, dirnames, filenames in os.walk(top, followlinks=False, onerror=on_error):
        if deadline is not None and time.monotonic() > deadline:
            raise ToolError(
                f"listing {_quote(top)} took longer than the time limit: pass a narrower path"
            )
        dirnames.sort()
        filenames.sort()
        yield directory, dirnames, filenames


def _decoded_match(line: str, regex: Pattern) -> tuple[str, Any] | None:
    """The first readable line of a JSONL message that matches, with its match."""
    rendered = message_text(line)
    if rendered is None:
        return None
    header = rendered[0] if rendered and rendered[0].startswith("[") else ""
    for text in rendered:
        found = regex.search(text)
        if found is not None:
            if header and text is not header:
                # Name the role; the match's span moves with the text.
                prefixed = f"{header} {text}"
                return prefixed, regex.search(prefixed)
            return text, found
    return None


def _flattened(line: str) -> str:
    """A JSONL message on one line, for context lines around a match."""
    rendered = message_text(line)
    return line if rendered is None else " ⏎ ".join(rendered)


def _line_event(file: int, number: int, text: str, is_match: bool) -> dict[str, Any]:
    return {"kind": "line", "file": file, "line": number, "text": text, "match": is_match}


def _clip(text: str, span: tuple[int, int] | None, max_chars: int) -> str:
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

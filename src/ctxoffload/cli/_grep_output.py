"""What `ctxoffload grep` prints: each line found, `path:number:text` (a context line with
`-` for `:`, `--` between hunks), in GNU grep's colours on a terminal, cut after
--max-columns bytes, made inert (`_output.inert_bytes`: no escape sequence of a file reaches
the terminal); or, with --json, one list of the matches.

(Plain classes here, not dataclasses: importing `dataclasses` costs ~12 ms, a tenth of a
whole search of 100 MB.)
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable

from ._output import inert_bytes, printable_ascii, raw_stream

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any, BinaryIO

__all__ = ["GrepQuery", "Hit", "Printer"]


class GrepQuery:
    """What one `ctxoffload grep` looks for and where, read once from its arguments by `run`
    (`GrepQuery.of`) and handed down instead of them."""

    __slots__ = ("context", "events", "fixed", "ignore_case", "pattern", "writers")

    def __init__(
        self,
        pattern: str,
        *,
        fixed: bool = False,
        ignore_case: bool = False,
        context: int = 0,
        events: bool = False,
        writers: bool = False,
    ) -> None:
        self.pattern = pattern
        self.fixed = fixed
        self.ignore_case = ignore_case
        self.context = context
        self.events = events
        self.writers = writers

    @classmethod
    def of(cls, args: Any) -> GrepQuery:
        """The query the command's parsed arguments give."""
        return cls(
            args.pattern,
            fixed=args.fixed_strings,
            ignore_case=args.ignore_case,
            context=args.context,
            events=args.events,
            writers=getattr(args, "writers", False),
        )


class Hit:
    """A line found in a file of a session (a memory file's: session None), and (with
    --writers) the agent that wrote it."""

    __slots__ = ("is_match", "line", "path", "session", "text", "writer")

    def __init__(
        self, path: str, line: int, text: bytes, is_match: bool, session: str | None
    ) -> None:
        self.path = path
        self.line = line
        self.text = text
        self.is_match = is_match
        self.session = session
        self.writer: dict[str, Any] | None = None


class Printer:
    """Prints each `Hit` as it comes (or keeps the matches, for --json)."""

    def __init__(self, as_json: bool, max_columns: int, context: int) -> None:
        self.as_json = as_json
        self.max_columns = max_columns
        self.context = context
        # The stream beneath the inert one: the colours below are written as they are, and
        # the file name and the line are made inert in `emit`.
        self.out: BinaryIO = raw_stream(sys.stdout).buffer
        if isinstance(self.out, io.FileIO) and not self.out.isatty():
            # Unbuffered (PYTHONUNBUFFERED, -u): into a pipe or a file, lines go in blocks of
            # their own, as GNU grep writes them, not one write each (30,000 lines of 10,000
            # small sessions: 0.3 s of system time). Over descriptor 1 without owning it.
            self.out = io.BufferedWriter(io.FileIO(self.out.fileno(), "wb", closefd=False))
        # GNU grep's colours: file names magenta, line numbers green, separators cyan.
        tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self.colored = tty
        self._file, self._number, self._sep, self._end = (
            (b"\x1b[35m", b"\x1b[32m", b"\x1b[36m", b"\x1b[0m") if tty else (b"",) * 4
        )
        self._match_sep = self._sep + b":" + self._end
        self._context_sep = self._sep + b"-" + self._end
        self._path = ""  # the file of the last line printed, and its name as printed
        self._shown_path = b""
        self.hits: list[dict[str, Any]] = []
        self.matches = 0
        self._last: tuple[str, int] | None = None

    def note(self, message: str) -> None:
        """Say `message` on stderr, after the lines printed before it."""
        self.out.flush()
        sys.stderr.write(f"ctxoffload grep: {message}\n")
        sys.stderr.flush()

    def emit(self, hit: Hit) -> None:
        """Print one line found (or keep it, for --json), with its writer if it has one."""
        self.lines(hit.path, hit.session, ((hit.line, hit.text, hit.is_match),), hit.writer)

    def lines(
        self,
        path: str,
        session: str | None,
        found: Iterable[tuple[int, bytes, bool]],
        writer: dict[str, Any] | None = None,
    ) -> None:
        """Print the lines found in one file, `(number, text, is_match)` in order, as `emit`
        prints each (a session's file has a few: one call for them, not one each)."""
        if self.as_json:
            for number, text, is_match in found:
                self.matches += is_match
                if is_match:
                    hit: dict[str, Any] = {"session": session, "file": path, "line": number}
                    if writer is not None:
                        hit["writer"] = writer
                    hit["text"] = text.decode("utf-8", errors="replace")
                    self.hits.append(hit)
            return
        if writer is None and not self.context and not self.colored:
            self._plain_lines(path, found)
            return
        max_columns, context = self.max_columns, self.context
        for number, text, is_match in found:
            self.matches += is_match
            if context:  # (`--` between hunks: the last line printed is kept for -C only)
                if self._last is not None:
                    last_path, last_line = self._last
                    if last_path != path or number > last_line + 1:
                        self.out.write(b"--\n")
                self._last = (path, number)
            if writer is not None:
                agent = writer.get("agent") or "workspace"
                text = f"[{agent}] ".encode("utf-8", "replace") + text
            if max_columns and len(text) > max_columns:
                text = self._cut(text)
            if path != self._path:  # each file's lines come together: its name made once
                self._path = path
                shown = inert_bytes(path.encode("utf-8", "surrogateescape"))
                self._shown_path = self._file + shown + self._end
            sep = self._match_sep if is_match else self._context_sep
            self.out.write(
                b"%s%s%s%d%s%s%s\n"
                % (
                    self._shown_path,
                    sep,
                    self._number,
                    number,
                    self._end,
                    sep,
                    # (Nearly every line is printable ASCII: `inert_bytes` only when not.)
                    text if printable_ascii(text) else inert_bytes(text),
                )
            )

    def _plain_lines(self, path: str, found: Iterable[tuple[int, bytes, bool]]) -> None:
        """`lines` without colours, -C or writers (most of a search's lines): each line is
        written as `path:number:text`, looked at once whole and made inert part by part
        only when it is not printable ASCII (the separators and the number are), not its
        file's name and its text each looked at (a session's file has a line or two)."""
        max_columns, write = self.max_columns, self.out.write
        name = path.encode("utf-8", "surrogateescape")
        for number, text, is_match in found:
            self.matches += is_match
            if max_columns and len(text) > max_columns:
                text = self._cut(text)
            sep = b":" if is_match else b"-"
            line = b"%s%s%d%s%s\n" % (name, sep, number, sep, text)
            if not printable_ascii(line):
                line = b"%s%s%d%s%s\n" % (inert_bytes(name), sep, number, sep, inert_bytes(text))
            write(line)

    def _cut(self, text: bytes) -> bytes:
        """`text` cut after `max_columns` bytes, saying how many more it had."""
        keep = self.max_columns
        # Never inside a UTF-8 character: back off over its continuation bytes (at most 3,
        # so a line that is not UTF-8 at all is still cut near max_columns).
        for _ in range(3):
            if keep > 0 and text[keep] & 0xC0 == 0x80:
                keep -= 1
        cut = len(text) - keep
        return text[:keep] + f" [... {cut:,} more bytes]".encode()

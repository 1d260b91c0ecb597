"""`ctxoffload grep`'s fast path: a tool-result file searched by ripgrep (`rg`) instead of the
engine (`ctxoffload._search.engine`).

ripgrep comes with the `fast` extra's binary wheel, or from PATH: linear time as RE2, and as
fast as GNU grep when hundreds of thousands of lines match, where a Python loop over the
matches is 20-40 times slower. It is used only where it finds exactly what RE2 finds
(`ripgrep_can`): a `-F` string, or a pattern made of literals, `.`, classes of explicit
characters, groups, alternation, repetition and anchors (no `\\w`, `\\d`, `\\s`, `\\b`, whose
ASCII or Unicode meaning differs between the two, and no inline flags), without -C, --json
and --writers, and for a pattern that may match a U+FFFD (`.`, a negated class, a class
holding a character that is not ASCII) in a file that is UTF-8 throughout: a byte that is
not is U+FFFD to the engine's pattern, no character to ripgrep's (checking costs 17-60 ms per
100 MB, where ripgrep takes 10-700 ms). Each `$` is given to it as `(?:\\r?$)`, and a line
it prints that ends in "\\r" is judged again without it (`ripgrep_pattern`): it reads that
"\\r" as part of the line, where the agent's tools do not. It is started by `os.posix_spawn`
(`_Process`), reads the file from the descriptor grep opened and sniffed (the same checks
against links, hard links and binary files), and its lines are printed through the same
inert writer. A file under 64 KB is left to the engine (`RG_FROM_BYTES`: starting ripgrep
costs more than the search). `CTXOFFLOAD_GREP=python` turns it off; `CTXOFFLOAD_GREP=/path/to/rg`
picks the binary, and has it search every file it can, the smallest too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator

from .._search.engine import is_utf8_file
from .._search.matcher import Matcher
from ..exceptions import CliError
from ._grep_output import GrepQuery, Hit, Printer
from ._output import inert_bytes, printable_ascii, printable_ascii_by_libc

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from io import FileIO
    from typing import BinaryIO
else:
    # `signal` brings `enum` (~3 ms of a search of a few matches), for two numbers that
    # `_signal`, which the interpreter has imported, holds too (as `_signals.py` does).
    import _signal as signal

__all__ = ["RG_READ", "Ripgrep", "ripgrep_can", "ripgrep_for", "ripgrep_path", "ripgrep_pattern"]

# A file smaller than this is searched by the engine, in this process: starting ripgrep and
# waiting for it (2-6 ms, more on a loaded machine, half of it in the kernel) costs more
# than the engine's search of 64 KB, which takes about 1 ms where every line matches. A
# workspace of 10,000 small sessions took 60 s where `grep -rn` takes 0.5 s.
RG_FROM_BYTES = 64 * 1024

# Bytes of ripgrep's output read and printed at once, and the room its pipe is given: the
# most an unprivileged process may give by default (/proc/sys/fs/pipe-max-size).
RG_READ = 1 << 20

# Bytes of ripgrep's output looked at by `printable_ascii` before `printable_ascii_by_libc`
# takes over: loading ctypes (about 4 ms) pays for itself after 5-6 MB.
_BY_LIBC_AFTER = 8 * RG_READ

# How long a read of ripgrep's output shorter than an eighth of its pipe waits for more
# (`_line_blocks`).
_PAUSE = 0.0005

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
    return "".join(
        "(?:\\r?$)" if part == "$" and not is_class else part
        for part, is_class in _pattern_parts(pattern)
    )


def _pattern_parts(pattern: str) -> Iterator[tuple[str, bool]]:
    """The parts of a pattern `ripgrep_can` passes, in order, and whether each is a class: an
    escape (`\\$`), a class whole (`[^]a-z]`), or one character. A class ends at its first
    `]` not escaped, but for one first in it (after `^`), which is one of its characters; a
    class never closed runs to the pattern's end (RE2 and ripgrep both refuse it)."""
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\":
            yield pattern[i : i + 2], False
            i += 2
        elif char == "[":
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            j += pattern[j : j + 1] == "]"
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            yield pattern[i : j + 1], True
            i = j + 1
        else:
            yield char, False
            i += 1


def ripgrep_path() -> str | None:
    """The `rg` to run: `CTXOFFLOAD_GREP` when it names one, else the one installed beside
    this Python (the `fast` extra's wheel), else one on PATH; None when there is none or
    `CTXOFFLOAD_GREP=python`."""
    chosen = _chosen()
    if chosen.lower() == "python":
        return None
    # PATH is looked through here, not by `shutil.which`: importing shutil (bz2, lzma, zlib)
    # would cost a search of a few matches a tenth of GNU grep's time.
    beside = os.path.join(os.path.dirname(sys.executable), "rg")
    if chosen and _is_program(chosen):
        return chosen
    if _is_program(beside):
        return beside
    # PATH as `os.get_exec_path` reads it, read only now and without the `warnings` that
    # function imports (~1 ms of every search).
    path = os.environ.get("PATH")
    for folder in (os.defpath if path is None else path).split(os.pathsep):
        candidate = os.path.join(folder or ".", "rg")
        if _is_program(candidate):
            return candidate
    return None


def _chosen() -> str:
    """What `CTXOFFLOAD_GREP` says: `python`, a ripgrep binary, or nothing."""
    return os.environ.get("CTXOFFLOAD_GREP", "")


def _is_program(path: str) -> bool:
    """Whether `path` is a file this user may run."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def ripgrep_for(query: GrepQuery, matcher: Matcher, printer: Printer) -> Ripgrep | None:
    """The ripgrep search of this grep's tool-result files, or None where it cannot find
    what the engine finds, print what the printer prints, or is not installed."""
    if (
        printer.as_json
        or query.context
        or query.writers
        or not ripgrep_can(query.pattern, fixed=query.fixed)
    ):
        return None
    rg = ripgrep_path()
    if rg is None:
        return None
    # A ripgrep named by CTXOFFLOAD_GREP searches every file it can, the smallest too.
    from_bytes = 0 if rg == _chosen() else RG_FROM_BYTES
    return Ripgrep(rg, query, matcher, printer, from_bytes=from_bytes)


class Ripgrep:
    """Searches one plain file with ripgrep and prints its lines as `Printer` would.

    Attributes:
        from_bytes: the smallest file it is worth starting ripgrep for (`RG_FROM_BYTES`;
            0 when CTXOFFLOAD_GREP names the binary).
    """

    def __init__(
        self,
        rg: str,
        query: GrepQuery,
        matcher: Matcher,
        printer: Printer,
        *,
        from_bytes: int = RG_FROM_BYTES,
    ) -> None:
        self.from_bytes = from_bytes
        # --encoding none: the bytes as stored, as RE2 and the agent's Grep read them. Without
        # it ripgrep decodes a file that starts with a UTF-16 byte-order mark as UTF-16 (and
        # drops a UTF-8 one), even with --text.
        self.command = [rg, "--no-config", "--line-number", "--no-filename", "--text"]
        self.command += ["--encoding", "none"]
        self.command += ["--color", "never"]
        self.command += ["--fixed-strings"] if query.fixed else []
        self.command += ["--ignore-case"] if query.ignore_case else ["--case-sensitive"]
        pattern = query.pattern if query.fixed else ripgrep_pattern(query.pattern)
        self.command += ["--regexp", pattern, "-"]
        self.matcher = matcher
        self.may_match_cr = _may_match_cr(query.pattern, fixed=query.fixed)
        self.may_match_replacement = _may_match_replacement(query.pattern, fixed=query.fixed)
        self.printer = printer
        self._printable: Callable[[bytes], bool] = printable_ascii
        self._looked_at = 0

    def search(self, fd: int, shown: str, session: str | None, size: int) -> bool:
        """Search the file open at `fd` (from its start, `size` bytes); False (nothing
        printed) when it is not worth it (under `from_bytes`) or ripgrep cannot, for the
        usual search: a file that is not UTF-8 throughout for a
        pattern that may match a U+FFFD, where ripgrep would read each byte that is not UTF-8
        as no character and the rule of every door reads it as U+FFFD (`_search.engine`), or
        a failure to run it.

        Raises:
            CliError: ripgrep failed after printing lines.
        """
        if size < self.from_bytes:
            return False
        if self.may_match_replacement and not is_utf8_file(fd):
            return False
        try:
            process = _Process.start(self.command, fd)
        except OSError:
            return False
        short_read = _widen_pipe(process.stdout.fileno()) // 8
        _widen_output(self.printer.out)
        prefix = inert_bytes(shown.encode("utf-8", "surrogateescape")) + b":"
        plain = not self.printer.colored  # no colours to put around each part
        printed = False
        with process:
            for block in _line_blocks(process.stdout, short_read):
                printed = True
                self._print(block, prefix, shown, session, plain)
        if process.returncode not in (0, 1):
            if not printed:
                # ripgrep refused the pattern or failed: the usual search, from the start of
                # the file, which ripgrep may have read on (the offset is shared).
                os.lseek(fd, 0, os.SEEK_SET)
                return False
            message = process.error.decode("utf-8", "replace").strip().splitlines()
            raise CliError(f"{shown}: ripgrep failed: {message[-1] if message else ''}")
        return True

    def _print(
        self, block: bytes, prefix: bytes, shown: str, session: str | None, plain: bool
    ) -> None:
        """Print a block of ripgrep's `NUMBER:TEXT` lines: at once when no colour goes in,
        but for the lines longer than --max-columns, which go through the printer as each
        line does when colours are on."""
        # A block of printable ASCII (most logs' lines) holds no "\r" and nothing to make
        # inert: it is printed as it is, with the path before each line.
        printable = plain and self._is_printable(block)
        # Looking for "\r" first: one byte is found at memchr's speed, where a search for
        # the two took ten times longer (0.4 s of a 110 MB output without any).
        if not printable and block.find(b"\r") >= 0 and b"\r\n" in block:
            block = self._as_read(block)
        if not plain:
            for line in block.split(b"\n")[:-1]:
                self._emit(line, shown, session)
            return
        start = 0
        for line_start, line_end in _long_lines(block, self.printer.max_columns):
            self._print_plain(block[start:line_start], prefix, printable)
            self._emit(block[line_start:line_end], shown, session)
            start = line_end + 1
        self._print_plain(block[start:] if start else block, prefix, printable)

    def _is_printable(self, block: bytes) -> bool:
        """`printable_ascii(block)`, by `printable_ascii_by_libc` once ripgrep has printed
        enough for it to pay (`_BY_LIBC_AFTER`)."""
        self._looked_at += len(block)
        if self._looked_at > _BY_LIBC_AFTER and self._printable is printable_ascii:
            self._printable = printable_ascii_by_libc()
        return self._printable(block)

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

    def _emit(self, line: bytes, shown: str, session: str | None) -> None:
        number, _, text = line.partition(b":")
        self.printer.emit(Hit(shown, int(number), text, True, session))

    def _print_plain(self, lines: bytes, prefix: bytes, printable: bool) -> None:
        """Print whole `NUMBER:TEXT` lines made inert (`printable`: known to need nothing
        made inert), each after `prefix` (the file's path)."""
        if not lines:
            return
        text = lines if printable else inert_bytes(lines)
        # One pass puts the path after every newline (after the last one it is not
        # printed); how much longer the text grew says how many lines there were, without
        # a second pass to count them.
        with_paths = text.replace(b"\n", b"\n" + prefix)
        self.printer.matches += (len(with_paths) - len(text)) // len(prefix)
        out = self.printer.out
        out.write(prefix)
        with memoryview(with_paths) as view:
            out.write(view[: len(view) - len(prefix)])


def _may_match_replacement(pattern: str, *, fixed: bool) -> bool:
    """Whether a pattern `ripgrep_can` passes may match a U+FFFD, so that a line that is not
    UTF-8 may match as shown (each such byte U+FFFD) and not as stored: a `.`, a negated
    class, a class holding a character that is not ASCII, or a U+FFFD. Any other such pattern
    matches only characters it spells (a class of ASCII characters spells each; ignoring case
    folds an ASCII letter to no U+FFFD either), which a line holds as shown exactly where it
    holds them as stored (the decoding that shows a byte as U+FFFD keeps every UTF-8
    character as it is), so ripgrep may search a file that is not UTF-8 for it, unchecked:
    `rows=3[0-9]{2}` costs no read of the file first."""
    if fixed:
        return "\ufffd" in pattern
    return any(
        part == "." or "\ufffd" in part or (is_class and (part[1:2] == "^" or not part.isascii()))
        for part, is_class in _pattern_parts(pattern)
    )


def _may_match_cr(pattern: str, *, fixed: bool) -> bool:
    """Whether something in a pattern `ripgrep_can` passes may match a "\\r": a `.`, a
    negated class, a `\\r` or a carriage return, or an escaped digit (an octal or a
    backreference), to be safe."""
    if fixed:
        return "\r" in pattern
    if any(part in pattern for part in (".", "[^", "\\r", "\r")):
        return True
    return any(pattern[i + 1 : i + 2].isdigit() for i, c in enumerate(pattern) if c == "\\")


class _Process:
    """ripgrep running: its output read from a pipe, its errors kept, its exit status.

    Started by `os.posix_spawn`, not `subprocess`: importing subprocess (threading,
    selectors, signal's machinery) would cost a search of a few matches a tenth of GNU grep's
    time, and this needs none of it. Used as a context manager: leaving it (at the end of
    the output, or on an error such as a closed stdout) closes the pipes, so a ripgrep still
    writing stops, and waits for it, so none is left behind.
    """

    def __init__(self, pid: int, stdout: FileIO, stderr: int) -> None:
        self.pid = pid
        self.stdout = stdout
        self._stderr = stderr
        self.error = b""
        self.returncode: int | None = None

    @classmethod
    def start(cls, command: list[str], stdin: int) -> _Process:
        """Start `command` reading `stdin` (a descriptor), its output and errors to pipes.

        Raises:
            OSError: it could not be started (a missing binary, no descriptors left).
        """
        import fcntl

        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        # Each descriptor is first copied above 2, so that putting one at 0, 1 or 2 never
        # overwrites another still to be put (this process's own 0-2 may be closed, and a
        # pipe then sits there); the copies close on exec, the three placed do not.
        high: list[int] = []
        try:
            for fd in (stdin, out_write, err_write):
                high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3))
            pid = os.posix_spawn(
                command[0],
                command,
                os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(high)],
                # As subprocess does: Python ignores SIGPIPE, and a child inherits that.
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except BaseException:
            os.close(out_read)
            os.close(err_read)
            raise
        finally:
            for fd in (*high, out_write, err_write):
                os.close(fd)
        return cls(pid, open(out_read, "rb", buffering=0), err_read)

    def __enter__(self) -> _Process:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stdout.close()
            if exc[0] is None:
                self.error = _read_all(self._stderr)
        finally:
            os.close(self._stderr)
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)


def _read_all(fd: int) -> bytes:
    """What is left to read from `fd`, to its end (ripgrep's errors: a few lines)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _widen_pipe(fd: int) -> int:
    """Let a pipe hold `RG_READ` bytes, where it holds fewer and the system lets it be
    widened (Linux); any other file, or a pipe this user may not widen (past
    /proc/sys/fs/pipe-max-size or the user's quota), is left as it is. Returns the pipe's
    size after, 0 where it cannot be known (not a pipe, not Linux).

    Both pipes of a search with many matching lines are widened. In Linux's default 64 KB
    pipe from ripgrep, ripgrep stops each time the pipe is full, so it mostly waits while a
    block is printed and the two run one after the other (the 1.2 M lines of
    bench/bench_cli_grep.py took about 0.55 s instead of 0.3 s); with room for a whole block
    it searches on while the last one is printed. Into a 64 KB pipe on stdout, each
    block printed is handed to the reader 64 KB at a time, a switch to the reader and back
    each time (the same 1.2 M lines into `| cat`: 0.39-0.61 s, and 0.22-0.26 s with the
    pipe widened, GNU `grep -Hn` 0.24-0.26 s).
    """
    import fcntl

    get_size = getattr(fcntl, "F_GETPIPE_SZ", None)
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if get_size is None or set_size is None:
        return 0
    try:
        # (F_GETPIPE_SZ fails on a file that is not a pipe; a wider pipe is never narrowed.)
        size = int(fcntl.fcntl(fd, get_size))
    except OSError:
        return 0
    if size < RG_READ:
        with contextlib.suppress(OSError):
            size = int(fcntl.fcntl(fd, set_size, RG_READ))
    return size


def _widen_output(out: BinaryIO) -> None:
    """`_widen_pipe` for the stream the lines are printed to, when it is a pipe."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):  # (io.UnsupportedOperation is both)
        return
    _widen_pipe(fd)


def _line_blocks(stream: FileIO, short_read: int = 0) -> Iterator[bytes]:
    """The whole lines read from `stream`, about `RG_READ` bytes at a time.

    One buffer is reused for every block and each block is copied out of it once: a fresh
    buffer for each read costs more in faulting in its pages than the read itself. A line
    longer than the buffer grows it. A last line without a newline (ripgrep ends every
    line) is dropped.

    A read of fewer than `short_read` bytes (an eighth of the pipe: 0 when its size is not
    known) is followed by a pause of `_PAUSE` seconds before the next: ripgrep writes 8 KB
    at a time, and a reader that waits on the pipe is woken at each write, where many lines
    match, 7,700 times in a search of 1.2 M lines (and 700 with the pause), which cost this
    process about 40 ms of CPU and ripgrep 20. A pause lets the pipe fill meanwhile (at most
    0.4 MB in 0.5 ms, from a ripgrep that prints 1.2 M lines in 0.3 s), and delays the
    search's end by 0.5 ms at most.
    """
    buffer = bytearray(RG_READ)
    filled = 0
    while True:
        with memoryview(buffer) as free:
            read = stream.readinto(free[filled:]) or 0
        filled += read
        if read and filled < len(buffer):
            if read < short_read:
                time.sleep(_PAUSE)
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

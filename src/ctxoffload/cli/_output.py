"""What every `ctxoffload` command prints through: the inert writer, paths as people see them,
JSON, tables, colours, sizes, times, and a progress line.

Terminal safety has one home here: `inert` shows every character that could act on a terminal
(C0 controls but newline and tab, DEL, C1 controls, ESC sequences, a bare CR, bidirectional
overrides and isolates) as a visible escape, and `main` puts an `InertStream` in place of
stdout and stderr while a command runs, so every `print` of every command goes through it and
none can forget it. What writes its own colours or progress line (`paint` through
`print_styled`, `print_table` with rich, `Progress`, grep's coloured lines) writes to the
stream beneath (`raw_stream`) and makes its content inert itself.

Kept light on purpose: rich is imported only to draw a table on a terminal.
"""

from __future__ import annotations

import os
import sys
import time
from contextvars import ContextVar

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    # (as `collections.abc` costs 2-4 ms, more than a tenth of `--help` over `import argparse`)
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TextIO

__all__ = [
    "PATHS_SHOWN_AS",
    "Column",
    "InertStream",
    "Progress",
    "fitted",
    "human_bytes",
    "inert",
    "inert_bytes",
    "iso_time",
    "json_text",
    "paint",
    "print_json",
    "print_styled",
    "print_table",
    "printable_ascii",
    "printable_ascii_by_libc",
    "raw_stream",
    "shown",
    "table_width",
]

# -- terminal safety: one rule, one writer ------------------------------------------------------

# Bidirectional controls: embeddings and overrides (U+202A-202E), isolates (U+2066-2069), the
# marks (U+200E/200F, U+061C). They reorder what a terminal shows (a name that reads `txt.exe`).
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Everything that may act on a terminal: C0 controls but \t and \n, DEL, C1 controls (0x9b is a
# CSI on its own), bidi controls, the line and paragraph separators, and lone surrogates (which
# no terminal can be sent; U+DC80-DC9F is a byte 0x80-0x9f that was not UTF-8, read with
# surrogateescape, and is shown as that byte).
_ACTIVE = f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff]"
# The same for bytes meant to be UTF-8 (grep's lines): a byte 0xa0-0xff that is not UTF-8 is
# written as it is, as GNU grep writes it (no terminal takes it for a control).
_ACTIVE_IN_BYTES = f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udc9f\udd00-\udfff]"
_patterns: dict[str, Any] = {}  # compiled on first use (`re` is not loaded at start-up)
_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\x00": "\\x00"}


def _escape(found: Any) -> str:
    char: str = found.group(0)
    code = ord(char)
    if code < 0x20:
        return _NAMED.get(char) or f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    # DEL, C1 and the rest as \uXXXX: a JSON string reads that escape back as the same
    # character, so JSON written through the stream stays exact.
    return f"\\u{code:04x}"


def inert(text: str) -> str:
    """`text` with every character that could act on a terminal shown as a visible escape.

    ESC becomes `\\x1b` (so `\\x1b[2J` no longer clears the screen, and an OSC 52 clipboard
    write or an OSC 8 link is shown, not obeyed), a bare CR `\\r`, other C0 controls
    `\\xNN`, DEL, C1 and bidirectional controls `\\uXXXX` (`\\u202e`), and a byte that was
    not UTF-8 (a lone surrogate from `surrogateescape`) `\\xNN`. Newlines and tabs stay: they
    lay out the text. The rule of `git` and `less`: nothing the workspace holds reaches the
    terminal as a command.
    """
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to look at
    return _substitute(_ACTIVE, text)


def _substitute(pattern: str, text: str) -> str:
    return str(_compiled(pattern).sub(_escape, text))


def _compiled(pattern: str) -> Any:
    compiled = _patterns.get(pattern)
    if compiled is None:
        import re

        compiled = _patterns[pattern] = re.compile(pattern)
    return compiled


def inert_bytes(data: bytes) -> bytes:
    """`inert` for bytes that are meant to be UTF-8 (what grep prints): a byte 0x80-0x9f that
    is not UTF-8 is shown as `\\xNN`; one 0xa0-0xff is written as it is, as GNU grep does."""
    if printable_ascii(data):
        return data
    text = data.decode("utf-8", "surrogateescape")
    if _compiled(_ACTIVE_IN_BYTES).search(text) is None:
        # surrogateescape encodes back to the very bytes: no substitution and no encoding
        # (a MB of text that is not ASCII and holds nothing active: 5.4 ms -> 4.4 ms).
        return data
    return _substitute(_ACTIVE_IN_BYTES, text).encode("utf-8", "surrogateescape")


def printable_ascii(data: bytes) -> bool:
    """Whether `data` holds only printable ASCII, tabs and newlines: what `inert_bytes`
    returns as it is at first sight (no control byte, no "\\r", no byte that is not ASCII).
    """
    # Every byte that is not printable ASCII, a tab or a newline is mapped to DEL (itself
    # one): a DEL left says one was there. (A table, not bytes to delete, which `translate`
    # turns into a table of 256 entries at each call; `in` with an int is one memchr, where
    # `find` parses its arguments: half the instructions of a short line's check.)
    return 0x7F not in data.translate(_ACTIVE_AS_DEL)


def printable_ascii_by_libc() -> Callable[[bytes], bool]:
    """`printable_ascii` done by the C library's `strspn` (through ctypes), or
    `printable_ascii` itself where that cannot be called (no C library to load).

    `strspn` measures the run of bytes from a set at the start of a string, and stops at a
    NUL (which is not in the set), so a run as long as the bytes says they are all
    printable: 47 ms per 113 MB of grep's output, where `isascii` and `translate` take 126
    (CPython ends every bytes object with a NUL, so `strspn` never reads past one). Loading
    ctypes costs about 4 ms: worth it for a few MB and more, not for every check.
    """
    try:
        import ctypes

        strspn = ctypes.CDLL(None).strspn
    except (OSError, TypeError, AttributeError):  # (Windows loads no C library by None)
        return printable_ascii
    strspn.restype = ctypes.c_size_t
    strspn.argtypes = [ctypes.c_char_p, ctypes.c_char_p]

    def printable(data: bytes) -> bool:
        return bool(strspn(data, _PRINTABLE_ASCII) == len(data))

    return printable


# (No NUL in it: `strspn` reads the set up to its first NUL.)
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n"
_ACTIVE_AS_DEL = bytes(b if b in _PRINTABLE_ASCII else 0x7F for b in range(256))


class _InertBytes:
    """The binary side of an `InertStream`: bytes written are made inert as UTF-8 text."""

    def __init__(self, stream: Any) -> None:
        self.raw_stream = stream

    def write(self, data: bytes) -> int:
        self.raw_stream.write(inert_bytes(bytes(data)))
        return len(data)

    def flush(self) -> None:
        self.raw_stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw_stream, name)


class InertStream:
    """A text stream that writes everything through `inert` to the stream beneath.

    `main` puts one in place of `sys.stdout` and one of `sys.stderr` while a command runs.
    Its `buffer` makes bytes inert the same way. `raw_stream` is the stream beneath, for
    what writes its own control sequences (colours, a progress line) around content it has
    made inert itself.
    """

    def __init__(self, stream: TextIO) -> None:
        self.raw_stream = stream
        buffer = getattr(stream, "buffer", None)
        self.buffer = _InertBytes(buffer) if buffer is not None else None

    def write(self, text: str) -> int:
        self.raw_stream.write(inert(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.raw_stream.flush()

    def isatty(self) -> bool:
        return self.raw_stream.isatty()

    def fileno(self) -> int:
        return self.raw_stream.fileno()

    def __getattr__(self, name: str) -> Any:  # encoding, errors, closed...
        return getattr(self.raw_stream, name)


def raw_stream(stream: Any) -> Any:
    """The stream beneath an `InertStream` (the stream itself when it is none): for writing
    control sequences of the command's own around content made inert with `inert`."""
    return getattr(stream, "raw_stream", stream)


PATHS_SHOWN_AS: ContextVar[Callable[[str], str] | None] = ContextVar("PATHS_SHOWN_AS", default=None)
"""How `shown` spells a path, for as long as one run of a command sets it: `main` sets its
bucket copies' `display`, so that a path into a copy is printed as the object's URI. A
context variable, not an argument: every message that names a file goes through `shown`, at
any depth; and not a global: each run (and each thread it hands its context) sees its own."""


def shown(path: str | os.PathLike[str]) -> str:
    """How a path is printed: the object's URI when it lies in a copy of a bucket."""
    display = PATHS_SHOWN_AS.get()
    text = os.fspath(path)
    return display(text) if display is not None else text


def json_text(value: Any, **options: Any) -> str:
    """`value` as JSON any parser takes (jq, a browser, `JSON.parse`): a NaN, Infinity or
    -Infinity (which Python's json writes for a float that is not finite, and reads back from
    a record) is written as the string "NaN", "Infinity" or "-Infinity". The one rule for
    every JSON a command prints or the viewer sends; `options` go to `json.dumps`."""
    import json

    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:  # a number JSON cannot spell: spelled as a string
        return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    """`value` with every float that is not finite as its name. Recursion is bounded: what is
    read from a workspace nests at most `READ_DEPTH` levels."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def print_json(value: Any, out: TextIO | None = None) -> None:
    """Print one JSON document (`json_text`)."""
    stream = out or sys.stdout
    stream.write(json_text(value, indent=2, ensure_ascii=False, default=str) + "\n")


_COLOURS = {"red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}


def paint(text: str, colour: str, stream: TextIO | None = None) -> str:
    """`text` (made inert) in an ANSI colour when `stream` (stdout) is a terminal and
    NO_COLOR is unset; print it with `print_styled`."""
    target = stream or sys.stdout
    text = inert(text)
    if os.environ.get("NO_COLOR") or not target.isatty():
        return text
    return f"\x1b[{_COLOURS[colour]}m{text}\x1b[0m"


def print_styled(line: str, out: TextIO | None = None) -> None:
    """Print a line whose every part is already inert (`inert`, `paint`): its colours reach
    the terminal, and nothing else that could act on it."""
    stream = raw_stream(out or sys.stdout)
    stream.write(line + "\n")


def _use_rich(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


class Column:
    """A column of `print_table`, and how it gives way when the table is too wide.

    Args:
        header: its title.
        short: the title abbreviated, used when the table does not fit with the titles whole.
        right: right-aligned (numbers).
        fold: its cells may wrap at their spaces (a time, a list); other cells are never
            cut or wrapped.
        keep: its priority: when columns must be left out, the lowest goes first (ties: the
            rightmost first). The first column is never left out.
        shorten: its cells are ids (the first column of `ls` and `stats`): one too wide for
            its room is shortened in its middle, `HEAD…TAIL`, which a command's SESSION
            takes (`expanded_session`), rather than folded into pieces no one can copy
            (when the shortened ids would not all differ, they fold).
    """

    def __init__(
        self,
        header: str,
        short: str | None = None,
        *,
        right: bool = False,
        fold: bool = False,
        keep: int = 0,
        shorten: bool = False,
    ) -> None:
        self.header, self.short, self.right, self.fold, self.keep = header, short, right, fold, keep
        self.shorten = shorten


def table_width(stream: TextIO) -> int | None:
    """The columns a table may take on `stream`: $COLUMNS when set, else the terminal's
    width; None (any) for a pipe without $COLUMNS."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not stream.isatty():
        return None
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


_WHOLE_WORD = 16


def _taken(text: str) -> int:
    """The columns `text` takes on a terminal: a wide or fullwidth (CJK) character two, a
    combining mark none, any other one (what rich measures too)."""
    if text.isascii():
        return len(text)
    import unicodedata

    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _longest_word(text: str) -> int:
    return max((_taken(word) for word in text.split()), default=0)


def _fit_columns(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int | None, chrome: Any
) -> tuple[list[int], list[str], list[int]]:
    """Which columns to show in `width`, with which titles and widths: the titles whole,
    then abbreviated, then folded at their spaces; then the cells of the columns that fold,
    the lowest priority first; then columns left out by priority, each step tried again.

    Args:
        columns: the table's columns.
        cells: its rows, as text.
        width: the room; None: any.
        chrome: `chrome(n)`, the characters a table of n columns adds to its cells.

    Returns:
        The indexes of the columns shown, their titles and their widths.
    """

    def natural(i: int, title: str) -> int:
        return max([_taken(title), *(_taken(row[i]) for row in cells if i < len(row))])

    shown = list(range(len(columns)))
    leave = sorted(shown[1:], key=lambda i: (columns[i].keep, -i))  # first to go first
    while True:
        titles = [columns[i].header for i in shown]
        widths = [natural(i, t) for i, t in zip(shown, titles, strict=True)]
        if width is None or sum(widths) + chrome(len(shown)) <= width:
            return shown, titles, widths
        titles = [columns[i].short or columns[i].header for i in shown]
        widths = [natural(i, t) for i, t in zip(shown, titles, strict=True)]
        folded = [
            max([_longest_word(t), *(_taken(row[i]) for row in cells if i < len(row))])
            for i, t in zip(shown, titles, strict=True)
        ]
        for step in (widths, folded):
            if sum(step) + chrome(len(shown)) <= width:
                return shown, titles, step
        widths = folded
        # The columns that fold, the lowest priority first; last the first column, when it
        # takes more than a third of the room (a long id folds rather than every other
        # column being left out; a shorter one is never folded).
        folding = [i for i in sorted(shown, key=lambda i: (columns[i].keep, -i)) if columns[i].fold]
        for i in [*(i for i in folding if i != 0), 0]:
            at = shown.index(i)
            column = [titles[at], *(row[i] for row in cells if i < len(row))]
            if i == 0 and not columns[0].fold:
                least = max(_longest_word(titles[0]), _WHOLE_WORD + 4, width // 3)
            else:
                # A word is kept whole up to _WHOLE_WORD characters (a date, a source); a
                # longer one (a path, a planted name) folds anywhere rather than leave the
                # column out.
                least = max(
                    [
                        _longest_word(titles[at]),
                        *(min(_WHOLE_WORD, _longest_word(t)) for t in column),
                    ]
                )
            over = sum(widths) + chrome(len(shown)) - width
            room = max(least, widths[at] - over)
            if room >= widths[at]:
                continue
            # As wide as its longest folded line: no room is kept that no line uses.
            widths[at] = max(_taken(line) for text in column for line in _folded(text, room))
            if sum(widths) + chrome(len(shown)) <= width:
                # The room left unfolds the titles, the highest priority first.
                for at in sorted(range(len(shown)), key=lambda a: -columns[shown[a]].keep):
                    spare = width - sum(widths) - chrome(len(shown))
                    widths[at] += max(0, min(spare, _taken(titles[at]) - widths[at]))
                return shown, titles, widths
        if not leave:
            # The first column alone is wider than the room: it folds (never cut with "…").
            return shown, titles, [max(1, width - chrome(1))]
        shown.remove(leave.pop(0))


def _rich_chrome(n: int) -> int:
    return 3 * n + 1  # "│ " before each cell, " " after it, and the closing "│"


def _plain_chrome(n: int) -> int:
    return 2 * (n - 1)  # two spaces between cells


def _folded(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns, broken at spaces (inside a word only where
    one is longer than the width)."""
    if _taken(text) <= width:
        return [text]
    if text.isascii():
        import textwrap

        return textwrap.wrap(text, width, break_on_hyphens=False) or [""]
    # textwrap counts characters; a wide one takes two columns.
    lines: list[str] = []
    line = ""
    for word in text.split():
        while _taken(word) > width:  # longer than the width: broken anywhere
            if line:
                lines.append(line)
                line = ""
            cut = 1
            while cut < len(word) and _taken(word[: cut + 1]) <= width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        if not line:
            line = word
        elif _taken(line) + 1 + _taken(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines or [""]


def print_table(
    headers: Sequence[str | Column],
    rows: Iterable[Sequence[Any]],
    *,
    right: Sequence[int] = (),
    title: str | None = None,
    out: TextIO | None = None,
) -> None:
    """A table: rich on a terminal when rich is installed, aligned plain text otherwise.

    It fits the terminal ($COLUMNS, else the terminal's width; a pipe without $COLUMNS
    takes any width): see `_fit_columns`. The columns left out are named on a line below.

    Args:
        headers: column titles, or `Column`s that say how each gives way.
        rows: cells; numbers are printed with thousands separators.
        right: indexes of right-aligned columns (besides `Column.right`).
        title: a line printed above the table.
    """
    stream = out or sys.stdout
    columns = [
        h if isinstance(h, Column) else Column(h, right=i in right, fold=i > 0 and i not in right)
        for i, h in enumerate(headers)
    ]
    cells = [[inert(_cell(v)) for v in row] for row in rows]
    rich = _use_rich(stream)
    width = table_width(stream)
    shown, titles, widths = _fit_columns(
        columns, cells, width, _rich_chrome if rich else _plain_chrome
    )
    if rich and width is not None and sum(widths) + _rich_chrome(len(shown)) > width:
        # No room for rich's borders around one character (COLUMNS=3): rich would squeeze
        # the cells to nothing. Plain text folds them, and shows every character.
        rich = False
        shown, titles, widths = _fit_columns(columns, cells, width, _plain_chrome)
    cells = [[row[i] if i < len(row) else "" for i in shown] for row in cells]
    if columns[0].shorten and width is not None:
        _shorten_ids(cells, widths[0])
    aligned = [columns[i].right or i in right for i in shown]
    left_out = [columns[i].header for i in range(len(columns)) if i not in shown]
    note = f"({', '.join(left_out)}: left out to fit {width} columns)" if left_out else None
    if rich:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left")
        for header, w, is_right in zip(titles, widths, aligned, strict=True):
            table.add_column(
                header,
                justify="right" if is_right else "left",
                width=w,
                overflow="fold",  # what must give way wraps; nothing is cut with "…"
            )
        for row in cells:
            table.add_row(*(Text(cell) for cell in row))  # Text: `[red]` in a name is no markup
        # The stream beneath: rich writes its own colours; the cells are inert already.
        Console(file=raw_stream(stream), width=width).print(table)
        if note:
            stream.write(note + "\n")
        return
    if title:
        stream.write(title + "\n")

    def lines(values: Sequence[str]) -> list[str]:
        parts = [_folded(v, w) for v, w in zip(values, widths, strict=True)]
        out = []
        for n in range(max(len(p) for p in parts)):
            line = [
                _padded(p[n] if n < len(p) else "", w, right=r)
                for p, w, r in zip(parts, widths, aligned, strict=True)
            ]
            out.append("  ".join(line).rstrip())
        return out

    for line in lines(titles):
        stream.write(line + "\n")
    for row in cells:
        for line in lines(row):
            stream.write(line + "\n")
    if note:
        stream.write(note + "\n")


def fitted(lines: Iterable[str], width: int) -> list[str]:
    """`lines` with each one wider than `width` folded at its spaces, what continues it
    indented two columns past the text after its time (`HH:MM:SS   `); a word is never
    broken (an id, a path: one wider than the room stands on a line of its own)."""
    import textwrap

    out: list[str] = []
    for line in lines:
        if _taken(line) <= width:
            out.append(line)
            continue
        timed = line[:8].replace(":", "").isdigit() and line[2:3] == line[5:6] == ":"
        start = 8 if timed else 0
        lead = start + len(line[start:]) - len(line[start:].lstrip(" "))
        indent = " " * min(lead + 2, width // 2)
        out += textwrap.wrap(
            line,
            width,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
    return out


def _shorten_ids(cells: list[list[str]], room: int) -> None:
    """The first cell of each row, an id (after the indent of a sub-agent's `└ `) wider
    than `room`, shortened in its middle to `HEAD…TAIL`; left as it is (to fold) when two
    would read the same."""
    shortened: list[str] = []
    for row in cells:
        text = row[0] if row else ""
        name = text.lstrip(" └")
        lead = text[: len(text) - len(name)]
        keep = room - _taken(lead) - 1
        if _taken(text) <= room or keep < 8 or not name.isascii():
            shortened.append(text)
            continue
        tail = keep // 2
        shortened.append(f"{lead}{name[: keep - tail]}…{name[len(name) - tail :]}")
    if len(set(shortened)) == len(shortened):
        for row, text in zip(cells, shortened, strict=True):
            if row:
                row[0] = text


def _padded(text: str, width: int, *, right: bool) -> str:
    """`text` padded with spaces to take `width` columns on a terminal."""
    pad = " " * max(0, width - _taken(text))
    return pad + text if right else text + pad


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def human_bytes(n: int) -> str:
    """`1536` -> `'1.5 KB'`."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{n:,} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def iso_time(epoch: float) -> str:
    """A POSIX time as `2026-11-22 10:53:18` UTC."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class Progress:
    """A one-line counter on stderr while long work runs; silent when stderr is not a terminal.

    Args:
        label: what is being done ("verifying").
        total: how many units there are, when known.
        stream: where to draw (stderr by default).
    """

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None):
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.done = 0
        self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self._last:
            raw_stream(self.stream).write("\r\x1b[K")
            self.stream.flush()

    def advance(self, n: int = 1, note: str = "") -> None:
        """Count `n` more units done and redraw, at most ten times a second."""
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if self._last and now - self._last < 0.1 and (self.total is None or self.done < self.total):
            return
        self._last = now
        of = bar = ""
        if self.total:
            filled = min(10, 10 * self.done // self.total)
            of, bar = f"/{self.total:,}", f"[{'#' * filled}{'.' * (10 - filled)}] "
        # Within the terminal's width: a line that wraps is not redrawn in place.
        line = inert(f"{self.label} {bar}{self.done:,}{of} {note}"[: self._width() - 1])
        raw_stream(self.stream).write(f"\r\x1b[K{line}")
        self.stream.flush()

    def _width(self) -> int:
        try:
            return os.get_terminal_size(raw_stream(self.stream).fileno()).columns or 80
        except (AttributeError, OSError, ValueError):  # no descriptor, or none of a terminal
            return 80

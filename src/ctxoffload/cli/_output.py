"""What every `ctxoffload` command prints through: paths as people see them, JSON, tables,
colours, sizes, times, and a progress line.

Kept light on purpose: rich is imported only to draw a table on a terminal.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any, TextIO

__all__ = [
    "Progress",
    "human_bytes",
    "iso_time",
    "paint",
    "print_json",
    "print_table",
    "shown",
]


def shown(path: str | os.PathLike[str]) -> str:
    """How a path is printed: the object's URI when it lies in a copy of a bucket."""
    bucket = sys.modules.get("ctxoffload.cli._bucket")  # imported only for a bucket
    text = os.fspath(path)
    return str(bucket.display(text)) if bucket is not None else text


def print_json(value: Any, out: TextIO | None = None) -> None:
    """Print one JSON document."""
    import json

    stream = out or sys.stdout
    stream.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


_COLOURS = {"red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}


def paint(text: str, colour: str, stream: TextIO | None = None) -> str:
    """`text` in an ANSI colour when `stream` (stdout) is a terminal and NO_COLOR is unset."""
    target = stream or sys.stdout
    if os.environ.get("NO_COLOR") or not target.isatty():
        return text
    return f"\x1b[{_COLOURS[colour]}m{text}\x1b[0m"


def _use_rich(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def print_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    right: Sequence[int] = (),
    title: str | None = None,
    out: TextIO | None = None,
) -> None:
    """A table: rich on a terminal when rich is installed, aligned plain text otherwise.

    Args:
        headers: column titles.
        rows: cells; numbers are printed with thousands separators.
        right: indexes of right-aligned columns.
        title: a line printed above the table.
    """
    stream = out or sys.stdout
    cells = [[_cell(v) for v in row] for row in rows]
    if _use_rich(stream):
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for i, header in enumerate(headers):
            # The first column (ids, names) and the numbers are never cut or wrapped, on a
            # narrow terminal too: the other columns wrap instead.
            whole = i == 0 or i in right
            width = max((len(row[i]) for row in cells if i < len(row)), default=0)
            table.add_column(
                header,
                justify="right" if i in right else "left",
                no_wrap=whole,
                min_width=width if whole else None,
                overflow="fold",  # what must give way wraps; nothing is cut with "…"
            )
        for row in cells:
            table.add_row(*row)
        Console(file=stream).print(table)
        return
    if title:
        stream.write(title + "\n")
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=False))
        ]
        return "  ".join(parts).rstrip()

    stream.write(line(headers) + "\n")
    for row in cells:
        stream.write(line(row) + "\n")


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
            self.stream.write("\r\x1b[K")
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
        of = f"/{self.total:,}" if self.total is not None else ""
        self.stream.write(f"\r\x1b[K{self.label} {self.done:,}{of} {note}"[:200])
        self.stream.flush()

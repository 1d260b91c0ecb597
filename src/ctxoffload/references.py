"""References returned by offloaders: strings that may carry where in the file content went."""

from __future__ import annotations

__all__ = ["ContextRef"]


class ContextRef(str):
    """The reference (path) of a context log, plus the lines one append wrote there.

    It *is* a `str` (the path), so code that only wants the path uses it as one; code that
    wants the span reads `first_line` / `last_line` (1-based, inclusive, physical lines of
    the file, so `sed -n 'FIRST,LASTp' PATH` or `Read(path, offset=FIRST)` shows them).
    """

    first_line: int
    last_line: int
    spans: tuple[tuple[int, int], ...]
    """The lines the messages of the append are on, as runs `(first, last)` of consecutive
    lines: `((first_line, last_line),)` unless some were in the log already (a batch repeated
    after a crash, with another split) at lines apart from the rest; empty when nothing was
    written."""

    def __new__(
        cls,
        path: str,
        first_line: int,
        last_line: int,
        spans: tuple[tuple[int, int], ...] | None = None,
    ) -> ContextRef:
        ref = super().__new__(cls, path)
        ref.first_line = first_line
        ref.last_line = last_line
        if spans is None:
            spans = ((first_line, last_line),) if last_line >= first_line else ()
        ref.spans = tuple(spans)
        return ref

    @property
    def line_span(self) -> str:
        """The span as text, `"12-40"`, or a single number when one line was written."""
        if self.first_line == self.last_line:
            return str(self.first_line)
        return f"{self.first_line}-{self.last_line}"

    def __reduce__(
        self,
    ) -> tuple[type[ContextRef], tuple[str, int, int, tuple[tuple[int, int], ...]]]:
        return (ContextRef, (str(self), self.first_line, self.last_line, self.spans))

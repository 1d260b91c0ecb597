"""References returned by offloaders: strings that may carry where in the file content went."""

from __future__ import annotations

from ._disk.wording import spans_text

__all__ = ["ContextRef"]


class ContextRef(str):
    """The reference (path) of a context log, plus the lines the messages of one append are on.

    It *is* a `str` (the path), so code that only wants the path uses it as one; code that
    wants the lines reads `spans` (or `line_span`, the same as text): 1-based, inclusive,
    physical lines of the file, so `sed -n 'FIRST,LASTp' PATH` or `Read(path, offset=FIRST)`
    shows each run. `first_line` and `last_line` bound them: they are the lines of the
    messages exactly when `spans` is one run, which it is unless some messages were in the
    log already (an append repeated after a crash, with another split) at lines apart from
    the rest.
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
        """The lines of the append's messages as text, such as `"12-40"`, a single number
        for one line, or `"1-12, 14-17"` when they are on lines apart (never the span from
        the first to the last over lines that hold other messages); `""` when nothing was
        written."""
        return spans_text(self.spans)

    def __reduce__(
        self,
    ) -> tuple[type[ContextRef], tuple[str, int, int, tuple[tuple[int, int], ...]]]:
        return (ContextRef, (str(self), self.first_line, self.last_line, self.spans))

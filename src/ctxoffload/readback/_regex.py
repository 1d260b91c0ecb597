"""Linear-time regular expressions for patterns a model writes (RE2, via google-re2).

Python's `re` backtracks: `(a+)+$` on forty `a` and a `b`, or the glob `*?*?…#`, runs for
minutes inside one C call that holds the GIL, freezing the event loop. RE2 matches in time
linear in the input and releases the GIL while it matches, so a search over a big file is
bounded and other tasks keep running. The price is RE2's syntax: no backreferences
(`\\1`) and no lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`). `google-re2` is imported on first
use, so `import ctxoffload` stays light.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._search.regex import load_re2, re2_options, reads_whole_text, refuse_empty
from ..exceptions import InvalidContent
from ._arguments import quote

__all__ = [
    "PATTERN_SYNTAX",
    "Pattern",
    "compile_pattern",
    "escape",
    "line_finder",
    "reads_whole_text",
]

PATTERN_SYNTAX = (
    "RE2 syntax (like Python `re` without backreferences such as \\1 and without lookaround "
    "such as (?=...), (?!...), (?<=...), (?<!...))"
)


class Match(Protocol):
    """What the code here uses of a match."""

    def span(self) -> tuple[int, int]: ...
    def start(self) -> int: ...


class Pattern(Protocol):
    """What the code here uses of a compiled pattern."""

    pattern: str

    def search(self, text: str) -> Match | None: ...
    def fullmatch(self, text: str) -> Match | None: ...


def compile_pattern(pattern: str) -> Pattern:
    """Compile `pattern` with RE2.

    Args:
        pattern: a regular expression in RE2 syntax.

    Returns:
        The compiled pattern (`search`, `fullmatch`, `pattern`).

    Raises:
        InvalidContent: the pattern is not a string, or RE2 rejects it; the message says
            why and, for backreferences or lookaround, what to write instead.
    """
    if not isinstance(pattern, str):
        raise InvalidContent(f"pattern {pattern!r} is not a string: pass a regular expression")
    refuse_empty(pattern)
    re2 = load_re2()
    try:
        compiled: Any = re2.compile(pattern, re2_options())
    except (re2.error, TypeError, ValueError, OverflowError) as exc:
        raise _invalid_pattern(pattern, exc) from None
    return compiled  # type: ignore[no-any-return]


def _invalid_pattern(pattern: str, exc: Exception) -> InvalidContent:
    """The error for a pattern RE2 refused with `exc`: why, and what to write instead."""
    if isinstance(exc, UnicodeEncodeError):  # RE2 takes UTF-8: its own reason is "utf-8"
        return InvalidContent(
            f"invalid regular expression {quote(pattern)}: it holds a lone surrogate "
            f"({exc.object[exc.start]!r}), which no regular expression can search for: "
            "leave it out"
        )
    reason = exc.args[0] if exc.args else exc
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    hint = (
        f"patterns use {PATTERN_SYNTAX}; put a backslash before a literal "
        f"( ) [ ] . * + ? {{ }} | or \\"
    )
    if "perl operator" in str(reason) or "escape sequence: \\" in str(reason):
        hint = (
            "backreferences (\\1) and lookaround ((?=...), (?!...), (?<=...), (?<!...)) "
            "are not supported: search for a simpler pattern and read the lines around it"
        )
    return InvalidContent(f"invalid regular expression {quote(pattern)}: {reason}; {hint}")


def line_finder(regex: Pattern) -> Any | None:
    """`regex` compiled for bytes with `^` and `$` at every line end, to find in text of many
    lines, split at "\\n" and joined again, the lines that may match (each is then judged on
    its own by `regex`).

    Whatever `regex` finds in one of those lines, the finder finds in the joined text, at
    the same characters: a line's ends are line ends there, its neighbours are newlines
    (neither word characters nor part of the line), and more may match (a match that runs
    across lines), never less. So a stretch where the finder finds nothing holds no
    matching line. Lines whose trailing "\\r" is dropped (`split_lines`) must be joined
    without it.

    Returns:
        The finder; None for a pattern that `reads_whole_text`, which only a line-by-line
        search reads right.
    """
    source = regex.pattern
    if reads_whole_text(source):
        return None
    re2 = load_re2()
    try:
        return re2.compile(b"(?m)" + source.encode("utf-8", "surrogatepass"), re2_options())
    except (re2.error, TypeError, ValueError, OverflowError):
        return None


def escape(text: str) -> str:
    """`text` as a pattern that Grep and the retrieval tool match literally (RE2 syntax, which
    Python's `re` reads the same way)."""
    return "".join(char if char.isalnum() or char == "_" else _escape_char(char) for char in text)


def _escape_char(char: str) -> str:
    if char == "\n":
        return "\\n"
    if ord(char) < 128:
        return "\\" + char if not char.isspace() else f"\\x{ord(char):02x}"
    return char

"""Linear-time regular expressions for patterns a model writes (RE2, via google-re2).

Python's `re` backtracks: `(a+)+$` on forty `a` and a `b`, or the glob `*?*?…#`, runs for
minutes inside one C call that holds the GIL, freezing the event loop. RE2 matches in time
linear in the input and releases the GIL while it matches, so a search over a big file is
bounded and other tasks keep running. The price is RE2's syntax: no backreferences
(`\\1`) and no lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`). `google-re2` is imported on first
use, so `import ctxoffload` stays light.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

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
    re2 = _re2()
    try:
        compiled: Any = re2.compile(pattern, _options())
    except (re2.error, TypeError, ValueError, OverflowError) as exc:
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
        raise InvalidContent(
            f"invalid regular expression {quote(pattern)}: {reason}; {hint}"
        ) from None
    return compiled  # type: ignore[no-any-return]


# A flag group that turns multi-line mode off, `(?-m)`, `(?i-m:`...: its `^` and `$` would
# then hold only at the ends of a whole piece. Read loosely (an escaped parenthesis counts
# too): a wrong match only sends the search line by line.
_MULTILINE_OFF = re.compile(r"\(\?[A-Za-z]*-[A-Za-z]*m")


def reads_whole_text(pattern: str) -> bool:
    """Whether `pattern` may match differently in a line alone than in that line among others
    in one text, with `^` and `$` at every line end (`(?m)`): it reads the start or end of the
    whole text (`\\A`, `\\z`, Python's `\\Z`) or turns multi-line mode off (`(?-m)`). Such a
    pattern is searched line by line, by Grep and by `ctxoffload grep` alike; any other is
    searched over many lines at once (`line_finder`)."""
    return any(end in pattern for end in ("\\A", "\\z", "\\Z")) or bool(
        _MULTILINE_OFF.search(pattern)
    )


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
    re2 = _re2()
    try:
        return re2.compile(b"(?m)" + source.encode("utf-8", "surrogatepass"), _options())
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


def _options() -> Any:
    """RE2's options for a pattern a model wrote."""
    options = _re2().Options()
    options.log_errors = False  # RE2 would print each rejected pattern on stderr
    options.max_mem = 64 << 20  # a bound on the compiled program, for absurd repetitions
    # Every paren only groups: nothing here reads a group, and groups cost RE2 work of their
    # own on each match (8,000 nested groups took 35-72 s on 300 short lines; 1 ms without).
    options.never_capture = True
    return options


def _re2() -> Any:
    import re2  # type: ignore[import-untyped]  # google-re2; imported here so that `import ctxoffload` stays light

    return re2

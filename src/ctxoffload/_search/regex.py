"""RE2, as every search runs it: loaded on first use (so `import ctxoffload` stays light),
with the options for a pattern a model or a person wrote; what every door says of a pattern
it cannot search for (`refuse_empty`, `invalid_pattern`); the one rule for a pattern that must
be judged line by line (`reads_whole_text`); and a literal as a pattern (`escape`).

Why RE2: Python's `re` backtracks, so `(a+)+$` on forty `a` and a `b`, or the glob
`*?*?…#`, runs for minutes inside one C call that holds the GIL, freezing the event loop.
RE2 matches in time linear in the input and releases the GIL while it matches, so a search
over a big file is bounded and other tasks keep running. The price is RE2's syntax: no
backreferences (`\\1`) and no lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`).
"""

from __future__ import annotations

from ..exceptions import InvalidContent

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "PATTERN_SYNTAX",
    "escape",
    "invalid_pattern",
    "load_re2",
    "re2_options",
    "reads_whole_text",
    "refuse_empty",
]

PATTERN_SYNTAX = (
    "RE2 syntax (like Python `re` without backreferences such as \\1 and without lookaround "
    "such as (?=...), (?!...), (?<=...), (?<!...))"
)

# A flag group that turns multi-line mode off, `(?-m)`, `(?i-m:`...: its `^` and `$` would
# then hold only at the ends of a whole piece. Read loosely (an escaped parenthesis counts
# too): a wrong match only sends the search line by line. Looked for only in a pattern that
# holds "(?": `re` (with `enum`) costs ~6 ms of a `ctxoffload grep` that needs it nowhere else.
_MULTILINE_OFF = r"\(\?[A-Za-z]*-[A-Za-z]*m"


def refuse_empty(pattern: str) -> None:
    """Refuse an empty pattern, the one rule of every door (the agent's Grep, the retrieval
    tool, `ctxoffload grep`, the viewer): it would match every line, which is reading the
    file, and a model that sends one meant something else.

    Raises:
        InvalidContent: `pattern` is empty; the message says what to do instead.
    """
    if pattern == "":
        raise InvalidContent(
            "the pattern is empty, so it would match every line: give the text or regular "
            "expression to look for (to see a whole file, read it instead)"
        )


def invalid_pattern(
    pattern: str, reason: object, *, backtracking: bool, hint: str | None = None
) -> InvalidContent:
    """The one error for a pattern that cannot be searched for, from every door: the reason
    the regex engine gave, and what to write instead.

    Args:
        pattern: the pattern as given.
        reason: why the engine refused it.
        backtracking: the door runs in Python's `re` what RE2 refuses (`ctxoffload grep`),
            so RE2's syntax is no reason to give.
        hint: what to do instead, where the reason calls for it; by default, how to write
            a pattern.
    """
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    shown = repr(pattern)
    if len(shown) > 200:  # an absurd pattern cannot flood the answer
        shown = shown[:200] + "…"
    if hint is not None:
        return InvalidContent(f"invalid regular expression {shown}: {reason}: {hint}")
    hint = "put a backslash before a literal ( ) [ ] . * + ? { } | or \\"
    if not backtracking:
        hint = f"patterns use {PATTERN_SYNTAX}; {hint}"
        if "perl operator" in str(reason) or "escape sequence: \\" in str(reason):
            hint = (
                "backreferences (\\1) and lookaround ((?=...), (?!...), (?<=...), (?<!...)) "
                "are not supported: search for a simpler pattern and read the lines around it"
            )
    return InvalidContent(f"invalid regular expression {shown}: {reason}; {hint}")


def reads_whole_text(pattern: str) -> bool:
    """Whether `pattern` may match differently in a line alone than in that line among others
    in one text, with `^` and `$` at every line end (`(?m)`): it reads the start or end of the
    whole text (`\\A`, `\\z`, Python's `\\Z`) or turns multi-line mode off (`(?-m)`). Such a
    pattern is searched line by line, by Grep and by `ctxoffload grep` alike; any other is
    searched over many lines at once (`engine.search_lines`, `log.log_line_judge`)."""
    if any(end in pattern for end in ("\\A", "\\z", "\\Z")):
        return True
    if "(?" not in pattern:
        return False
    import re

    return re.search(_MULTILINE_OFF, pattern) is not None


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


def re2_options() -> Any:
    """RE2's options for a pattern a model wrote."""
    options = load_re2().Options()
    options.log_errors = False  # RE2 would print each rejected pattern on stderr
    options.max_mem = 64 << 20  # a bound on the compiled program, for absurd repetitions
    # Every paren only groups: nothing here reads a group, and groups cost RE2 work of their
    # own on each match (8,000 nested groups took 35-72 s on 300 short lines; 1 ms without).
    options.never_capture = True
    return options


def load_re2() -> Any:
    """The `re2` module (google-re2)."""
    import re2  # type: ignore[import-untyped]  # google-re2; imported here so that `import ctxoffload` stays light

    return re2

"""RE2, as every search runs it: loaded on first use (so `import ctxoffload` stays light),
with the options for a pattern a model or a person wrote, and the one rule for a pattern that
must be judged line by line (`reads_whole_text`)."""

from __future__ import annotations

import re
from typing import Any

from ..exceptions import InvalidContent

__all__ = ["load_re2", "re2_options", "reads_whole_text", "refuse_empty"]

# A flag group that turns multi-line mode off, `(?-m)`, `(?i-m:`...: its `^` and `$` would
# then hold only at the ends of a whole piece. Read loosely (an escaped parenthesis counts
# too): a wrong match only sends the search line by line.
_MULTILINE_OFF = re.compile(r"\(\?[A-Za-z]*-[A-Za-z]*m")


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


def reads_whole_text(pattern: str) -> bool:
    """Whether `pattern` may match differently in a line alone than in that line among others
    in one text, with `^` and `$` at every line end (`(?m)`): it reads the start or end of the
    whole text (`\\A`, `\\z`, Python's `\\Z`) or turns multi-line mode off (`(?-m)`). Such a
    pattern is searched line by line, by Grep and by `ctxoffload grep` alike; any other is
    searched over many lines at once (`line_finder`)."""
    return any(end in pattern for end in ("\\A", "\\z", "\\Z")) or bool(
        _MULTILINE_OFF.search(pattern)
    )


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

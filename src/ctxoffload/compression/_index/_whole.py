"""Whether an artifact is written whole at a place in a text: the one test of "this text names
that value", which every check of the artifact index applies (named by the summary's text,
inside an entry the index holds, in a row it wrote).

A value is named only where it is written as a whole value: `/mnt/vol1` is not named by
`/mnt/vol10`, nor `E1234` by `E12345`, nor `pytest -q` by `pytest -q tests/`. Whole means that
neither character beside it could continue a value of its kind, as the scan (`_artifacts`)
reads one:

- a letter, a digit or `_` continue every kind;
- a path goes on through `.-/@+~`, but a `/` after it names it as the folder of what follows
  (`/mnt/vol1/a.csv` names the folder `/mnt/vol1`, and `/mnt/vol1/`, as a tree row names the
  folders on its way);
- a URL goes on through anything but a blank or `<>"'`|()[]{}` (and its scheme, before it,
  through `.+-`);
- an id through nothing else (the scan ends one at `\\b`);
- a command through anything but the end of its line, a quote, a backtick or an operator
  (`;|&()`), blanks before them aside: `pytest -q | tee log` names `pytest -q`; before it,
  through anything but a blank, a quote, a backtick or an operator (`/usr/bin/pytest -q`
  does not name `pytest -q`).

After any value, the punctuation that ends a sentence (`.,;:!?'"`, which the scan strips
from a value's end) followed by a blank or the text's end ends it too: `see /mnt/vol1.`
names `/mnt/vol1`. A value the scan cut (` […]` after its first 200 characters) is named
where those are, whatever follows them (`uncut`).
"""

from __future__ import annotations

from ._artifacts import CUT_MARK

__all__ = ["names_in", "uncut", "whole_at", "written_whole"]

_PATH_GOES_ON = frozenset("_.-/@+~")
_SCHEME_GOES_ON = frozenset("_.+-")
_URL_STOPS = frozenset("<>\"'`|()[]{}")
_COMMAND_STOPS = frozenset("\n\r`'\";|&()")
_COMMAND_BLANKS = frozenset(" \t")
_SENTENCE_END = frozenset(".,;:!?'\"")


def _continues_before(kind: str, char: str) -> bool:
    """Whether `char`, right before a value of `kind`, is part of a longer value."""
    if char.isalnum() or char == "_":
        return True
    if kind == "path":
        return char in _PATH_GOES_ON
    if kind == "url":
        return char in _SCHEME_GOES_ON
    if kind == "command":
        return not (char.isspace() or char in _COMMAND_STOPS)
    return False


def _ends_at(text: str, end: int, kind: str) -> bool:
    """Whether a value of `kind` written up to `end` ends there (see the module)."""
    size = len(text)
    if end >= size:
        return True
    # A sentence's punctuation and then a blank or the end.
    after = end
    while after < size and text[after] in _SENTENCE_END:
        after += 1
    if after > end and (after >= size or text[after].isspace()):
        return True
    char = text[end]
    if kind == "command":
        while end < size and text[end] in _COMMAND_BLANKS:
            end += 1
        return end >= size or text[end] in _COMMAND_STOPS
    if char.isalnum() or char == "_":
        return False
    if kind == "path":
        return char == "/" or char not in _PATH_GOES_ON
    if kind == "url":
        return char.isspace() or char in _URL_STOPS
    return True


def written_whole(text: str, start: int, end: int, kind: str, *, open_end: bool = False) -> bool:
    """Whether the value of `kind` that `text[start:end]` holds is written whole there:
    neither character beside it continues it (`open_end`: the value was cut, so what follows
    it is not asked about)."""
    if start > 0 and _continues_before(kind, text[start - 1]):
        return False
    # (A folder's path, `/mnt/vol1/`, is named by the path of what it holds.)
    folder = kind == "path" and end > start and text[end - 1] == "/"
    return open_end or folder or _ends_at(text, end, kind)


def uncut(value: str) -> tuple[str, bool]:
    """What of `value` a text must hold, and whether it was cut (then what follows it there
    is not asked about)."""
    if value.endswith(CUT_MARK):
        return value[: -len(CUT_MARK)], True
    return value, False


def whole_at(
    text: str,
    value: str,
    kind: str,
    start: int = 0,
    end: int | None = None,
    *,
    open_end: bool = False,
    places: int = 64,
) -> int:
    """The first place of `text[start:end]` where it holds `value` written whole, or -1; at
    most `places` places where it is written are looked at (-1 past them: "not named" is the
    safe answer, the value is then written again)."""
    end = len(text) if end is None else end
    at = text.find(value, start, end)
    while at >= 0 and places > 0:
        if written_whole(text, at, at + len(value), kind, open_end=open_end):
            return at
        places -= 1
        at = text.find(value, at + 1, end)
    return -1


def names_in(text: str, value: str, kind: str) -> bool:
    """Whether `text` (one line) holds `value`, an artifact of `kind`, written whole."""
    needle, open_end = uncut(value)
    return bool(needle) and whole_at(text, needle, kind, open_end=open_end) >= 0

"""Glob patterns as regular expressions over `/`-joined relative paths.

`fnmatch` rules within a path segment (`*` and `?` never match `/`, `[abc]` and `[!abc]`
classes, an unclosed `[` literal), and `**` for any number of directories. The regex runs in
RE2, so no glob a model writes (`*?*?*?…#`) can take more than linear time.
"""

from __future__ import annotations

from typing import Any

from .._search.regex import escape, load_re2, re2_options

__all__ = ["GLOB_CHARS", "compile_glob", "glob_regex", "has_wildcard"]

GLOB_CHARS = frozenset("*?[")
"""The characters that make a path a glob."""


def has_wildcard(text: str) -> bool:
    """Whether `text` holds a glob wildcard."""
    return not GLOB_CHARS.isdisjoint(text)


def glob_regex(segments: list[str]) -> str:
    """A regex for `/`-joined relative paths matching the glob `segments`."""
    regex = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _segment_regex(segment) + ("" if last else "/")
    return regex


def compile_glob(segments: list[str]) -> Any:
    """The glob `segments` compiled (RE2) to `fullmatch` `/`-joined relative paths.

    Raises:
        ValueError: RE2 refuses the regex (a class such as `[z-a]`); its message names the
            part of the glob at fault (`z-a`).
    """
    re2 = load_re2()
    try:
        return re2.compile(glob_regex(segments), re2_options())
    except UnicodeEncodeError as exc:  # RE2 takes UTF-8: its own reason would be "utf-8"
        raise ValueError(f"it holds a lone surrogate ({exc.object[exc.start]!r})") from None
    except (re2.error, TypeError, ValueError, OverflowError) as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        # RE2 says `invalid character class range: z-a`: the regex is not the model's, its
        # part at fault is.
        raise ValueError(str(reason).split(": ", 1)[-1]) from None


def _segment_regex(segment: str) -> str:
    """fnmatch rules within one path segment: `*` and `?` never match `/`."""
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "*":
            while index < len(segment) and segment[index] == "*":
                index += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = _class_end(segment, index)
            if end >= len(segment):
                out.append(escape(char))  # an unclosed `[` is literal, as in fnmatch
                continue
            body = segment[index:end].replace("\\", "\\\\")
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            index = end + 1
        else:
            out.append(escape(char))
    return "".join(out)


def _class_end(segment: str, start: int) -> int:
    """Where the class opened just before `start` closes (`len(segment)`: it does not)."""
    end = start
    if end < len(segment) and segment[end] in "!^":
        end += 1
    if end < len(segment) and segment[end] == "]":
        end += 1
    while end < len(segment) and segment[end] != "]":
        end += 1
    return end

"""Glob patterns as regular expressions over `/`-joined relative paths.

`fnmatch` rules within a path segment (`*` and `?` never match `/`, `[abc]` and `[!abc]`
classes, an unclosed `[` literal), and `**` for any number of directories. The regex runs in
RE2, so no glob a model writes (`*?*?*?…#`) can take more than linear time.
"""

from __future__ import annotations

from ._regex import escape

__all__ = ["GLOB_CHARS", "glob_regex", "has_wildcard"]

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

"""Values the read-back tests share (their fixtures are in conftest.py)."""

SECRET = "TOP SECRET outside the workspace"
"""The text of the files outside the roots: never in any answer."""

REST = " (Read offset={} char_offset={} shows the rest)"
"""The end of a line Read cut: how the model reads the rest (format: line, character)."""

HUGE_SIZE = 50_000_000
"""The length of the one line of `huge_root`'s huge.txt."""


def literal(text: str) -> str:
    """A pattern (RE2 syntax) that matches `text` as it is, whatever characters it holds."""
    return "".join(f"\\x{{{ord(char):x}}}" for char in text)

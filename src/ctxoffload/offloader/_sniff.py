"""The NUL sniff: whether content is text the tools show, or binary they refer to by path.

Read, Grep and the retrieval tool apply the rule git and grep use: a NUL in the first 8 KB
makes content binary. (Images are told apart first, by their signature: `_images.py`.)
"""

from __future__ import annotations

__all__ = ["SNIFF_BYTES", "looks_binary"]

SNIFF_BYTES = 8192
"""How much of the start of a file the sniff looks at."""


def looks_binary(head: bytes | str) -> bool:
    """Whether content starting with `head` is binary: a NUL in its first `SNIFF_BYTES`.

    Args:
        head: the start of the content, as bytes or as decoded text (then its first
            `SNIFF_BYTES` characters are looked at).
    """
    if isinstance(head, str):
        return "\0" in head[:SNIFF_BYTES]
    return b"\0" in head[:SNIFF_BYTES]

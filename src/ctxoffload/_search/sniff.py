"""The sniff: whether content is text the tools show, or binary they refer to by path.

The one rule, for every reader: Read, Grep and the retrieval tool, `ctxoffload cat`,
`ctxoffload grep` and through it the viewer's search (none of the searches reads a binary
file; each says so its own way), and the agent deciding whether the bytes a tool returned
are data to store or text to show. It looks at the first 8 KB of the content: binary when
it holds a NUL (the rule git and grep use), or when most of it is not text (more than
`NOT_TEXT_SHARE` of its characters are bytes that are not UTF-8 or control characters: a
compressed or encrypted file has no NUL to tell it by). Content that passes is text: a byte
that is not UTF-8 is shown as U+FFFD, and a pattern reads it as that U+FFFD (`engine`).
(Images are told apart first, by their signature: `readback._images`,
`_disk.payloads.sniff_media_type`.)
"""

from __future__ import annotations

import codecs

__all__ = ["NOT_TEXT_SHARE", "SNIFF_BYTES", "binary_reason"]

SNIFF_BYTES = 8192
"""How much of the start of a file the sniff looks at."""

NOT_TEXT_SHARE = 0.3
"""The share of the sniffed characters that may be bytes not UTF-8 or control characters
before content counts as binary. Text in a legacy encoding (Latin-1 French, German) stays far
below it (an accented letter is one byte in twenty); random bytes without a NUL are above
one half."""

# Control characters that text does not hold; tab, newline, vertical tab, form feed,
# carriage return, backspace and escape (terminal colours in a log) it does. Counted by
# deleting them (`translate`), not by `re`, whose import (with `enum`) costs ~6 ms of a
# `ctxoffload grep`.
_CONTROL = bytes([*range(0x00, 0x08), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_CONTROL_DELETED = dict.fromkeys(_CONTROL)
_NOT_PLAIN_AS_NUL = bytes(0 if b in _CONTROL or b > 0x7F else b for b in range(256))


def binary_reason(head: bytes | str) -> str | None:
    """Why content starting with `head` is binary, or None when it is text.

    The one rule of every reader (see the module's docstring).

    Args:
        head: the start of the content, as bytes (its first `SNIFF_BYTES` are looked at)
            or as decoded text (its first `SNIFF_BYTES` characters, as their UTF-8 bytes).

    Returns:
        A phrase for an error message (`NUL bytes in its first 8 KB`), or None.
    """
    if isinstance(head, str):
        head = head[:SNIFF_BYTES].encode("utf-8", "surrogatepass")
    head = head[:SNIFF_BYTES]
    # Nearly every file: ASCII without a NUL or a control character, nothing more to count.
    # (A NUL left once each of those bytes is mapped to one says one was there: a table, not
    # bytes to delete, which `translate` turns into a table at each call; `in` with an int
    # is one memchr, `find` parses its arguments first.)
    if 0 not in head.translate(_NOT_PLAIN_AS_NUL):
        return None
    if 0 in head:
        return "NUL bytes in its first 8 KB"
    # A character the end of the sniff cuts is left out (not held against the content).
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=False)
    whole = codecs.getincrementaldecoder("utf-8")("ignore").decode(head, final=False)
    # U+FFFD that was in the content as UTF-8 is in both, so only decoding failures count.
    controls = len(whole) - len(whole.translate(_CONTROL_DELETED))
    not_text = len(text) - len(whole) + controls
    if not_text > NOT_TEXT_SHARE * len(text):
        return (
            f"its first 8 KB is mostly not text: {not_text:,} of {len(text):,} characters "
            "are bytes that are not UTF-8 or control characters"
        )
    return None

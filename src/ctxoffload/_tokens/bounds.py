"""What a text's size alone says of its tokens, with no tokenizer loaded: a door's hook asks
it of each tool output before it loads the engine (most outputs are short)."""

from __future__ import annotations

__all__ = ["within_bytes"]


def within_bytes(text: str, limit: int) -> bool:
    """Whether `text` is at most `limit` bytes in UTF-8: then a byte-level BPE encoding
    (o200k, cl100k) counts it within `limit` tokens, each of its tokens holding at least one
    byte. Not one character: a character outside ASCII is up to four bytes and as many tokens
    (`𝔘` and `ꙮ` are three each in o200k), so an output of fewer characters than the limit
    may be far over it."""
    return len(text) <= limit and (
        text.isascii() or len(text.encode("utf-8", "surrogatepass")) <= limit
    )

"""Read: numbered lines of one file of the roots, an image as the image, binary refused.

The file is opened through `open_readable` (confined, checked on the descriptor), sniffed
(an image signature, then `binary_reason`), and shown as a numbered-line window of
at most `max_output_chars`, with a footer saying which offset to pass next.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from .._search.sniff import SNIFF_BYTES, binary_reason
from ..exceptions import ToolError
from ..messages import DataBlock, TextBlock
from ..text import is_jsonl
from ._arguments import as_int, quote
from ._confine import open_readable, resolve_in_roots
from ._images import HEADER_BYTES, MAX_IMAGE_BYTES, image_answer, image_media_type
from ._lines import NOTE_ROOM
from ._window import read_jsonl_window, read_line_slice, read_window

__all__ = ["read_file"]


def read_file(
    path: str,
    offset: int,
    limit: int,
    char_offset: int,
    *,
    roots: list[Path],
    max_line_chars: int,
    max_output_chars: int,
    images: bool,
) -> str | list[TextBlock | DataBlock]:
    """Numbered lines `offset`.. of the file at `path`, at most `limit` of them; blocking.

    Args:
        path: the file, as the model wrote it; relative paths start at the first root.
        offset: the first line shown, from 1.
        limit: the most lines shown.
        char_offset: when above 0, only line `offset`, from this character (from 0).
        roots: the real roots.
        max_line_chars: longest line shown.
        max_output_chars: longest answer, footer included.
        images: answer an image with the image (True) or with one line about it.

    Returns:
        The numbered lines and, when lines remain, a footer naming the next offset; for an
        image, a line describing it and the image (or the line alone, saying why: the model
        takes no images, or this one may not be sent, `ctxoffload._media`).

    Raises:
        ToolError: a bad argument, a path outside the roots, a file that cannot be read, a
            binary file, or an offset past the end.
    """
    offset = as_int("offset", offset, minimum=1)
    limit = as_int("limit", limit, minimum=1)
    char_offset = as_int("char_offset", char_offset, minimum=0)
    budget = max_output_chars - NOTE_ROOM
    try:
        with open_readable(path, resolve_in_roots(path, roots), roots) as file:
            size = file.seek(0, os.SEEK_END)  # where reading stops (`open_readable`)
            file.seek(0)
            head = file.read(SNIFF_BYTES)
            media_type = image_media_type(head)
            if media_type is not None:
                return _read_image(file, path, size, media_type, images)
            why = binary_reason(head)
            if why is not None:
                raise ToolError(
                    f"{quote(path)} is a binary file ({size:,} bytes, {why}): Read shows "
                    "text only. It is probably a data file (image, audio, PDF, archive): "
                    "refer to it by path"
                )
            file.seek(0)
            jsonl = is_jsonl(str(path))
            if char_offset:
                return read_line_slice(file, path, offset, char_offset, budget, jsonl=jsonl)
            window = read_jsonl_window if jsonl else read_window
            shown, total = window(file, offset, limit, max_line_chars, budget=budget)
    except OSError as exc:
        raise ToolError(f"cannot read {quote(path)}: {exc.strerror or exc}") from exc
    return _with_footer(path, shown, total, offset, limit)


def _with_footer(path: str, shown: list[str], total: int, offset: int, limit: int) -> str:
    if total == 0:
        return f"{path} is empty (0 lines)."
    if not shown:
        raise ToolError(
            f"offset={offset} is past the end of {quote(path)}, which has {total} lines: "
            f"call Read with an offset from 1 to {total}"
        )
    last = offset + len(shown) - 1
    text = "\n".join(shown)
    if last < total:
        capped = "" if len(shown) == limit else " (output size cap reached)"
        text += (
            f"\n… lines {offset}–{last} of {total} shown{capped}; "
            f"call Read with offset={last + 1} to continue"
        )
    return text


def _read_image(
    file: IO[bytes], path: str, size: int, media_type: str, images: bool
) -> str | list[TextBlock | DataBlock]:
    file.seek(0)
    # One too big to send is described from its header alone: the rest is never read.
    data = file.read(HEADER_BYTES if size > MAX_IMAGE_BYTES else size)
    return image_answer(data, media_type, path, images=images, refer="its path", size=size)

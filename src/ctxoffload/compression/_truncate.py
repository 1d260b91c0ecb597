"""Tool-result truncation: the whole result goes to the offloader, the context keeps its head.

The head and the marker after it fit in `tool_result_limit` tokens together. The marker
names the file, its size in lines and bytes, the lines shown, and how to read the rest, so
the agent can page through it with Read or search it with Grep.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel

from .._disk.payloads import count_lines, render_tool_output
from .._disk.wording import plural
from .._lease_lost import logged_unless_lease_lost
from .._tokens.counters import count_over, fits_by_size
from ..messages import DataBlock, Msg, TextBlock, ToolResultBlock, URLSource
from ..text import TRUNCATION_MARKER, defuse
from ..tokens import TokenCounter
from ..workspace import Offloader
from ._tool_names import ReaderTools, how_to_read

__all__ = [
    "TRUNCATION_MARKER",
    "TruncatedText",
    "Truncation",
    "count_output",
    "data_files",
    "head_within",
    "tail_within",
    "truncate_text",
    "truncation_notice",
    "utf8",
]

logger = logging.getLogger("ctxoffload")


@dataclass
class Truncation:
    """What one truncation did."""

    block: ToolResultBlock
    reference: str | None
    total_lines: int
    total_bytes: int
    shown_lines: int
    tokens_before: int
    tokens_after: int
    last_line_partial: bool = False  # the last line shown is cut (`lines 1-4 and part of 5`)
    # When `tokens_before` is an estimate (a text far over the limit, `count_over`): the
    # least and the most it may be. None: counted exactly.
    tokens_before_bounds: tuple[int, int] | None = None
    full_text: str = ""  # the whole result as the file holds it, to cut again if needed
    # Once `full_text` is let go of (`Truncator.release`): its sha256, to know it when it is
    # read back from `reference` (or given again whole). "": `full_text` is held.
    full_sha256: str = ""
    data: list[tuple[str, str]] = field(default_factory=list)
    # The texts ctxoffload cut from it since (to fit a reserve): a result that is one of them
    # is this one. Its text alone never says so: a tool may write a notice.
    stand_ins: list[str] = field(default_factory=list)


def utf8(text: str) -> bytes:
    """`text` as the workspace writes it, so sizes match the file.

    Surrogate escapes go back to their bytes; any other lone surrogate (half an emoji from a
    JSON escape, say) is kept with surrogatepass instead of failing the truncation.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _not_stored(raw: bytes, media_type: str | None) -> str:
    return "(not kept: no offloader was configured)"


def rendered_text(output: Any) -> str:
    """A tool output as text, exactly as the tool_result file holds it (data as `<data/>`).

    Payloads are offloaded before rendering when there is an offloader; without one, a
    base64 payload is shown as a `<data/>` line saying it was not kept.
    """
    if isinstance(output, list):
        # The workspace renders the JSON form of the blocks; render the same, line for line.
        output = [p.model_dump(mode="json") if isinstance(p, BaseModel) else p for p in output]
    return render_tool_output(output, _not_stored).decode("utf-8", "surrogateescape")


def head_within(text: str, budget: int, counter: TokenCounter) -> tuple[str, int, bool]:
    """The longest run of whole lines from the start of `text` within `budget` tokens.

    When even the first line does not fit, it is cut by characters instead.

    Returns:
        (head, number of lines shown, whether the last shown line was cut).
    """
    if budget <= 0:
        return "", 0, False
    # Line by line from the start, never splitting the rest (a 10 MB output's lines cost
    # 20 ms to split, and the head is a few dozen of them).
    used = shown = start = 0
    end = -1  # where the last line shown ends
    while start <= len(text):
        stop = text.find("\n", start)
        stop = len(text) if stop < 0 else stop
        cost = counter.count_text(text[start:stop] + "\n")
        if used + cost > budget:
            break
        shown, used, end, start = shown + 1, used + cost, stop, stop + 1
    if shown:
        return text[:end], shown, False
    # One enormous first line: binary search for the longest prefix that fits.
    first = text.partition("\n")[0]
    lo, hi = 0, min(len(first), budget * 8)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count_text(first[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return first[:lo], 1 if lo else 0, bool(lo)


def _shown_phrase(shown_lines: int, partial_last: bool, tail_from: int | None, total: int) -> str:
    if tail_from is not None:
        head = f"lines 1-{shown_lines}" if shown_lines > 1 else "line 1"
        tail = f"lines {tail_from}-{total}" if tail_from < total else f"line {total}"
        return f"{head} and {tail}"
    if partial_last:
        return (
            f"lines 1-{shown_lines - 1} and part of line {shown_lines}"
            if shown_lines > 1
            else "part of line 1"
        )
    if shown_lines > 1:
        return f"lines 1-{shown_lines}"
    return f"{shown_lines} line" + ("" if shown_lines == 1 else "s")


NAMED_DATA_FILES = 3
"""The distinct data files a notice names; it says how many more the stored file names."""


def _data_named(data: Sequence[tuple[str, str]], *, full: bool, stored: bool) -> list[str]:
    """Each distinct data file of `data` once, first seen first, with how many times the
    result held it, up to `NAMED_DATA_FILES`, then how many more there are: a notice is
    counted within the preview, and a result of 3,000 small images once named the same file
    3,000 times (339,213 characters for a 3,000-token limit). The stored file names them all,
    one `<data/>` line each."""
    times: dict[tuple[str, str], int] = {}
    for item in data:
        times[item] = times.get(item, 0) + 1
    named = []
    for (url, media_type), count in list(times.items())[:NAMED_DATA_FILES]:
        kind = f"{media_type.split('/')[0]} ({media_type})" if full else media_type
        named.append(f"{kind} in {url}" + (f" ({count:,} times)" if count > 1 else ""))
    if (more := len(times) - NAMED_DATA_FILES) > 0:
        where = ", each named in the file above" if stored else ""
        named.append(f"and {plural(more, 'more file')}{where}")
    return named


def _data_sentence(data: Sequence[tuple[str, str]], *, stored: bool) -> str:
    """Where the result's images, audio or documents are, and what kind each is."""
    if not data:
        return ""
    return (
        " It also held "
        + "; ".join(_data_named(data, full=True, stored=stored))
        + ": open such a file with a tool that takes images or documents, not as text."
    )


def truncation_notice(
    *,
    tool_name: str,
    tool_id: str,
    reference: str | None,
    total_lines: int,
    total_bytes: int,
    shown_lines: int,
    partial_last: bool,
    what: str = "tool result",
    compact: bool = False,
    readers: ReaderTools | None = None,
    tail_from: int | None = None,
    data: Sequence[tuple[str, str]] = (),
) -> str:
    """The marker and `<system-reminder>` that follow a truncated head.

    Args:
        tool_name: the producing tool, or "" when unknown.
        tool_id: the tool call's id.
        reference: the file holding the whole content; None when nothing was kept.
        total_lines: lines in that file.
        total_bytes: bytes in that file.
        shown_lines: lines of the head (the last one maybe `partial_last`).
        partial_last: whether the head's last line was cut.
        what: "tool result", or a description such as "the user's message".
        compact: a one-line reminder with the same facts, for tight limits.
        readers: the agent's reader tools, named in the "how to read on" sentence.
        tail_from: with a head-and-tail preview, the first line of the tail, which follows
            the notice.
        data: (path, media type) of each image, audio or document the result held; they
            are named, and no line offset is suggested past the end of the text.
    """
    shown = _shown_phrase(shown_lines, partial_last, tail_from, total_lines)
    # The tool's name and the call's id come from the model: they cannot close the notice.
    tool_id = defuse(tool_id)
    origin = f"tool {defuse(repr(tool_name))} (call {tool_id})" if tool_name else f"call {tool_id}"
    what = defuse(what)
    subject = f"The output of {origin}" if what == "tool result" else what[:1].upper() + what[1:]
    size = f"{total_lines:,} line{'' if total_lines == 1 else 's'}, {total_bytes:,} bytes"
    next_line: int | None = shown_lines if partial_last else shown_lines + 1
    if tail_from is None and next_line is not None and next_line > total_lines:
        next_line = None  # every line is shown: nothing to read on from
    where = "shown above" if tail_from is None else "shown (the head above, the tail below)"
    if compact:
        rest = (
            "the rest was discarded (no offloader)"
            if reference is None
            else f"all in {reference} ({how_to_read(reference, next_line, readers, compact=True)})"
        )
        named = _data_named(data, full=False, stored=reference is not None)
        kinds = "".join(f"; {each}" for each in named)
        return (
            f"\n{TRUNCATION_MARKER}\n<system-reminder>{shown} of {size} shown; {rest}{kinds}"
            "</system-reminder>"
        )
    if reference is None:
        return (
            f"\n{TRUNCATION_MARKER}\n<system-reminder>\n{subject} had {size}; "
            f"only {shown} {where}. The rest was discarded because no offloader is "
            "configured, and cannot be recovered: re-run the tool with a narrower request if "
            f"you need more.{_data_sentence(data, stored=False)}\n</system-reminder>"
        )
    return (
        f"\n{TRUNCATION_MARKER}\n<system-reminder>\n{subject} had {size}; "
        f"{shown} {where}. The whole output is saved in:\n{reference}\n"
        f"{how_to_read(reference, next_line, readers)} Line numbers in the file match the "
        f"lines shown.{_data_sentence(data, stored=True)}\n</system-reminder>"
    )


class TruncatedText(NamedTuple):
    """A text cut to its limit, and what the notice says about the whole."""

    text: str
    shown_lines: int
    total_lines: int
    total_bytes: int
    last_line_partial: bool = False


def tail_within(lines: list[str], budget: int, counter: TokenCounter) -> list[str]:
    """The longest run of whole lines from the end of `lines` within `budget` tokens."""
    used = 0
    tail: list[str] = []
    for line in reversed(lines):
        cost = counter.count_text(line + "\n")
        if used + cost > budget:
            break
        tail.append(line)
        used += cost
    tail.reverse()
    return tail


def truncate_text(
    text: str,
    *,
    limit: int,
    counter: TokenCounter,
    reference: str | None,
    tool_name: str = "",
    tool_id: str = "",
    what: str = "tool result",
    readers: ReaderTools | None = None,
    preview: str = "head",
    data: Sequence[tuple[str, str]] = (),
) -> TruncatedText:
    """`text` cut to `limit` tokens, the notice included.

    Args:
        preview: "head" keeps the first lines; "head_tail" keeps about two thirds of the
            budget from the start and one third from the end, with the notice between them
            saying which lines are shown.
    """
    total_bytes = len(utf8(text))
    total_lines = count_lines(text)
    # What stays of the text is shown beside the notice: it may not fake or close one (the
    # lines stay as they are numbered in the file, which keeps the original).
    text = defuse(text)
    notice_args: dict[str, Any] = {
        "tool_name": tool_name,
        "tool_id": tool_id,
        "reference": reference,
        "total_lines": total_lines,
        "total_bytes": total_bytes,
        "what": what,
        "readers": readers,
        "data": data,
    }
    widest = total_lines if preview == "head_tail" else None
    # The notice's own size depends on the numbers in it only slightly; measure it with the
    # widest values so the head + notice never exceed the limit. When the full notice would
    # take over half the limit, the compact one leaves room for a useful head (and fits
    # limits the full one cannot).
    probe = truncation_notice(
        **notice_args, shown_lines=total_lines, partial_last=True, tail_from=widest
    )
    notice_args["compact"] = counter.count_text(probe) * 2 > limit
    if notice_args["compact"]:
        probe = truncation_notice(
            **notice_args, shown_lines=total_lines, partial_last=True, tail_from=widest
        )
    budget = limit - counter.count_text(probe)
    if preview == "head_tail":
        head, shown, partial = head_within(text, budget * 2 // 3, counter)
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()  # the newline ends the last line; it does not start another
        if not partial and shown < len(lines):
            used = counter.count_text(head + "\n") if shown else 0
            tail = tail_within(lines[shown:], budget - used, counter)
            if tail:
                tail_from = len(lines) - len(tail) + 1
                notice = truncation_notice(
                    **notice_args, shown_lines=shown, partial_last=False, tail_from=tail_from
                )
                return TruncatedText(
                    head + notice + "\n" + "\n".join(tail),
                    shown + len(tail),
                    total_lines,
                    total_bytes,
                )
    head, shown, partial = head_within(text, budget, counter)
    notice = truncation_notice(**notice_args, shown_lines=shown, partial_last=partial)
    return TruncatedText(head + notice, shown, total_lines, total_bytes, partial)


async def truncate_tool_result(
    block: ToolResultBlock,
    *,
    limit: int,
    counter: TokenCounter,
    offloader: Offloader | None,
    session_id: str,
    preview_tokens: int | None = None,
    preview: str = "head",
    readers: ReaderTools | None = None,
) -> Truncation | None:
    """Offload and truncate `block` when it is over `limit` tokens; None when it fits.

    Persist before drop: the whole result is offloaded first; if that fails, the result is
    kept whole and a warning logged. A text far over the limit is not counted whole: its
    first lines decide, and its `tokens_before` is an estimate within bounds
    (`count_over`). Binary blocks are stored in data/ first and appear in
    both the file and the head as one `<data url=... />` line; the notice names each such
    file and its kind.

    Args:
        limit: the offload threshold in tokens (`tool_result_limit`).
        preview_tokens: what stays in the context, notice included; `limit` when None.
        preview: "head" or "head_tail" (see `truncate_text`).
        readers: the agent's reader tools, named in the notice.
    """
    # (A text far over the limit is known to be over from its first lines: its tokens are
    # then estimated, within bounds, rather than all counted.)
    if isinstance(block.output, str):
        if fits_by_size(counter, block.output, limit):
            return None  # (most outputs: no tokenizer needed)
        tokens_before, bounds = count_over(counter, block.output, limit)
    else:
        tokens_before, bounds = count_output(block, counter), None
    if tokens_before <= limit:
        return None
    original = block
    reference: str | None = None
    if offloader is not None:
        with logged_unless_lease_lost(
            "could not offload the result of %s (call %s), keeping it whole",
            original.name or "a tool",
            original.id,
        ) as failed:
            block = await _offload_payloads(block, offloader)
            reference = await offloader.offload_tool_result(session_id, block)
        if failed:
            return None
    full_text = rendered_text(block.output)
    data = data_files(block) if reference is not None else []
    cut = truncate_text(
        full_text,
        limit=min(limit, preview_tokens or limit),
        counter=counter,
        reference=reference,
        tool_name=block.name,
        tool_id=block.id,
        readers=readers,
        preview=preview,
        data=data,
    )
    return Truncation(
        block=block.model_copy(update={"output": cut.text}),
        reference=reference,
        total_lines=cut.total_lines,
        total_bytes=cut.total_bytes,
        shown_lines=cut.shown_lines,
        tokens_before=tokens_before,
        tokens_after=counter.count_text(cut.text),
        tokens_before_bounds=bounds,
        last_line_partial=cut.last_line_partial,
        full_text=full_text,
        data=data,
    )


def data_files(block: ToolResultBlock) -> list[tuple[str, str]]:
    """(path, media type) of each stored payload in a tool result's output."""
    if isinstance(block.output, str):
        return []
    found = []
    for part in block.output:
        if isinstance(part, DataBlock) and isinstance(part.source, URLSource):
            found.append((part.source.url, part.media_type or "data"))
    return found


def count_output(block: ToolResultBlock, counter: TokenCounter) -> int:
    """The tokens of a tool result's output: its text, or the message that holds its parts."""
    if isinstance(block.output, str):
        return counter.count_text(block.output)
    return counter.count_message(Msg(role="tool", content=[block]))


async def _offload_payloads(block: ToolResultBlock, offloader: Offloader) -> ToolResultBlock:
    if isinstance(block.output, str) or not any(isinstance(p, DataBlock) for p in block.output):
        return block
    parts: list[TextBlock | DataBlock] = []
    for part in block.output:
        if isinstance(part, DataBlock):
            part = await offloader.offload_data_block(part)
        parts.append(part)
    return block.model_copy(update={"output": parts})

"""Tool-result truncation: the whole result goes to the offloader, the context keeps its head.

The head and the marker after it fit in `tool_result_limit` tokens together. The marker
names the file, its size in lines and bytes, the lines shown, and how to read the rest, so
the agent can page through it with Read or search it with Grep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel

from .._payloads import count_lines, render_tool_output
from ..messages import DataBlock, Msg, TextBlock, ToolResultBlock
from ..offloader import Offloader
from ..tokens import TokenCounter

__all__ = [
    "TRUNCATION_MARKER",
    "TruncatedText",
    "Truncation",
    "head_within",
    "truncate_text",
    "truncation_notice",
    "utf8",
]

logger = logging.getLogger("ctxoffload")

TRUNCATION_MARKER = "<<<TRUNCATED>>>"


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
    lines = text.split("\n")
    used = 0
    shown: list[str] = []
    for line in lines:
        cost = counter.count_text(line + "\n")
        if used + cost > budget:
            break
        shown.append(line)
        used += cost
    if shown:
        return "\n".join(shown), len(shown), False
    # One enormous first line: binary search for the longest prefix that fits.
    first = lines[0]
    lo, hi = 0, min(len(first), budget * 8)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count_text(first[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return first[:lo], 1 if lo else 0, bool(lo)


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
) -> str:
    """The marker and `<system-reminder>` that follow a truncated head.

    `compact` gives a one-line reminder with the same facts, for limits too small for the
    full one.
    """
    shown = (
        f"lines 1-{shown_lines}"
        if shown_lines > 1
        else f"{shown_lines} line" + ("" if shown_lines == 1 else "s")
    )
    if partial_last:
        shown = (
            f"lines 1-{shown_lines - 1} and part of line {shown_lines}"
            if shown_lines > 1
            else ("part of line 1")
        )
    origin = f"tool {tool_name!r} (call {tool_id})" if tool_name else f"call {tool_id}"
    subject = f"The output of {origin}" if what == "tool result" else what[:1].upper() + what[1:]
    size = f"{total_lines:,} line{'' if total_lines == 1 else 's'}, {total_bytes:,} bytes"
    next_line = shown_lines if partial_last else shown_lines + 1
    if compact:
        rest = (
            "the rest was discarded (no offloader)"
            if reference is None
            else f"all in {reference} (Read offset={next_line}, or Grep it)"
        )
        return (
            f"\n{TRUNCATION_MARKER}\n<system-reminder>{shown} of {size} shown; {rest}"
            "</system-reminder>"
        )
    if reference is None:
        return (
            f"\n{TRUNCATION_MARKER}\n<system-reminder>\n{subject} had {size}; "
            f"only {shown} shown above. The rest was discarded because no offloader is "
            "configured, and cannot be recovered: re-run the tool with a narrower request if "
            "you need more.\n</system-reminder>"
        )
    return (
        f"\n{TRUNCATION_MARKER}\n<system-reminder>\n{subject} had {size}; "
        f"{shown} shown above. The whole output is saved in:\n{reference}\n"
        f"To read the rest, use Read(path={reference!r}, offset={next_line}, limit=200); "
        f"to search it, use Grep(pattern='...', path_or_glob={reference!r}). Line numbers in "
        "the file match the lines above.\n</system-reminder>"
    )


class TruncatedText(NamedTuple):
    """A text cut to its limit, and what the notice says about the whole."""

    text: str
    shown_lines: int
    total_lines: int
    total_bytes: int


def truncate_text(
    text: str,
    *,
    limit: int,
    counter: TokenCounter,
    reference: str | None,
    tool_name: str = "",
    tool_id: str = "",
    what: str = "tool result",
) -> TruncatedText:
    """`text` cut to `limit` tokens, the notice included."""
    total_bytes = len(utf8(text))
    total_lines = count_lines(text)
    notice_args: dict[str, Any] = {
        "tool_name": tool_name,
        "tool_id": tool_id,
        "reference": reference,
        "total_lines": total_lines,
        "total_bytes": total_bytes,
        "what": what,
    }
    # The notice's own size depends on the numbers in it only slightly; measure it with the
    # widest values so the head + notice never exceed the limit. When the full notice would
    # take over half the limit, the compact one leaves room for a useful head (and fits
    # limits the full one cannot).
    probe = truncation_notice(**notice_args, shown_lines=total_lines, partial_last=True)
    notice_args["compact"] = counter.count_text(probe) * 2 > limit
    if notice_args["compact"]:
        probe = truncation_notice(**notice_args, shown_lines=total_lines, partial_last=True)
    budget = limit - counter.count_text(probe)
    head, shown, partial = head_within(text, budget, counter)
    notice = truncation_notice(**notice_args, shown_lines=shown, partial_last=partial)
    return TruncatedText(head + notice, shown, total_lines, total_bytes)


async def truncate_tool_result(
    block: ToolResultBlock,
    *,
    limit: int,
    counter: TokenCounter,
    offloader: Offloader | None,
    session_id: str,
) -> Truncation | None:
    """Offload and truncate `block` when it is over `limit` tokens; None when it fits.

    Persist before drop: the whole result is offloaded first; if that fails, the result is
    kept whole and a warning logged. Binary blocks are stored in data/ first and appear in
    both the file and the head as one `<data url=... />` line.
    """
    tokens_before = _count_output(block, counter)
    if tokens_before <= limit:
        return None
    original = block
    reference: str | None = None
    if offloader is not None:
        try:
            block = await _offload_payloads(block, offloader)
            reference = await offloader.offload_tool_result(session_id, block)
        except Exception as exc:
            logger.warning(
                "could not offload the result of %s (call %s), keeping it whole: %s",
                original.name or "a tool",
                original.id,
                exc,
            )
            return None
    cut = truncate_text(
        rendered_text(block.output),
        limit=limit,
        counter=counter,
        reference=reference,
        tool_name=block.name,
        tool_id=block.id,
    )
    return Truncation(
        block=block.model_copy(update={"output": cut.text}),
        reference=reference,
        total_lines=cut.total_lines,
        total_bytes=cut.total_bytes,
        shown_lines=cut.shown_lines,
        tokens_before=tokens_before,
        tokens_after=counter.count_text(cut.text),
    )


def _count_output(block: ToolResultBlock, counter: TokenCounter) -> int:
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

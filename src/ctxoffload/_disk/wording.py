"""How the parts of an event read to people: figures, durations, token changes, a
compression's fidelity report, the files an event names, an error, a first line. The
sentences of `events.py` are made of these, so every reader words a figure the same way.

Light on purpose, as `events.py`: no `typing` at run time.
"""

from __future__ import annotations

from .records import line_runs

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

__all__ = [
    "describe_holder",
    "duration",
    "error_text",
    "fidelity_parts",
    "fidelity_sentence",
    "figure",
    "files_text",
    "first_line",
    "into_text",
    "lines_text",
    "plural",
    "quoted",
    "said",
    "spans_text",
    "summary_origin_text",
    "token_change",
]


def figure(value: object) -> str:
    """A figure with thousands separators; `?` for one the event does not hold: the one
    number formatter of every sentence, `show`'s tree and the log."""
    if value is None:
        return "?"
    return f"{value:,}" if isinstance(value, int) else str(value)


def said(value: object) -> str:
    """A field as a sentence says it: `?` for one the event does not hold (a line cut short,
    edited by hand, or written by a buggy writer), never Python's `None`."""
    return "?" if value is None else str(value)


def duration(value: object) -> str:
    """`812 ms`, `3.20 s`; `? ms` for a duration the event does not hold."""
    if not isinstance(value, (int, float)):
        return "? ms"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def plural(count: object, word: str) -> str:
    """`1 step`, `3 steps`, `? steps`."""
    return f"{figure(count)} {word}{'' if count == 1 else 's'}"


def token_change(event: Mapping[str, Any]) -> str:
    """`6,760→570 tokens`: an event's `tokens_before` and `tokens_after`.

    A `tokens_before` that was estimated, not counted whole (a tool output far over the
    limit is counted only in its first lines, a long history seen for the first time only as
    far as decides), is marked `~` and says what was counted, in words:
    `~655,388→289 tokens (estimated: its first lines counted, 20,560 tokens, and scaled to
    its length)`, `~4,288,611→28,564 tokens (estimated: the oldest messages sized by their
    length, not counted)`. (Its bounds, the second of which is a byte count, stay in the
    event for `--json`: as words they read as a range no one could use.)
    """
    before, after = figure(event.get("tokens_before")), figure(event.get("tokens_after"))
    change = f"{before}→{after} tokens"
    if event.get("tokens_before_exact") is not False:
        return change
    return f"~{change} ({_estimate_basis(event)})"


def _estimate_basis(event: Mapping[str, Any]) -> str:
    """What an estimated `tokens_before` was made from, as `token_change` says it."""
    bounds = event.get("tokens_before_range")
    counted = bounds[0] if isinstance(bounds, list) and len(bounds) == 2 else None
    if event.get("kind") in ("truncation", "offload") and isinstance(counted, int):
        tokens = figure(counted)
        return f"estimated: its first lines counted, {tokens} tokens, and scaled to its length"
    uncounted = event.get("tokens_before_uncounted")
    if isinstance(uncounted, int) and uncounted > 0:
        return f"estimated: the {plural(uncounted, 'oldest message')} sized by length, not counted"
    return "estimated: the oldest messages sized by their length, not counted"


def fidelity_sentence(event: Mapping[str, Any], cut_held: str) -> str | None:
    """What a compression kept named and could read back, from its event; None for an event
    without the report (another kind, or written before the report existed). `cut_held` says
    where the artifacts cut from the index are (a clearing leaves them in the outputs it
    stored, a compaction lists them in events.jsonl).

    `artifacts: 28 left, 8 in the summary, 16 indexed, 4 cut (listed in events.jsonl);
    2 of 2 messages read back at their lines`
    """
    return "; ".join(fidelity_parts(event, cut_held)) or None


def fidelity_parts(event: Mapping[str, Any], cut_held: str) -> list[str]:
    """The parts of `fidelity_sentence`: what stayed named, and what was read back (none
    for an event without the report)."""
    counts = event.get("artifacts")
    checked = event.get("recoverable")
    parts: list[str] = []
    if isinstance(counts, dict) and isinstance(counts.get("left"), int):
        named = [
            f"{figure(counts.get(key))} {what}"
            for key, what in (
                ("in_summary", "in the summary"),
                ("in_kept", "still in the context"),
                ("indexed", "indexed"),
            )
            if counts.get(key)
        ]
        cut = counts.get("cut")
        if cut:
            named.append(f"{figure(cut)} cut ({cut_held})")
        left = figure(counts["left"])
        parts.append(f"artifacts: {left} left" + "".join(f", {n}" for n in named))
    if isinstance(checked, dict) and isinstance(checked.get("messages"), int):
        if isinstance(checked.get("verified"), int):
            parts.append(
                f"{figure(checked['verified'])} of {figure(checked['messages'])} "
                "messages read back at their lines"
            )
        else:
            parts.append("messages not read back (the offloader cannot read references)")
    return parts


def files_text(refs: object, lead: str, more: str = "more") -> str:
    """`{lead}FIRST and N more` for the files an event names; "" for none."""
    if not isinstance(refs, list) or not refs:
        return ""
    return f"{lead}{refs[0]}" + (f" and {len(refs) - 1} {more}" if len(refs) > 1 else "")


def spans_text(spans: Iterable[Sequence[int]]) -> str:
    """Line spans as people and models read them, in order, adjacent or overlapping ones
    merged: `"1-40, 52-60"` (a single line as `"7"`); `""` for none. Every text that names
    where messages went in a context log (a summary, a note, a reference's `line_span`, an
    event's sentence) spells its lines so: exactly the lines that hold them, never the span
    from the first to the last when other lines lie between."""
    merged: list[list[int]] = []
    for first, last in sorted((int(run[0]), int(run[1])) for run in spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in merged)


def lines_text(span: object, spans: object = None) -> str:
    """ " lines 1-12, 14-17" for an event's `lines` (`[first, last]`) and `spans` (each run
    of lines apart, when its messages are not on consecutive lines), as `line_runs` reads
    them (" line 7" for one line); "" when it holds neither (a line cut short)."""
    runs = line_runs(span, spans)
    if not runs:
        return ""
    text = spans_text(runs)
    return f" line {text}" if text.isdigit() else f" lines {text}"


def into_text(reference: object, span: object, spans: object = None) -> str:
    """ " into FILE lines A-B" for an event that moved lines into a file ("" without one),
    its lines as `lines_text` says them."""
    where = f" into {reference}" if reference else ""
    return where + lines_text(span, spans)


def error_text(error: object) -> str:
    """`TYPE: MESSAGE` of an event's `error` object."""
    found: dict[str, Any] = error if isinstance(error, dict) else {}
    return f"{said(found.get('type'))}: {said(found.get('message'))}"


_SHORT = 100  # characters of a first line shown: a tool's error, a message without --full


def first_line(text: str, limit: int = _SHORT) -> str:
    """The first line of `text`, cut to `limit` characters, ` …` when there is more: how
    `show` quotes a tool's error and a message's text on one line."""
    text = text.strip()
    line = text.split("\n", 1)[0]
    more = len(line) > limit or "\n" in text
    return line[:limit] + (" …" if more else "")


def quoted(text: str, limit: int = 200) -> str:
    """`text` quoted as Python writes a string (a newline, a tab or a terminal's escape shown
    as `\\n`, `\\t`, `\\x1b`, never acted on), its first `limit` characters, ` …` when there
    is more: how `show` quotes a text an agent wrote."""
    return repr(text[:limit]) + (" …" if len(text) > limit else "")


def describe_holder(holder: Mapping[str, Any]) -> str:
    """Who holds a session's lease, from what its record says: `agent 'coder' (pid 123 on
    host-a, since 2026-...)`; the one wording of the errors, gc's report and the CLI."""
    agent = holder.get("agent")
    who = f"agent {agent!r}" if agent else "a writer"
    where = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
    since = f", since {holder['started']}" if holder.get("started") else ""
    return f"{who} ({where}{since})"


_REPLY_WORDS = {
    "json": "structured",
    "prose": "parsed from prose",
    "headings": "parsed from headings",
    "tags": "parsed from tags",
    "cut": "parsed from a cut-off reply",
}
_FALLBACK_WORDS = {
    "no_model": "no summary model",
    "no_messages": "no messages to send the summary model",
    "no_time": "no time left of the summary timeout",
    "window": "the summary model's window is too small",
}


def _names(names: object) -> str:
    """`a`, `a and b`, `a, b and c` of the field names a list holds; empty for no list."""
    found = [str(n) for n in names] if isinstance(names, list) else []
    if len(found) < 2:
        return "".join(found)
    return f"{', '.join(found[:-1])} and {found[-1]}"


def summary_origin_text(origin: object) -> str | None:
    """The one line that says who wrote a compaction's summary, from its `summary_origin`:
    `summary: gpt-4o-mini, structured, 2 attempts, 5,120 tokens in, 380 out` (the tokens
    its replies reported), `summary: claude-3-5-haiku, parsed from headings, next_steps from
    the extract`, `summary: extractive (timeout after 30 s)`.
    None for a record without one (an older release's)."""
    if not isinstance(origin, dict):
        return None
    parts: list[str] = []
    attempts, chunks = origin.get("attempts"), origin.get("chunks")
    if origin.get("source") == "model":
        door = origin.get("door")
        parts.append(said(origin.get("model")) + (f" through {door}" if door else ""))
        parts.append(
            _REPLY_WORDS.get(str(origin.get("reply")), f"read as {said(origin.get('reply'))}")
        )
        if isinstance(attempts, int) and isinstance(chunks, int) and attempts > max(chunks, 1):
            parts.append(plural(attempts, "attempt"))
        if isinstance(chunks, int) and chunks > 1:
            parts.append(f"in {figure(chunks)} parts")
        if _names(origin.get("filled")):
            parts.append(f"{_names(origin.get('filled'))} from the extract")
        if _names(origin.get("cut")):
            parts.append(f"{_names(origin.get('cut'))} cut off")
        usage = origin.get("usage")
        if isinstance(usage, dict) and all(
            isinstance(usage.get(key), int) for key in ("input_tokens", "output_tokens")
        ):
            parts.append(
                f"{figure(usage['input_tokens'])} tokens in, {figure(usage['output_tokens'])} out"
            )
        return "summary: " + ", ".join(parts)
    fallback = origin.get("fallback")
    timeout = origin.get("timeout")
    if fallback == "timeout":
        why = f"timeout after {timeout:g} s" if isinstance(timeout, (int, float)) else "timeout"
    elif fallback == "failed":
        error = origin.get("error")
        why = f"{plural(attempts, 'attempt')} failed" + (
            f", the last with {quoted(first_line(error), 120)}" if isinstance(error, str) else ""
        )
    else:
        why = _FALLBACK_WORDS.get(str(fallback), said(fallback))
    return f"summary: extractive ({why})"

"""Answers of the wrapped server that the SDK's parser refuses, read again.

The SDK parses each message a server sends with pydantic, which refuses JSON that Python's
`json` takes: a lone surrogate escape (`"\\ud800"`, which `JSON.stringify` writes for a string
cut inside an emoji) and `NaN` among them. Over stdio the SDK then drops the line, and the
request it answered waits for its deadline, its answer lost; over HTTP it fails the request
with -32700. The rule, written once here: each lone surrogate escape becomes `\\ufffd` (U+FFFD,
as the transport already replaces bytes that are not UTF-8), everything else as the server
sent it, byte for byte. `reread` applies it to a line the stdio transport refused (an answer
that still cannot be read becomes a JSON-RPC error for its request, so the call fails at once,
saying why, and the SDK's traceback for the line is left out of the log: `QuietRereads`);
`LoneSurrogateEscapes` applies it to an HTTP body as it streams in, before the
SDK parses it (`ctxoffload.mcp._http_answers`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

__all__ = ["LoneSurrogateEscapes", "QuietRereads", "reread", "without_lone_surrogate_escapes"]

_ESCAPE = re.compile(
    rb"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a pair: kept
    rb"|u[dD][89a-fA-F][0-9a-fA-F]{2}"  # a lone surrogate: replaced
    rb"|[\s\S])"  # any other escape (`\\` among them, so `\\ud800` is no escape): kept
)
"""One escape of JSON text. Scanned from the start, every backslash the scan meets begins one
(outside strings JSON has none, and inside one `\\\\` is consumed whole)."""

_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
"""What begins every surrogate escape (and some that are none): text without it passes as it
is, unscanned."""

_LONGEST = 12
"""Bytes the longest escape the scan looks at takes (a pair, `\\ud83d\\ude00`)."""

_REPLACEMENT = rb"\ufffd"

_PARSE_ERROR = -32700
"""JSON-RPC's code for a message that cannot be parsed."""


class LoneSurrogateEscapes:
    """The rule applied to JSON text that comes in pieces (an HTTP body): `feed` each piece,
    then `end`; what they return, joined, is the whole text with its lone surrogate escapes
    replaced. At most 12 bytes are held back between pieces (an escape a piece's end may
    have cut), and never a line's end.
    """

    def __init__(self) -> None:
        self._held = b""

    def feed(self, piece: bytes) -> bytes:
        """The text that is settled once `piece` came (maybe empty)."""
        data = self._held + piece
        done, self._held = _replaced(data, final=False)
        return done

    def end(self) -> bytes:
        """The rest of the text, at its end."""
        done, self._held = _replaced(self._held, final=True)
        return done


def without_lone_surrogate_escapes(text: bytes) -> bytes:
    """`text`, whole JSON text, with each lone surrogate escape `\\ufffd`."""
    return _replaced(text, final=True)[0]


def _replaced(data: bytes, *, final: bool) -> tuple[bytes, bytes]:
    """What of `data` is settled, replaced, and what must wait for more (nothing if `final`).

    What waits is at most the last 12 bytes, and never a line's end: a line's end is settled
    at once (an event of an event stream reaches the SDK when it ends), since no escape goes
    on past it.
    """
    # Every escape that begins before the last line's end is settled (JSON text holds no
    # line break inside a string, so no escape spans one).
    settled = len(data) if final else data.rfind(b"\n") + 1
    if _SURROGATE.search(data) is None:
        if final:
            return data, b""
        # Held: the last bytes (an escape may begin there), cut where an escape or the text
        # between escapes begins, never inside one: within a run of backslashes (`\\`s, and
        # maybe an escape's first byte) an even count from the run's start, which is where
        # an escape begins since no escape but `\\` has a backslash for its second byte.
        cut = run = max(len(data) - _LONGEST, 0)
        while run > 0 and data[run - 1] == 0x5C:
            run -= 1
        cut -= (cut - run) % 2
        cut = max(cut, settled)
        return data[:cut], data[cut:]
    pieces: list[bytes] = []
    start = 0
    for match in _ESCAPE.finditer(data):
        if match.start() >= settled and match.start() + _LONGEST > len(data):
            # The escape may continue in the next piece (its end, or a low half after it).
            pieces.append(data[start : match.start()])
            return b"".join(pieces), data[match.start() :]
        escape = match.group()
        pieces += [data[start : match.start()], _REPLACEMENT if len(escape) == 6 else escape]
        start = match.end()
    rest = data[start:]
    if not final and rest.endswith(b"\\"):
        # A backslash whose escape's next byte has not come yet.
        return b"".join([*pieces, rest[:-1]]), b"\\"
    return b"".join([*pieces, rest]), b""


def reread(types: Any, session_message: Any, item: Any) -> Any:
    """`item`, a line the SDK's parser refused, as a message; or `item` itself when it is no
    refused line, or no JSON at all.

    Args:
        types: `mcp_types` (its message adapter, `JSONRPCError`, `ErrorData`).
        session_message: the SDK's `SessionMessage`, which the transport's stream carries.
        item: what the transport's stream gave.
    """
    line = _refused_line(item)
    if line is None:
        return item
    try:
        cleaned = without_lone_surrogate_escapes(line.encode("utf-8", "surrogatepass"))
        return session_message(types.jsonrpc_message_adapter.validate_json(cleaned, by_name=False))
    except ValueError as exc:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return item
        request_id = value.get("id") if isinstance(value, dict) else None
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return item
        if "result" not in value and "error" not in value:
            return item  # a request or notification of the server's: nobody waits for it
        error = types.ErrorData(
            code=_PARSE_ERROR,
            message=f"the wrapped MCP server's answer could not be read: {_first_error(exc)}",
        )
        return session_message(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


class QuietRereads(logging.Filter):
    """A filter for the SDK's stdio logger: it drops the traceback the SDK logs for a line
    its parser refused when `reread` makes that line a message (the answer, or the error that
    fails its call, which the proxy logs itself); any other record passes.

    Args:
        reread: `reread` with its `types` and `session_message` given.
    """

    def __init__(self, reread: Callable[[Any], Any]) -> None:
        super().__init__()
        self._reread = reread

    def filter(self, record: logging.LogRecord) -> bool:
        refused = record.exc_info[1] if record.exc_info else None
        return refused is None or _refused_line(refused) is None or self._reread(refused) is refused


def _refused_line(item: Any) -> str | None:
    """The line of a parse error the SDK passed on in its place, when it is one."""
    if not isinstance(item, ValueError):
        return None
    errors = getattr(item, "errors", None)
    if not callable(errors):
        return None
    try:
        first = errors()[0]
    except (TypeError, IndexError):
        return None
    line = first.get("input") if first.get("type") == "json_invalid" else None
    return line if isinstance(line, str) else None


def _first_error(exc: ValueError) -> str:
    """The first thing pydantic says is wrong, in one line."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return str(first.get("msg", exc))
        except (TypeError, IndexError):
            pass
    return " ".join(str(exc).split())[:300]

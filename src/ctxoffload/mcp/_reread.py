"""A line of the wrapped server that the SDK's parser refused, read again.

The SDK parses each line a server writes with pydantic, which refuses JSON that Python's `json`
takes: a lone surrogate escape (`"\\ud800"`, which `JSON.stringify` writes for a string cut
inside an emoji) and `NaN` among them. Over stdio the SDK then drops the line, and the request
it answered waits for its deadline, its answer lost. `reread` reads such a line with `json`:
each lone surrogate becomes U+FFFD (as the transport already replaces bytes that are not UTF-8)
and the message goes on, everything else in it as the server sent it; an answer that still
cannot be read becomes a JSON-RPC error for its request, so the call fails at once, saying why.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["reread"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate left alone once `json` has joined every pair."""

_PARSE_ERROR = -32700
"""JSON-RPC's code for a message that cannot be parsed."""


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
        value = json.loads(line)
        cleaned = json.dumps(_without_lone_surrogates(value), ensure_ascii=False)
    except (ValueError, RecursionError):
        return item
    try:
        return session_message(types.jsonrpc_message_adapter.validate_json(cleaned, by_name=False))
    except ValueError as exc:
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


def _without_lone_surrogates(value: Any) -> Any:
    """`value` with each lone surrogate of its strings (keys too) U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {
            _without_lone_surrogates(key): _without_lone_surrogates(item)
            for key, item in value.items()
        }
    return value


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

"""A context.jsonl line as the text the model saw, for searching and reading it back.

context.jsonl stores each message as its own JSON, so what the model read as
`print("FAILURE: disk")` sits in the file as `print(\\"FAILURE: disk\\")`, and a multi-line
message is one long line of `\\n` escapes. A literal search for the text the model saw
misses it, and reading it shows JSON. `message_text` decodes one line into readable lines:
a `[role] name` header, then every string the message holds (its text, tool output, tool
arguments), each split at its real newlines. It reads any message format (ctxoffload's own,
OpenAI, Anthropic, a framework's dump) without the message model, so Grep and Read stay
light. The file's format does not change: only what the tools show and match.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DECODED_LINE_BYTES", "is_jsonl", "message_text"]

# Longer lines are shown and searched as they are: decoding them would hold several copies
# of one line in memory at once.
MAX_DECODED_LINE_BYTES = 16 << 20

# Values that say what a part is rather than what it says.
_LABEL_KEYS = frozenset(
    {"role", "name", "type", "id", "tool_call_id", "tool_use_id", "timestamp", "created_at"}
)


def is_jsonl(name: str) -> bool:
    """Whether a file or reference name is a JSON Lines log (context.jsonl, events.jsonl)."""
    return name.endswith(".jsonl")


def message_text(line: str) -> list[str] | None:
    """The readable lines of one JSONL line, or None when it is not a JSON object or list.

    Args:
        line: one line of the log, without its newline.

    Returns:
        A header (`[role] name`, when the line has a role) followed by each string the
        line holds, split at newlines; None for a line that is not JSON (a torn last line)
        or is longer than `MAX_DECODED_LINE_BYTES`.
    """
    if len(line) > MAX_DECODED_LINE_BYTES or not line.lstrip().startswith(("{", "[")):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    out: list[str] = []
    if isinstance(value, dict) and isinstance(value.get("role"), str):
        name = value.get("name")
        out.append(f"[{value['role']}]" + (f" {name}" if isinstance(name, str) and name else ""))
    try:
        _strings(value, out, label=None)
    except RecursionError:  # nested about as deep as json.loads allows: not a message
        return None
    return out


def _strings(value: Any, out: list[str], label: str | None) -> None:
    if isinstance(value, str):
        if label not in _LABEL_KEYS and value:
            out.extend(value.split("\n"))
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings(item, out, key)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out, label)

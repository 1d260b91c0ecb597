"""A context row as a line of a log, and the key that recognises its message again.

Every backend writes a context log's rows through here: `dumps_row` (or `dumps_line` for any
JSON value) makes the line, and `message_key` names the message it holds by its id and a hash
of what it says, so that a message offloaded again (an agent resumed after a kill) is found
where it is (`index_keys`) rather than written twice. `jsonl` appends the lines.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic_core import to_json as _to_json

from .._depth import load_json

__all__ = [
    "TextRow",
    "dumps_line",
    "dumps_record",
    "dumps_row",
    "index_keys",
    "line_key",
    "lines_and_keys",
    "message_key",
    "row_line_and_key",
]


class TextRow:
    """A context row that is a ctxoffload `Msg`'s own JSON, serialised already: its line.

    Its layout is the model's (`id` among the fields, `timestamp` last), so
    `row_line_and_key` finds the key from the JSON and the id without parsing it back.

    Attributes:
        raw: the message's JSON (`model_dump_json`, as bytes), without a newline.
        message_id: its `id`.
    """

    __slots__ = ("message_id", "raw")

    def __init__(self, raw: bytes, message_id: str) -> None:
        self.raw = raw
        self.message_id = message_id

    def value(self) -> Any:
        """The row parsed, for what needs the JSON value itself."""
        return json.loads(self.raw)


def dumps_line(obj: Any) -> bytes:
    """Serialise one JSON value as a single line of UTF-8, ending in a newline.

    Text stays readable (not \\u-escaped) so `grep` finds it in the file; a string holding a
    lone surrogate cannot be UTF-8, and only then is the line written with ASCII escapes,
    which still round-trips exactly.
    """
    try:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def dumps_row(row: Any) -> bytes:
    """`dumps_line` for a context row, a value made only of JSON types, about 3x as fast.

    pydantic-core's serialiser writes the same compact, unescaped UTF-8 JSON as `dumps_line`
    (the one difference: a float's exponent without padding, `1e-7` for `1e-07`; both read
    back as the same number). It refuses a lone surrogate, and that row goes to `dumps_line`,
    which escapes it.
    """
    if isinstance(row, TextRow):
        return row.raw + b"\n"
    text = getattr(row, "json_text", None)
    if isinstance(text, str):  # a model's own JSON text, parsed (a `JsonRow`)
        return text.encode() + b"\n"
    return dumps_record(row)


def dumps_record(value: Any) -> bytes:
    """`dumps_line` for an event record (or any value of JSON types), about 3x as fast: the
    line of `dumps_row`, from pydantic-core's serialiser. A value it refuses (a lone
    surrogate, an object of no JSON type) goes to `dumps_line`, which escapes the one and
    refuses the other as it always did; a few it takes that `json` refuses (a set, bytes)
    are written rather than lost."""
    try:
        return _to_json(value, inf_nan_mode="constants") + b"\n"
    except ValueError:
        return dumps_line(value)


# Top-level fields that differ between two copies of one message (made at different times),
# left out of `message_key`.
_VOLATILE = frozenset({"timestamp", "created_at", "finished_at", "usage"})


def message_key(row: dict[str, Any]) -> str | None:
    """The key of idempotent offloading: a message's id and a hash of what it says.

    The same message offloaded again (an agent resumed after a crash, even one that rebuilt
    its messages with new timestamps) has the same key and is not written twice; a message
    whose id stays while its content grows (AgentScope keeps appending blocks to one reply
    `Msg`) has a new key, and each new version is written. None for a row without an id.
    """
    return row_line_and_key(row)[1]


def row_line_and_key(row: Any) -> tuple[bytes, str | None]:
    """A context row's line (`dumps_line`) and its `message_key`, serialising it once.

    The hash covers the row without its volatile fields (`timestamp`, `created_at`, ...);
    those are written after the rest, so the line is that text with them appended.

    A row may be a message's own JSON rather than its value: a `JsonRow` (parsed from its
    `json_text`) or a `TextRow` (not parsed: its last field is `timestamp`, which is found
    in the JSON).
    """
    if isinstance(row, TextRow):
        fast = _line_and_key_of_msg_json(row.raw, row.message_id)
        if fast is not None:
            return fast
        row = row.value()  # laid out otherwise (a Msg is not): the full way
    msg_id = row.get("id") if isinstance(row, dict) else None
    if not isinstance(msg_id, str) or not msg_id:
        return dumps_row(row), None
    text = getattr(row, "json_text", None)  # a JsonRow: parsed from this text
    if text is not None:
        fast = _line_and_key_of_text(text, row, msg_id)
        if fast is not None:
            return fast
    volatile = {k: v for k, v in row.items() if k in _VOLATILE}
    stable = {k: v for k, v in row.items() if k not in _VOLATILE} if volatile else row
    head = dumps_row(stable)
    key = f"{msg_id}:{hashlib.sha256(head).hexdigest()[:20]}"
    if not volatile:
        return head, key
    return head[:-2] + b"," + dumps_row(volatile)[1:], key


def lines_and_keys(rows: Sequence[Any]) -> tuple[list[bytes], list[str | None]]:
    """Each context row's line and key (`row_line_and_key`), as the two lists an append takes;
    a row without a top-level `id` has no key and is always written."""
    pairs = [row_line_and_key(row) for row in rows]
    return [line for line, _ in pairs], [key for _, key in pairs]


def _line_and_key_of_text(text: str, row: dict[str, Any], msg_id: str) -> tuple[bytes, str] | None:
    """`row_line_and_key` of a row parsed from `text`, without serialising it again.

    For a row whose one volatile field, `timestamp`, comes last (a ctxoffload `Msg`): the
    line is the text, and the hashed part is the text without that last field. None when
    the row is laid out otherwise.
    """
    keys = list(row)
    if keys[-1] != "timestamp" or any(k in _VOLATILE for k in keys[:-1]):
        return None
    line = text.encode() + b"\n"
    tail = b"," + dumps_row({"timestamp": row["timestamp"]})[1:]
    if not line.endswith(tail):
        return None
    head = line[: -len(tail)] + b"}\n"
    return line, f"{msg_id}:{hashlib.sha256(head).hexdigest()[:20]}"


_TIMESTAMP_FIELD = b',"timestamp":"'


def _line_and_key_of_msg_json(raw: bytes, msg_id: str) -> tuple[bytes, str] | None:
    """`row_line_and_key` of a `TextRow`: the line is the JSON; the hashed part is the JSON
    without its last field, `"timestamp":"..."`, as `message_key` hashes the parsed row.

    The field found is the object's last one: it is followed only by the closing brace, and
    its value holds no quote, backslash or brace, so it is neither inside a string (whose
    quotes would be escaped) nor inside a nested object (which would close first). None when
    the JSON does not end so.
    """
    at = raw.rfind(_TIMESTAMP_FIELD)
    if at < 0 or not raw.endswith(b'"}'):
        return None
    value = raw[at + len(_TIMESTAMP_FIELD) : -2]
    if b'"' in value or b"\\" in value or b"}" in value:
        return None
    line = raw + b"\n"
    # The head is the line up to that field, closed: hashed from the line, not copied.
    digest = hashlib.sha256(memoryview(line)[:at])
    digest.update(b"}\n")
    return line, f"{msg_id}:{digest.hexdigest()[:20]}"


def index_keys(lines: Iterable[bytes], first_line: int, into: dict[str, int]) -> None:
    """Record where each message of a context log is: its key (`message_key`) -> the number
    of its line, counting `lines` from `first_line`; a key seen before keeps its first line.

    The one index every backend builds from what a log holds, so that a message offloaded
    again (an agent resumed after a kill) is found where it is, not written twice.
    """
    for line_no, raw in enumerate(lines, first_line):
        key = line_key(raw)
        if key is not None:
            into.setdefault(key, line_no)


def line_key(raw: bytes) -> str | None:
    """The `message_key` of one context line; None for a line without one, or that does not
    read (not JSON, nested deeper than any workspace writes)."""
    if b'"id"' not in raw:  # the cheap test: most lines hold no id, so are not parsed
        return None
    try:
        value = load_json(raw)
    except ValueError:
        return None
    return message_key(value) if isinstance(value, dict) else None

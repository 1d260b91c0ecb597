"""How deeply content may nest, and a text form of any value that never recurses.

Python's `json`, `repr` and pydantic's serialiser all recurse: 255 levels stop pydantic,
about 1,000 stop `json.dumps`, and past that a `RecursionError` escapes. ctxoffload checks
depth itself, without recursion, so that a value nested too deeply (or one that contains
itself) is refused with a clear error at the edge, never a `RecursionError` in the middle.

The one home of every "too deep" rule: the limits, the check of a value (`too_deep`), of
JSON text (`load_json`, which a tool call's arguments, a log line, a transcript and a
configuration file are all read with), the JSON text of a value handed over from outside
at any depth (`json_text`, for counting, rendering and the wire formats), and the error
that names what was refused (`depth_error`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping

TYPE_CHECKING = False  # `typing` and pydantic cost every command's start-up: the reader uses this
if TYPE_CHECKING:
    from typing import Any

    from .exceptions import InvalidContent

__all__ = [
    "MAX_DEPTH",
    "RAW_ARGUMENTS",
    "READ_DEPTH",
    "STORE_DEPTH",
    "TooDeep",
    "copied",
    "depth_error",
    "json_text",
    "load_json",
    "text_form",
    "too_deep",
]

MAX_DEPTH = 100
"""Levels of dicts and lists inside each other that a value may have: tool-call arguments, a
tool's return value, or a field of a message or block. Deeper values are refused."""

RAW_ARGUMENTS = "_raw_arguments"
"""The key a tool call's input keeps its arguments under, as text, when they are no JSON object
(a provider's arguments that do not parse) or cannot be stored as they are (too deep)."""

STORE_DEPTH = MAX_DEPTH + 8
"""The limit for a whole message or block: its own envelope (content list, block, source,
tool-result parts) may add a few levels on top of a value that is within `MAX_DEPTH`."""


READ_DEPTH = 2 * STORE_DEPTH
"""The limit for one JSON line or file read from a workspace or given to a command (a log line,
state.json, a transcript): an event or state.json holds a whole message inside its own object,
and this leaves room to spare. A deeper value is read as a bad line, so nothing that walks what
was read (rendering a message, a report) can recurse past the interpreter's stack."""


def _model_class() -> Any:
    """pydantic's `BaseModel` when pydantic is loaded; no value can be a model when it is not
    (so the light reader, which never loads it, costs no pydantic import)."""
    pydantic = sys.modules.get("pydantic")
    return None if pydantic is None else pydantic.BaseModel


_LEAVES = frozenset({str, int, float, bool, type(None), bytes})


def _children(value: Any, model: Any = None) -> Iterable[Any] | None:
    if isinstance(value, Mapping):
        return value.values()
    if isinstance(value, (list, tuple)):
        return value
    if model is not None and isinstance(value, model):
        return [v for _, v in value]
    return None


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` nests dicts, lists, tuples or pydantic models more than `limit` deep.

    A value that contains itself is too deep. The walk is depth first and stops at the first
    path over the limit, so a cycle or a very deep value costs at most `limit` steps down.
    """
    model = _model_class()
    # One iterator per level of the path walked: the path's depth is the stack's height.
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        for item in stack[-1]:
            kind = type(item)
            if kind in _LEAVES:
                continue  # most values: told apart by identity, the cheapest test
            children = (
                item.values() if kind is dict else item if kind is list else _children(item, model)
            )
            if children is None:
                continue
            if len(stack) > limit:
                return True
            stack.append(iter(children))
            break
        else:
            stack.pop()
    return False


def depth_error(where: str, limit: int = MAX_DEPTH) -> InvalidContent:
    """The error for content nested deeper than `limit` levels (or containing itself),
    naming it by `where` (its first 80 characters)."""
    from .exceptions import InvalidContent

    shown = where if len(where) <= 80 else where[:80] + "..."
    return InvalidContent(
        f"{shown} is nested deeper than {limit} levels (or contains itself): flatten it, "
        "or pass deeply nested data as JSON text"
    )


class TooDeep(ValueError):
    """JSON nested more levels deep than `load_json` reads."""


def load_json(raw: str | bytes, limit: int = READ_DEPTH, **options: Any) -> Any:
    """`json.loads(raw, **options)`, refusing a value nested more than `limit` levels deep.

    The one rule for JSON text from outside: a log line or state.json read from a workspace,
    a transcript or a configuration given to a command (`READ_DEPTH`, deeper than any the
    workspace writes), the arguments of a tool call a model wrote (`MAX_DEPTH`). A value
    deeper than `limit` is refused as a bad value, like text that is not JSON, instead of
    reaching code that walks it (or the parser's own RecursionError escaping).

    Raises:
        TooDeep: nested too deeply (a `ValueError`).
        ValueError: not JSON.
    """
    try:
        if options or type(raw) is not str:
            value = json.loads(raw, **options)
        else:
            # A text that is one JSON value and nothing else is read by the scanner json.loads
            # runs (C), without its two passes for the whitespace around the value: a third of
            # the cost of a short log line. Any other text (whitespace around, more after, not
            # JSON) goes to json.loads itself, for its value or its error.
            try:
                value, end = _SCAN(raw, 0)
            except StopIteration:
                end = -1
            if end != len(raw):
                value = json.loads(raw)
    except RecursionError:
        raise TooDeep(f"nested more than {limit} levels deep") from None
    # Only a text with more brackets than the limit can be that deep: counting them is a
    # C-speed pass, so an ordinary line is not walked at all.
    # (No text shorter than the limit holds that many: most lines are not even counted.)
    if len(raw) <= limit:
        return value
    opening = ("[", "{") if isinstance(raw, str) else (b"[", b"{")
    if raw.count(opening[0]) + raw.count(opening[1]) > limit and too_deep(value, limit):  # type: ignore[arg-type]
        raise TooDeep(f"nested more than {limit} levels deep")
    return value


# The scanner of a decoder with json.loads's defaults (its own `_default_decoder`'s): an
# attribute each decoder sets, which typeshed does not declare.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def json_text(
    value: Any,
    encode: Callable[[Any], str] | None = None,
    *,
    exact: bool = False,
    **options: Any,
) -> str:
    """`json.dumps(value, **options)` (or `encode(value)`, a prebuilt encoder's), at any depth:
    the JSON text of a value a host, a tool or a model handed over, never a RecursionError.

    A value nested deeper than `json` recurses is written by `text_form`: the same values,
    compact and unescaped, whatever `options` asked. A value JSON has no true text for (one
    that holds itself, an int past Python's digit limit, a set) is written by `text_form` too
    (`"<cycle>"`, hex, its repr) for counting and showing; with `exact`, for a wire format
    that must send the value itself, it raises what `json` raises.

    What nests too deeply was refused at the edge where ctxoffload could (`load_json`,
    `too_deep`); a value built in Python and handed over whole (a host's `Msg` whose tool
    call input it parsed itself) is still counted, shown and sent, not raised on.

    Raises:
        TypeError: with `exact`, a value JSON has no form for.
        ValueError: with `exact`, a value that holds itself or an int too long to write.
    """
    try:
        return encode(value) if encode is not None else json.dumps(value, **options)
    except RecursionError:
        pass
    except (TypeError, ValueError):  # a set; "Circular reference detected"; too many digits
        if exact:
            raise
    return text_form(value, exact=exact)


def copied(value: Any, where: str, limit: int = MAX_DEPTH) -> Any:
    """`copy.deepcopy(value)`, for a wire format that needs the value itself (an Anthropic or
    Converse tool input): one nested past what copying can walk is refused, naming it.

    Raises:
        InvalidContent: `value` nests too deeply to copy (`depth_error(where, limit)`).
    """
    import copy

    try:
        return copy.deepcopy(value)
    except RecursionError:  # only a value handed over whole, never one ctxoffload read
        raise depth_error(where, limit) from None


class _Emit(str):
    """Text to write as is (a bracket, a comma, a key), as opposed to a value to encode."""


class _Leave:
    """Marks the end of a container, which may then appear again elsewhere (not a cycle)."""

    def __init__(self, key: int) -> None:
        self.key = key


def _leaf(value: Any, exact: bool = False) -> str:
    if isinstance(value, str) or value is None or isinstance(value, (bool, float)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # over sys.get_int_max_str_digits(); hex has no such limit
            if exact:
                raise
            return json.dumps(hex(value))
    if exact:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    try:
        return json.dumps(repr(value), ensure_ascii=False)
    except Exception as exc:
        return json.dumps(f"<{type(value).__name__} whose repr raised {type(exc).__name__}>")


def text_form(value: Any, *, exact: bool = False, limit: int | None = None) -> str:
    """`value` as compact JSON text, at any depth, for the record of what could not be stored.

    JSON values come out as `json.dumps(value, separators=(",", ":"))` would write them;
    a pydantic model as the object of its fields; anything else as the JSON string of its
    `repr` (or a note naming its type when even that fails); an int too long for `str` in
    hex; a container inside itself as `"<cycle>"`. Never recurses; never raises unless
    `exact` (JSON values only, as `json.dumps` takes them).

    With `limit`, the text stops soon after that many characters (a message showing the
    start of a value 100,000 levels deep reads a few of them, not all).

    Raises:
        TypeError: with `exact`, a value that is not a JSON value (a model included).
        ValueError: with `exact`, a container inside itself, an int too long to write.
    """
    model = _model_class() if not exact else None
    out: list[str] = []
    size = 0
    open_ids: set[int] = set()
    stack: list[Any] = [value]
    while stack:
        if limit is not None and size > limit:
            break
        item = stack.pop()
        if isinstance(item, _Emit):
            out.append(item)
            size += len(item)
            continue
        if isinstance(item, _Leave):
            open_ids.discard(item.key)
            continue
        key = id(item)
        if model is not None and isinstance(item, model):
            item = dict(item)
        if isinstance(item, Mapping):
            pairs: list[tuple[Any, Any]] = list(item.items())
            opening, closing = "{", "}"
        elif isinstance(item, (list, tuple)):
            pairs = [(None, v) for v in item]
            opening, closing = "[", "]"
        else:
            out.append(_leaf(item, exact))
            size += len(out[-1])
            continue
        if key in open_ids:
            if exact:
                raise ValueError("Circular reference detected")
            out.append('"<cycle>"')
            continue
        open_ids.add(key)
        out.append(opening)
        size += 1
        # Pushed in reverse, so the stack pops them in order.
        stack.append(_Leave(key))
        stack.append(_Emit(closing))
        for i in range(len(pairs) - 1, -1, -1):
            field, child = pairs[i]
            stack.append(child)
            if field is not None:
                name = field if isinstance(field, str) else _leaf(field, exact)
                stack.append(_Emit(json.dumps(name, ensure_ascii=False) + ":"))
            if i:
                stack.append(_Emit(","))
    return "".join(out)

"""Recorded agent transcripts, read into ctxoffload messages for `ctxoffload replay`.

Formats: OpenAI chat messages (a JSON list, `{"messages": [...]}`, or JSONL), Anthropic
messages (`{"system": ..., "messages": [...]}` or a list), mini-swe-agent `.traj.json`,
OpenHands evaluation `output.jsonl`, Claude Code session JSONL, Codex rollout JSONL and
SWE-agent `.traj`. A file may hold several runs (OpenHands: one per line).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import CliError

__all__ = ["FORMATS", "Run", "detect_format", "load_transcript"]


@dataclass
class Run:
    """One recorded conversation: a name and its messages, oldest first."""

    name: str
    messages: list[Any]  # ctxoffload Msg


class _Rows(list[Any]):
    """The rows of a JSONL transcript, with the line of the file each was read from (blank
    lines are skipped), so that an error names the line a person opens."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[int] = []

    def line_of(self, index: int) -> str:
        """How an error names the row at `index`: `line N`."""
        return f"line {self.lines[index]}"


def _read_json_or_lines(path: Path) -> tuple[Any | None, list[Any] | None]:
    """The file as one JSON value, or as JSONL rows; (None, None) when it is neither.

    Raises:
        CliError: the file, or one of its lines, nests deeper than any transcript does
            (`_depth.load_json`: nothing after it may recurse past the stack).
    """
    from .._depth import TooDeep, load_json

    try:
        # utf-8-sig: a byte-order mark at the start (some Windows editors write one) is no
        # part of the JSON.
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        return None, None
    try:
        return load_json(text), None
    except TooDeep as exc:
        raise CliError(f"transcript {str(path)!r} is {exc}: it is no transcript") from None
    except ValueError:
        pass
    rows = _Rows()
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(load_json(line))
            rows.lines.append(number)
        except TooDeep as exc:
            raise CliError(
                f"transcript {str(path)!r}: line {number} is {exc}: it is no transcript"
            ) from None
        except ValueError:
            if number == len(lines) and not text.endswith("\n") and rows:
                # The last line of a session still being written: read what was complete.
                print(
                    f"ctxoffload replay: transcript {str(path)!r}: its last line is torn "
                    f"(no newline, not JSON); replaying the {len(rows):,} lines before it",
                    file=sys.stderr,
                )
                break
            return None, None
    return None, rows or None


def detect_format(value: Any | None, rows: list[Any] | None) -> str | None:
    """The name of the format of a parsed transcript, or None."""
    if isinstance(value, dict):
        if "trajectory_format" in value:
            # The transcript names its format: one replay does not know is not guessed from
            # the keys (a null, a number, another agent's format).
            return "mini-swe-agent" if _mini_swe_agent_format(value) else None
        if "messages" in value and "info" in value and "trajectory" not in value:
            return "mini-swe-agent"
        if "history" in value and "trajectory" in value:
            return "swe-agent"
        if isinstance(value.get("messages"), list):
            return _chat_format(value["messages"])
        if "history" in value and "instance_id" in value:
            return "openhands"
    if isinstance(value, list):
        return _chat_format(value)
    if rows:
        first = rows[0] if isinstance(rows[0], dict) else {}
        if "history" in first and "instance_id" in first:
            return "openhands"
        if any(isinstance(r, dict) and r.get("type") == "response_item" for r in rows[:50]):
            return "codex"
        if any(
            isinstance(r, dict) and r.get("type") in ("user", "assistant") and "message" in r
            for r in rows[:50]
        ):
            return "claude-code"
        return _chat_format(rows)
    return None


def _mini_swe_agent_format(value: dict[str, Any]) -> bool:
    named = value.get("trajectory_format")
    return isinstance(named, str) and named.startswith("mini-swe-agent")


def _named_format(value: Any) -> str:
    """` (its trajectory_format is null)`, for a transcript that names a format replay does
    not know; empty for one that names none."""
    if not isinstance(value, dict) or "trajectory_format" not in value:
        return ""
    named = json.dumps(value["trajectory_format"], ensure_ascii=False, default=str)
    return f" (its trajectory_format is {named if len(named) <= 40 else named[:39] + '…'})"


def _chat_format(messages: list[Any]) -> str | None:
    if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        return None
    for m in messages:
        if m.get("role") == "tool" or "tool_calls" in m:
            return "openai"
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return "anthropic"
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("image_url", "input_audio") for b in content
        ):
            return "openai"
    return "openai"


def _records(value: Any, rows: list[Any] | None) -> list[Any]:
    """The records of a JSONL transcript: its rows, or its one record when the file has a
    single line (which reads as one JSON value)."""
    if rows is not None:
        return rows
    return [value] if isinstance(value, dict) else []


def _listed(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of messages, got {type(value).__name__}")
    return value


# -- one loader per format ----------------------------------------------------------------------


def _openai(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    from ..formats import from_openai

    messages = value.get("messages") if isinstance(value, dict) else value
    return [Run(name, from_openai(_listed(messages if messages is not None else rows)))]


def _anthropic(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    from ..formats import from_anthropic
    from ..messages import Msg

    system = value.get("system") if isinstance(value, dict) else None
    messages = value.get("messages") if isinstance(value, dict) else value
    out = from_anthropic(_listed(messages if messages is not None else rows))
    if isinstance(system, str) and system:
        out.insert(0, Msg(role="system", content=system))
    return [Run(name, out)]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return "" if content is None else str(content)


def _mini_swe_agent(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    from ..messages import Msg

    # No tool calls in this format: each command's output comes back as a user message, and
    # stays one here, as the agent saw it.
    return [
        Run(
            name,
            [Msg(role=m["role"], content=_text_of(m.get("content"))) for m in value["messages"]],
        )
    ]


def _swe_agent(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    from ..formats import from_openai

    def listed(field: Any) -> list[Any]:
        if isinstance(field, str):  # some .traj files store these lists as Python reprs
            parsed = _python_literal(field)
            return parsed if isinstance(parsed, list) else []
        return field if isinstance(field, list) else []

    messages: list[dict[str, Any]] = []
    for m in value["history"]:
        role = m.get("role")
        content = _text_of(m.get("content"))
        if role == "tool":
            ids = listed(m.get("tool_call_ids"))
            messages.append(
                {"role": "tool", "tool_call_id": ids[0] if ids else "", "content": content}
            )
        elif role == "assistant" and m.get("tool_calls"):
            messages.append(
                {"role": "assistant", "content": content, "tool_calls": listed(m["tool_calls"])}
            )
        elif role in ("system", "user", "assistant"):
            messages.append({"role": role, "content": content})
    return [Run(name, from_openai(messages))]


# A Python repr of a list of tool calls or ids is a few kilobytes; past this, one is no such
# list, and Python's parser would spend memory (and stack) on it for nothing.
_MAX_LITERAL = 1 << 20


def _python_literal(text: str) -> Any:
    """The value a Python literal spells (`"['call_1']"`), or None when it is none.

    JSON first (no parser of Python's at all); then `ast.literal_eval` on a text of at most
    `_MAX_LITERAL` characters, whose parser's own limits (MemoryError for `-` repeated
    100,000 times, RecursionError for `1+1+...`) make it None too.
    """
    from .._depth import load_json

    try:
        return load_json(text)
    except ValueError:
        pass
    if len(text) > _MAX_LITERAL:
        return None
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _openhands(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    from ..formats import from_openai

    tasks = rows if rows is not None else [value]
    runs = []
    labels: set[str] = set()
    for index, task in enumerate(tasks, start=1):
        messages: list[dict[str, Any]] = []
        responses: set[str] = set()
        for event in task.get("history", []):
            action, observation = event.get("action"), event.get("observation")
            args = event.get("args") or {}
            metadata = event.get("tool_call_metadata") or None
            if action == "system":
                messages.append(
                    {"role": "system", "content": args.get("content") or event.get("message", "")}
                )
            elif action == "message" and not metadata:
                role = "user" if event.get("source") == "user" else "assistant"
                messages.append(
                    {"role": role, "content": args.get("content") or event.get("message", "")}
                )
            elif action is not None and metadata:
                response = metadata.get("model_response") or {}
                if response.get("id") in responses:
                    continue  # one model response, several tool calls
                responses.add(str(response.get("id")))
                message = (response.get("choices") or [{}])[0].get("message") or {}
                calls = [
                    {"id": c["id"], "type": "function", "function": c["function"]}
                    for c in message.get("tool_calls") or []
                ]
                entry: dict[str, Any] = {
                    "role": "assistant",
                    "content": message.get("content") or "",
                }
                if calls:
                    entry["tool_calls"] = calls
                messages.append(entry)
            elif observation is not None and metadata:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": metadata.get("tool_call_id", ""),
                        "name": metadata.get("function_name", ""),
                        "content": event.get("content", ""),
                    }
                )
        label = str(task.get("instance_id") or index)
        if label in labels:  # two runs of one task: each needs a name of its own
            label = next(f"{label}-{n}" for n in itertools.count(2) if f"{label}-{n}" not in labels)
        labels.add(label)
        runs.append(Run(f"{name}-{label}" if len(tasks) > 1 else name, from_openai(messages)))
    return runs


def _claude_code(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    from ..formats.claude_code import from_claude_code

    return [Run(name, from_claude_code(_records(value, rows)))]


def _codex(value: Any, rows: list[Any] | None, name: str) -> list[Run]:
    """A Codex rollout: its `response_item` rows are Responses-API input items, read by the
    one reader of that format (`formats.responses`). Items ctxoffload keeps opaque (reasoning,
    whose encrypted content only its provider reads) carry nothing to replay and are left out;
    a `developer` message (Codex's instructions and environment, between the turns) is
    replayed as the user text it is sent as; parallel calls are one assistant message. Each
    message keeps its row's time."""
    from .._times import recorded_at
    from ..formats.responses import ITEM_KEY, from_responses
    from ..messages import Msg

    records = _records(value, rows)
    at = [
        index
        for index, row in enumerate(records)
        if isinstance(row, dict)
        and row.get("type") == "response_item"
        and isinstance(row.get("payload"), dict)
    ]
    kept = [records[index] for index in at]
    where_of = (lambda i: records.line_of(at[i])) if isinstance(records, _Rows) else None
    items = from_responses([row["payload"] for row in kept], where_of=where_of)
    msgs: list[Msg] = []
    for row, msg in zip(kept, items, strict=True):
        if ITEM_KEY in (msg.metadata or {}):
            continue
        when = recorded_at(row.get("timestamp"))
        if when is not None:
            msg = msg.model_copy(update={"timestamp": when})
        if msg.role == "system":
            msg = Msg(role="user", content=msg.text, timestamp=msg.timestamp)
        before = msgs[-1] if msgs else None
        if (
            msg.tool_calls
            and before is not None
            and before.role == "assistant"
            and before.tool_calls
            and not before.text
        ):
            msgs[-1] = Msg(role="assistant", content=[*before.blocks, *msg.blocks])
            continue
        msgs.append(msg)
    return [Run(name, msgs)]


FORMATS: dict[str, Callable[[Any, list[Any] | None, str], list[Run]]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "mini-swe-agent": _mini_swe_agent,
    "swe-agent": _swe_agent,
    "openhands": _openhands,
    "claude-code": _claude_code,
    "codex": _codex,
}


def load_transcript(path: Path, fmt: str | None = None) -> tuple[str, list[Run]]:
    """Read a transcript file into runs of messages.

    Args:
        path: the file.
        fmt: one of `FORMATS`, or None to detect it.

    Returns:
        The format used and the runs.

    Raises:
        CliError: the file is missing, not JSON / JSONL, of no known format, or not valid
            in the format given.
    """
    from ..exceptions import CtxOffloadError

    if not path.is_file():
        raise CliError(f"transcript {str(path)!r} is not a file")
    value, rows = _read_json_or_lines(path)
    if value is None and rows is None:
        raise CliError(f"transcript {str(path)!r} is neither JSON nor JSONL")
    detected = fmt or detect_format(value, rows)
    if detected is None:
        raise CliError(
            f"transcript {str(path)!r} is in no format replay knows{_named_format(value)}: "
            f"pass --format ({', '.join(FORMATS)})"
        )
    name = path.name.split(".")[0]
    try:
        runs = FORMATS[detected](value, rows, name)
    except CtxOffloadError as exc:  # says what and where in one line
        raise CliError(f"transcript {str(path)!r} is not valid {detected}: {exc}") from exc
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise CliError(
            f"transcript {str(path)!r} is not valid {detected} ({_one_line(exc)})"
        ) from exc
    runs = [r for r in runs if r.messages]
    if not runs:
        raise CliError(f"transcript {str(path)!r} holds no messages ({detected})")
    return detected, runs


def _one_line(exc: Exception) -> str:
    """An error a format's reader did not word, in one line: pydantic's first complaint
    (the field, what it holds, what belongs there), without its documentation URL."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "the value"
        held = repr(first.get("input"))
        held = held if len(held) <= 40 else held[:37] + "..."
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"{field} holds {held}: {first['msg'].lower()}{more}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

"""The model calls of the corpus transcripts (../shared/corpus) that carry the provider's
reported usage, each with the messages the transcript shows were sent.

Claude Code session JSONL: every assistant response (the records that share one
`message.id`) is one call; its context is the chain of records its first record descends
from (`parentUuid`), read with `load_transcript` as a transcript of its own, so a subagent's
calls (its sidechain) count as calls of their own conversation. The request's input is
`input_tokens + cache_read_input_tokens + cache_creation_input_tokens` (the uncached part is
only `input_tokens`).

Codex rollout JSONL: every `event_msg` of type `token_count` closes one call; its
`last_token_usage.input_tokens` (cached tokens included) is the request's input, and its
context is the rollout's `response_item` rows before the items that call answered with.

What the host sends beside the messages (Claude Code's system prompt and tool schemas,
Codex's instructions and tools) is in no transcript: `Thread.host_tokens` estimates it as
the first call's reported input minus a count of its messages. Used by
`bench/bench_calibration.py` and `tests/test_token_families.py`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxoffload.cli._transcripts import load_transcript
from ctxoffload.messages import Msg
from helpers import CORPUS

__all__ = ["CORPUS", "Call", "Thread", "threads"]

# Codex answers a call with these items; anything else (a tool's output, a user or
# developer message) is input to the next one.
_CODEX_OUTPUTS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call"})


@dataclass(frozen=True)
class Call:
    """One model call: the messages it was sent (as the transcript shows them) and the input
    tokens the provider reported for the whole request."""

    messages: list[Msg]
    reported: int


@dataclass
class Thread:
    """The calls of one conversation (a Claude Code agent or subagent, a Codex rollout),
    in order, and the model that answered them."""

    name: str
    model: str
    calls: list[Call] = field(default_factory=list)


def threads(corpus: Path = CORPUS) -> Iterator[Thread]:
    """Every conversation of the corpus's Claude Code and Codex transcripts with at least one
    call that reported usage, Claude Code's first."""
    for path in sorted(corpus.glob("claudecode-*.jsonl")):
        yield from _claude_code(path)
    for path in sorted(corpus.glob("codex-*.jsonl")):
        thread = _codex(path)
        if thread.calls:
            yield thread


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [row for row in rows if isinstance(row, dict)]


def _read(rows: list[dict[str, Any]], fmt: str) -> list[Msg]:
    """`rows` read as a transcript of format `fmt` by `load_transcript` (the reader
    `ctxoffload replay` uses); [] when they hold no message yet."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "calls.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        try:
            _, runs = load_transcript(path, fmt)
        except Exception as exc:  # "holds no messages": a call before any message
            if "holds no messages" in str(exc):
                return []
            raise
    return list(runs[0].messages)


def _claude_code(path: Path) -> Iterator[Thread]:
    rows = _rows(path)
    by_uuid = {row["uuid"]: row for row in rows if isinstance(row.get("uuid"), str)}
    by_root: dict[str, Thread] = {}
    seen: set[str] = set()
    for row in rows:
        message = row.get("message")
        if row.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if message.get("id") in seen or not isinstance(usage, dict):
            continue
        seen.add(message["id"])
        chain: list[dict[str, Any]] = []
        parent = by_uuid.get(row.get("parentUuid") or "")
        while parent is not None:
            # A subagent's records are marked as a sidechain, which the reader leaves out
            # (they are not the main agent's); here they are the subagent's own context.
            chain.append({**parent, "isSidechain": False})
            parent = by_uuid.get(parent.get("parentUuid") or "")
        chain.reverse()
        if not chain:
            continue
        reported = sum(
            usage.get(key) or 0
            for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        root = chain[0]["uuid"]
        name = f"{path.stem}:{'sidechain' if row.get('isSidechain') else 'main'}:{root[:8]}"
        thread = by_root.setdefault(root, Thread(name, str(message.get("model"))))
        thread.calls.append(Call(_read(chain, "claude-code"), reported))
    yield from by_root.values()


def _codex(path: Path) -> Thread:
    rows = _rows(path)
    model = "gpt-5-codex"
    for row in rows:
        payload = row.get("payload") or {}
        if row.get("type") == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
            break
    thread = Thread(path.stem, model)
    answered = 0  # rows up to here were answered by a call already counted
    for at, row in enumerate(rows):
        payload = row.get("payload") or {}
        if row.get("type") != "event_msg" or payload.get("type") != "token_count":
            continue
        info = payload.get("info") or {}
        usage = info.get("last_token_usage") or {}
        if not isinstance(usage.get("input_tokens"), int):
            continue
        items = [i for i in range(answered, at) if rows[i].get("type") == "response_item"]
        if not items:
            continue  # a repeated report: no new item since the last call
        start = at
        for i in reversed(items):
            kind = rows[i]["payload"].get("type")
            is_output = kind in _CODEX_OUTPUTS or (
                kind == "message" and rows[i]["payload"].get("role") == "assistant"
            )
            if not is_output:
                break
            start = i
        answered = at
        context = [r for r in rows[:start] if r.get("type") == "response_item"]
        messages = _read(context, "codex")
        if messages:
            thread.calls.append(Call(messages, usage["input_tokens"]))
    return thread

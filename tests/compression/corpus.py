"""Loaders for the real agent transcripts in ../shared/corpus: each file becomes one or more
conversations of ctxoffload `Msg`s, with tool calls paired to their results by id.

The formats (see the corpus's SOURCES.md): mini-swe-agent `.traj.json`, OpenHands
`output.jsonl` (one task per line), Claude Code session JSONL, Codex rollout JSONL and
SWE-agent `.traj`. What a model never saw (sidechains, UI events, encrypted reasoning) is
left out.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxoffload import Base64Source, DataBlock, Msg, TextBlock, ToolCallBlock, ToolResultBlock

__all__ = ["conversations"]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(part) for part in value)
    if isinstance(value, dict):
        return str(value.get("text") or value.get("content") or "")
    return "" if value is None else str(value)


def _mini_swe_agent(path: Path) -> Iterator[list[Msg]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    yield [Msg(role=m["role"], content=_text(m["content"])) for m in data["messages"]]


def _openhands(path: Path) -> Iterator[list[Msg]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        task = json.loads(line)
        msgs: list[Msg] = []
        for event in task["history"]:
            meta = event.get("tool_call_metadata") or {}
            if event.get("action") == "system":
                msgs.append(Msg(role="system", content=event["args"]["content"]))
            elif event.get("action") == "message":
                role = "user" if event["source"] == "user" else "assistant"
                msgs.append(Msg(role=role, content=event["args"].get("content") or ""))
            elif "action" in event and meta.get("tool_call_id"):
                args = {k: v for k, v in event.get("args", {}).items() if k != "thought"}
                call = ToolCallBlock(
                    id=meta["tool_call_id"], name=meta["function_name"], input=args
                )
                thought = event.get("args", {}).get("thought") or ""
                content: list[Any] = [TextBlock(text=thought)] if thought else []
                msgs.append(Msg(role="assistant", content=[*content, call]))
            elif "observation" in event and meta.get("tool_call_id"):
                result = ToolResultBlock(
                    id=meta["tool_call_id"], name=meta["function_name"], output=event["content"]
                )
                msgs.append(Msg(role="tool", content=[result]))
        yield msgs


def _claude_block(block: dict[str, Any]) -> TextBlock | DataBlock:
    if block.get("type") == "image":
        source = block["source"]
        return DataBlock(source=Base64Source(media_type=source["media_type"], data=source["data"]))
    return TextBlock(text=_text(block))


def _claude_code(path: Path) -> Iterator[list[Msg]]:
    msgs: list[Msg] = []
    last_assistant_id: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") not in ("user", "assistant") or record.get("isSidechain"):
            continue
        message = record["message"]
        content = message["content"]
        if record["type"] == "assistant":
            blocks: list[Any] = []
            for block in content if isinstance(content, list) else [content]:
                if isinstance(block, str):
                    blocks.append(TextBlock(text=block))
                elif block["type"] == "text":
                    blocks.append(TextBlock(text=block["text"]))
                elif block["type"] == "tool_use":
                    blocks.append(
                        ToolCallBlock(id=block["id"], name=block["name"], input=block["input"])
                    )
            if not blocks:
                continue
            # One API response is split over several lines sharing message.id.
            if msgs and last_assistant_id == message.get("id") and msgs[-1].role == "assistant":
                msgs[-1] = Msg(role="assistant", content=[*msgs[-1].blocks, *blocks])
            else:
                msgs.append(Msg(role="assistant", content=blocks))
            last_assistant_id = message.get("id")
            continue
        last_assistant_id = None
        if isinstance(content, str):
            msgs.append(Msg(role="user", content=content))
            continue
        results = []
        texts = []
        for block in content:
            if block.get("type") == "tool_result":
                raw = block.get("content")
                output: Any = (
                    [_claude_block(b) for b in raw] if isinstance(raw, list) else _text(raw)
                )
                results.append(
                    ToolResultBlock(
                        id=block["tool_use_id"],
                        name="",
                        output=output,
                        is_error=bool(block.get("is_error")),
                    )
                )
            elif block.get("type") == "text":
                texts.append(block["text"])
        if results:
            msgs.append(Msg(role="tool", content=results))
        if texts:
            msgs.append(Msg(role="user", content="\n".join(texts)))
    yield _name_results(msgs)


def _codex(path: Path) -> Iterator[list[Msg]]:
    msgs: list[Msg] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") != "response_item":
            continue
        payload = record["payload"]
        kind = payload.get("type")
        if kind == "message":
            role = "assistant" if payload["role"] == "assistant" else "user"
            text = "\n".join(_text(part) for part in payload.get("content", []))
            msgs.append(Msg(role=role, content=text))
        elif kind == "function_call":
            try:
                arguments = json.loads(payload["arguments"])
            except ValueError:
                arguments = {"raw": payload["arguments"]}
            call = ToolCallBlock(id=payload["call_id"], name=payload["name"], input=arguments)
            if msgs and msgs[-1].role == "assistant" and msgs[-1].tool_calls:
                # Parallel calls: one model response, several function_call items.
                msgs[-1] = Msg(role="assistant", content=[*msgs[-1].blocks, call])
            else:
                msgs.append(Msg(role="assistant", content=[call]))
        elif kind == "function_call_output":
            output = payload["output"]
            with contextlib.suppress(ValueError, TypeError, KeyError):
                output = json.loads(output)["output"]
            msgs.append(
                Msg(
                    role="tool",
                    content=[ToolResultBlock(id=payload["call_id"], name="", output=_text(output))],
                )
            )
    yield _name_results(msgs)


def _swe_agent(path: Path) -> Iterator[list[Msg]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    msgs: list[Msg] = []
    for entry in data["history"]:
        role = entry["role"]
        text = _text(entry.get("content"))
        if role == "assistant" and entry.get("tool_calls"):
            calls = []
            for call in entry["tool_calls"]:
                try:
                    arguments = json.loads(call["function"]["arguments"])
                except ValueError:
                    arguments = {"raw": call["function"]["arguments"]}
                calls.append(
                    ToolCallBlock(id=call["id"], name=call["function"]["name"], input=arguments)
                )
            head: list[Any] = [TextBlock(text=text)] if text.strip() else []
            msgs.append(Msg(role="assistant", content=[*head, *calls]))
        elif role == "tool":
            ids = entry.get("tool_call_ids") or []
            results = [ToolResultBlock(id=i, name="", output=text) for i in ids]
            msgs.append(
                Msg(role="tool", content=results) if results else Msg(role="user", content=text)
            )
        else:
            msgs.append(Msg(role=role, content=text))
    yield _name_results(msgs)


def _name_results(msgs: list[Msg]) -> list[Msg]:
    """Give each tool result the name of the call it answers (the formats leave it out)."""
    names: dict[str, str] = {}
    out = []
    for msg in msgs:
        for call in msg.tool_calls:
            names[call.id] = call.name
        if msg.tool_results and isinstance(msg.content, list):
            content = [
                b.model_copy(update={"name": names.get(b.id, "tool")})
                if isinstance(b, ToolResultBlock) and not b.name
                else b
                for b in msg.content
            ]
            msg = msg.model_copy(update={"content": content})
        out.append(msg)
    return out


def conversations(path: Path) -> list[list[Msg]]:
    """Every conversation in one corpus file, each as the messages a model saw, in order."""
    name = path.name
    if name.endswith(".traj.json"):
        loader = _mini_swe_agent
    elif name.endswith(".output.jsonl"):
        loader = _openhands
    elif name.startswith("claudecode-"):
        loader = _claude_code
    elif name.startswith("codex-"):
        loader = _codex
    elif name.endswith(".traj"):
        loader = _swe_agent
    else:
        raise ValueError(f"{name}: unknown corpus format")
    return [c for c in loader(path) if c]

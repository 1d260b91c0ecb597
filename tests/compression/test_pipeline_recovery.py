"""Every documented pipeline, replayed over real and generated transcripts: whatever left the
context is recoverable byte for byte from the references the context still holds."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from corpus import conversations

from ctxoffload import (
    Base64Source,
    Compressor,
    ContextConfig,
    ContextPipeline,
    DataBlock,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import is_context_note
from helpers import CORPUS, SUMMARY, corpus_cases

TEMPLATES = Path(__file__).with_name("pipeline_templates.json")
WINDOW = 16_000
_PATH = re.compile(r"(/[^\s'\"<>()\[\],;`|]+)")


def documented_pipelines() -> dict[str, dict[str, Any] | None]:
    templates = json.loads(TEMPLATES.read_text(encoding="utf-8"))
    found: dict[str, dict[str, Any] | None] = {"default": None}
    found.update({t["name"]: t for t in templates})
    return found


PIPELINES = documented_pipelines()


def build(name: str, ws: LocalWorkspace, session: str) -> Any:
    config = ContextConfig(context_window=WINDOW)
    template = PIPELINES[name]
    small = ScriptedModel(default=SUMMARY)
    if template is None:
        pipeline = ContextPipeline.from_config(config)
    else:
        pipeline = ContextPipeline.from_dict(template, models={"small": small}, config=config)
    compressor = Compressor(
        config, offloader=ws, session_id=session, counter=get_token_counter(exact=False)
    )
    return pipeline.bind(compressor)


async def replay(run: Any, conversation: list[Msg]) -> list[Msg]:
    """Play the conversation as an agent lives it: pre_llm before each model reply, post_tool
    on each tool result as it arrives."""
    context: list[Msg] = []
    fresh = False
    for msg in conversation:
        if msg.role == "assistant" and fresh:
            context = (await run.pre_llm(context)).messages
            fresh = False
        if msg.tool_results and not isinstance(msg.content, str):
            content = [
                await run.post_tool(b, messages=context) if isinstance(b, ToolResultBlock) else b
                for b in msg.content
            ]
            msg = msg.model_copy(update={"content": content})
        context.append(msg)
        fresh = fresh or msg.role != "assistant"
    return (await run.pre_llm(context)).messages


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for part in value for t in _texts(part)]
    if isinstance(value, dict):
        if value.get("type") == "text":
            return [value.get("text", "")]
        if value.get("type") == "tool_result":
            return _texts(value.get("output"))
        return []
    if isinstance(value, TextBlock):
        return [value.text]
    if isinstance(value, ToolResultBlock):
        return _texts(value.output)
    return []


def _files(texts: list[str], cache: dict[str, bytes]) -> list[bytes]:
    found = []
    for text in texts:
        for path in _PATH.findall(text):
            if path not in cache:
                file = Path(path)
                cache[path] = file.read_bytes() if file.is_file() else b""
            if cache[path]:
                found.append(cache[path])
    return found


def _images(value: Any) -> list[bytes]:
    blocks = value.content if isinstance(value, Msg) and not isinstance(value.content, str) else []
    out = []
    for block in blocks:
        parts = block.output if isinstance(block, ToolResultBlock) else [block]
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, DataBlock) and isinstance(part.source, Base64Source):
                out.append(base64.b64decode(part.source.data))
    return out


async def check_recoverable(
    ws: LocalWorkspace, session: str, originals: list[Msg], context: list[Msg]
) -> int:
    """Assert every original's text and images are in the context or reachable from it;
    return how many messages left the context."""
    rows = {row["id"]: row for row in await ws.read_context(session)}
    live = {m.id: m for m in context}
    context_text = [t for m in context for t in _texts(m.content)]
    if rows:
        assert any(str(ws.context_path(session)) in t for t in context_text if True), (
            "no note or summary names context.jsonl"
        )
    cache: dict[str, bytes] = {}
    for msg in originals:
        if msg.role == "system":
            continue
        assert msg.id in live or msg.id in rows, f"message {msg.id} ({msg.role}) is lost"
        version = live[msg.id].content if msg.id in live else rows[msg.id]["content"]
        kept = _texts(version)
        files = _files(kept, cache)
        for text in _texts(msg.content):
            if not text or any(text in k for k in kept):
                continue
            data = text.encode("utf-8", "surrogatepass")
            assert any(data in f for f in files), (
                f"{msg.role} text of {msg.id} ({text[:80]!r}...) is neither kept nor in a file "
                "the context names"
            )
        for raw in _images(msg):
            digest = hashlib.sha256(raw).hexdigest()
            assert any(p.name.startswith(digest) for p in (ws.workdir / "data").glob("*")) or (
                msg.id in live and raw in _images(live[msg.id])
            ), f"an image of {msg.id} is lost"
    assert not rows.keys() & {m.id for m in context if not is_context_note(m)}
    return len(rows)


def generated(turns: int = 40) -> list[Msg]:
    """A tool-heavy session: big logs, JSON, screenshots, and user follow-ups."""
    msgs = [
        Msg(role="system", content="You investigate incidents."),
        Msg(role="user", content="go"),
    ]
    for i in range(turns):
        msgs.append(
            Msg(role="assistant", content=[ToolCallBlock(id=f"t{i}", name="fetch", input={"i": i})])
        )
        lines = "\n".join(f"{i}-{j} GET /api/{j} 200 {j * 3}ms" for j in range(40 + 37 * (i % 9)))
        output: Any = lines + f"\nINCIDENT-{i}"
        if i % 5 == 0:
            png = b"\x89PNG\r\n\x1a\n" + bytes([i]) * 300
            shot = DataBlock(
                source=Base64Source(data=base64.b64encode(png).decode(), media_type="image/png")
            )
            output = [TextBlock(text=output), shot]
        msgs.append(
            Msg(role="tool", content=[ToolResultBlock(id=f"t{i}", name="fetch", output=output)])
        )
        if i % 7 == 6:
            msgs.append(Msg(role="assistant", content=f"checked {i}"))
            msgs.append(Msg(role="user", content=f"now look at incident {i + 1}"))
    msgs.append(Msg(role="assistant", content="done"))
    return msgs


@pytest.mark.parametrize("name", list(PIPELINES))
async def test_a_generated_session_loses_nothing_under_each_documented_pipeline(
    name: str, local_ws: LocalWorkspace
) -> None:
    conversation = generated()
    context = await replay(build(name, local_ws, "gen"), conversation)
    left = await check_recoverable(local_ws, "gen", conversation, context)
    if name != "token-aware-truncation":  # 200,000 tokens is never reached at this size
        assert left > 0, "nothing left the context: the replay proves nothing"


CORPUS_CASES = corpus_cases(
    [
        CORPUS / "minisweagent-pylint-dev__pylint-6528.traj.json",
        CORPUS / "claudecode-demo-todoapp-fe5e1c67.jsonl",
        CORPUS / "codex-rollout-2025-09-24T19-22-20-01997e76.jsonl",
    ],
    width=30,
)


@pytest.mark.slow
@pytest.mark.parametrize("path", CORPUS_CASES)
@pytest.mark.parametrize("name", list(PIPELINES))
async def test_a_corpus_transcript_loses_nothing_under_each_documented_pipeline(
    name: str, path: Path, local_ws: LocalWorkspace
) -> None:
    for index, conversation in enumerate(conversations(path)):
        session = f"corpus-{index}"
        context = await replay(build(name, local_ws, session), conversation)
        await check_recoverable(local_ws, session, conversation, context)

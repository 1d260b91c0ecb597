"""A real agent transcript replayed through the Compressor, message by message."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from corpus import conversations

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.agent import FileToolbox
from ctxoffload.compression import TRUNCATION_MARKER, Compressor, is_summary_message
from ctxoffload.readback import escape
from helpers import SUMMARY, corpus_cases, corpus_file, corpus_files

TRAJECTORY = "minisweagent-pylint-dev__pylint-6528.traj.json"
WINDOW = 16_000


def load() -> list[Msg]:
    data = json.loads(corpus_file(TRAJECTORY).read_text(encoding="utf-8"))
    # mini-swe-agent sends each command's output back as a user message; they stay user
    # text here, as the agent saw them.
    return [Msg(role=m["role"], content=m["content"]) for m in data["messages"]]


async def test_a_real_transcript_stays_in_the_window_and_loses_nothing(
    local_ws: LocalWorkspace,
) -> None:
    transcript = load()
    assert transcript[0].role == "system"
    comp = Compressor(
        ContextConfig(context_window=WINDOW),
        model=ScriptedModel(default=SUMMARY),
        offloader=local_ws,
        session_id="pylint-6528",
        counter=get_token_counter(exact=True),
    )
    context = [transcript[0]]
    compressions = 0
    for msg in transcript[1:]:
        context.append(msg)
        result = await comp.maybe_compress(context)
        if result.compressed:
            compressions += 1
            assert result.tokens_after < WINDOW
            assert result.tokens_after < result.tokens_before
        context = result.messages
        assert comp.count(context) < WINDOW
    assert compressions >= 3, compressions

    rows = {row["id"]: row for row in await local_ws.read_context("pylint-6528")}
    live = {m.id: m for m in context}
    assert not rows.keys() & live.keys()  # nothing is both compressed and still there
    for msg in transcript:
        if msg.id in rows:
            version = rows[msg.id]["content"]
        else:
            assert msg.id in live, f"message {msg.id} ({msg.role}) is lost"
            version = live[msg.id].content
        if version == msg.content:
            continue
        # An observation bigger than the reserve, once pinned as the latest user message, or
        # a reply too long for the reserve while it was the newest turn: cut, with its whole
        # text in the file the marker names.
        assert msg.role in ("user", "assistant") and isinstance(version, str)
        assert TRUNCATION_MARKER in version
        path = re.findall(rf"\S+/tool_result-{msg.role}-\S+?\.txt", version)[0]
        assert (await local_ws.read_reference(path)).decode() == msg.text
    summary = next(m for m in context if is_summary_message(m))
    assert f"{local_ws.context_path('pylint-6528')} (lines 1-{len(rows)})" in summary.text


# -- every corpus file, at three windows ------------------------------------------------------


@dataclass
class Replay:
    """What one replay saw."""

    model_calls: int = 0
    compressions: int = 0
    misses: list[str] = field(default_factory=list)


async def replay(conversation: list[Msg], window: int, offloader: Any, session_id: str) -> Replay:
    """Play `conversation` as an agent would live it, calling `maybe_compress` before each
    model call (before each assistant message) and truncating tool results as they arrive.

    A miss is a tool result (or, in formats without tool calls, the observation that answers
    the assistant) that arrived since the previous model call and is not in the context the
    next model call is given.
    """
    comp = Compressor(
        ContextConfig(context_window=window),
        offloader=offloader,
        session_id=session_id,
        counter=get_token_counter(exact=True),
    )
    outcome = Replay()
    context: list[Msg] = []
    fresh: list[Msg] = []
    for msg in conversation:
        if msg.role == "assistant" and any(m.role != "system" for m in fresh):
            result = await comp.maybe_compress(context)
            outcome.model_calls += 1
            outcome.compressions += result.compressed
            context = result.messages
            live = {m.id for m in context}
            outcome.misses += [
                f"call {outcome.model_calls}: {m.role} message {m.id}"
                for m in fresh
                if m.role in ("tool", "user") and m.id not in live
            ]
            fresh = []
        if msg.role == "tool":
            msg = await comp.process_message(msg)
        context.append(msg)
        fresh.append(msg)
    return outcome


CORPUS_CASES = corpus_cases(corpus_files())


@pytest.mark.parametrize("window", [8_000, 16_000, 32_000])
@pytest.mark.parametrize("path", CORPUS_CASES)
async def test_no_model_call_misses_the_results_it_asked_for(
    path: Path, window: int, local_ws: LocalWorkspace
) -> None:
    for index, conversation in enumerate(conversations(path)):
        outcome = await replay(conversation, window, local_ws, f"replay-{index}")
        assert outcome.misses == [], (outcome.compressions, outcome.misses[:5])


# -- what left the context can be found again from the paths the context names -------------

LITERALS_PER_REPLAY = 25
_PATH = re.compile(r"(/[^\s'\"<>()\[\],;`]+)")


def _texts(msg: Msg) -> list[str]:
    """Everything of `msg` the model read as text."""
    out: list[str] = []
    for block in msg.blocks:
        if isinstance(block, TextBlock):
            out.append(block.text)
        elif isinstance(block, ToolResultBlock):
            if isinstance(block.output, str):
                out.append(block.output)
            else:
                out += [p.text for p in block.output if isinstance(p, TextBlock)]
        elif isinstance(block, ToolCallBlock):
            out += [v for v in block.input.values() if isinstance(v, str)]
    return out


def _literal(texts: list[str]) -> str | None:
    """A line the model saw, preferring one that JSON must escape (quotes, backslashes)."""
    lines = [line.strip() for text in texts for line in text.split("\n")]
    lines = [line for line in lines if len(line) >= 16 and "\ufffd" not in line]
    if not lines:
        return None
    hard = [line for line in lines if '"' in line or "\\" in line]
    line = (hard or lines)[len(hard or lines) // 2]
    return line[:120]


@pytest.mark.parametrize("window", [8_000, 16_000, 32_000])
@pytest.mark.parametrize("path", CORPUS_CASES)
async def test_what_left_the_context_is_found_by_grep_from_the_paths_it_names(
    path: Path, window: int, tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    toolbox = FileToolbox([ws.workdir], max_output_chars=200_000)
    conversation = conversations(path)[0]
    comp = Compressor(
        ContextConfig(context_window=window),
        offloader=ws,
        session_id="replay",
        counter=get_token_counter(exact=True),
    )
    context: list[Msg] = []
    for msg in conversation:
        if msg.role == "assistant":
            context = (await comp.maybe_compress(context)).messages
        context.append(await comp.process_message(msg) if msg.role == "tool" else msg)
    live = {m.id: m for m in context}
    named = {
        p
        for m in context
        for text in _texts(m)
        for p in _PATH.findall(text)
        if Path(p).is_file() and Path(p).is_relative_to(ws.workdir)
    }
    left = []
    for msg in conversation:
        kept = live.get(msg.id)
        if kept is None:
            left.append(_texts(msg))
        elif TRUNCATION_MARKER in "".join(_texts(kept)):
            shown = "".join(_texts(kept))
            left.append(
                [line for text in _texts(msg) for line in text.split("\n") if line not in shown]
            )
    literals = [lit for lit in map(_literal, left) if lit is not None]
    if not literals:
        pytest.skip(f"nothing left the context at window {window}")
    step = max(1, len(literals) // LITERALS_PER_REPLAY)
    sample = literals[::step][:LITERALS_PER_REPLAY]
    missing = []
    for literal in sample:
        pattern = escape(literal)
        if not any(
            toolbox.grep(pattern, p).split(":", 1)[0] == str(Path(p).relative_to(ws.workdir))
            for p in sorted(named)
        ):
            missing.append(literal)
    assert named, "the final context names no file"
    assert missing == [], f"{len(missing)} of {len(sample)} not found: {missing[:3]}"

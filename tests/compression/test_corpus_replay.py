"""A real agent transcript replayed through the Compressor, message by message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, Summary, get_token_counter
from ctxoffload.compression import Compressor, is_summary_message
from ctxoffload.compression._truncate import TRUNCATION_MARKER

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
TRAJECTORY = CORPUS / "minisweagent-pylint-dev__pylint-6528.traj.json"
WINDOW = 16_000


def load() -> list[Msg]:
    if not TRAJECTORY.is_file():
        pytest.skip(f"corpus transcript {TRAJECTORY} is not there")
    data = json.loads(TRAJECTORY.read_text(encoding="utf-8"))
    # mini-swe-agent sends each command's output back as a user message; they stay user
    # text here, as the agent saw them.
    return [Msg(role=m["role"], content=m["content"]) for m in data["messages"]]


async def test_a_real_transcript_stays_in_the_window_and_loses_nothing(
    local_ws: LocalWorkspace,
) -> None:
    transcript = load()
    assert transcript[0].role == "system"
    reply = {name: f"{name} of the pylint session so far" for name in Summary.model_fields}
    comp = Compressor(
        ContextConfig(context_window=WINDOW),
        model=ScriptedModel(default=reply),
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
        # An observation bigger than the reserve, once pinned as the latest user message: cut,
        # with its whole text in the file the marker names.
        assert msg.role == "user" and isinstance(version, str) and TRUNCATION_MARKER in version
        path = re.findall(r"\S+/tool_result-user-\S+?\.txt", version)[0]
        assert (await local_ws.read_reference(path)).decode() == msg.text
    summary = next(m for m in context if is_summary_message(m))
    assert f"{local_ws.context_path('pylint-6528')} (lines 1-{len(rows)})" in summary.text

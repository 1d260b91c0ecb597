"""The summary request the prompt cache can serve: when the summary model is the agent's own,
the request is the previous model request (messages and tool schemas, unchanged) plus one
instruction; otherwise, or when that fails, the usual request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.agent import OpenAIChatModel
from ctxoffload.cli import main
from ctxoffload.compression import Compressor
from ctxoffload.compression._cache_request import same_model
from helpers import call, summary_reply
from openai_server import OpenAIServer

COUNTER = get_token_counter(exact=True)
SYSTEM = Msg(role="system", content="You are a coding agent.")
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
WORDS = " ".join(f"word{j}" for j in range(60))


def history(turns: int) -> list[Msg]:
    msgs = [SYSTEM, Msg(role="user", content=f"fix the build {WORDS}")]
    for i in range(turns):
        msgs += [
            call(f"c{i}", "bash", command=f"make step{i}"),
            Msg(role="user", content=f"output of step {i}: {WORDS}"),
            Msg(role="assistant", content=f"step {i} done. {WORDS}"),
        ]
    return msgs


def compressor(ws: LocalWorkspace, model: ScriptedModel, **config: Any) -> Compressor:
    return Compressor(
        ContextConfig(context_window=4000, **config),
        model=model,
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
    )


def events(ws: LocalWorkspace) -> list[dict[str, Any]]:
    path = ws.session_dir("s1") / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_the_summary_request_is_the_previous_request_plus_one_instruction(
    local_ws: LocalWorkspace,
) -> None:
    model = ScriptedModel([], default=summary_reply("cached"))
    comp = compressor(local_ws, model)
    sent = history(8)
    comp.note_request(sent, TOOLS, model)  # what the agent sent its model last
    context = [*sent, Msg(role="user", content=f"and now? {WORDS}")]
    result = await comp.maybe_compress(context, force=True)

    assert result.compressed and result.summary_source == "model"
    assert result.summary is not None and result.summary.task_overview == "cached task_overview"
    [request] = model.calls
    assert request[: len(sent)] == sent  # the cached prefix, message for message
    assert len(request) == len(sent) + 1
    instruction = request[-1]
    assert instruction.role == "user" and "summarise the conversation above" in instruction.text
    assert model.tools_seen == [TOOLS]  # the tool schemas are part of the cached prefix
    summary_event = next(e for e in events(local_ws) if e["kind"] == "summary")
    assert summary_event["request"] == "cached_prefix"


async def test_another_summary_model_gets_the_usual_request(local_ws: LocalWorkspace) -> None:
    agent_model = ScriptedModel([], model_name="agent")
    summariser = ScriptedModel([], default=summary_reply("usual"), model_name="summariser")
    comp = compressor(local_ws, summariser)
    sent = history(8)
    comp.note_request(sent, TOOLS, agent_model)
    await comp.maybe_compress([*sent, Msg(role="user", content="next")], force=True)
    [request] = summariser.calls
    assert request[0].role == "system" and request[0].text == comp.config.compression_prompt
    assert "<conversation>" in request[1].text
    summary_event = next(e for e in events(local_ws) if e["kind"] == "summary")
    assert summary_event["request"] == "new"


async def test_both_summary_requests_share_one_summary_timeout(
    local_ws: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    # The agent's own model hangs on the cache-shaped request: it spent the whole timeout,
    # so the usual request is not sent (it would have waited a second full timeout).
    async def hangs(messages: Any) -> dict[str, str]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = ScriptedModel([], default=hangs)
    comp = compressor(local_ws, model, summary_timeout=0.2)
    sent = history(8)
    comp.note_request(sent, TOOLS, model)
    result = await asyncio.wait_for(
        comp.maybe_compress([*sent, Msg(role="user", content="next")], force=True), 30
    )
    assert result.compressed and result.summary_source == "extractive"
    assert len(model.calls) == 1 and model.calls[0][: len(sent)] == sent
    assert "no answer within summary_timeout=0.2 s" in caplog.text
    assert "no time is left of summary_timeout=0.2 s" in caplog.text


async def test_a_reply_that_is_no_summary_falls_back_to_the_usual_request(
    local_ws: LocalWorkspace,
) -> None:
    # The model, sent its own context and tools, carries on with the task instead.
    model = ScriptedModel([call("x", "bash", command="ls")], default=summary_reply("usual"))
    comp = compressor(local_ws, model)
    sent = history(8)
    comp.note_request(sent, TOOLS, model)
    result = await comp.maybe_compress([*sent, Msg(role="user", content="next")], force=True)
    assert result.summary is not None and result.summary.task_overview == "usual task_overview"
    assert len(model.calls) == 2
    assert model.calls[0][: len(sent)] == sent
    assert "<conversation>" in model.calls[1][-1].text


async def test_messages_the_previous_request_lacks_get_the_usual_request(
    local_ws: LocalWorkspace,
) -> None:
    model = ScriptedModel([], default=summary_reply("usual"))
    comp = compressor(local_ws, model)
    everything = history(8)
    comp.note_request([SYSTEM, everything[-1]], TOOLS, model)  # not the history that leaves
    await comp.maybe_compress([*everything, Msg(role="user", content="next")], force=True)
    [request] = model.calls
    assert "<conversation>" in request[1].text


def test_same_model_is_one_object_or_one_client_and_name() -> None:
    a, b = ScriptedModel([]), ScriptedModel([])
    assert same_model(a, a) and not same_model(a, b)


async def test_the_agent_sends_a_cache_shaped_summary_request_and_records_cached_tokens(
    server: OpenAIServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ws = LocalWorkspace(tmp_path / "ws")
    summary = json.dumps(summary_reply("served"))
    # Two steps of the agent, then the summary (asked with the second request as prefix),
    # then the answer.
    server.add_completion(f"first thoughts {WORDS} {WORDS}", usage=(1_000, 50), cached_tokens=0)
    server.add_completion(summary, usage=(1_400, 80), cached_tokens=1_024)
    server.add_completion("the answer", usage=(600, 5), cached_tokens=512)
    async with OpenAIChatModel(
        "gpt-4o-mini", base_url=server.base_url, max_retries=0, context_window=1_000
    ) as model:
        agent = Agent(
            model=model,
            offloader=ws,
            session_id="s1",
            context_config=ContextConfig(trigger_ratio=0.5, reserve_ratio=0.1),
        )
        agent.messages = [*agent.messages, *history(3)[1:]]
        await agent.reply(f"first question {WORDS}")
        await agent.reply("second question")
    requests = server.requests
    assert len(requests) == 3
    # The summary request repeats the previous request's messages, then asks for the summary.
    previous, summary_request = requests[0]["messages"], requests[1]["messages"]
    assert summary_request[: len(previous)] == previous
    assert "summarise" in json.dumps(summary_request[-1])
    calls = [e for e in events(ws) if e["kind"] == "model_call"]
    assert [c["cached_input_tokens"] for c in calls] == [0, 512]
    assert main(["--workdir", str(ws.workdir), "stats", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["sessions"][0]
    assert row["input_tokens"] == 1_600 and row["cached_input_tokens"] == 512
    assert main(["--workdir", str(ws.workdir), "stats"]) == 0
    assert " 32% " in capsys.readouterr().out  # 512 of 1,600 input tokens


async def test_a_cached_reply_missing_a_field_is_used_and_the_record_says_so(
    local_ws: LocalWorkspace,
) -> None:
    partial = {k: v for k, v in summary_reply("cached").items() if k != "context_to_preserve"}
    model = ScriptedModel([f"Summary:\n```json\n{json.dumps(partial)}\n```"])
    comp = compressor(local_ws, model)
    sent = history(8)
    comp.note_request(sent, TOOLS, model)
    result = await comp.maybe_compress([*sent, Msg(role="user", content="and now?")], force=True)

    assert len(model.calls) == 1 and result.summary_source == "model"
    assert result.summary is not None
    assert result.summary.task_overview == "cached task_overview"
    assert "cached" not in result.summary.context_to_preserve  # the extract's
    compression = next(e for e in events(local_ws) if e["kind"] == "compression")
    assert compression["summary_origin"]["reply"] == "prose"
    assert compression["summary_origin"]["filled"] == ["context_to_preserve"]

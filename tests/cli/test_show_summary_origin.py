"""`ctxoffload show` says who wrote each summary, in one line under its compaction: an
`Agent` whose summary model answers in prose around JSON, or never answers, recorded on disk
and shown from the files alone, as text and as JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    ModelResponse,
    Msg,
    ScriptedModel,
    Usage,
)
from helpers import call, fetch_log, summary_reply

# How a model such as Claude often answers when asked for JSON: a sentence, a fenced object
# without one of the fields, a remark.
PROSE_AND_JSON = (
    "Here is the summary of the conversation so far:\n\n```json\n"
    + json.dumps({k: v for k, v in summary_reply("haiku").items() if k != "next_steps"}, indent=2)
    + "\n```\n\nLet me know if you need anything else."
)


async def never_answers(messages: Sequence[Msg]) -> str:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def record(workdir: Path, summary_model: ScriptedModel, timeout: float = 120) -> Agent:
    script = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(12)]
    agent = Agent(
        name="origin",
        system_prompt="You read logs.",
        model=ScriptedModel([*script, "Done."]),
        offloader=LocalWorkspace(workdir),
        tools=[fetch_log],
        session_id="run-1",
        context_config=ContextConfig(
            context_window=4000, tool_result_limit=300, summary_timeout=timeout
        ),
        summary_model=summary_model,
    )
    await agent.reply("what do the logs say?")
    assert agent.compressor.compressions >= 1
    return agent


def summary_lines(out: str) -> list[str]:
    return [line.split("   ", 1)[1] for line in out.splitlines() if "   summary: " in line]


async def test_show_says_which_model_wrote_each_summary_and_what_came_from_the_extract(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    model = ScriptedModel(default=PROSE_AND_JSON, model_name="claude-3-5-haiku")
    agent = await record(workdir, model)

    shown = cli("show", "run-1", "--workdir", workdir)
    assert shown.code == 0, shown.err
    lines = summary_lines(shown.out)
    assert len(lines) == agent.compressor.compressions
    assert set(lines) == {
        "summary: scripted (claude-3-5-haiku), parsed from prose, next_steps from the extract"
    }

    as_json = cli("show", "run-1", "--workdir", workdir, "--json")
    compressions = [e for e in json.loads(as_json.out)["events"] if e["kind"] == "compression"]
    assert [e["summary_origin"]["reply"] for e in compressions] == ["prose"] * len(lines)
    assert all(e["summary_origin"]["filled"] == ["next_steps"] for e in compressions)
    assert all(e["summary_origin"]["door"] is None for e in compressions)


async def test_show_says_why_a_summary_is_the_extract(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    await record(workdir, ScriptedModel(default=never_answers), timeout=0.3)

    shown = cli("show", "run-1", "--workdir", workdir)
    assert shown.code == 0, shown.err
    lines = summary_lines(shown.out)
    assert lines and all(line.startswith("summary: extractive (") for line in lines)
    # The first compaction waits out the timeout; a later one may find none of it left.
    assert lines[0] == "summary: extractive (timeout after 0.3 s)"


class Reporting(ScriptedModel):
    """A summary model whose every reply reports its tokens, as a provider's does."""

    async def generate(self, messages: Sequence[Msg], **kwargs: Any) -> ModelResponse:
        reply = await super().generate(messages, **kwargs)
        return ModelResponse(
            message=reply.message, usage=Usage(input_tokens=1200, output_tokens=90)
        )


async def test_the_tokens_each_summary_cost_are_in_the_record_and_its_line(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    agent = await record(workdir, Reporting(default=summary_reply("haiku"), model_name="m"))

    as_json = cli("show", "run-1", "--workdir", workdir, "--json")
    compressions = [e for e in json.loads(as_json.out)["events"] if e["kind"] == "compression"]
    assert len(compressions) == agent.compressor.compressions
    usage = [e["summary_origin"]["usage"] for e in compressions]
    assert usage == [{"input_tokens": 1200, "output_tokens": 90}] * len(compressions)
    lines = summary_lines(cli("show", "run-1", "--workdir", workdir).out)
    assert lines and all(line.endswith(", 1,200 tokens in, 90 out") for line in lines)

"""OffloadingInputFilter counts with the agent's model and, through the model `wrap` returns,
folds each response's reported usage back: the real OpenAI Agents SDK on its real
`OpenAIChatCompletionsModel`, named as a Claude model, against a loopback chat-completions
server whose replies report 3x o200k_base's count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agents", "openai_agents")

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    set_tracing_disabled,
)
from openai import AsyncOpenAI  # noqa: E402

from ctxoffload import ContextConfig, LocalWorkspace  # noqa: E402
from ctxoffload.integrations.openai_agents import OffloadingInputFilter  # noqa: E402
from ctxoffload.tokens import CalibratedCounter  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402
from reporting_provider import TURNS, WINDOW, ReportingProvider, question  # noqa: E402

set_tracing_disabled(True)

CONFIG = ContextConfig(context_window=WINDOW, tool_result_limit=300)


async def _converse(
    folder: Path, provider: ReportingProvider, *, wrapped: bool, stream: bool
) -> OffloadingInputFilter:
    """`TURNS` runs in sequence on one session, each given the items of the one before."""
    offload = OffloadingInputFilter(
        LocalWorkspace(folder), config=CONFIG, session_id="u", summary_model=False
    )
    items: list[Any] = []
    with OpenAIServer() as server:
        server.responder = provider
        async with AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
            model: Any = OpenAIChatCompletionsModel(model="claude-sonnet-4-5", openai_client=client)
            if wrapped:
                model = offload.wrap(model)
            agent = Agent(name="ops", instructions="You run exports.", model=model, tools=[])
            config = RunConfig(call_model_input_filter=offload)
            for turn in range(TURNS):
                given = [*items, {"role": "user", "content": question(turn)}]
                if stream:
                    result: Any = Runner.run_streamed(agent, given, run_config=config)
                    async for _ in result.stream_events():
                        pass
                else:
                    result = await Runner.run(agent, given, run_config=config)
                items = result.to_input_list()
    return offload


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
async def test_the_reported_usage_decides_the_next_compaction(tmp_path: Path, stream: bool) -> None:
    """The wrapped model hands each response's `usage.input_tokens` back (a streamed one from
    its `response.completed` event): the trigger (0.8 of the window) is compared with the
    provider's count, so no request the provider counts is over the window, though the
    Claude counter counts a 2.4th of it."""
    provider = ReportingProvider()
    offload = await _converse(tmp_path / "ws", provider, wrapped=True, stream=stream)
    assert len(provider.counted) == TURNS
    assert max(provider.counted) <= WINDOW
    assert isinstance(offload._projector.counter, CalibratedCounter)


async def test_an_unwrapped_model_reports_nothing_and_the_window_is_passed(tmp_path: Path) -> None:
    """The control, and why `wrap` is the place: the input filter never sees a response, so
    without the wrapped model the counter's own count lets the requests grow past the window
    as the provider counts them. The counter is still the agent's model's (its `model`)."""
    provider = ReportingProvider()
    offload = await _converse(tmp_path / "ws", provider, wrapped=False, stream=False)
    assert max(provider.counted) > WINDOW
    assert isinstance(offload._projector.counter, CalibratedCounter)
    assert not offload._projector._compressor.tracker.is_anchored


@pytest.mark.parametrize("usage", ["none", "zero", "partial"])
async def test_a_reply_without_a_whole_count_is_not_taken(tmp_path: Path, usage: str) -> None:
    """No usage, 0, or a tenth of the count: nothing is anchored on it."""
    provider = ReportingProvider(usage=usage)
    offload = await _converse(tmp_path / "ws", provider, wrapped=True, stream=False)
    assert len(provider.counted) == TURNS
    assert not offload._projector._compressor.tracker.is_anchored


async def test_a_request_the_filter_did_not_make_reports_nothing(tmp_path: Path) -> None:
    """Usage is taken only for the items the filter made for its latest call: a request of
    other items (a model called outside the run) is not the projection's."""
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    provider = ReportingProvider()
    await _converse(tmp_path / "ws", provider, wrapped=True, stream=False)
    usage = type("Usage", (), {"input_tokens": 9_000})()
    assert await offload.reported([{"role": "user", "content": "hi"}], usage) is False

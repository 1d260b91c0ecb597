"""The ContextOffload capability counts with the agent's model and folds the provider's reported
usage back: a real pydantic-ai `Agent` on its real `OpenAIChatModel`, named as a Claude model,
against a loopback chat-completions server whose replies report 3x o200k_base's count."""

from __future__ import annotations

from pathlib import Path

from frameworks import require_framework

require_framework("pydantic_ai", "pydantic_ai")
require_framework("openai", "pydantic_ai")

import pytest  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from ctxoffload import ContextConfig, LocalWorkspace  # noqa: E402
from ctxoffload.compression import Projector  # noqa: E402
from ctxoffload.integrations.pydantic_ai import ContextOffload  # noqa: E402
from ctxoffload.tokens import CalibratedCounter  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402
from reporting_provider import TURNS, WINDOW, ReportingProvider, question  # noqa: E402

CONFIG = ContextConfig(context_window=WINDOW, tool_result_limit=300)


async def _converse(
    folder: Path, provider: ReportingProvider, *, stream: bool, runs: int = 1
) -> ContextOffload:
    """`TURNS` turns of one conversation, each a run given the history before it, split over
    `runs` capabilities in sequence (a process that ends and one that resumes the session)."""
    history: list[ModelMessage] = []
    offload: ContextOffload | None = None
    with OpenAIServer() as server:
        server.responder = provider
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        model = OpenAIChatModel("claude-sonnet-4-5", provider=OpenAIProvider(openai_client=client))
        for turn in range(TURNS):
            if offload is None or turn % (TURNS // runs) == 0:
                offload = ContextOffload(LocalWorkspace(folder), config=CONFIG, summary_model=False)
                agent = Agent(model, capabilities=[offload])
            if stream:
                async with agent.run_stream(
                    question(turn), message_history=history, conversation_id="u"
                ) as result:
                    await result.get_output()
                history = result.all_messages()
            else:
                done = await agent.run(question(turn), message_history=history, conversation_id="u")
                history = done.all_messages()
        await client.close()
    assert offload is not None
    return offload


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_the_reported_usage_decides_the_next_compaction(tmp_path: Path, stream: bool) -> None:
    """Each response's `usage.input_tokens` goes back to the projection: the trigger (0.8 of
    the 4,000-token window) is compared with the provider's count, so no request the provider
    counts is over the window, though the Claude counter counts a 2.4th of it."""
    provider = ReportingProvider()
    offload = await _converse(tmp_path / "ws", provider, stream=stream)
    assert len(provider.counted) == TURNS
    assert max(provider.counted) <= WINDOW
    # The counter of the agent's model (named at its first request), not o200k_base's.
    (projector,) = offload._projectors.values()
    assert isinstance(projector.counter, CalibratedCounter)


async def test_without_the_fold_back_the_provider_counts_past_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the reports ignored, the counter's own count lets the requests grow
    past the window as the provider counts them (what the fold-back prevents)."""

    async def ignored(self: Projector, input_tokens: int) -> bool:
        return False

    monkeypatch.setattr(Projector, "report_usage", ignored)
    provider = ReportingProvider()
    await _converse(tmp_path / "ws", provider, stream=False)
    assert max(provider.counted) > WINDOW


@pytest.mark.parametrize("usage", ["none", "zero", "partial"])
async def test_a_reply_without_a_whole_count_is_not_taken(tmp_path: Path, usage: str) -> None:
    """No usage, 0, or a tenth of the count (a figure without the cached part): nothing is
    anchored on it, and the run goes on counting with the Claude counter, compacting as that
    counter decides (the provider's count of each request stays what the counter allows)."""
    provider = ReportingProvider(usage=usage)
    offload = await _converse(tmp_path / "ws", provider, stream=False)
    (projector,) = offload._projectors.values()
    assert not projector._compressor.tracker.is_anchored
    # The counter alone keeps the count it is given under the trigger: 0.8 * 4,000 * 2.4.
    assert max(provider.counted) <= 0.8 * WINDOW * 2.4 + 600


async def test_a_resumed_session_counts_until_its_first_report(tmp_path: Path) -> None:
    """Three processes in sequence on one session (a new capability every ten turns): each
    counts with the Claude counter until its first reply reports, then with the report."""
    provider = ReportingProvider()
    offload = await _converse(tmp_path / "ws", provider, stream=False, runs=3)
    (projector,) = offload._projectors.values()
    assert projector._compressor.tracker.is_anchored
    assert max(provider.counted) <= WINDOW

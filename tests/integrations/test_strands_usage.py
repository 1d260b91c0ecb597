"""OffloadingConversationManager counts with the agent's model (its config's `model_id`): a
real Strands `Agent` on its real `OpenAIModel` against a loopback chat-completions server whose
replies report 3x o200k_base's count. (The manager's pipeline does not fold that usage back:
Strands reads it itself, for its proactive compression, which calls the manager.)"""

from __future__ import annotations

from pathlib import Path

from frameworks import require_framework

require_framework("strands", "strands")
require_framework("openai", "strands")

from strands import Agent  # noqa: E402
from strands.models.openai import OpenAIModel  # noqa: E402

from ctxoffload import LocalWorkspace  # noqa: E402
from ctxoffload.integrations.strands import OffloadingConversationManager  # noqa: E402
from ctxoffload.tokens import CalibratedCounter, TiktokenCounter  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402
from reporting_provider import TURNS, WINDOW, ReportingProvider, question  # noqa: E402


def _converse(folder: Path, provider: ReportingProvider, model_id: str) -> Agent:
    manager = OffloadingConversationManager(
        LocalWorkspace(folder),
        session_id="u",
        strategy="summarization",
        preserve_recent_messages=4,
        proactive_compression={"compression_threshold": 0.8},
        context_window=WINDOW,
        summary_model=False,
    )
    with OpenAIServer() as server:
        server.responder = provider
        model = OpenAIModel(
            client_args={"base_url": server.base_url, "api_key": "test", "max_retries": 0},
            model_id=model_id,
            context_window_limit=WINDOW,
        )
        agent = Agent(model=model, conversation_manager=manager, callback_handler=None)
        for turn in range(TURNS):
            agent(question(turn))
    return agent


def test_the_agents_model_picks_the_counter(tmp_path: Path) -> None:
    """The manager counts with the Claude counter (the model's `model_id`) and the run stays
    under the window as the provider counts it, what left in context.jsonl."""
    provider = ReportingProvider()
    agent = _converse(tmp_path / "ws", provider, "claude-sonnet-4-5")
    manager = agent.conversation_manager
    assert isinstance(manager, OffloadingConversationManager)
    assert isinstance(manager._bridge.run.compressor.counter, CalibratedCounter)
    assert len(provider.counted) == TURNS
    assert max(provider.counted) <= WINDOW
    assert (tmp_path / "ws" / "sessions" / "u" / "context.jsonl").stat().st_size > 0


def test_an_openai_model_is_counted_exactly(tmp_path: Path) -> None:
    provider = ReportingProvider(factor=1)
    agent = _converse(tmp_path / "ws", provider, "gpt-4o")
    counter = agent.conversation_manager._bridge.run.compressor.counter
    assert isinstance(counter, TiktokenCounter) and counter.is_exact

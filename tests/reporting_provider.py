"""A provider that counts more tokens than ctxoffload does, and says so in each reply's usage:
the loopback chat-completions server's `responder` for the tests of every host's fold-back.

    with OpenAIServer() as server:
        provider = server.responder = ReportingProvider()
        ...  # a host's OpenAI-compatible model on server.base_url, named claude-sonnet-4-5
        assert max(provider.reported) <= WINDOW

Its count of a request is `factor` times o200k_base's count of the request's messages and
tools (a model family ctxoffload cannot count exactly: the Claude counter counts 1.25 times
o200k_base, so the provider counts 2.4 times what the counter does). `usage` chooses what the
reply reports: the count (`whole`), nothing (`none`), 0 (`zero`), or a tenth of the count
(`partial`, Anthropic's `input_tokens` without the cached part).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ctxoffload.formats import to_msgs
from ctxoffload.tokens import get_token_counter
from openai_server import chat_completion

__all__ = ["TURNS", "WINDOW", "ReportingProvider", "answer", "question"]

WINDOW = 12_000
"""The context window of these tests: a few dozen turns are compacted."""

TURNS = 40


def question(turn: int) -> str:
    """The user's message of a turn."""
    return f"Question {turn}: " + "and then? " * 20


def answer(turn: int) -> str:
    """The model's answer of a turn."""
    return f"Answer {turn}: " + "the batch finished and the next one started. " * 8


class ReportingProvider:
    """The server's `responder`: answers every chat-completions request with the next answer
    and the usage its mode reports.

    Args:
        factor: the provider's tokens per o200k_base token.
        usage: `whole`, `none`, `zero` or `partial` (see the module docstring).

    Attributes:
        counted: the provider's count of each request, oldest first.
        reported: what each reply reported as its input tokens (None when it reported none).
    """

    def __init__(self, *, factor: int = 3, usage: str = "whole") -> None:
        self.factor = factor
        self.usage = usage
        self.counted: list[int] = []
        self.reported: list[int | None] = []
        self._counter = get_token_counter(None)
        self._lock = threading.Lock()

    def count(self, body: dict[str, Any]) -> int:
        """The provider's count of a request body."""
        messages = to_msgs(_plain(body.get("messages") or []))
        tools = body.get("tools") or []
        ours = self._counter.count_messages(messages) + self._counter.count_tools(tools)
        return self.factor * ours

    def __call__(self, body: Any) -> dict[str, Any]:
        with self._lock:
            counted = self.count(body)
            self.counted.append(counted)
            turn = len(self.counted)
            reported: int | None = {
                "whole": counted,
                "none": None,
                "zero": 0,
                "partial": counted // 10,
            }[self.usage]
            self.reported.append(reported)
        return chat_completion(
            answer(turn), usage=None if reported is None else (reported, 5), model="claude"
        )


def _plain(messages: list[Any]) -> list[dict[str, Any]]:
    """Chat messages as `to_msgs` reads them: text parts joined (some hosts send a system
    prompt as a list of parts), JSON-only values passed as they are."""
    out: list[dict[str, Any]] = []
    for message in json.loads(json.dumps(messages)):
        content = message.get("content")
        if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" for p in content
        ):
            message = {**message, "content": "".join(p.get("text", "") for p in content)}
        out.append(message)
    return out

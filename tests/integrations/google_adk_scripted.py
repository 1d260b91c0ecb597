"""A scripted Google ADK model (ADK's own `BaseLlm`, subclassed: offline) and the runs the ADK
tests share, shared by the tests, the resumed-run script and the contract's driver."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.genai import types
from pydantic import Field

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload._disk.ids import session_id_for
from ctxoffload.integrations.google_adk import ContextOffloadPlugin, from_genai
from ctxoffload.tokens import get_token_counter

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB
CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)
"""A small window, so that a few dozen turns are compacted."""
APP = "ops"
USER = "ana"


def stored_as(session_id: str, user_id: str = USER) -> str:
    """The workspace session of ADK session `session_id` of `user_id` in the app: the one
    rule's name of `app/user/session id`, what `ctxoffload show ops/ana/<id>` finds."""
    return session_id_for(f"{APP}/{user_id}/{session_id}")


class Scripted(BaseLlm):
    """A model that answers from a script (a reply per request) and keeps a deep copy of
    every request it was sent."""

    model: str = "scripted"
    replies: list[LlmResponse] = Field(default_factory=list)
    seen: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(llm_request.model_copy(deep=True))
        yield self.replies.pop(0)


def call(name: str, args: dict[str, Any], call_id: str | None) -> LlmResponse:
    """A model turn that calls one tool (`call_id` None: the model gives none, as Gemini)."""
    part = types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
    return LlmResponse(content=types.Content(role="model", parts=[part]))


def say(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def wire(request: LlmRequest) -> list[str]:
    """What a request carried, one line a content (its JSON, as the provider is sent it)."""
    return [
        json.dumps(content.model_dump(mode="json", exclude_none=True), sort_keys=True)
        for content in request.contents
    ]


def tokens(request: LlmRequest) -> int:
    instruction = str(request.config.system_instruction or "")
    counter = get_token_counter(None)
    return counter.count_text(instruction) + counter.count_messages(from_genai(request.contents))


def dump() -> str:
    """Dump the export job's whole log."""
    return BIG


def runner_on(
    folder: Path,
    model: Scripted,
    *,
    tools: list[Callable[..., Any]] | None = None,
    sessions: BaseSessionService | None = None,
    config: ContextConfig = CONFIG,
    summary_model: Any = False,
) -> tuple[Runner, ContextOffloadPlugin]:
    """A new runner whose agent has the plugin on a new workspace object on `folder`
    (`summary_model=False` by default: the scripted model plays the agent's turns, and a
    summary request would take one; test_google_adk_summary_model.py holds the others)."""
    offload = ContextOffloadPlugin(
        LocalWorkspace(folder), config=config, summary_model=summary_model
    )
    agent = LlmAgent(
        name="ops",
        model=model,
        instruction="You keep the export job's log.",
        tools=[*(tools if tools is not None else [dump]), *offload.tools],
    )
    app = App(name=APP, root_agent=agent, plugins=[offload])
    runner = Runner(app=app, session_service=sessions or InMemorySessionService())
    return runner, offload


async def session_of(runner: Runner, session_id: str, user_id: str = USER) -> str:
    """`session_id`, created in the runner's session service if it has no such session."""
    found = await runner.session_service.get_session(
        app_name=APP, user_id=user_id, session_id=session_id
    )
    if found is None:
        await runner.session_service.create_session(
            app_name=APP, user_id=user_id, session_id=session_id
        )
    return session_id


async def ask(runner: Runner, session_id: str, text: str, user_id: str = USER) -> list[Any]:
    """One run: the user's `text`, every event the run yields."""
    events = []
    async for event in runner.run_async(
        user_id=user_id, session_id=session_id, new_message=user(text)
    ):
        events.append(event)
    return events


async def converse(runner: Runner, model: Scripted, turns: range, session_id: str) -> None:
    """Run `turns` of the long chat in `session_id`, each a run of its own."""
    await session_of(runner, session_id)
    for turn in turns:
        model.replies = [say(f"Noted, step {turn} is logged. " + "ok " * 30)]
        prompt = f"Step {turn}: record the reading {turn * 7} " + "and more detail " * 20
        await ask(runner, session_id, prompt)

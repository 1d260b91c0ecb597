"""The contract's driver for Google ADK's `Runner` with the `ContextOffloadPlugin` (ADK's own
`BaseLlm`, scripted: offline)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from contract import DoorDriver, Outcome, Turn, gated_fetch, run_held_in_its_tool, scripted

from ctxoffload import ContextConfig, SessionBusyError

CONFIG = ContextConfig(context_window=3_800, tool_result_limit=300)
"""A window the resume test's conversation passes at its 12th request (ADK's requests carry
the agent's instruction and the read-back tools' declarations), so the first request after
the resume re-applies that summary: one the resumed process made anew would name the files
it did not truncate itself in its artifact index, not its summary (not held to the bytes)."""


class _Made:
    """The plugin, the session service ADK keeps its sessions in, and the gate a live run's
    tool waits at."""

    def __init__(self, plugin: Any) -> None:
        from google.adk.sessions import InMemorySessionService

        self.plugin = plugin
        self.sessions = InMemorySessionService()
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class GoogleAdkDriver(DoorDriver):
    door = "google-adk"
    module = "google.adk"
    extra = "google_adk"
    door_object = "plugin"

    def host_id(self, conversation: str) -> str:
        from google_adk_scripted import APP, USER

        # A `/` or `%` inside a part is written `%2F` or `%25` (docs/guides/google-adk.md).
        escaped = conversation.replace("%", "%25").replace("/", "%2F")
        return f"{APP}/{USER}/{escaped}"

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.google_adk import ContextOffloadPlugin

        # The scripted model plays the conversation's turns: a summary request would take
        # one (test_google_adk_summary_model.py holds the summaries models write).
        return _Made(ContextOffloadPlugin(workspace, config=CONFIG, summary_model=False))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        try:
            return asyncio.run(self._converse(made, conversation, turns))
        except RuntimeError as exc:
            # ADK wraps what a plugin raises in a RuntimeError naming the plugin; an ADK user
            # finds the refusal as its cause.
            if isinstance(exc.__cause__, SessionBusyError):
                raise exc.__cause__ from None
            raise

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from google_adk_scripted import call, say

        replies, outputs = scripted(turns, call, say)
        fetch = gated_fetch(made, outputs)

        model, runner, session = await self._runner(made, conversation, replies, [fetch])
        given = ["fetch", *(tool.name for tool in made.plugin.tools)]
        kept = ""
        for turn in turns:
            for response in await self._ask(runner, session, turn.user):
                kept = str((response.response or {}).get("result", ""))
        return Outcome(
            session=self.session_of(session),
            sent=[_wire(request) for request in model.seen],
            kept=kept,
            tools=given,
        )

    async def _runner(
        self, made: _Made, conversation: str | None, replies: list[Any], tools: list[Any]
    ) -> tuple[Any, Any, str]:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner
        from google_adk_scripted import APP, USER, Scripted

        model = Scripted(replies=replies)
        agent = LlmAgent(name="ops", model=model, tools=[*tools, *made.plugin.tools])
        app = App(name=APP, root_agent=agent, plugins=[made.plugin])
        runner = Runner(app=app, session_service=made.sessions)
        found = None
        if conversation is not None:
            found = await made.sessions.get_session(
                app_name=APP, user_id=USER, session_id=conversation
            )
        if found is None:  # ADK names a session it creates without an id itself
            found = await made.sessions.create_session(
                app_name=APP, user_id=USER, session_id=conversation
            )
        return model, runner, found.id

    async def _ask(self, runner: Any, session: str, text: str) -> list[Any]:
        from google_adk_scripted import USER, user

        responses = []
        async for event in runner.run_async(
            user_id=USER, session_id=session, new_message=user(text)
        ):
            for part in event.content.parts if event.content is not None else []:
                if part.function_response is not None:
                    responses.append(part.function_response)
        return responses

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        """The agent's own call of Grep, in a run of the conversation."""
        from google_adk_scripted import call, say

        async def run() -> str:
            replies = [call("Grep", {"pattern": pattern}, "call_grep"), say("found")]
            _, runner, session = await self._runner(made, conversation, replies, [])
            (response,) = await self._ask(runner, session, "grep it")
            assert response.name == "Grep"
            return str((response.response or {}).get("result", ""))

        return asyncio.run(run())

    def reopen(self, made: _Made, workspace: Any) -> _Made:
        again = self.make(workspace)
        again.sessions = made.sessions  # the sessions ADK kept (its session service)
        return again


def _wire(request: Any) -> list[str]:
    """What a request carried: its instruction, then each content's JSON."""
    instruction = str(request.config.system_instruction or "")
    contents = [
        json.dumps(content.model_dump(mode="json", exclude_none=True), sort_keys=True)
        for content in request.contents
    ]
    return [instruction, *contents]


DRIVER = GoogleAdkDriver()

"""`ctxoffload eval` asks a Google ADK model (a `BaseLlm`) through the ADK door's adapter: an
`LlmRequest` of genai contents, the read-back tools as function declarations in its config,
the model's function calls read back with their ids. The same reader, asked once over HTTP as
an `OpenAIChatModel` and once as an ADK model, answers and reads alike, probe by probe.

The ADK model here is one of ADK's own base class that turns each `LlmRequest` into the
OpenAI chat body a provider would be sent and answers as the reader (the ADK venv has no
OpenAI-compatible model of ADK's: `LiteLlm` needs litellm, which it lacks). Like Gemini, it
gives a thought signature with each call it makes, which must come back with that call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("google.adk", "google_adk")

from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.genai import types  # noqa: E402
from host_eval import (  # noqa: E402
    DEMO_SESSION,
    READER,
    assert_asked_alike,
    demo_workdir,
    over_http,
    read_only_by_reading,
    summary_asked_with_tools,
)
from pydantic import Field  # noqa: E402

from ctxoffload.eval import evaluate  # noqa: E402


class ReaderLlm(BaseLlm):
    """An ADK model that answers as the deterministic reader: each request sent to it as the
    OpenAI chat body of its contents and function declarations, its tool calls given back as
    genai function calls, each signed (`sig-<id>`) as a thinking Gemini signs them.

    With `gives_ids` False it gives its calls no id, as Gemini's API does not.
    `offered` holds, per call, the tools it was offered; `made` the ids of the calls it made;
    `answered` the function responses each request carried, as (id, the signature the call
    it answers came back with)."""

    model: str = "reader"
    gives_ids: bool = True
    offered: list[list[str]] = Field(default_factory=list)
    made: list[str] = Field(default_factory=list)
    answered: list[tuple[str | None, bytes | None]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        body = self._body(llm_request)
        self.offered.append([t["function"]["name"] for t in body.get("tools") or []])
        said = READER.answer_as_reader(body)["choices"][0]["message"]
        self.made += [call["id"] for call in said.get("tool_calls") or []]
        parts = [types.Part(text=said["content"])] if said.get("content") else []
        parts += [
            types.Part(
                function_call=types.FunctionCall(
                    id=call["id"] if self.gives_ids else None,
                    name=call["function"]["name"],
                    args=json.loads(call["function"]["arguments"]),
                ),
                thought_signature=f"sig-{call['id']}".encode(),
            )
            for call in said.get("tool_calls") or []
        ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))

    def _body(self, request: LlmRequest) -> dict[str, Any]:
        """The OpenAI chat body of `request`, as a provider is sent it."""
        config = request.config
        system = config.system_instruction
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        signed: dict[str | None, bytes | None] = {}
        for content in request.contents:
            parts = content.parts or []
            text = "".join(p.text for p in parts if p.text and not p.thought)
            calls = [p for p in parts if p.function_call is not None]
            signed.update({p.function_call.id: p.thought_signature for p in calls})
            responses = [p.function_response for p in parts if p.function_response is not None]
            for response in responses:
                self.answered.append((response.id, signed.get(response.id)))
                result = response.response or {}
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": response.id,
                        "content": result.get("result", json.dumps(result)),
                    }
                )
            if responses:
                continue
            message: dict[str, Any] = {
                "role": "assistant" if content.role == "model" else "user",
                "content": text or None,
            }
            if calls:
                message["tool_calls"] = [
                    {
                        "id": p.function_call.id,
                        "type": "function",
                        "function": {
                            "name": p.function_call.name,
                            "arguments": json.dumps(p.function_call.args or {}),
                        },
                    }
                    for p in calls
                ]
            messages.append(message)
        body: dict[str, Any] = {"model": "reader", "messages": messages}
        tools = [
            {
                "type": "function",
                "function": {
                    "name": declared.name,
                    "description": declared.description,
                    "parameters": declared.parameters_json_schema,
                },
            }
            for tool in config.tools or []
            for declared in tool.function_declarations or []
        ]
        if tools:
            body["tools"] = tools
        return body


def test_an_adk_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    workdir = demo_workdir(tmp_path)
    direct = over_http(workdir)
    llm = ReaderLlm()
    through = asyncio.run(evaluate(str(workdir), DEMO_SESSION, llm))
    assert_asked_alike(direct, through, llm.offered)  # function declarations in the config
    # Each read's result went back under its call's id, the call with its signature.
    mine = [(call, given) for call, given in llm.answered if call in llm.made]
    assert mine and all(given == f"sig-{call}".encode() for call, given in mine), mine


def test_a_call_made_without_an_id_goes_back_without_one(tmp_path: Path) -> None:
    """Gemini's API gives its calls no id: the one the adapter gives such a call (an ADK
    client id, `adk-...`) is stripped from the next request as an ADK flow strips it, and
    the call goes back with its signature."""
    llm = ReaderLlm(gives_ids=False)
    through = asyncio.run(evaluate(str(demo_workdir(tmp_path)), DEMO_SESSION, llm))
    assert read_only_by_reading(through)
    assert (None, b"sig-read_1") in llm.answered
    assert not any(str(call).startswith("adk-") for call, _ in llm.answered)


def test_a_summary_request_carrying_the_agents_tools_is_asked_without_them() -> None:
    """A summary shaped as the agent's last request (for its cache) carries the agent's
    tools: the door's adapter asks it with the summary's schema alone, as before eval."""
    llm = ReaderLlm()
    summary_asked_with_tools(llm)
    assert llm.offered == [[]]

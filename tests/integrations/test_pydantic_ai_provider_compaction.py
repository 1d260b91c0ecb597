"""The Responses API's own compaction under real pydantic-ai, offline: an `Agent` on its
`OpenAIResponsesModel` talks to the project's loopback server (`POST /v1/responses`), whose
reply carries a `compaction` output item (tests/provider_shapes.py), with `ContextOffload`.

What pydantic-ai does with the item (2.68, `models/openai/_responses_model.py` and
`messages.py`): it keeps it in its history as a `CompactionPart` of the `ModelResponse`
(`provider_name` "openai", the encrypted content in `provider_details`) and itself sends
the next request from that part on. ctxoffload's converter names the part on the `Msg`
(`HOST_ITEM_KEY`), so the projection stores what the item replaces and puts the note after
the item's turn; pydantic-ai's own object goes back unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("pydantic_ai", "pydantic_ai")

from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import CompactionPart, ModelResponse  # noqa: E402
from pydantic_ai.models.openai import OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from ctxoffload import ContextConfig, LocalWorkspace  # noqa: E402
from ctxoffload.integrations.pydantic_ai import ContextOffload  # noqa: E402
from openai_server import OpenAIServer, function_call_item  # noqa: E402
from openai_server import message_item as message  # noqa: E402
from provider_shapes import OPENAI_COMPACTION_ITEM  # noqa: E402

CONFIG = ContextConfig(context_window=100_000)


def function_call(batch: int) -> dict[str, Any]:
    """A `function_call` output item calling `status` for `batch`."""
    return function_call_item("status", {"batch": batch}, f"call_{batch}")


def agent_on(server: OpenAIServer, folder: Path, client: AsyncOpenAI) -> Agent[None, str]:
    provider = OpenAIProvider(openai_client=client)
    offload = ContextOffload(LocalWorkspace(folder), config=CONFIG, summary_model=False)
    agent = Agent(
        OpenAIResponsesModel("gpt-5", provider=provider),
        capabilities=[offload],
        instructions="You run exports.",
    )

    @agent.tool_plain
    def status(batch: int) -> str:
        """The status line of one export batch."""
        if batch == 1:
            return "batch 1: failed, ERR-4711 in /var/log/export/batch-1.log"
        return f"batch {batch}: ok"

    return agent


def provider_events(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "sessions" / "c1" / "events.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    return [row for row in rows if row["kind"] == "provider_compaction"]


async def test_pydantic_ai_keeps_the_part_and_ctxoffload_keeps_what_it_replaces(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ws"
    with OpenAIServer() as server:
        # One client, closed at the end: a provider given only a URL leaves its sockets open.
        client = AsyncOpenAI(base_url=server.base_url, api_key="k")
        server.add_response([function_call(1)])
        server.add_response([OPENAI_COMPACTION_ITEM, function_call(2)])
        server.add_response([message("Batch 1 failed on ERR-4711.")])
        server.add_response([message("Yes, batch 1.")])
        agent = agent_on(server, folder, client)
        result = await agent.run("check batches 1 and 2", conversation_id="c1")
        assert result.output == "Batch 1 failed on ERR-4711."
        # pydantic-ai keeps the provider's part in its history.
        history = result.all_messages()
        (holder,) = [
            m
            for m in history
            if isinstance(m, ModelResponse) and m.parts[0].part_kind == "compaction"
        ]
        part = holder.parts[0]
        assert isinstance(part, CompactionPart) and part.id == OPENAI_COMPACTION_ITEM["id"]
        # A run resumed from that history (a new agent and capability) records nothing twice.
        log = (folder / "sessions" / "c1" / "context.jsonl").read_bytes()
        again = await agent_on(server, folder, client).run(
            "was it batch 1?", message_history=history, conversation_id="c1"
        )
        await client.close()
        assert again.output == "Yes, batch 1."
    sent = server.requests[2]["input"]
    # pydantic-ai sends from the item on; the note follows the item's turn.
    assert sent[0] == {k: v for k, v in OPENAI_COMPACTION_ITEM.items() if k != "created_by"}
    assert [item.get("type") for item in sent[1:3]] == ["function_call", "function_call_output"]
    (note,) = [i for i in sent if i.get("role") == "user"]
    assert "(lines 1-3)" in note["content"] and "ERR-4711" in note["content"]
    rows = [json.loads(line) for line in log.decode().splitlines()]
    assert [row["role"] for row in rows] == ["user", "assistant", "tool"]
    assert "ERR-4711" in rows[2]["content"][0]["output"]
    (event,) = provider_events(folder)
    assert event["item_id"] == OPENAI_COMPACTION_ITEM["id"] and event["lines"] == [1, 3]
    assert (folder / "sessions" / "c1" / "context.jsonl").read_bytes() == log
    resumed = server.requests[3]["input"]
    assert resumed[: len(sent)] == sent

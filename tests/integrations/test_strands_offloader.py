"""Strands Agents' own `ContextOffloader` storing into ctxoffload workspaces, with the real package.

A Strands `Agent` with a scripted model (no network) calls a tool whose result is far over the
plugin's limit; the plugin stores it through `WorkspaceStorage`; the model reads the preview,
calls Strands' `retrieve_offloaded_content` with the reference it was given, and answers with
the line it found. Run by `.ci/run` in an environment with `ctxoffload[strands]`.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("strands", "strands")

import pytest  # noqa: E402
from strands import Agent, tool  # noqa: E402
from strands.vended_plugins.context_offloader import ContextOffloader  # noqa: E402
from strands_scripted import ScriptedModelBase  # noqa: E402

from ctxoffload import LocalWorkspace, ObjectStoreWorkspace  # noqa: E402
from ctxoffload.integrations.strands import WorkspaceStorage  # noqa: E402
from s3_server import shared_server  # noqa: E402

NEEDLE = "02817 ERROR export-worker-3 order_id=ORD-58213 failed: disk quota exceeded"
PNG = b"\x89PNG\r\n\x1a\n" + zlib.compress(b"chart" * 40)


def log_text() -> str:
    lines = [f"{i:05d} INFO export-worker-{i % 8} exported ORD-{10000 + i}" for i in range(1, 6001)]
    lines[2816] = NEEDLE
    return "\n".join(lines)


@tool
def fetch_logs(job: str) -> str:
    """Fetch the export job's log."""
    return log_text()


@tool
def capture_chart(name: str) -> dict[str, Any]:
    """Render a chart with its data."""
    return {
        "status": "success",
        "content": [
            {"text": log_text()},
            {"json": {"series": list(range(2000))}},
            {"image": {"format": "png", "source": {"bytes": PNG}}},
        ],
    }


class ScriptedModel(ScriptedModelBase):
    """Plays a fixed plan; records every request it is sent."""

    def __init__(self, first_tool: str) -> None:
        self.first_tool = first_tool
        self.requests: list[list[dict[str, Any]]] = []

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self.requests.append(json.loads(json.dumps(messages, default=repr)))
        step = len(self.requests)
        if step == 1:
            events = _tool_call("t1", self.first_tool, {"job": "nightly", "name": "chart"})
        elif step == 2:
            preview = _last_tool_result_text(messages)
            reference = re.search(r"^\s+(\S+) \(text, ", preview, re.MULTILINE)
            if reference is None:  # nothing was offloaded: the whole result is here
                line = next(x for x in preview.splitlines() if "ERROR" in x)
                for event in _text(f"Read in full: {line.strip()}"):
                    yield event
                return
            events = _tool_call(
                "t2",
                "retrieve_offloaded_content",
                {"reference": reference.group(1), "pattern": "ORD-58213"},
            )
        else:
            found = _last_tool_result_text(messages)
            line = next(x for x in found.splitlines() if "ERROR" in x)
            events = _text(f"The failing line: {line.strip()}")
        for event in events:
            yield event


def _tool_call(tool_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_id, "name": name}}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}},
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]


def _text(text: str) -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": text}}},
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "end_turn"}},
    ]


def _last_tool_result_text(messages: Any) -> str:
    for message in reversed(messages):
        for block in message["content"]:
            if "toolResult" in block:
                return "\n".join(c.get("text", "") for c in block["toolResult"]["content"])
    raise AssertionError("no tool result in the request")


def run_agent(storage: WorkspaceStorage, first_tool: str) -> tuple[ScriptedModel, str]:
    model = ScriptedModel(first_tool)
    agent = Agent(
        model=model,
        tools=[fetch_logs, capture_chart],
        plugins=[ContextOffloader(storage=storage, max_result_tokens=2500, preview_tokens=300)],
        callback_handler=None,
    )
    answer = str(agent("Which order failed in last night's export?"))
    return model, answer


def test_a_local_workspace_holds_the_result_and_the_model_reads_it_back(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    model, answer = run_agent(WorkspaceStorage(ws, session_id="run-1"), "fetch_logs")
    assert answer.startswith("The failing line:") and NEEDLE in answer
    stored = tmp_path / "ws/sessions/run-1/tool_result-t1_0.txt"
    assert stored.read_text() == log_text()  # whole, byte for byte, at its own line numbers
    preview = _last_tool_result_text(model.requests[1])
    reference = re.search(r"^\s+(\S+tool_result-t1_0\.txt) \(text, ", preview, re.MULTILINE)
    assert reference is not None and ws.resolve_reference(reference.group(1)) == stored.resolve()
    assert NEEDLE not in preview  # the needle was in the offloaded part only
    events = (tmp_path / "ws/sessions/run-1/events.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in events]
    assert "tool_result" in kinds


def test_every_block_of_a_mixed_result_goes_to_the_bucket_with_its_type() -> None:
    s3 = shared_server()
    url = f"s3://{s3.new_bucket()}/agents"
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    model, answer = run_agent(WorkspaceStorage(ws, session_id="run-2"), "capture_chart")
    assert answer.startswith("The failing line:") and NEEDLE in answer
    preview = _last_tool_result_text(model.requests[1])
    references = re.findall(r"^\s+(s3://\S+) \(", preview, re.MULTILINE)
    image = re.search(r"\| ref: (s3://[^\s\]]+)\]", json.dumps(model.requests[1]))
    assert image is not None
    assert len(references) == 3 and image.group(1) in references
    text_ref, json_ref, image_ref = references
    assert text_ref == f"{url}/sessions/run-2/tool_result-t1_0.txt"
    import asyncio

    async def read_all() -> list[tuple[bytes, str]]:
        return [await ws.read_bytes(r) for r in references]

    (text, text_type), (data, data_type), (png, png_type) = asyncio.run(read_all())
    assert text.decode() == log_text() and text_type.startswith("text/plain")
    assert json.loads(data) == {"series": list(range(2000))} and data_type == "application/json"
    assert png == PNG and png_type == "image/png"
    assert json_ref.endswith(".json") and image_ref.endswith(".png")


def test_a_store_that_is_down_keeps_the_whole_result_in_the_context(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "sessions").write_bytes(b"not a folder")  # every write is refused
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    model = ScriptedModel("fetch_logs")
    agent = Agent(
        model=model,
        tools=[fetch_logs],
        plugins=[ContextOffloader(storage=WorkspaceStorage(ws, "run-3"), max_result_tokens=2500)],
        callback_handler=None,
    )
    answer = str(agent("Which order failed?"))
    assert answer.strip() == f"Read in full: {NEEDLE}"  # no reference: nothing was offloaded
    assert _last_tool_result_text(model.requests[1]) == log_text()  # Strands kept it all


def test_a_workspace_given_in_the_storage_s_place_says_so_when_the_plugin_is_built(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Strands keeps any storage it is given: a workspace in place of WorkspaceStorage stored
    # nothing, and said so nowhere. Strands asks for `store` as it builds the plugin.
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        ContextOffloader(storage=LocalWorkspace(tmp_path / "ws"), max_result_tokens=2500)
    (said,) = [r.getMessage() for r in caplog.records if r.name == "ctxoffload"]
    assert said.startswith("LocalWorkspace was given where a host's own store belongs")
    assert "Pass WorkspaceStorage(workspace, session_id=...)" in said

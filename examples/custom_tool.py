"""A custom tool: any typed, documented function (sync or async) becomes an agent tool.

The JSON schema the model sees comes from the type hints and the Google-style docstring.
This example runs offline with a ScriptedModel standing in for a real model.

The guide: docs/guides/agent.md ("Tools").

Run:  python examples/custom_tool.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Literal

from ctxoffload import Agent, ContextConfig, LocalWorkspace, Msg, ScriptedModel, ToolCallBlock
from ctxoffload.agent import as_tool


async def query_metrics(
    service: str, metric: Literal["latency_ms", "errors"] = "latency_ms", points: int = 5_000
) -> str:
    """Return a time series of one metric of a service.

    Args:
        service: the service name, e.g. checkout.
        metric: which metric to return.
        points: how many points (one per minute).
    """
    series = [{"minute": i, metric: (i * 37) % 1000} for i in range(points)]
    return json.dumps({"service": service, "metric": metric, "series": series})


async def main() -> None:
    print("Schema the model sees:")
    print(json.dumps(as_tool(query_metrics).schema, indent=2))

    model = ScriptedModel(
        [
            Msg(
                role="assistant",
                content=[
                    ToolCallBlock(id="call_1", name="query_metrics", input={"service": "checkout"})
                ],
            ),
            "Latency peaked at 999 ms; the full series is in the workspace file.",
        ]
    )
    # A temporary workspace, removed with everything in it at the end.
    with tempfile.TemporaryDirectory(prefix="ctxoffload-") as workdir:
        async with Agent(
            model=model,
            tools=[query_metrics],
            offloader=LocalWorkspace(workdir),
            context_config=ContextConfig(context_window=16_000, tool_result_limit=500),
        ) as agent:  # closing the agent releases its session (a lease)
            print("\nAnswer:", (await agent.reply("How did checkout latency look?")).text)
    seen = str(model.calls[1][-1].tool_results[0].output)
    notice = seen.index("<<<TRUNCATED>>>")
    print("\nWhat the model saw of the 200 KB result:")
    print(seen[:160], "...", seen[notice:], sep="\n")


if __name__ == "__main__":
    asyncio.run(main())

"""Quick start: an agent on any OpenAI-compatible endpoint, kept inside its window.

Needs the `openai` extra: from a clone  pip install -e '.[openai]'  (once the package is
published: pip install 'ctxoffload[openai]'). docs/guides/agent.md walks through it.

Environment variables:
  OPENAI_BASE_URL  the endpoint, e.g. http://127.0.0.1:8000/v1 for a local vLLM or llama.cpp
                   server (leave unset for api.openai.com)
  OPENAI_API_KEY   the key (local servers usually ignore it)
  OPENAI_MODEL     the model name (default gpt-4o-mini)

Run:  python examples/quickstart_openai.py "Find why the nightly job failed"
"""

from __future__ import annotations

import asyncio
import os
import sys

from ctxoffload import Agent, ContextConfig, LocalWorkspace
from ctxoffload.agent import OpenAIChatModel, workspace_tools


def fetch_logs(job: str) -> str:
    """Fetch the latest log of a batch job.

    Args:
        job: the job's name, e.g. nightly.
    """
    lines = [
        f"03:{i // 60:02d}:{i % 60:02d} INFO {job}: processed batch {i}" for i in range(20_000)
    ]
    lines.insert(14_321, f"03:59:01 ERROR {job}: connection to db-2 refused (max_connections=100)")
    return "\n".join(lines)


async def main(question: str) -> None:
    ws = LocalWorkspace(workdir="./agent_workspace")
    await ws.initialize()
    config = ContextConfig(trigger_ratio=0.8, reserve_ratio=0.1, tool_result_limit=3000)
    async with OpenAIChatModel(
        os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL"),
    ) as model:
        async with Agent(
            name="analyst",
            system_prompt=(
                "You investigate failures. Large tool results are saved to files in your "
                "workspace; read them with Read and search them with Grep."
            ),
            model=model,
            # Read/Grep output stays well below tool_result_limit, so reading an offloaded
            # file never gets offloaded again.
            tools=[fetch_logs, *workspace_tools(ws, max_output_chars=8_000)],
            offloader=ws,
            context_config=config,
        ) as agent:  # closing the agent releases its session (a lease) for the next run
            reply = await agent.reply(question)
        print(reply.text)
        print(f"\nSession files: {ws.session_dir(agent.session_id)}")


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Find why the nightly job failed"))

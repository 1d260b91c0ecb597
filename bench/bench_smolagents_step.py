"""What does a step cost smolagents' OffloadingStepCallbacks when the memory is long?

smolagents rebuilds every model call from the agent's whole memory, and the callbacks see that
memory at every step: they record what the step's call was sent, store a big observation and
check the trigger. Measured with a real `ToolCallingAgent` whose memory holds N messages (a
task, then steps that each call a tool and hold its observation, every 50th observation
20 KB), over a `LocalWorkspace` (fsync on), with a window of 10M tokens so that nothing is
compacted and every call walks the whole memory (the worst case for a per-call cost):

- from nothing: new callbacks, whose first step converts, counts and records every message;
- the next step: the same callbacks one step later (one step more: two messages).

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a step costs what
is new, not the memory), as for the projection of the hosts that keep their own history
(bench/bench_projection.py).

Usage: python bench/bench_smolagents_step.py [--messages N] [--runs N]  (needs smolagents:
pip install -e '.[smolagents]')
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from _history import arguments, median_times, report, tool_output
from smolagents import ToolCallingAgent
from smolagents.memory import ActionStep, TaskStep, ToolCall
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import Timing

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.smolagents import OffloadingStepCallbacks


class Idle(Model):  # type: ignore[misc]
    """A model never called (the steps are made here)."""

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content="")


def step(number: int) -> ActionStep:
    """A finished step: one tool call and its observation (two messages to the model)."""
    observation = tool_output(number, big=number % 50 == 0)
    return ActionStep(
        step_number=number,
        timing=Timing(start_time=0.0, end_time=0.0),
        model_input_messages=[],
        tool_calls=[ToolCall(name="grep", arguments={"pattern": f"p{number}"}, id=f"c{number}")],
        observations=observation,
    )


def one_run(root: Path, n: int, run: int) -> tuple[float, float]:
    offload = OffloadingStepCallbacks(
        LocalWorkspace(root / f"run-{run}"), config=ContextConfig(context_window=10_000_000)
    )
    agent = ToolCallingAgent(tools=[], model=Idle(), verbosity_level=0)
    agent.memory.steps.append(TaskStep(task="debug the build"))
    number = 1
    while 2 + 2 * number < n:  # the system prompt, the task, two messages a step
        agent.memory.steps.append(step(number))
        number += 1
    current = step(number)
    start = time.perf_counter()
    offload.on_action_step(current, agent)
    cold = time.perf_counter() - start
    agent.memory.steps.append(current)
    current = step(number + 1)
    start = time.perf_counter()
    offload.on_action_step(current, agent)
    warm = time.perf_counter() - start
    offload.close()
    return cold, warm


def main(n: int, runs: int) -> None:
    cold, warm = median_times(one_run, n, runs)
    report(
        f"memory of {n:,} messages, median of {runs} runs",
        [("from nothing", cold), ("the next step (one new step)", warm)],
        warm / cold,
    )


if __name__ == "__main__":
    args = arguments(__doc__)
    main(args.messages, args.runs)

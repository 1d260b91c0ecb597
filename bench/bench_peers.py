"""ctxoffload beside the context management a LangChain user already has, on the same replay.

Every run of the transcript corpus (`../shared/corpus`, 13 runs) is replayed through one
LangChain v1 `create_agent` per strategy: a scripted chat model answers each call with the
run's next recorded answer (its text and tool calls), and each tool answers with the output
the run recorded for that call. So every strategy gets the same history; what differs is what
each one sends the model, keeps in LangGraph's checkpoints, and keeps on disk:

- `ctxoffload`: the first example of docs/guides/langchain.md as written (read from the guide:
  a bench whose arguments differ from it stops): `ContextOffloadMiddleware` on a
  `LocalWorkspace` with `ContextConfig(context_window=W, tool_result_limit=3_000)`, summaries
  by the agent's own model, its reading tools (Read, Grep, Glob) given to the agent, and
  `state_schema=DeltaAgentState` (messages checkpointed as deltas, as deepagents' state is);
- `deepagents`: `create_deep_agent` with its defaults (its summarisation at 0.85 of the window
  the model's profile declares, keeping 0.10; results over 20,000 tokens to files), on its
  default `StateBackend`; `deepagents+WB`: the same with ctxoffload's `WorkspaceBackend` routed
  for its two folders;
- `lc-summary`, `lc-clear`, `lc-both`: LangChain's `SummarizationMiddleware` (trigger 0.8 of
  the window, keep 0.1, as ctxoffload's defaults), `ContextEditingMiddleware` with
  `ClearToolUsesEdit` (trigger 0.8 of the window in tokens, keep 3), and both;
- `none`: `create_agent` alone, the baseline of time and checkpoint bytes;
- `ctxoffload-AgentState` (asked for by name, not compared): the guide's example without its
  `state_schema=DeltaAgentState`, on LangChain's default state.

A summary call (LangChain's and deepagents' summarisers call the model without tools) is
answered with one fixed sentence, as a scripted model can; ctxoffload's, which asks through
LangChain's structured output, gets the same sentence in each field its schema requires (the
five of a summary), as a model held to the schema answers. A strategy's own tool whose name a
run's tools already use (Claude Code's `Read` and `Glob`) is left out of that run's agent.

What each column means:

- input tokens: every request's messages and tool schemas, summary calls included, counted
  with ctxoffload's exact o200k_base counter (`get_token_counter("gpt-4o")`);
- largest request, requests over the window, runs ended (an exception ended the run);
- prefix share: of all the tokens sent, the share that repeats the request before it from
  its start (tools, then messages, compared whole): what a provider's prompt cache can serve;
  tokens outside that prefix: the rest, summary calls included (what is billed in full);
  billed: those, with each cached token at a tenth of the price. The share is shown and not
  compared: sending more repeated tokens raises it, and so would a strategy that kept more;
  what the cache saves is the two rows under it;
- checkpoint bytes: what LangGraph's `InMemorySaver` holds at the end of all runs (every
  checkpoint, blob and write);
- host CPU ms per call: the CPU time of the process (every thread: LangGraph, its
  checkpoints, the strategy) during the run, minus the scripted model's, per model call, minus
  the same for `none` (best of `--repeat` replays). CPU time, not wall time, so that other
  work on the machine does not count; time spent waiting for the disk (the workspace's fsyncs)
  is not in it. Each run is replayed by every strategy in turn before the next run, so a
  machine whose speed drifts weighs on all of them alike; under it, not compared, the same
  on the thread that invoked the agent alone (the rest is in the threads LangGraph starts
  to run tools, where each strategy's tool-call hooks run too). When a strategy ended a run,
  both rows are given again on the runs no strategy ended: the ended run's calls stop where
  its history is longest, so over all runs that strategy's calls and the baseline's are not
  the same calls;
- recoverable: of the bytes of what the agent received before the run's last request and
  that this request no longer sends, the share a literal search finds as a line in what the
  strategy keeps at the end (the final state's messages and files, the workspace's
  tool_result files and the messages of context.jsonl); named: the share found in a file
  whose name the last request names. Lines are compared stripped, and lines under 8
  characters are not counted.

Run it in a virtual environment of its own, as the host tests run (it re-runs itself there when
`.venv-peers` exists):

    python3 -m venv .venv-peers
    .venv-peers/bin/pip install -e '.[test,langchain,deepagents]'
    python bench/bench_peers.py

Options: `--what-if JSON` (the ctxoffload column with `ContextConfig` fields changed, and
`"summary_model": false` for the extract: what a choice would cost, printed as not the
guide's example), `--windows 8000 32000`, `--strategies ctxoffload none ...`, `--runs N`
(the first N),
`--repeat N` (replays of each run per strategy, in turn; the best host time is kept),
`--corpus DIR` (another folder of transcripts), `--shapes [NAME ...]` (instead of the corpus,
runs of other shapes generated from `--seed` by `transcript_shapes.py`: long single outputs,
many small ones, sub-agents' reports, a mini-swe-agent run; all four when none is named).
"""

from __future__ import annotations

import argparse
import ast
import collections
import functools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
VENV = ROOT / ".venv-peers"
INSTALL = (
    "bench_peers needs LangChain, LangGraph and deepagents in a virtual environment of its own:\n"
    "  python3 -m venv .venv-peers\n"
    "  .venv-peers/bin/pip install -e '.[test,langchain,deepagents]'"
)

try:
    from deepagents import create_deep_agent
    from deepagents.backends import CompositeBackend, StateBackend
    from langchain.agents import create_agent
    from langchain.agents.middleware import (
        ClearToolUsesEdit,
        ContextEditingMiddleware,
        SummarizationMiddleware,
    )
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.checkpoint.memory import InMemorySaver
except ImportError:
    python = VENV / "bin" / "python"
    if python.exists() and Path(sys.executable).resolve() != python.resolve():
        os.execv(str(python), [str(python), *sys.argv])
    raise SystemExit(INSTALL) from None

sys.path[:0] = [str(ROOT / "tests" / "integrations"), str(ROOT / "tests")]
from frameworks import saver_bytes  # noqa: E402  (one home for what a saver holds)

from ctxoffload import (  # noqa: E402
    ContextConfig,
    LocalWorkspace,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ctxoffload.cli._transcripts import load_transcript  # noqa: E402
from ctxoffload.compression import rendered_text  # noqa: E402
from ctxoffload.integrations.deepagents import WorkspaceBackend  # noqa: E402
from ctxoffload.integrations.langchain import (  # noqa: E402
    ContextOffloadMiddleware,
    DeltaAgentState,
    from_langchain,
)
from ctxoffload.tokens import REPLY_PRIMING_TOKENS, get_token_counter  # noqa: E402

WINDOWS = (8_000, 32_000)
STRATEGIES = ("ctxoffload", "deepagents", "deepagents+WB", "lc-summary", "lc-clear", "lc-both")
BASELINE = "none"
DEFAULT_STATE = "ctxoffload-AgentState"
WHAT_IF: dict[str, Any] = {}
"""`--what-if`: fields of the ctxoffload column's `ContextConfig` changed from the guide's
example (and `summary_model`, the middleware's), to measure what a choice would cost; empty,
the example as written."""
"""The guide's example without its `state_schema` (LangChain's default state): not a peer."""
SUMMARY = "Summary: the work so far is in the messages that follow."
"""What a summary call is answered: a scripted model writes no real summary."""
DONE = "Done."
"""The answer to a call the recording has no answer for (a turn that ended on a user message)."""
MIN_LINE = 8
"""Lines shorter than this (stripped) are not counted: `}` or `fi` is found anywhere."""


# -- the corpus as scripts ------------------------------------------------------------------


@dataclass
class Turn:
    """One recorded model answer: its text and its tool calls."""

    text: str
    calls: list[dict[str, Any]]


@dataclass
class Invocation:
    """One `agent.invoke`: the user's messages, then the answers the model gives until the
    next user message."""

    inputs: list[str]
    turns: list[Turn] = field(default_factory=list)


@dataclass
class Script:
    """A corpus run as the replay plays it."""

    name: str
    system: str | None
    invocations: list[Invocation]
    outputs: dict[str, tuple[str, bool]]
    arguments: dict[str, set[str]]


def scripts(limit: int | None = None, corpus: Path = CORPUS) -> list[Script]:
    """Every run of the corpus as a script, in a stable order."""
    if not corpus.is_dir():
        raise SystemExit(f"the transcript corpus {corpus} is not there: pass --corpus")
    out: list[Script] = []
    for path in sorted(corpus.iterdir()):
        if path.name == "SOURCES.md":
            continue
        fmt, runs = load_transcript(path)
        for run in runs:
            messages = as_bash_calls(run.messages) if fmt == "mini-swe-agent" else run.messages
            out.append(script_of(run.name, messages))
    return out[:limit]


_BASH = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def as_bash_calls(messages: Sequence[Msg]) -> list[Msg]:
    """A mini-swe-agent run as a LangChain agent runs it: the command each answer holds (its
    ```bash block) is a call of a `bash` tool, and the output the run gave back as the next
    user message is that call's result. Only the first user message (the task) stays one."""
    out: list[Msg] = []
    for i, msg in enumerate(messages):
        follows = i + 1 < len(messages) and messages[i + 1].role == "user"
        if msg.role == "assistant" and follows:
            found = _BASH.search(msg.text)
            command = found.group(1) if found else ""
            call = ToolCallBlock(id=f"bash-{i}", name="bash", input={"command": command})
            out.append(msg.model_copy(update={"content": [TextBlock(text=msg.text), call]}))
        elif msg.role == "user" and out and out[-1].tool_calls:
            result = ToolResultBlock(id=out[-1].tool_calls[0].id, name="bash", output=msg.text)
            out.append(Msg(role="tool", content=[result]))
        else:
            out.append(msg)
    return out


def script_of(name: str, messages: Sequence[Msg]) -> Script:
    """A run's messages as invocations: consecutive assistant messages with nothing between
    them are one answer; a tool call id used twice is made unique, its results matched in
    order."""
    system: str | None = None
    invocations: list[Invocation] = []
    outputs: dict[str, tuple[str, bool]] = {}
    arguments: dict[str, set[str]] = collections.defaultdict(set)
    waiting: dict[str, collections.deque[str]] = collections.defaultdict(collections.deque)
    used: collections.Counter[str] = collections.Counter()
    pending: list[str] = []
    last = ""
    for msg in messages:
        if msg.role == "system" and not invocations and not pending:
            system = msg.text if system is None else f"{system}\n\n{msg.text}"
            continue
        if msg.role == "assistant":
            if not invocations or pending:
                invocations.append(Invocation(pending or ["Go on."]))
                pending, last = [], ""
            calls = []
            for call in msg.tool_calls:
                used[call.id] += 1
                unique = call.id if used[call.id] == 1 else f"{call.id}-{used[call.id]}"
                waiting[call.id].append(unique)
                arguments[call.name].update(call.input)
                calls.append({"name": call.name, "args": call.input, "id": unique})
            turns = invocations[-1].turns
            if last == "assistant" and turns:
                turns[-1].text = "\n".join(t for t in (turns[-1].text, msg.text) if t)
                turns[-1].calls.extend(calls)
            else:
                turns.append(Turn(msg.text, calls))
            last = "assistant"
            continue
        for result in msg.tool_results:
            if waiting[result.id]:
                unique = waiting[result.id].popleft()
                outputs[unique] = (rendered_text(result.output), result.is_error)
            last = "tool"
        if msg.text.strip():
            pending.append(msg.text)
            last = "user"
    if pending:
        invocations.append(Invocation(pending))
    return Script(name, system, invocations, outputs, dict(arguments))


# -- the scripted model and tools -----------------------------------------------------------


class Replay:
    """What one run's replay plays and what it saw: the answers of the invocation under way,
    every request the model was sent, what the agent received, and the time spent in the
    scripted model (which is not the host's)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.answers: collections.deque[Turn] = collections.deque()
        self.requests: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = []
        self.summary_requests: list[list[BaseMessage]] = []
        self.received: list[str] = []
        self.before_last = 0  # what was received before the latest request was answered
        self.model_seconds = 0.0  # CPU time in the scripted model
        self.model_wall_seconds = 0.0  # wall time in the scripted model
        self._schemas: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._answered = 0

    def schemas_of(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """The tools as OpenAI schemas, converted once per tool object."""
        out = []
        for tool in tools:
            known = self._schemas.get(id(tool))
            if known is None or known[0] is not tool:
                known = (tool, convert_to_openai_tool(tool))
                self._schemas[id(tool)] = known
            out.append(known[1])
        return out

    def answer(
        self, messages: list[BaseMessage], tools: list[dict[str, Any]], *, summary: bool
    ) -> AIMessage:
        if summary:
            self.summary_requests.append(list(messages))
            if tools:
                # A summariser that asks through structured output (ctxoffload's, bound as
                # a tool by LangChain) gets the same sentence in the shape it asked for:
                # every field its schema requires, as a model held to the schema answers.
                function = tools[0].get("function", tools[0])
                call = {
                    "name": function["name"],
                    "args": dict.fromkeys(schema_fields(function), SUMMARY),
                    "id": "summary",
                }
                return AIMessage("", tool_calls=[{**call, "type": "tool_call"}])
            return AIMessage(SUMMARY)
        self.requests.append((list(messages), tools))
        self.before_last = len(self.received)
        self._answered += 1
        ident = f"ai-{self._answered}"
        if not self.answers:
            self.received.append(DONE)
            return AIMessage(DONE, id=ident)
        turn = self.answers.popleft()
        self.received.append(turn.text)
        self.received.extend(leaf for call in turn.calls for leaf in leaves(call["args"]))
        calls = [{**call, "type": "tool_call"} for call in turn.calls]
        return AIMessage(turn.text, tool_calls=calls, id=ident)


class ReplayModel(BaseChatModel):  # type: ignore[misc]
    """A chat model that answers with the recording: the next recorded answer, or the fixed
    summary to a summariser's call (LangChain marks it `lc_source: summarization`)."""

    replay: Any

    @property
    def _llm_type(self) -> str:
        return "replay"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        # As a provider's chat model binds them (`ChatOpenAI`, `ChatAnthropic`): the same model
        # object, the schemas passed with each call. (A copy of the model for each call made
        # LangChain serialise it again at each call, 0.2 ms, which deepagents' agent did at
        # about two calls in three and the others' at every one.)
        return self.bind(tools=self.replay.schemas_of(tools), **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        started, started_wall = time.thread_time(), time.perf_counter()
        try:
            metadata = getattr(run_manager, "metadata", None) or {}
            summary = metadata.get("lc_source") == "summarization"
            message = self.replay.answer(messages, kwargs.get("tools") or [], summary=summary)
            return ChatResult(generations=[ChatGeneration(message=message)])
        finally:
            self.replay.model_seconds += time.thread_time() - started
            self.replay.model_wall_seconds += time.perf_counter() - started_wall


class ReplayTool(BaseTool):  # type: ignore[misc]
    """A tool of the recorded run: it answers each call with the output recorded for it."""

    replay: Any

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke answers
        raise NotImplementedError

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        call_id = input["id"]
        text, is_error = self.replay.script.outputs.get(call_id, ("(no output recorded)", False))
        self.replay.received.append(text)
        status = "error" if is_error else "success"
        return ToolMessage(
            text, tool_call_id=call_id, name=self.name, status=status, id=f"tool-{call_id}"
        )

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return self.invoke(input, config, **kwargs)


def schema_fields(function: dict[str, Any]) -> list[str]:
    """The fields a structured-output call's answer holds: those its schema requires, else
    all it names (`text` for a schema that names none). Answering fewer than the schema
    requires is a reply no provider held to the schema gives: ctxoffload would fill the
    fields it lacks from its extract at every compaction (`--what-if '{"summary_model":
    false}'` measures the extract alone)."""
    parameters = function.get("parameters", {})
    return list(parameters.get("required") or parameters.get("properties") or ["text"])


def replay_tools(replay: Replay) -> list[ReplayTool]:
    """One tool per name the run calls, its parameters the argument names it was given."""
    return [
        ReplayTool(
            name=name,
            description=f"The recorded run's {name} tool.",
            args_schema={"type": "object", "properties": {a: {} for a in sorted(names)}},
            replay=replay,
        )
        for name, names in sorted(replay.script.arguments.items())
    ]


def leaves(value: Any) -> Iterable[str]:
    """The strings a tool call's arguments hold (other values as JSON)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif value is not None:
        yield json.dumps(value)


# -- the strategies -------------------------------------------------------------------------


@dataclass
class Built:
    """An agent, and where its strategy keeps what it moved out of the context."""

    agent: Any
    workspace: LocalWorkspace | None = None
    routes: dict[str, Any] | None = None


def build(strategy: str, window: int, replay: Replay, folder: Path, saver: Any) -> Built:
    """The agent of `strategy` for one run."""
    model = ReplayModel(replay=replay, profile={"max_input_tokens": window})
    tools = replay_tools(replay)
    taken = {tool.name for tool in tools}
    system = replay.script.system
    fraction = int(0.8 * window)
    if strategy in ("ctxoffload", DEFAULT_STATE):
        # The LangChain guide's first example as written (`guide_example`): its arguments,
        # the window and the run's system prompt aside. No summary_model: the agent's own
        # model writes the summaries (the replay answers them with one sentence).
        given = guide_example()
        workspace = LocalWorkspace(folder / "ws")
        fields = {k: v for k, v in WHAT_IF.items() if k != "summary_model"}
        chosen = {k: v for k, v in WHAT_IF.items() if k == "summary_model"}
        offload = ContextOffloadMiddleware(
            workspace,
            config=ContextConfig(
                **{"context_window": window, "tool_result_limit": given["tool_result_limit"]}
                | fields
            ),
            **chosen,
        )
        own = [tool for tool in offload.tools if tool.name not in taken]
        agent = create_agent(
            model,
            tools=[*tools, *own],
            system_prompt=system,
            middleware=[offload],
            checkpointer=saver,
            state_schema=given["state_schema"] if strategy == "ctxoffload" else None,
        )
        return Built(agent, workspace=workspace)
    if strategy.startswith("deepagents"):
        workspace = routes = None
        backend: Any = StateBackend()
        if strategy == "deepagents+WB":
            workspace = LocalWorkspace(folder / "ws")
            routes = WorkspaceBackend.routes(workspace)
            backend = CompositeBackend(default=StateBackend(), routes=routes)
        agent = create_deep_agent(
            model=model, tools=tools, system_prompt=system, backend=backend, checkpointer=saver
        )
        return Built(agent, workspace=workspace, routes=routes)
    middleware: list[Any] = []
    if strategy in ("lc-summary", "lc-both"):
        middleware.append(
            SummarizationMiddleware(model, trigger=("fraction", 0.8), keep=("fraction", 0.1))
        )
    if strategy in ("lc-clear", "lc-both"):
        middleware.append(ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=fraction)]))
    if strategy != BASELINE and not middleware:
        raise SystemExit(f"unknown strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    agent = create_agent(
        model, tools, system_prompt=system, middleware=middleware, checkpointer=saver
    )
    return Built(agent)


GUIDE = ROOT / "docs" / "guides" / "langchain.md"
GUIDE_ARGUMENTS = {
    "ContextOffloadMiddleware": {"config"},
    "ContextConfig": {"context_window", "tool_result_limit"},
    "create_agent": {"tools", "middleware", "checkpointer", "state_schema"},
}
"""The keyword arguments of the guide's first example that `build` passes as it does."""


@functools.cache
def guide_example() -> dict[str, Any]:
    """What the LangChain guide's first example passes that the replay passes the same:
    its `tool_result_limit` and its `state_schema`. The example is read from the guide, and
    one that passes a keyword argument `build` does not (or leaves one out) stops the bench:
    the column is the example as written, or no column."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    if found is None:
        raise SystemExit(f"{GUIDE} has no Python example")
    calls: dict[str, dict[str, ast.expr]] = {}
    for node in ast.walk(ast.parse(found.group(1))):
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Name) and called.id in GUIDE_ARGUMENTS:
            calls[called.id] = {k.arg: k.value for k in node.keywords if k.arg}
    for name, expected in GUIDE_ARGUMENTS.items():
        if set(calls.get(name, {})) != expected:
            raise SystemExit(
                f"the guide's first example calls {name} with {sorted(calls.get(name, {}))}, "
                f"the bench with {sorted(expected)}: make build() pass what the guide does"
            )
    schema = calls["create_agent"]["state_schema"]
    states = {"DeltaAgentState": DeltaAgentState}
    if not isinstance(schema, ast.Name) or schema.id not in states:
        raise SystemExit(f"the guide's state_schema is {ast.unparse(schema)}: teach the bench it")
    limit = ast.literal_eval(calls["ContextConfig"]["tool_result_limit"])
    return {"tool_result_limit": limit, "state_schema": states[schema.id]}


# -- one run --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one strategy did with one run at one window."""

    calls: int = 0
    tokens: int = 0
    summary_tokens: int = 0
    largest: int = 0
    over_window: int = 0
    prefix_tokens: int = 0
    ended: str | None = None
    checkpoint_bytes: int = 0
    host_seconds: float = 0.0
    host_thread_seconds: float = 0.0  # of `host_seconds`, on the thread that invoked
    host_wall_seconds: float = 0.0  # wall time, the scripted model's left out
    left: int = 0
    recoverable: int = 0
    named: int = 0


def replay_run(strategy: str, window: int, script: Script, folder: Path) -> Outcome:
    """Replay `script` through `strategy`'s agent and measure what it sent and kept."""
    replay = Replay(script)
    saver = InMemorySaver()
    built = build(strategy, window, replay, folder, saver)
    thread = script.name.replace("/", "_")
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 100_000}
    outcome = Outcome()
    started, started_here = time.process_time(), time.thread_time()
    started_wall = time.perf_counter()
    for number, invocation in enumerate(script.invocations):
        replay.answers = collections.deque(invocation.turns)
        replay.received.extend(invocation.inputs)
        inputs = [
            HumanMessage(text, id=f"user-{number}-{i}") for i, text in enumerate(invocation.inputs)
        ]
        try:
            built.agent.invoke({"messages": inputs}, config)
        except Exception as exc:  # a strategy that ends the run: counted, not fatal
            outcome.ended = f"{type(exc).__name__}: {str(exc)[:120]}"
            break
    outcome.host_wall_seconds = time.perf_counter() - started_wall - replay.model_wall_seconds
    outcome.host_seconds = time.process_time() - started - replay.model_seconds
    # (The scripted model answers on the invoking thread: a sync LangGraph run calls it there.)
    outcome.host_thread_seconds = time.thread_time() - started_here - replay.model_seconds
    outcome.checkpoint_bytes = saver_bytes(saver)
    measure_requests(replay, window, outcome)
    state = built.agent.get_state(config).values
    measure_recall(replay, state, built, thread, outcome)
    return outcome


_COUNTER = get_token_counter("gpt-4o")
_counted: dict[int, tuple[Any, int]] = {}


def tokens_of(message: BaseMessage) -> int:
    """A LangChain message's tokens, counted once per message object."""
    known = _counted.get(id(message))
    if known is None or known[0] is not message:
        known = (message, _COUNTER.count_message(from_langchain([message])[0]))
        _counted[id(message)] = known
    return known[1]


def measure_requests(replay: Replay, window: int, outcome: Outcome) -> None:
    """Tokens of every request, the largest, those over the window, the cached prefix."""
    before: tuple[list[BaseMessage], list[dict[str, Any]]] | None = None
    tools_tokens: dict[str, int] = {}
    for messages, tools in replay.requests:
        key = json.dumps(tools, sort_keys=True)
        if key not in tools_tokens:
            tools_tokens[key] = _COUNTER.count_tools(tools) if tools else 0
        costs = [tokens_of(m) for m in messages]
        total = tools_tokens[key] + sum(costs) + REPLY_PRIMING_TOKENS
        outcome.calls += 1
        outcome.tokens += total
        outcome.largest = max(outcome.largest, total)
        outcome.over_window += total > window
        if before is not None and before[1] == tools:
            shared = tools_tokens[key]
            for cost, (old, new) in zip(
                costs, zip(before[0], messages, strict=False), strict=False
            ):
                if not (old is new or old == new):
                    break
                shared += cost
            outcome.prefix_tokens += shared
        before = (messages, tools)
    for messages in replay.summary_requests:
        cost = sum(tokens_of(m) for m in messages) + REPLY_PRIMING_TOKENS
        outcome.summary_tokens += cost
        outcome.tokens += cost


# -- what left, what is kept ----------------------------------------------------------------


def lines_of(texts: Iterable[str]) -> Iterable[str]:
    """The counted lines of some texts, stripped."""
    for text in texts:
        for line in text.split("\n"):
            line = line.strip()
            if len(line) >= MIN_LINE:
                yield line


def msg_texts(msg: Msg) -> Iterable[str]:
    """The texts a message holds: its text, its tool calls' argument strings, its results."""
    yield msg.text
    for call in msg.tool_calls:
        yield from leaves(call.input)
    for result in msg.tool_results:
        yield rendered_text(result.output)


def message_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """The texts of LangChain messages."""
    return [text for msg in from_langchain(list(messages)) for text in msg_texts(msg)]


def kept_files(state: dict[str, Any], built: Built, thread: str) -> dict[str, list[str]]:
    """What the strategy keeps outside the messages, by the name a request would use for it:
    deepagents' files (in state, or through the routed backend), the workspace's
    tool_result files and the messages of its context.jsonl."""
    files: dict[str, list[str]] = {}
    for path, data in (state.get("files") or {}).items():
        content = data.get("content") if isinstance(data, dict) else data
        files[path] = ["\n".join(content) if isinstance(content, list) else str(content)]
    if built.routes is not None:
        for prefix, backend in built.routes.items():
            reader = WorkspaceBackend(backend.workspace, prefix, session_id=thread)
            paths = [entry["path"] for entry in reader.glob("**").matches or []]
            for path, answer in zip(paths, reader.download_files(paths), strict=True):
                if answer.content is not None:
                    files[prefix.rstrip("/") + path] = [answer.content.decode("utf-8", "replace")]
    elif built.workspace is not None:
        for session in (built.workspace.workdir / "sessions").iterdir():
            for path in session.iterdir():
                if path.name.startswith("tool_result-"):
                    files[path.name] = [path.read_text(encoding="utf-8", errors="replace")]
                elif path.name == "context.jsonl":
                    rows = path.read_text(encoding="utf-8").splitlines()
                    msgs = [Msg.model_validate_json(row) for row in rows if row.strip()]
                    files[path.name] = [t for msg in msgs for t in msg_texts(msg)]
    return files


def measure_recall(
    replay: Replay, state: dict[str, Any], built: Built, thread: str, outcome: Outcome
) -> None:
    """How much of what left the last request a literal search finds, and in a named file."""
    last = replay.requests[-1][0] if replay.requests else []
    last_texts = message_texts(last)
    sent = set(lines_of(last_texts))
    last_text = "\n".join(last_texts)
    where: dict[str, bool] = {}  # line -> whether a file holding it is named
    for line in lines_of(message_texts(state.get("messages", []))):
        where.setdefault(line, False)
    for name, texts in kept_files(state, built, thread).items():
        named = name in last_text
        for line in lines_of(texts):
            where[line] = where.get(line, False) or named
    # The last answer came after the last request: it never left a context.
    for line in lines_of(replay.received[: replay.before_last]):
        if line in sent:
            continue
        size = len(line.encode("utf-8", "surrogatepass"))
        outcome.left += size
        if line in where:
            outcome.recoverable += size
            outcome.named += size if where[line] else 0


# -- the table ------------------------------------------------------------------------------


def total(outcomes: Sequence[Outcome]) -> Outcome:
    """The outcomes of all runs together: sums, the largest request, the runs ended."""
    out = Outcome()
    for one in outcomes:
        for name, value in vars(one).items():
            if name == "largest":
                out.largest = max(out.largest, value)
            elif name != "ended":
                setattr(out, name, getattr(out, name) + value)
    out.ended = str(sum(one.ended is not None for one in outcomes))
    return out


def ratio(part: float, whole: float) -> float:
    """`part / whole`; 1 where there is no whole (nothing left: nothing lost)."""
    return part / whole if whole else 1.0


def per_call_ms(one: Outcome) -> float:
    """Host CPU milliseconds per model call."""
    return 1000 * one.host_seconds / max(1, one.calls)


def thread_ms(one: Outcome) -> float:
    """Host CPU milliseconds per model call on the thread that invoked the agent."""
    return 1000 * one.host_thread_seconds / max(1, one.calls)


def wall_ms(one: Outcome) -> float:
    """Host wall milliseconds per model call (what the user waits for)."""
    return 1000 * one.host_wall_seconds / max(1, one.calls)


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


@dataclass(frozen=True)
class Row:
    """A row of the table: its label, how a strategy's figure is shown (beside the
    baseline's), the figure compared, whether more is better, whether it is compared."""

    label: str
    shown: Callable[[Outcome, Outcome], str]
    figure: Callable[[Outcome], float]
    higher: bool = False
    compared: bool = True


def _prefix_share(one: Outcome) -> float:
    return ratio(one.prefix_tokens, one.tokens - one.summary_tokens)


CACHED_PRICE = 0.1
"""What a token read from the prompt cache costs, against one billed in full (Anthropic's and
OpenAI's newer models: a tenth; a price between 0 and 1 orders these strategies the same)."""


def _billed(one: Outcome) -> float:
    """The input tokens billed, each cached one at `CACHED_PRICE`."""
    return one.tokens - one.prefix_tokens + CACHED_PRICE * one.prefix_tokens


ROWS = (
    Row(
        "input tokens sent, tools included",
        lambda o, b: f"{o.tokens / 1e6:.2f} M",
        lambda o: o.tokens,
    ),
    Row(
        "  of them summary calls",
        lambda o, b: f"{o.summary_tokens / 1e6:.2f} M",
        lambda o: o.summary_tokens,
        compared=False,
    ),
    Row("largest request, tokens", lambda o, b: f"{o.largest:,}", lambda o: o.largest),
    Row("requests over the window", lambda o, b: f"{o.over_window:,}", lambda o: o.over_window),
    Row("runs ended", lambda o, b: str(o.ended), lambda o: float(o.ended or 0)),
    # A share, not compared: it rises with every repeated token sent (a strategy that sent
    # more history would score higher). What the cache is worth is the next two rows.
    Row(
        "prompt-cache prefix share",
        lambda o, b: percent(_prefix_share(o)),
        _prefix_share,
        higher=True,
        compared=False,
    ),
    Row(
        "  tokens outside that prefix",
        lambda o, b: f"{(o.tokens - o.prefix_tokens) / 1e6:.2f} M",
        lambda o: o.tokens - o.prefix_tokens,
    ),
    Row(
        "  billed, cached tokens at a tenth",
        lambda o, b: f"{_billed(o) / 1e6:.2f} M",
        _billed,
    ),
    Row(
        "checkpoint bytes, all steps",
        lambda o, b: f"{o.checkpoint_bytes / 1e6:.1f} MB",
        lambda o: o.checkpoint_bytes,
    ),
    Row(
        "host wall ms per call, over none",
        lambda o, b: f"{wall_ms(o) - wall_ms(b):+.1f}",
        wall_ms,
    ),
    Row(
        "host CPU ms per call, over none",
        lambda o, b: f"{per_call_ms(o) - per_call_ms(b):+.1f}",
        per_call_ms,
    ),
    # Not compared: where the row above is spent, the invoking thread's share against the
    # threads LangGraph starts to run tools (every strategy's hooks on a tool call run there).
    Row(
        "  on the invoking thread",
        lambda o, b: f"{thread_ms(o) - thread_ms(b):+.1f}",
        thread_ms,
        compared=False,
    ),
    Row(
        "recoverable of what left",
        lambda o, b: percent(ratio(o.recoverable, o.left)),
        lambda o: ratio(o.recoverable, o.left),
        higher=True,
    ),
    Row(
        "named in the last request",
        lambda o, b: percent(ratio(o.named, o.left)),
        lambda o: ratio(o.named, o.left),
        higher=True,
    ),
)


def finished_rows(finished: int) -> tuple[Row, ...]:
    """The host time rows again, on the `finished` runs no strategy ended: a strategy that
    ended a run made fewer calls in it, and a call's cost grows with the history it carries,
    so its figure over all runs averages other calls than the baseline's. Here every strategy
    and the baseline are measured on the same runs, whole."""
    wall, cpu, thread = (row for row in ROWS if row.figure in (wall_ms, per_call_ms, thread_ms))
    return (
        Row(f"{wall.label}, the {finished} runs no strategy ended", wall.shown, wall.figure),
        Row(cpu.label, cpu.shown, cpu.figure),
        Row(thread.label, thread.shown, thread.figure, compared=False),
    )


def table(
    window: int,
    runs: int,
    results: dict[str, Outcome],
    finished: tuple[int, dict[str, Outcome]] | None = None,
) -> str:
    """Every strategy's figures at one window, and the rows where ctxoffload is behind the
    best peer (LangChain's built-ins and deepagents; not `none`); with `finished` (how many
    runs no strategy ended, and the figures on those alone), the host CPU rows on them too."""
    names = list(results)
    rows = [(row, results) for row in ROWS]
    if finished is not None:
        rows += [(row, finished[1]) for row in finished_rows(finished[0])]
    width = max(len(row.label) for row, _ in rows) + 2
    lines = [
        f"at {window:,} tokens ({runs} runs)".ljust(width) + "".join(f"{n:>15}" for n in names)
    ]
    for row, figures in rows:
        base = figures.get(BASELINE, Outcome())
        shown = "".join(f"{row.shown(figures[n], base):>15}" for n in names)
        lines.append(row.label.ljust(width) + shown)
    peers = [n for n in names if n not in ("ctxoffload", DEFAULT_STATE, BASELINE)]
    if "ctxoffload" in results and peers:
        behind = []
        for row, figures in rows:
            ours = row.figure(figures["ctxoffload"])
            values = [row.figure(figures[n]) for n in peers]
            best = max(values) if row.higher else min(values)
            if row.compared and (ours < best if row.higher else ours > best):
                behind.append(row.label.strip())
        lines.append("ctxoffload behind the best peer on: " + (", ".join(behind) or "nothing"))
    return "\n".join(lines)


def run_line(one: Outcome) -> str:
    """One run's figures, for `--verbose`."""
    return (
        f"{one.calls:4} calls {one.tokens:>10,} tokens, largest {one.largest:>8,}, "
        f"{one.over_window} over, ckpt {one.checkpoint_bytes / 1e6:6.1f} MB, "
        f"{wall_ms(one):6.1f} ms/call wall, {per_call_ms(one):6.1f} CPU, "
        f"recoverable {percent(ratio(one.recoverable, one.left))}"
        f", named {percent(ratio(one.named, one.left))}"
    )


def versions() -> str:
    from importlib.metadata import version

    names = ("ctxoffload", "langchain", "langchain-core", "langgraph", "deepagents")
    return ", ".join(f"{name} {version(name)}" for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--strategies", nargs="+", default=[*STRATEGIES, BASELINE])
    parser.add_argument("--runs", type=int, default=None, help="replay only the first N runs")
    parser.add_argument("--repeat", type=int, default=1, help="replays; the best time is kept")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the transcripts' folder")
    parser.add_argument(
        "--shapes",
        nargs="*",
        default=None,
        help="replay generated runs of these shapes (transcript_shapes.py) instead of the corpus",
    )
    parser.add_argument("--seed", type=int, default=None, help="the shapes' seed")
    parser.add_argument("--shape-runs", type=int, default=2, help="generated runs of each shape")
    parser.add_argument("--verbose", action="store_true", help="print each run's figures")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--what-if",
        type=json.loads,
        default={},
        metavar="JSON",
        help="a what-if, not the guide's example: ContextConfig fields of the ctxoffload "
        'column changed, and "summary_model": false for the extract, e.g. '
        """'{"trigger_ratio": 0.65}'""",
    )
    args = parser.parse_args()
    if not isinstance(args.what_if, dict):
        parser.error("--what-if takes a JSON object")
    WHAT_IF.update(args.what_if)
    if WHAT_IF:
        print(f"what-if, not the guide's example: the ctxoffload column with {json.dumps(WHAT_IF)}")
    with tempfile.TemporaryDirectory() as generated:
        corpus = args.corpus
        if args.shapes is not None:
            corpus = Path(generated)
            write_shapes(corpus, args.seed, args.shape_runs, args.shapes)
        runs = scripts(args.runs, corpus)
    run_all(args, runs)


def write_shapes(folder: Path, seed: int | None, count: int, shapes: Sequence[str]) -> None:
    """Generated transcripts of other shapes than the corpus's (`transcript_shapes.py`)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import transcript_shapes

    chosen = tuple(shapes) or transcript_shapes.SHAPES
    given = transcript_shapes.SEED if seed is None else seed
    transcript_shapes.write(folder, given, count, chosen)
    print(f"shapes {', '.join(chosen)}: {count} runs each, seed {given}")


def run_all(args: argparse.Namespace, runs: list[Script]) -> None:
    """Replay `runs` as `args` asks and print the tables."""
    strategies = [s for s in args.strategies if s != BASELINE] + [BASELINE]
    print(versions())
    print(f"{len(runs)} runs, {sum(len(s.invocations) for s in runs)} user turns")
    figures: dict[str, Any] = {}
    # Unmeasured: each strategy once on the smallest run (imports, the tokenizer, caches).
    smallest = min(runs, key=lambda s: sum(len(i.turns) for i in s.invocations))
    for strategy in strategies:
        with tempfile.TemporaryDirectory() as folder:
            replay_run(strategy, args.windows[0], smallest, Path(folder))
    for window in args.windows:
        # Run by run, each strategy in turn (and each replay of a run in turn), so that a
        # machine whose load drifts over the minutes of a window weighs on every strategy
        # alike: the host CPU row compares strategies measured side by side.
        outcomes: dict[str, list[Outcome]] = {strategy: [] for strategy in strategies}
        for script in runs:
            best: dict[str, Outcome] = {}
            for _ in range(args.repeat):
                for strategy in strategies:
                    with tempfile.TemporaryDirectory() as folder:
                        one = replay_run(strategy, window, script, Path(folder))
                    if strategy not in best:
                        best[strategy] = one
                        continue
                    # The best of each time apart: a replay slowed by the machine's other
                    # work in wall time may be the fastest one in CPU time.
                    kept = best[strategy]
                    wall = min(kept.host_wall_seconds, one.host_wall_seconds)
                    if one.host_seconds < kept.host_seconds:
                        best[strategy] = kept = one
                    kept.host_wall_seconds = wall
            for strategy in strategies:
                kept = best[strategy]
                if kept.ended:
                    print(f"  {strategy} at {window:,}: {script.name} ended: {kept.ended}")
                if args.verbose:
                    print(f"    {strategy:13} {script.name[:44]:44} {run_line(kept)}", flush=True)
                outcomes[strategy].append(kept)
            print(f"  at {window:,}: {script.name} done", flush=True)
        results = {strategy: total(outcomes[strategy]) for strategy in strategies}
        whole = [
            i for i in range(len(runs)) if all(outcomes[s][i].ended is None for s in strategies)
        ]
        finished = None
        if len(whole) < len(runs):
            finished = len(whole), {s: total([outcomes[s][i] for i in whole]) for s in strategies}
        print()
        print(table(window, len(runs), results, finished))
        print()
        figures[str(window)] = {name: vars(o) for name, o in results.items()}
        if finished is not None:
            figures[f"{window} finished"] = {name: vars(o) for name, o in finished[1].items()}
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

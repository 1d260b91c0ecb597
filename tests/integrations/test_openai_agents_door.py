"""The OpenAI Agents SDK's door on the door core (docs/guides/hosts.md): what it is given is
checked when it is built, each `Runner.run` the host names no way gets a session of its own
(runs side by side in one `trace()` block too), one live run writes a session (through one
filter or two), a run that ended however it ended gives its session up, and the record opens
with the door. Runs of the real SDK with `Scripted`, a model of the test's own, offline."""

from __future__ import annotations

import asyncio
import fcntl
import gc
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agents", "openai_agents")

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
    trace,
)
from openai import AsyncOpenAI  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall  # noqa: E402
from openai_agents_scripted import Scripted, answer, call, tool_call  # noqa: E402
from workspace_kinds import bucket, local, memory  # noqa: E402

from ctxoffload import (  # noqa: E402
    ConfigError,
    ContextConfig,
    LocalWorkspace,
    SessionBusyError,
    SqlWorkspace,
)
from ctxoffload._disk.ids import session_id_for  # noqa: E402
from ctxoffload._doors.doors import DOORS  # noqa: E402
from ctxoffload.formats.responses import from_responses  # noqa: E402
from ctxoffload.integrations.openai_agents import (  # noqa: E402
    OffloadingInputFilter,
    WorkspaceSession,
)
from ctxoffload.tokens import get_token_counter  # noqa: E402
from ctxoffload.workspace import Workspace  # noqa: E402
from helpers import megabyte_output, retained_per_run  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402

set_tracing_disabled(True)

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)
OUTPUT = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(600))
BUSY = DOORS["openai-agents"].busy


class Gate:
    """A tool that waits at the gate until it is opened: a run kept live in its tool."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

        @function_tool
        async def fetch() -> str:
            """Fetch the export's log."""
            self.entered.set()
            await self.opened.wait()
            return OUTPUT

        self.tool = fetch


def agent_on(model: Scripted, offload: OffloadingInputFilter, tool: Any) -> Agent[Any]:
    return Agent(name="ops", instructions="You run exports.", model=model, tools=[tool])


async def one_run(
    offload: OffloadingInputFilter, tool: Any, session: WorkspaceSession | None = None
) -> Scripted:
    """One run that calls `tool` once and answers."""
    model = Scripted(tool_call("fetch", "call_1"), answer("done"))
    config = RunConfig(call_model_input_filter=offload)
    await Runner.run(agent_on(model, offload, tool), "dump it", session=session, run_config=config)
    return model


def folders(root: Path) -> set[str]:
    sessions = root / "sessions"
    return {p.name for p in sessions.iterdir()} if sessions.is_dir() else set()


def events(root: Path, session: str) -> list[dict[str, Any]]:
    text = (root / "sessions" / session / "events.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def plain_tool() -> Any:
    @function_tool
    def fetch() -> str:
        """Fetch the export's log."""
        return OUTPUT

    return fetch


# -- checked at construction ---------------------------------------------------------------------


def test_what_the_door_is_given_is_checked_when_it_is_built(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(ConfigError, match=r"pass LocalWorkspace\('agent_workspace'\)"):
        WorkspaceSession("agent_workspace", "c1", summary_model=False)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        WorkspaceSession(LocalWorkspace(afile), "c1", summary_model=False)
    with pytest.raises(ConfigError, match="not a ContextConfig"):
        OffloadingInputFilter(
            LocalWorkspace(tmp_path / "ws"), config={"context_window": 8}, summary_model=False
        )  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_output_chars 0 is not a positive int"):
        OffloadingInputFilter(
            LocalWorkspace(tmp_path / "ws"), max_output_chars=0, summary_model=False
        )
    assert afile.read_text() == "not a folder" and not (tmp_path / "ws").exists()


# -- identity --------------------------------------------------------------------------------------


def test_a_host_id_is_mapped_once_whichever_part_is_given_it(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    session = WorkspaceSession(workspace, "team/alice:42", summary_model=False)
    assert session.session_id == session_id_for("team/alice:42")
    assert session.input_filter().session_id == session.session_id  # not mapped twice
    named = OffloadingInputFilter(workspace, session_id="team/alice:42", summary_model=False)
    assert named.session_id == session.session_id
    assert (
        OffloadingInputFilter(workspace, summary_model=False).session_id is None
    )  # no shared default


async def test_runs_side_by_side_in_one_trace_get_a_session_each(tmp_path: Path) -> None:
    """The SDK's own pattern for parallel runs (`asyncio.gather` in one `trace()` block):
    the runs share the trace, never a session."""
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    with trace("parallel exports"):
        await asyncio.gather(*(one_run(offload, plain_tool()) for _ in range(3)))
    await one_run(offload, plain_tool())  # and one after them, outside the trace
    written = folders(tmp_path / "ws")
    assert len(written) == 4 and "openai-agents" not in written
    for session in written:  # each whole: its door event first, its one output stored
        kinds = [e["kind"] for e in events(tmp_path / "ws", session)]
        assert kinds[0] == "door" and kinds.count("model_call") == 2
        assert (tmp_path / "ws" / "sessions" / session / "tool_result-call_1.txt").exists()


# -- one writer ------------------------------------------------------------------------------------


async def test_a_second_live_run_through_the_same_filter_is_refused_and_the_first_goes_on(
    tmp_path: Path,
) -> None:
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="c1", summary_model=False
    )
    gate = Gate()
    first = asyncio.create_task(one_run(offload, gate.tool))
    await gate.entered.wait()
    with pytest.raises(SessionBusyError) as refused:
        await one_run(offload, plain_tool())
    assert BUSY in str(refused.value) and "if_busy" not in str(refused.value)
    gate.opened.set()
    model = await first
    assert len(model.seen) == 2  # the first run made both of its calls
    await one_run(offload, plain_tool())  # a run after it is welcome
    kinds = [e["kind"] for e in events(tmp_path / "ws", "c1")]
    assert kinds.count("model_call") == 4


async def test_an_agent_run_as_a_tool_writes_a_child_session_and_the_parent_goes_on(
    tmp_path: Path,
) -> None:
    """`Agent.as_tool()` runs the sub-agent inside the parent's tool call with the parent's
    RunConfig, so through the same filter and its session: the nested run was refused with
    SessionBusyError (its parent held the session), and the parent's model was told the
    tool failed. The nested run writes a child session of its own now, linked to the
    parent's, and a run outside both is still refused while the parent is live."""
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="s", summary_model=False
    )
    inner = Scripted(tool_call("fetch", "sub_1"), answer("the export ran clean"))
    researcher = Agent(
        name="research er", instructions="You read logs.", model=inner, tools=[plain_tool()]
    )
    gate = Gate()

    @function_tool
    async def wait() -> str:
        """Wait for the operator."""
        gate.entered.set()
        await gate.opened.wait()
        return "go on"

    outer = Scripted(
        tool_call("research", "c1", input="read the export log"),
        tool_call("wait", "c2"),
        answer("all done"),
    )
    lead = Agent(
        name="lead",
        instructions="You delegate.",
        model=outer,
        tools=[researcher.as_tool(tool_name="research", tool_description="Research."), wait],
    )
    config = RunConfig(call_model_input_filter=offload)
    running = asyncio.create_task(Runner.run(lead, "check the export", run_config=config))
    await gate.entered.wait()
    with pytest.raises(SessionBusyError, match=BUSY):
        await one_run(offload, plain_tool())  # not nested: still one writer
    gate.opened.set()
    result = await running
    assert result.final_output == "all done"
    # The parent's model was given the sub-agent's answer, not an error.
    sent = json.dumps([item for call in outer.seen for item in call], default=str)
    assert "the export ran clean" in sent and "SessionBusyError" not in sent
    (child,) = folders(tmp_path / "ws") - {"s"}
    assert child.startswith("s--research_er-")
    door = events(tmp_path / "ws", child)[0]
    assert door["kind"] == "door" and door["parent"]["session"] == "s"
    assert (tmp_path / "ws" / "sessions" / child / "tool_result-sub_1.txt").read_text() == OUTPUT
    kinds = [e["kind"] for e in events(tmp_path / "ws", child)]
    assert kinds.count("model_call") == 2
    assert [e["kind"] for e in events(tmp_path / "ws", "s")].count("model_call") == 3
    # Both sessions were given up: the next run of each is welcome.
    await one_run(offload, plain_tool())


def sqlite(tmp_path: Path) -> Workspace:
    return SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}")


@pytest.mark.parametrize("kind", [local, memory, bucket, sqlite], ids=lambda f: f.__name__)
async def test_one_live_run_per_session_on_every_workspace(
    tmp_path: Path, kind: Callable[[Path], Workspace]
) -> None:
    """Two filters of one session on one workspace (a folder, memory, a bucket, SQLite): the
    second run is refused while the first is live, and welcome once it ended."""
    workspace = kind(tmp_path)
    first = OffloadingInputFilter(workspace, config=CONFIG, session_id="c1", summary_model=False)
    gate = Gate()
    running = asyncio.create_task(one_run(first, gate.tool))
    await gate.entered.wait()
    second = OffloadingInputFilter(workspace, config=CONFIG, session_id="c1", summary_model=False)
    with pytest.raises(SessionBusyError, match=BUSY):
        await one_run(second, plain_tool())
    gate.opened.set()
    await running
    await one_run(second, plain_tool())
    kinds = [event["kind"] for event in await workspace.read_events("c1")]
    assert kinds.count("model_call") == 4 and kinds[0] == "door"


async def test_a_refused_run_writes_nothing_in_the_conversation(tmp_path: Path) -> None:
    """The SDK reads a session's items before its first model call: a run of a conversation
    another run writes is refused there, before its question is added to the items."""
    first = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "c1", config=CONFIG, summary_model=False
    )
    gate = Gate()
    running = asyncio.create_task(one_run(first.input_filter(), gate.tool, first))
    await gate.entered.wait()
    history = tmp_path / "ws" / "sessions" / "c1" / "history.jsonl"
    before = history.read_bytes()
    second = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "c1", config=CONFIG, summary_model=False
    )
    with pytest.raises(SessionBusyError, match=BUSY):
        await one_run(second.input_filter(), plain_tool(), second)
    assert history.read_bytes() == before
    gate.opened.set()
    await running
    items = await second.get_items()
    assert [item.get("role") for item in items if "role" in item] == ["user", "assistant"]


async def test_a_run_that_raised_gives_its_session_up(tmp_path: Path) -> None:
    """A run ends however it ends: the next run of its conversation, through this filter or
    another, is not refused (the SDK drops a failed run later, through a reference cycle)."""

    class Failing(Scripted):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            if len(self.seen) == 1:
                raise RuntimeError("the provider is down")
            return await super().get_response(*args, **kwargs)

    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="c1", summary_model=False
    )
    model = Failing(tool_call("fetch", "call_1"), answer("done"))
    agent = agent_on(model, offload, plain_tool())
    with pytest.raises(RuntimeError, match="the provider is down"):
        await Runner.run(agent, "dump it", run_config=RunConfig(call_model_input_filter=offload))
    await one_run(offload, plain_tool())
    other = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="c1", summary_model=False
    )
    await one_run(other, plain_tool())


async def test_a_wrapped_model_gives_the_session_up_as_the_run_ends(tmp_path: Path) -> None:
    """The SDK tells the models of a run that it ended (in its `finally`): with `wrap`, the
    lease is released then, even while the failed run is kept (its error held, the cycle
    collector off); without it, the lease is let go of when the SDK drops the run."""

    def locked(session: str) -> bool:
        """Whether another process would find the session's lease held."""
        fd = os.open(tmp_path / "ws" / "sessions" / session / "lease.json", os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    errors: list[BaseException] = []
    gc.disable()
    try:
        for session, wrapped in (("bare", False), ("wrapped", True)):
            offload = OffloadingInputFilter(
                LocalWorkspace(tmp_path / "ws"),
                config=CONFIG,
                session_id=session,
                summary_model=False,
            )
            model: Any = Scripted(tool_call("fetch", "call_1"))  # then nothing: it raises
            agent = agent_on(offload.wrap(model) if wrapped else model, offload, plain_tool())
            try:
                await Runner.run(agent, "go", run_config=RunConfig(call_model_input_filter=offload))
            except IndexError as error:
                errors.append(error)
        assert locked("bare") and not locked("wrapped")
        assert "released" in (tmp_path / "ws/sessions/wrapped/lease.json").read_text()
    finally:
        gc.enable()
    errors.clear()
    gc.collect()
    assert not locked("bare")


async def test_a_streamed_run_kept_by_its_result_gives_its_session_up_as_it_ends(
    tmp_path: Path,
) -> None:
    """A streamed result keeps the SDK's run (in its finished tasks): the run has ended all
    the same, and the next run of the conversation, through another session object and its
    filter, is not refused."""
    with OpenAIServer() as server:
        server.add(call("fetch", {}, "call_1"))
        server.add_completion("The export finished.")
        server.add_completion("Yes.")
        async with AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0) as client:
            model = OpenAIChatCompletionsModel(model="test-model", openai_client=client)
            agent = Agent(name="ops", model=model, tools=[plain_tool()])
            first = WorkspaceSession(
                LocalWorkspace(tmp_path / "ws"), "c1", config=CONFIG, summary_model=False
            )
            config = RunConfig(call_model_input_filter=first.input_filter())
            streamed = Runner.run_streamed(agent, "dump it", session=first, run_config=config)
            async for _ in streamed.stream_events():
                pass
            again = WorkspaceSession(
                LocalWorkspace(tmp_path / "ws"), "c1", config=CONFIG, summary_model=False
            )
            config = RunConfig(call_model_input_filter=again.input_filter())
            result = await Runner.run(agent, "all done?", session=again, run_config=config)
    assert (streamed.final_output, result.final_output) == ("The export finished.", "Yes.")
    assert len(await again.get_items()) == 6


# -- recorded --------------------------------------------------------------------------------------


async def test_a_session_used_alone_opens_its_record_with_the_door(tmp_path: Path) -> None:
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "team/alice:42", config=CONFIG, summary_model=False
    )
    await session.add_items(
        [
            {"type": "function_call", "call_id": "c1", "name": "fetch", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": OUTPUT},
        ]
    )
    first, *rest = events(tmp_path / "ws", session.session_id)
    assert first["kind"] == "door" and first["host"] == "the OpenAI Agents SDK"
    assert first["conversation"] == "team/alice:42"
    assert [e["kind"] for e in rest] == ["tool_result", "truncation"]


async def test_runs_that_ended_leave_no_state_and_their_next_run_takes_over_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without `wrap`, a run's session is given up when the SDK drops the run. The next run
    of a named session then took the lease over with a WARNING that blamed the user ("close
    agents with `async with`"), 551 times in 601 requests of a server loop; and a filter of
    fresh sessions kept each run's entry for good (1,001 after 1,000 runs). Both quiet and
    bounded now."""
    named = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="a", summary_model=False
    )
    with caplog.at_level("INFO", logger="ctxoffload"):
        for _ in range(3):
            await one_run(named, plain_tool())
            gc.collect()
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    fresh = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    for _ in range(20):
        await one_run(fresh, plain_tool())
    gc.collect()
    assert len(fresh._runs._runs) <= 1
    assert len(folders(tmp_path / "ws")) == 21  # each run a session of its own, kept


# -- stored once, whole: a call that wrote a whole file ------------------------------------------


async def test_a_call_that_wrote_a_whole_file_is_sent_cut_as_the_models_own_item(
    tmp_path: Path,
) -> None:
    """The newest turn over the window because the model's own call held a whole file: the
    model is sent the call with its file cut to a head and a notice naming the file that
    holds it whole, in the model's own item otherwise: its call id, path, item id and status
    (the Responses API pairs the item id with the reasoning before it; the filter made the
    item anew without them)."""
    body = "".join(
        f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
    )

    @function_tool
    def write_file(path: str, content: str) -> str:
        """Write `content` to `path`."""
        return f"wrote {len(content)} characters to {path}"

    arguments = json.dumps({"path": "app/report.py", "content": body})
    wrote = ResponseFunctionToolCall(
        type="function_call",
        name="write_file",
        arguments=arguments,
        call_id="w1",
        id="fc_1",
        status="completed",
    )
    model = Scripted(wrote, answer("Written."))
    config = ContextConfig(context_window=4_000, tool_result_limit=300)
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=config, session_id="f", summary_model=False
    )
    run_config = RunConfig(call_model_input_filter=offload)
    agent = agent_on(model, offload, write_file)
    await Runner.run(agent, "write the report module", run_config=run_config)

    assert len(model.seen) == 2
    last = [i if isinstance(i, dict) else i.model_dump(exclude_unset=True) for i in model.seen[-1]]
    assert body not in json.dumps(last)
    counter = get_token_counter(None)
    assert counter.count_messages(from_responses(last)) < config.context_window
    (sent,) = [item for item in last if item.get("type") == "function_call"]
    assert (sent["call_id"], sent["id"], sent["status"]) == ("w1", "fc_1", "completed")
    args = json.loads(sent["arguments"])
    assert args["path"] == "app/report.py"
    assert "<<<TRUNCATED>>>" in args["content"] and body.startswith(args["content"][:200])
    (stored,) = (tmp_path / "ws" / "sessions" / "f").glob("tool_result-w1_content*.txt")
    assert str(stored) in args["content"] and stored.read_text(encoding="utf-8") == body


def test_a_named_filter_keeps_no_output_of_a_run_that_is_over(tmp_path: Path) -> None:
    """A filter named for its conversation (`session_id=`, or made by a `WorkspaceSession`)
    keeps the session's projector for the next run, and a server keeps a filter per
    conversation. It kept the whole text of the output the run's last call cut, and its
    counter the counts of long texts with the texts, for as long as the filter lived (1.22 MB
    per conversation of a 1.1 MB output). Once the run is over (the SDK dropped it) the
    projector lets go of them; the output is in its file, where a result cut again is read
    back from."""
    outputs: list[str] = []
    filters: list[OffloadingInputFilter] = []  # (a server's, one per conversation)

    @function_tool
    def fetch() -> str:
        """Fetch the export's log."""
        return outputs.pop()

    def run(number: int) -> None:
        outputs.append(megabyte_output(number))
        offload = OffloadingInputFilter(
            local(tmp_path), config=CONFIG, session_id=f"s{number}", summary_model=False
        )
        filters.append(offload)
        asyncio.run(one_run(offload, fetch))

    assert retained_per_run(run) < 200_000
    assert all(offload._projector is not None for offload in filters)  # each still kept

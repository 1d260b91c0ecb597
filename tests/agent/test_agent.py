"""The Agent loop: tools, truncation, compression, overflow retry, state and resume."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    Base64Source,
    ContextConfig,
    ContextOverflowError,
    DataBlock,
    InvalidSessionId,
    LocalWorkspace,
    ModelError,
    Msg,
    Offloader,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    URLSource,
    get_token_counter,
)
from ctxoffload.compression import TRUNCATION_MARKER, is_summary_message
from ctxoffload.readback import RETRIEVAL_TOOL_NAME
from helpers import SUMMARY, WHITESPACE_PADDING, OffloaderOnly, call, padded_report


def big_log(lines: int = 3000) -> str:
    return "\n".join(f"{i:05d} INFO request served in {i % 97} ms" for i in range(lines))


def fetch_log(log: str) -> str:
    """Fetch a log file.

    Args:
        log: which log.
    """
    return big_log() + f"\nFACT {log}"


@pytest.fixture
def workspace(tmp_path: Path) -> LocalWorkspace:
    return LocalWorkspace(tmp_path / "ws")


def make_agent(model: ScriptedModel, workspace: Offloader, **kwargs: Any) -> Agent:
    kwargs.setdefault("context_config", ContextConfig(context_window=4000, tool_result_limit=300))
    kwargs.setdefault("counter", get_token_counter(exact=False))
    return Agent(
        name="tester",
        system_prompt="You test things.",
        model=model,
        offloader=workspace,
        **kwargs,
    )


async def test_final_answer_without_tools_ends_the_loop(workspace: LocalWorkspace) -> None:
    agent = make_agent(ScriptedModel(["hello"]), workspace)
    reply = await agent.reply("hi")
    assert reply.text == "hello"
    assert [m.role for m in agent.messages] == ["system", "user", "assistant"]


async def test_sync_tool_result_goes_back_to_the_model(workspace: LocalWorkspace) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedModel([call("c1", "add", a=2, b=3), "done"])
    agent = make_agent(model, workspace, tools=[add])
    await agent.reply("add")
    result = model.calls[1][-1].tool_results[0]
    assert (result.id, result.output, result.is_error) == ("c1", "5", False)


async def test_several_calls_in_one_step_run_concurrently(workspace: LocalWorkspace) -> None:
    first, second = asyncio.Event(), asyncio.Event()

    async def ping() -> str:
        """Wait for pong."""
        first.set()
        await asyncio.wait_for(second.wait(), 30)  # a hang guard, not a speed check
        return "ping"

    async def pong() -> str:
        """Wait for ping."""
        second.set()
        await asyncio.wait_for(first.wait(), 30)
        return "pong"

    both = Msg(
        role="assistant",
        content=[
            ToolCallBlock(id="a", name="ping", input={}),
            ToolCallBlock(id="b", name="pong", input={}),
        ],
    )
    model = ScriptedModel([both, "done"])
    agent = make_agent(model, workspace, tools=[ping, pong])
    await agent.reply("go")
    outputs = [r.output for r in model.calls[1][-1].tool_results]
    assert outputs == ["ping", "pong"]


async def test_tool_exception_becomes_an_error_result(workspace: LocalWorkspace) -> None:
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([call("c1", "explode"), "ok"])
    agent = make_agent(model, workspace, tools=[explode])
    assert (await agent.reply("try")).text == "ok"
    result = model.calls[1][-1].tool_results[0]
    assert result.is_error and "RuntimeError: disk on fire" in str(result.output)


async def test_unknown_tool_and_bad_arguments_become_error_results(
    workspace: LocalWorkspace,
) -> None:
    def square(x: int) -> int:
        """Square a number."""
        return x * x

    model = ScriptedModel([call("c1", "nope"), call("c2", "square", x="not a number"), "ok"])
    agent = make_agent(model, workspace, tools=[square])
    await agent.reply("try")
    unknown = model.calls[1][-1].tool_results[0]
    bad = model.calls[2][-1].tool_results[0]
    assert unknown.is_error and "no tool named 'nope'" in str(unknown.output)
    assert "square" in str(unknown.output)
    assert bad.is_error and "argument 'x'" in str(bad.output)


async def test_large_tool_result_is_offloaded_whole_and_truncated(
    workspace: LocalWorkspace,
) -> None:
    model = ScriptedModel([call("c1", "fetch_log", log="api"), "done"])
    agent = make_agent(model, workspace, tools=[fetch_log])
    await agent.reply("read the log")
    seen = model.calls[1][-1].tool_results[0]
    assert isinstance(seen.output, str) and "<<<TRUNCATED>>>" in seen.output
    files = await workspace.list_files(agent.session_id)
    assert len(files) == 1 and files[0] in seen.output
    assert Path(files[0]).read_text() == fetch_log("api")
    assert agent.steps[0].truncated == 1


async def test_history_is_compressed_before_the_model_call(workspace: LocalWorkspace) -> None:
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(12)]
    model = ScriptedModel([*steps, "done"])
    agent = make_agent(
        model, workspace, tools=[fetch_log], summary_model=ScriptedModel(default=SUMMARY)
    )
    await agent.reply("read many logs")
    assert agent.compressor.compressions >= 1
    window = 4000
    for sent in model.calls:
        assert agent.compressor.counter.count_messages(sent) <= window
    assert any(is_summary_message(m) for m in agent.messages)
    events = await workspace.read_events(agent.session_id)
    assert any(e["kind"] == "compression" for e in events)


async def test_an_offloader_with_only_the_three_methods_truncates_and_compresses(
    workspace: LocalWorkspace,
) -> None:
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(12)]
    model = ScriptedModel([*steps, "done"])
    agent = make_agent(
        model,
        OffloaderOnly(workspace),
        tools=[fetch_log],
        summary_model=ScriptedModel(default=SUMMARY),
    )
    assert (await agent.reply("read many logs")).text == "done"
    assert agent.compressor.compressions >= 1
    summary = next(m for m in agent.messages if is_summary_message(m))
    assert str(workspace.context_path(agent.session_id)) in summary.text
    assert len(await workspace.list_files(agent.session_id)) == 12
    # Not a ReferenceReader, an EventLog nor a StateStore: no retrieval tool, no session
    # record (the workspace underneath logs its own offloads), no state.
    assert RETRIEVAL_TOOL_NAME not in agent.tools
    kinds = {e["kind"] for e in await workspace.read_events(agent.session_id)}
    assert not kinds & {"session_start", "model_call", "summary", "compression"}
    assert await workspace.read_state(agent.session_id) is None


async def test_summary_model_writes_the_summaries(workspace: LocalWorkspace) -> None:
    summarizer = ScriptedModel(default=SUMMARY)
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(12)]
    model = ScriptedModel([*steps, "done"])
    agent = make_agent(model, workspace, tools=[fetch_log], summary_model=summarizer)
    await agent.reply("go")
    assert summarizer.calls, "the summary model was never asked"
    assert all(s is not None for s in summarizer.schemas_seen)
    assert model.schemas_seen == [None] * len(model.calls)


async def test_context_overflow_compresses_once_and_retries(workspace: LocalWorkspace) -> None:
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(3)]
    model = ScriptedModel(
        [*steps, ContextOverflowError("maximum context length exceeded"), "recovered"]
    )
    config = ContextConfig(context_window=100_000, tool_result_limit=300)
    agent = make_agent(
        model,
        workspace,
        tools=[fetch_log],
        context_config=config,
        summary_model=ScriptedModel(default=SUMMARY),
    )
    reply = await agent.reply("go")
    assert reply.text == "recovered"
    assert agent.compressor.compressions == 1
    assert is_summary_message(model.calls[-1][1])


async def test_overflow_twice_is_raised(workspace: LocalWorkspace) -> None:
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(3)]
    overflow = ContextOverflowError("prompt is too long")
    model = ScriptedModel([*steps, overflow, ContextOverflowError("still too long")])
    config = ContextConfig(context_window=100_000, tool_result_limit=300)
    agent = make_agent(
        model,
        workspace,
        tools=[fetch_log],
        context_config=config,
        summary_model=ScriptedModel(default=SUMMARY),
    )
    with pytest.raises(ContextOverflowError, match="still too long"):
        await agent.reply("go")


async def test_step_limit_stops_with_a_note(workspace: LocalWorkspace) -> None:
    def noop() -> str:
        """Do nothing."""
        return "nothing"

    model = ScriptedModel(default=lambda messages: call(f"c{len(messages)}", "noop"))
    agent = make_agent(model, workspace, tools=[noop], max_steps=3)
    reply = await agent.reply("loop forever")
    assert len(model.calls) == 3
    assert "stopped after 3 steps" in reply.text


async def test_model_error_propagates(workspace: LocalWorkspace) -> None:
    agent = make_agent(ScriptedModel([]), workspace)
    with pytest.raises(ModelError, match="no steps left"):
        await agent.reply("hi")


async def test_session_id_is_generated_and_validated(workspace: LocalWorkspace) -> None:
    agent = make_agent(ScriptedModel(["a"]), workspace)
    other = make_agent(ScriptedModel(["a"]), workspace)
    assert agent.session_id != other.session_id
    with pytest.raises(InvalidSessionId):
        make_agent(ScriptedModel(["a"]), workspace, session_id="../escape")


async def test_state_json_holds_the_live_context_with_references(
    workspace: LocalWorkspace,
) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()

    def screenshot() -> list[TextBlock | DataBlock]:
        """Take a screenshot."""
        return [
            TextBlock(text="here"),
            DataBlock(source=Base64Source(media_type="image/png", data=png)),
        ]

    model = ScriptedModel([call("c1", "screenshot"), "seen"])
    agent = make_agent(
        model,
        workspace,
        tools=[screenshot],
        context_config=ContextConfig(context_window=50_000, tool_result_limit=5_000),
        session_id="run-42",
    )
    await agent.reply("look")
    state_file = workspace.state_path("run-42")
    text = state_file.read_text()
    assert png not in text, "state.json must hold references, not payloads"
    state = json.loads(text)
    assert [m["role"] for m in state["messages"]] == [m.role for m in agent.messages]
    assert "/data/" in text


async def test_a_new_agent_resumes_the_session(workspace: LocalWorkspace) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"x" * 100).decode()

    def screenshot() -> list[TextBlock | DataBlock]:
        """Take a screenshot."""
        return [DataBlock(source=Base64Source(media_type="image/png", data=png))]

    config = ContextConfig(context_window=50_000, tool_result_limit=5_000)
    first = make_agent(
        ScriptedModel([call("c1", "screenshot"), "first answer"]),
        workspace,
        tools=[screenshot],
        context_config=config,
        session_id="run-7",
    )
    await first.reply("look")
    await first.aclose()  # the session's lease is given up: another agent may write it
    model = ScriptedModel(["second answer"])
    second = make_agent(
        model, workspace, tools=[screenshot], context_config=config, session_id="run-7"
    )
    await second.reply("and now?")
    sent = model.calls[0]
    assert [m.text for m in sent if m.role == "user"] == ["look", "and now?"]
    # The system prompt comes from the new agent; everything after it is the saved session.
    assert [m.id for m in sent[1:-1]] == [m.id for m in first.messages[1:]]
    image = sent[3].tool_results[0].output[0]
    assert isinstance(image, DataBlock) and isinstance(image.source, Base64Source)
    assert image.source.data == png, "the payload is inlined again on resume"


async def test_a_resumed_agent_sends_a_reference_as_a_reference(
    workspace: LocalWorkspace,
) -> None:
    """A tool's audio goes to data/ at once and the context names the file (a URL block).
    A resumed agent inlined every data/ reference of state.json: it sent the whole clip as
    base64 (4,000,060 characters counted as 1,420 tokens, which a provider refused). Only
    what was inline in the context (the image) is inlined again."""
    import struct

    samples = bytes((i * 7) % 251 for i in range(300_000))
    header = struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8)
    wav = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt " + header
    wav += b"data" + struct.pack("<I", len(samples)) + samples
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"x" * 100).decode()

    def record_call() -> bytes:
        """Record the support call."""
        return wav

    config = ContextConfig(context_window=50_000, tool_result_limit=5_000)
    look = Msg(
        role="user",
        content=[
            TextBlock(text="record it; here is the form"),
            DataBlock(source=Base64Source(media_type="image/png", data=png)),
        ],
    )
    first_model = ScriptedModel([call("r1", "record_call"), "recorded"])
    first = make_agent(
        first_model, workspace, tools=[record_call], context_config=config, session_id="a"
    )
    await first.reply(look)
    await first.aclose()
    (clip,) = [
        p for p in first_model.calls[1][3].tool_results[0].output if isinstance(p, DataBlock)
    ]
    assert isinstance(clip.source, URLSource), "the clip is named by its data/ file"

    model = ScriptedModel(["ok"])
    second = make_agent(
        model, workspace, tools=[record_call], context_config=config, session_id="a"
    )
    await second.reply("summarise the call")

    sent = model.calls[0]
    (again,) = [p for p in sent[3].tool_results[0].output if isinstance(p, DataBlock)]
    assert again.source == clip.source
    form = next(b for b in sent[1].blocks if isinstance(b, DataBlock))
    assert isinstance(form.source, Base64Source) and form.source.data == png
    assert sum(len(m.model_dump_json()) for m in sent) < 50_000


async def test_compress_context_takes_a_one_off_config(workspace: LocalWorkspace) -> None:
    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = make_agent(
        model,
        workspace,
        tools=[fetch_log],
        context_config=ContextConfig(context_window=100_000, tool_result_limit=300),
        summary_model=ScriptedModel(default=SUMMARY),
    )
    await agent.reply("go")
    assert not (await agent.compress_context()).compressed
    tight = ContextConfig(context_window=700, trigger_ratio=0.5, reserve_ratio=0.1)
    result = await agent.compress_context(tight)
    assert result.compressed
    assert result.tokens_after < result.tokens_before
    assert agent.messages == result.messages
    assert agent.context_config.context_window == 100_000


@pytest.mark.slow
@pytest.mark.parametrize("fast", ["0", "1"], ids=["tiktoken", "rs-bpe"])
@pytest.mark.parametrize("pad", WHITESPACE_PADDING)
async def test_a_report_padded_with_a_megabyte_of_whitespace_is_offloaded(
    pad: str, fast: str, workspace: LocalWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXOFFLOAD_FAST_COUNTER", fast)

    def report() -> str:
        """Print the monthly report."""
        return padded_report(pad)

    model = ScriptedModel([call("c1", "report"), "done"])
    agent = make_agent(model, workspace, tools=[report], counter=get_token_counter(exact=True))
    assert (await agent.reply("report")).text == "done"
    sent = model.calls[1][-1].tool_results[0].output
    assert isinstance(sent, str) and TRUNCATION_MARKER in sent
    stored = next(workspace.session_dir(agent.session_id).glob("tool_result-*.txt"))
    assert stored.read_text(encoding="utf-8") == padded_report(pad)


class CountingWorkspace(LocalWorkspace):
    """A real LocalWorkspace that counts payload offloads."""

    data_offloads = 0

    async def offload_data_block(self, block: Any) -> Any:
        self.data_offloads += 1
        return await super().offload_data_block(block)


async def test_state_saving_stores_each_image_once_per_session(tmp_path: Path) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"y" * 5000).decode()

    def screenshot() -> list[TextBlock | DataBlock]:
        """Take a screenshot."""
        return [DataBlock(source=Base64Source(media_type="image/png", data=png))]

    def noop() -> str:
        """Do nothing."""
        return "ok"

    ws = CountingWorkspace(tmp_path / "ws")
    steps = [call("c1", "screenshot"), *(call(f"n{i}", "noop") for i in range(4)), "done"]
    agent = make_agent(
        ScriptedModel(steps),
        ws,
        tools=[screenshot, noop],
        context_config=ContextConfig(context_window=50_000, tool_result_limit=5_000),
    )
    await agent.reply("look")
    assert len(agent.steps) == 6
    assert ws.data_offloads == 1
    assert png not in ws.state_path(agent.session_id).read_text()


async def test_a_reply_cancelled_while_its_tools_run_leaves_no_call_unanswered(
    workspace: LocalWorkspace,
) -> None:
    # The reply is cancelled while the tool waits (a server request dropped,
    # Ctrl-C): the call must still get a result, or every later request would be refused
    # by the provider (a tool call with no result after it).
    async def hangs(host: str) -> str:
        """Probe a host.

        Args:
            host: the host.
        """
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    started = asyncio.Event()
    model = ScriptedModel([call("c1", "hangs", host="db-1"), "second answer"])
    agent = make_agent(model, workspace, tools=[hangs], session_id="s")
    # Cancelled once the tool runs, never on a clock: a busy machine may take longer than
    # any fixed time to reach the call.
    first = asyncio.ensure_future(agent.reply("first"))
    await started.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    reply = await agent.reply("second")
    assert reply.text == "second answer"
    sent = model.calls[-1]
    calls = [c.id for m in sent for c in m.tool_calls]
    [result] = [r for m in sent for r in m.tool_results]
    assert calls == ["c1"] and result.id == "c1" and result.is_error
    assert "the reply stopped (CancelledError)" in str(result.output)
    # The answer is in the session record and in the saved state too.
    state = json.loads((workspace.session_dir("s") / "state.json").read_text())
    saved = [b for m in state["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert any(b.get("type") == "tool_result" and b.get("id") == "c1" for b in saved)
    record = (workspace.session_dir("s") / "events.jsonl").read_text()
    assert "the reply stopped (CancelledError)" in record


async def test_the_same_prompt_msg_sent_every_reply_is_compressed_like_new_ones(
    tmp_path: Path,
) -> None:
    """A fixed prompt `Msg` passed to every `reply` (one id) is a new request each time: the
    context is still compressed, and the model sees each copy as a message of its own."""
    model = ScriptedModel(default="ok " * 150)
    agent = Agent(
        model=model,
        offloader=LocalWorkspace(tmp_path),
        context_config=ContextConfig(context_window=4000, trigger_ratio=0.5, reserve_ratio=0.1),
        session_id="s",
        summary_model=ScriptedModel(default=SUMMARY),
        counter=get_token_counter(exact=False),
    )
    prompt = Msg(role="user", content="Check the queue and report. " + "detail " * 100)
    for _ in range(12):
        await agent.reply(prompt)
    assert agent.compressor.compressions > 0
    assert agent.steps[-1].context_tokens <= 4000
    ids = [m.id for m in agent.messages]
    assert len(ids) == len(set(ids))

"""The ContextOffload capability under a real pydantic-ai `Agent`, offline (pydantic-ai's own
`FunctionModel`): tool results stored whole, a long run compacted with nothing lost, a resumed
run projecting the same way, and the read-back tools used from inside the agent."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

from frameworks import context_ids, require_framework

require_framework("pydantic_ai", "pydantic_ai")

import pytest  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.exceptions import ModelContextWindowExceededError  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai_scripted import (  # noqa: E402
    BIG,
    CONFIG,
    Scripted,
    agent_on,
    call,
    converse,
    dump,
    say,
    tokens,
    wire,
)

from ctxoffload import ContextConfig, LocalWorkspace, SessionBusyError  # noqa: E402
from ctxoffload.integrations.pydantic_ai import (  # noqa: E402
    ContextOffload,
    from_pydantic_ai,
    to_pydantic_ai,
)
from helpers import megabyte_output, retained_per_run  # noqa: E402


async def test_a_5_mb_tool_result_is_stored_whole_and_the_next_request_fits(tmp_path: Path) -> None:
    assert len(BIG) > 5_000_000
    model = Scripted(call("dump", {}, "call_1"), say("The export finished."))
    result = await agent_on(tmp_path / "ws", model).run("dump the log", conversation_id="t1")
    stored = tmp_path / "ws" / "sessions" / "t1" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    (returned,) = result.all_messages()[2].parts
    assert isinstance(returned, ToolReturnPart) and returned.tool_call_id == "call_1"
    assert returned.content.startswith(BIG[:200])
    assert "tool_result-call_1.txt" in returned.content and len(returned.content) < 5_000
    assert tokens(model.seen[1]) < CONFIG.context_window


async def test_the_projection_prefix_is_byte_stable_across_requests(tmp_path: Path) -> None:
    model = Scripted(call("dump", {}, "c1"), call("dump", {}, "c2"), say("Both are stored."))
    await agent_on(tmp_path / "ws", model).run("dump the log twice", conversation_id="s1")
    sent = [wire(messages) for messages in model.seen]
    assert len(sent) == 3
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before


async def test_a_long_run_is_compacted_and_what_left_is_in_context_jsonl(tmp_path: Path) -> None:
    model = Scripted()
    history = await converse(agent_on(tmp_path / "ws", model), model, range(80), "long")
    assert len(history) == 160  # the history keeps every message
    assert max(tokens(messages) for messages in model.seen) < CONFIG.context_window
    # The last request re-numbers what it holds: tell what it kept by content.
    last = set(wire(model.seen[-1]))
    everything = zip(from_pydantic_ai(history[:-1]), wire(history[:-1]), strict=True)
    left = {msg.id for msg, line in everything if line not in last}
    assert len(left) > 100
    assert left <= context_ids(tmp_path / "ws", "long")


async def test_a_resumed_run_projects_the_same_messages(tmp_path: Path) -> None:
    # A new agent and workspace object on the folder, given the history back, must send what
    # the unbroken run sent.
    control = Scripted()
    await converse(agent_on(tmp_path / "a", control), control, range(41), "t")
    first = Scripted()
    history = await converse(agent_on(tmp_path / "b", first), first, range(40), "t")
    resumed = Scripted(say("Noted, step 40 is logged. " + "ok " * 30))
    prompt = "Step 40: record the reading 280 " + "and more detail " * 20
    await agent_on(tmp_path / "b", resumed).run(
        prompt, message_history=history, conversation_id="t"
    )
    unbroken = [line.replace(str(tmp_path / "a"), "WS") for line in wire(control.seen[-1])]
    assert [line.replace(str(tmp_path / "b"), "WS") for line in wire(resumed.seen[0])] == unbroken
    assert len(wire(resumed.seen[0])) < 80  # it was compacted


def test_a_run_resumed_in_a_new_process_projects_the_same_messages(tmp_path: Path) -> None:
    control = Scripted()
    asyncio.run(converse(agent_on(tmp_path / "a", control), control, range(41), "t"))
    script = Path(__file__).with_name("pydantic_ai_resume.py")
    folder, history, out = tmp_path / "b", tmp_path / "history.json", tmp_path / "sent.json"
    for first, last in ((0, 40), (40, 41)):
        subprocess.run(
            [
                sys.executable,
                str(script),
                str(folder),
                str(first),
                str(last),
                str(history),
                str(out),
            ],
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    (resumed,) = json.loads(out.read_text())
    unbroken = [line.replace(str(tmp_path / "a"), "WS") for line in wire(control.seen[-1])]
    assert [line.replace(str(folder), "WS") for line in resumed] == unbroken


async def test_the_agent_reads_an_offloaded_result_back_with_the_toolset(tmp_path: Path) -> None:
    model = Scripted(
        call("dump", {}, "call_1"),
        call("Grep", {"pattern": "batch 123456 done"}, "call_2"),
        say("Batch 123456 finished."),
    )
    result = await agent_on(tmp_path / "ws", model).run("find batch 123456", conversation_id="r1")
    (found,) = result.all_messages()[4].parts
    assert isinstance(found, ToolReturnPart) and found.tool_call_id == "call_2"
    assert "tool_result-call_1.txt" in found.content
    assert "batch 123456 done" in found.content


def test_messages_round_trip_through_ctxoffload() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                SystemPromptPart("Be brief."),
                UserPromptPart(
                    [
                        "what is on this chart?",
                        BinaryContent(data=b"\x89PNG\r\n", media_type="image/png"),
                        ImageUrl(url="https://example.com/a.png"),
                    ]
                ),
            ]
        ),
        ModelResponse(
            parts=[
                ThinkingPart("the chart shows load", signature="sig"),
                TextPart("Looking closer."),
                ToolCallPart("zoom", {"x": 1}, "c1"),
                ToolCallPart("crop", {}, "c2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("zoom", "zoomed", "c1"),
                ToolReturnPart("crop", "give a box", "c2", outcome="retried"),
            ]
        ),
        ModelRequest(parts=[UserPromptPart("and now?")]),
    ]
    msgs = from_pydantic_ai(messages)
    assert [msg.role for msg in msgs] == ["system", "user", "assistant", "tool", "user"]
    back = to_pydantic_ai(msgs)
    assert [type(m) for m in back] == [type(m) for m in messages]
    for given, again in zip(messages, back, strict=True):
        strip = [{**vars(p), "timestamp": None} for p in given.parts]
        assert [{**vars(p), "timestamp": None} for p in again.parts] == strip


async def test_a_request_refused_as_over_the_window_is_summarised_and_sent_again(
    tmp_path: Path,
) -> None:
    refused: list[list[ModelMessage]] = []
    at: list[int] = []  # the index in `model.seen` of the attempt sent again
    model = Scripted()

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 8 and not refused:  # the provider counts more than the counter
            refused.append(list(messages))
            at.append(len(model.seen))
            raise ModelContextWindowExceededError("scripted", "input is too long")
        return model.answer(messages, info)

    model.model = FunctionModel(answer)
    agent = agent_on(tmp_path / "ws", model)
    history = await converse(agent, model, range(6), "over")
    assert len(refused) == 1 and len(history) == 12
    again = model.seen[at[0]]
    assert "context.jsonl" not in wire(refused[0])[0]
    assert "context.jsonl" in wire(again)[0]  # a summary stands for the older messages


async def test_a_history_that_lost_its_first_messages_never_takes_the_old_summary(
    tmp_path: Path,
) -> None:
    # pydantic-ai's messages have no ids. Ids made of positions alone let a history trimmed by a
    # history processor match the summary decided for the untrimmed one: the model was sent a
    # summary of messages that were no longer there, in place of the ones that were.
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.compression import Projector

    turns = [
        message
        for i in range(60)
        for message in (
            ModelRequest(parts=[UserPromptPart(content=f"request {i}: " + "w " * 40)]),
            ModelResponse(parts=[TextPart(content=f"answer {i}: " + "x " * 40)]),
        )
    ]
    projector = Projector(LocalWorkspace(tmp_path), "t", config=ContextConfig(context_window=3000))
    first = await projector.project(from_pydantic_ai(turns))
    assert len(first) < len(turns)  # summarised
    trimmed = from_pydantic_ai(turns[2:])  # one exchange dropped
    second = await projector.project(trimmed)
    # Whatever is sent now stands for the trimmed history: its own last messages, and never
    # the summary made of the untrimmed history in place of messages it does not hold.
    assert second[-1].text == trimmed[-1].text
    assert [m.id for m in second[-5:]] == [m.id for m in trimmed[-5:]]
    old_summary = {m.id for m in first} - {m.id for m in from_pydantic_ai(turns)}
    assert not old_summary & {m.id for m in second}


async def test_a_big_result_that_is_not_text_is_stored_as_the_json_the_model_would_read(
    tmp_path: Path,
) -> None:
    rows = [{"batch": i, "state": "exported", "checksum": f"{i:08x}"} for i in range(20_000)]

    def export_rows() -> list[dict[str, object]]:
        """Every exported row."""
        return rows

    model = Scripted(call("export_rows", {}, "rows_1"), say("20,000 rows."))
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    agent = Agent(model.model, tools=[export_rows], capabilities=[offload])
    result = await agent.run("list the rows", conversation_id="rows")
    stored = tmp_path / "ws" / "sessions" / "rows" / "tool_result-rows_1.txt"
    assert json.loads(stored.read_text(encoding="utf-8")) == rows  # whole, as JSON
    (returned,) = result.all_messages()[2].parts
    assert isinstance(returned, ToolReturnPart)
    assert "tool_result-rows_1.txt" in returned.content and len(returned.content) < 5_000


async def test_a_run_holds_its_session_and_a_second_run_of_it_meanwhile_is_refused(
    tmp_path: Path,
) -> None:
    """One live writer per session: a run of the same conversation started while another
    runs fails at once naming the holder; the lease is given up however a run ends."""
    entered, leave = asyncio.Event(), asyncio.Event()

    async def wait_here() -> str:
        """Wait until told."""
        entered.set()
        await leave.wait()
        return "done"

    def failing() -> str:
        """Always fails."""
        raise RuntimeError("the export service is down")

    first = Scripted(call("wait_here", {}, "w1"), say("Finished."))
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    agent = Agent(first.model, tools=[wait_here, failing], capabilities=[offload])
    running = asyncio.create_task(agent.run("wait", conversation_id="shared"))
    await entered.wait()
    second = Scripted(say("never sent"))
    with pytest.raises(SessionBusyError, match="shared"):
        await agent.run("me too", conversation_id="shared", model=second.model)
    assert second.seen == []
    other = Scripted(say("Another conversation runs."))
    await agent.run("elsewhere", conversation_id="other", model=other.model)  # not held
    leave.set()
    assert (await running).output == "Finished."
    broken = Scripted(call("failing", {}, "f1"))  # the script ends: the run raises
    with pytest.raises(Exception):  # noqa: B017 - whichever error ends the run
        await agent.run("fail", conversation_id="shared", model=broken.model)
    again = Scripted(say("Free again."))
    assert (await agent.run("again", conversation_id="shared", model=again.model)).output == (
        "Free again."
    )


def test_show_prints_what_each_request_was_sent(tmp_path: Path) -> None:
    """`ctxoffload show --step N` on a pydantic-ai conversation: the messages request N was
    sent, the 5 MB result as the head and notice the model read."""
    model = Scripted(call("dump", {}, "call_1"), say("The export finished."))
    asyncio.run(agent_on(tmp_path / "ws", model).run("dump the log", conversation_id="t1"))

    def show(*args: str) -> str:
        workdir = str(tmp_path / "ws")
        command = [sys.executable, "-m", "ctxoffload", "show", "t1", "--workdir", workdir]
        return subprocess.run([*command, *args], capture_output=True, text=True, check=True).stdout

    for step, messages in enumerate(model.seen, start=1):
        shown = json.loads(show("--step", str(step), "--json"))["messages"]
        sent = from_pydantic_ai(messages)
        assert [m["role"] for m in shown] == [m.role for m in sent]
        assert [str(m["content"]) for m in shown] == [
            str(m.model_dump(mode="json")["content"]) for m in sent
        ]
    step_2 = show("--step", "2", "--full")
    assert "tool_result-call_1.txt" in step_2 and len(step_2) < 20_000
    assert "step 2 · model call" in show()


async def test_with_memory_the_agent_keeps_a_memory_and_the_run_records_the_change(
    tmp_path: Path,
) -> None:
    create = {"command": "create", "path": "/memories/exports.md", "file_text": "batch 7 fails\n"}
    model = Scripted(call("memory", create, "m1"), say("Noted for next time."))
    offload = ContextOffload(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, memory=True, summary_model=False
    )
    agent = Agent(model.model, capabilities=[offload])
    await agent.run("remember that batch 7 fails", conversation_id="ops-1")
    memory = tmp_path / "ws" / "memories" / "exports.md"
    assert memory.read_text(encoding="utf-8") == "batch 7 fails\n"
    events_file = tmp_path / "ws" / "sessions" / "ops-1" / "events.jsonl"
    events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines()]
    (change,) = [e for e in events if e["kind"] == "memory"]
    assert change["writer"]["agent"] == "pydantic-ai" and change["writer"]["session"] == "ops-1"
    # A later conversation reads it back (memories outlive a session).
    view = {"command": "view", "path": "/memories/exports.md"}
    later = Scripted(call("memory", view, "m2"), say("Batch 7 fails."))
    await agent.run("what do you remember?", conversation_id="ops-2", model=later.model)
    assert any("batch 7 fails" in line for line in wire(later.seen[1]))
    plain = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    assert "memory" in offload.get_toolset().tools and "memory" not in plain.get_toolset().tools


async def test_a_tool_return_keeps_its_image_and_metadata_and_stores_its_value(
    tmp_path: Path,
) -> None:
    """A tool returning `ToolReturn(return_value=<big text>, content=[an image], metadata=...)`
    became a plain string in the history: its image (sent beside the result as a user part)
    and its metadata were lost, and the file held the JSON of the whole wrapper. Only the
    return value is stored and cut; the image and the metadata stay."""
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 100

    def shot() -> ToolReturn:
        """A screenshot and the page's log."""
        image = BinaryContent(data=png, media_type="image/png")
        return ToolReturn(return_value=BIG, content=[image], metadata={"page": 7})

    model = Scripted(call("shot", {}, "c1"), say("seen"))
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    agent = Agent(model.model, tools=[shot], capabilities=[offload])
    result = await agent.run("look", conversation_id="s")
    (stored,) = (tmp_path / "ws" / "sessions" / "s").glob("tool_result-*.txt")
    assert stored.read_text(encoding="utf-8") == BIG
    (part,) = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert isinstance(part.content, str) and str(stored) in part.content
    assert part.metadata == {"page": 7}
    sent = [
        item
        for m in model.seen[1]
        for p in m.parts
        if isinstance(p, UserPromptPart) and not isinstance(p.content, str)
        for item in p.content
    ]
    assert any(isinstance(item, BinaryContent) and item.data == png for item in sent)
    assert tokens(model.seen[1]) < CONFIG.context_window


async def test_a_cut_result_that_holds_an_image_is_sent_with_its_image(tmp_path: Path) -> None:
    """A tool returning `[<long text>, <image>]` enters the history as it is (pydantic-ai
    sends the image as a part of its own), and the projection cuts its text. The cut result
    was rebuilt as text alone, so the model was never sent the image; it is sent the head
    and notice and the image, and the file holds the text whole."""
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 100
    log = BIG[:20_000]

    def shot() -> list[object]:
        """A screenshot of the page and its log."""
        return [log, BinaryContent(data=png, media_type="image/png")]

    model = Scripted(call("shot", {}, "c1"), say("seen"))
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    agent = Agent(model.model, tools=[shot], capabilities=[offload])
    await agent.run("look", conversation_id="s")
    stored = tmp_path / "ws" / "sessions" / "s" / "tool_result-c1.txt"
    assert stored.read_text(encoding="utf-8") == log
    (sent,) = [p for m in model.seen[1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert isinstance(sent.content, list)
    text, image = sent.content
    assert isinstance(text, str) and text.startswith(log[:200]) and str(stored) in text
    assert isinstance(image, BinaryContent) and image.data == png
    assert tokens(model.seen[1]) < CONFIG.context_window


FILES = [
    DocumentUrl(url="https://example.com/report.pdf"),
    AudioUrl(url="https://example.com/call.mp3"),
    VideoUrl(url="https://example.com/demo.mp4"),
    ImageUrl(url="https://example.com/chart?id=7", media_type="image/png"),
    DocumentUrl(url="https://example.com/export?id=7"),  # no media type to be had
    BinaryContent(data=b"%PDF-1.7 report", media_type="application/pdf"),
    BinaryContent(data=b"ID3 call", media_type="audio/mpeg"),
]
"""A user prompt's files of every kind pydantic-ai has."""


def test_a_user_prompts_files_of_every_kind_round_trip_through_ctxoffload() -> None:
    """A document, audio or video URL became the text of its repr, and an image URL whose
    media type its URL does not say raised; each comes back as the object it was."""
    prompt = ModelRequest(parts=[UserPromptPart(["read these", *FILES])])
    (back,) = to_pydantic_ai(from_pydantic_ai([prompt]))
    (part,) = back.parts
    assert part.content == ["read these", *FILES]
    assert [type(item) for item in part.content] == [str, *map(type, FILES)]


def test_what_a_file_tells_the_provider_round_trips_through_ctxoffload() -> None:
    """`to_pydantic_ai` gave an image URL back without its `force_download` and
    `vendor_metadata` (the provider fetched it itself, at its default detail), and a file
    without the `identifier` the model names it by."""
    files = [
        ImageUrl(
            url="https://example.com/chart.png",
            force_download=True,
            vendor_metadata={"detail": "high"},
        ),
        DocumentUrl(url="https://example.com/report.pdf", identifier="report"),
        AudioUrl(url="https://example.com/call.mp3", force_download=True),
        BinaryContent(
            data=b"\x89PNG",
            media_type="image/png",
            vendor_metadata={"detail": "low"},
            identifier="s",
        ),
    ]
    prompt = ModelRequest(parts=[UserPromptPart(["read these", *files])])
    (back,) = to_pydantic_ai(from_pydantic_ai([prompt]))
    (part,) = back.parts
    assert part.content == ["read these", *files]
    got = [(f.vendor_metadata, f.identifier, getattr(f, "force_download", None)) for f in files]
    assert [
        (f.vendor_metadata, f.identifier, getattr(f, "force_download", None))
        for f in part.content[1:]
    ] == got


BESIDE = [
    "files:",
    ImageUrl(
        url="https://example.com/chart.png",
        force_download=True,
        vendor_metadata={"detail": "high"},
    ),
    BinaryContent(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 64, media_type="image/png"),
]
"""What a tool's `ToolReturn` sends beside its result: a text, an image URL, an image."""


def fetch_with_files() -> ToolReturn:
    """Fetch the report's log and files."""
    return ToolReturn(return_value=BIG, content=BESIDE)


def refused_once(model: Scripted, after: int) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """`model`, whose first request of more than `after` messages the provider refuses as over
    its window (it counts more than the counter), and the requests it refused."""
    refused: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > after and not refused:
            refused.append(messages)
            raise ModelContextWindowExceededError("scripted", "input is too long")
        return model.answer(messages, info)

    return FunctionModel(answer), refused


async def test_files_a_tool_sent_beside_its_result_never_stand_for_the_users_prompt(
    tmp_path: Path,
) -> None:
    """The files of a `ToolReturn`'s `content` are a user prompt part of their own: the
    compaction of the request after the tool kept them as the latest request and summarised
    the user's prompt away. They are the tool's, in its turn: the prompt stays verbatim."""
    prompt = "fetch the report of batch 7 and tell me what failed"
    model = Scripted(call("fetch_with_files", {}, "f1"), say("read"))
    scripted, refused = refused_once(model, after=2)
    config = ContextConfig(context_window=24_000, tool_result_limit=1_500)
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=config, summary_model=False)
    agent = Agent(scripted, tools=[fetch_with_files], capabilities=[offload])
    await agent.run(prompt, conversation_id="r")
    assert refused  # so the request after the tool was sent summarised
    sent = [p.content for m in model.seen[-1] for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompt in sent
    assert BESIDE in sent  # the tool's turn, unsummarised, with its files as they were
    msgs = from_pydantic_ai(model.seen[-1])
    (beside,) = [m for m in msgs if m.role == "tool"]
    assert beside.tool_results and len(beside.blocks) == 1 + len(BESIDE)


async def test_a_summary_of_a_tools_turn_takes_its_files_stored_and_named(tmp_path: Path) -> None:
    """A summary standing for a tool's return stood for it alone: the files sent beside it
    stayed in the context as a user's request. They leave with their tool's turn: the image
    stored in data/ and named in context.jsonl, the URL named in the artifact index."""
    model = Scripted(call("fetch_with_files", {}, "f1"), say("read"), say("done"))
    scripted, refused = refused_once(model, after=4)
    config = ContextConfig(context_window=24_000, tool_result_limit=1_500)
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=config, summary_model=False)
    agent = Agent(scripted, tools=[fetch_with_files], capabilities=[offload])
    first = await agent.run("fetch the report", conversation_id="r")
    await agent.run("thanks", message_history=first.all_messages(), conversation_id="r")
    assert refused and wire(refused[0])[-1] == wire(model.seen[-1])[-1]  # "thanks", again
    last = model.seen[-1]
    assert "context.jsonl" in wire(last)[0] and "https://example.com/chart.png" in wire(last)[0]
    sent = [p.content for m in last for p in m.parts if isinstance(p, UserPromptPart)]
    assert sent[-1] == "thanks" and BESIDE not in sent
    session = tmp_path / "ws" / "sessions" / "r"
    (image,) = (tmp_path / "ws" / "data").glob("*.png")
    assert image.read_bytes() == BESIDE[2].data
    assert str(image) in (session / "context.jsonl").read_text(encoding="utf-8")


def test_a_requests_tool_returns_and_their_files_round_trip_through_ctxoffload() -> None:
    """Two tools' `ToolReturn` content (a text, a list of files) and, in a run resumed with
    deferred results, the user's prompt after them: each is its own part again, and only the
    prompt is the user's."""
    calls = ModelResponse(
        parts=[ToolCallPart("a", {}, "c1"), ToolCallPart("b", {}, "c2")], run_id="run-1"
    )
    request = ModelRequest(
        parts=[
            ToolReturnPart("a", "done", "c1"),
            ToolReturnPart("b", "done", "c2"),
            UserPromptPart("a's note"),
            UserPromptPart(["b's files:", *BESIDE[1:]]),
            UserPromptPart("and now the summary, please"),
        ],
        run_id="run-2",
    )
    msgs = from_pydantic_ai([calls, request])
    assert [m.role for m in msgs] == ["assistant", "tool", "user"]
    assert msgs[-1].text == "and now the summary, please"
    (_, back) = to_pydantic_ai(msgs)
    assert [{**vars(p), "timestamp": None} for p in back.parts] == [
        {**vars(p), "timestamp": None} for p in request.parts
    ]
    same_run = dataclasses.replace(request, run_id="run-1")  # no prompt: every part the tools'
    assert [m.role for m in from_pydantic_ai([calls, same_run])] == ["assistant", "tool"]


async def test_a_capability_keeps_the_projectors_of_the_conversations_used_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One agent serves every conversation of a server: the capability kept a projector for
    each conversation it ever ran, for good. Past `SESSIONS_KEPT`, the least recently used
    whose run is over are forgotten; one that comes back projects from its record as a run
    resumed in a new process does: the summary and the messages after it, the same bytes."""
    from ctxoffload._doors import runs

    monkeypatch.setattr(runs, "SESSIONS_KEPT", 2)
    model = Scripted()
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    agent = Agent(model.model, tools=[dump], capabilities=[offload])
    history = await converse(agent, model, range(26), "first")
    before = wire(model.seen[-1])
    assert "context.jsonl" in before[0]  # summarised
    for number in range(5):
        await converse(agent, model, range(1), f"other-{number}")
        assert len(offload._projectors) <= 2
    assert "first" not in offload._projectors
    model.replies = iter([say("Back again.")])
    await agent.run("and once more", message_history=history, conversation_id="first")
    again = wire(model.seen[-1])
    assert again[: len(before)] == before
    assert "and once more" in again[-1]


def test_a_server_keeps_no_output_of_a_conversation_whose_run_is_over(tmp_path: Path) -> None:
    """One capability serves every conversation of a server and keeps each conversation's
    projector for its next run (up to `SESSIONS_KEPT`). Each kept the whole text of the
    output its last call cut, and its counter the counts of long texts with the texts. Once a
    run is over its projector lets go of them; the output is in its file, where a result cut
    again is read back from."""
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)

    def run(number: int) -> None:
        output = megabyte_output(number)

        def fetch() -> str:
            """Fetch the output."""
            return output

        model = Scripted(call("fetch", {}, f"call_{number}"), say("done"))
        agent = Agent(model.model, tools=[fetch], capabilities=[offload])
        # (`asyncio.run`, not `run_sync`: that leaves an event loop of its own open.)
        asyncio.run(agent.run(f"q {number}", conversation_id=f"c{number}"))

    assert retained_per_run(run) < 200_000
    assert len(offload._projectors) == 8  # each conversation's projector is still kept


async def test_a_session_id_names_the_conversation_of_runs_that_name_none(tmp_path: Path) -> None:
    """pydantic-ai gives every run a conversation id (a new UUID when none is passed or
    inherited), so `session_id=` was never used: each run without a `conversation_id` wrote
    a session of its own. It names the conversation of such runs now (pydantic-ai's own
    default conversation id), and a `conversation_id` passed or inherited still wins."""
    model = Scripted()
    offload = ContextOffload(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="desk-1", summary_model=False
    )
    agent = Agent(model.model, capabilities=[offload])
    model.replies = iter([say("first")])
    first = await agent.run("hello")
    model.replies = iter([say("second")])
    second = await agent.run("hello again")
    assert first.conversation_id == second.conversation_id == "desk-1"
    model.replies = iter([say("named")])
    named = await agent.run("elsewhere", conversation_id="other")
    model.replies = iter([say("inherited")])
    inherited = await agent.run("go on", message_history=named.all_messages())
    assert named.conversation_id == inherited.conversation_id == "other"
    sessions = sorted(path.name for path in (tmp_path / "ws" / "sessions").iterdir())
    assert sessions == ["desk-1", "other"]
    steps = [
        json.loads(line)["kind"]
        for line in (tmp_path / "ws" / "sessions" / "desk-1" / "events.jsonl")
        .read_text()
        .splitlines()
    ]
    assert steps.count("model_call") == 2


async def test_a_call_that_wrote_a_whole_file_is_sent_cut_in_the_models_own_response(
    tmp_path: Path,
) -> None:
    """The newest turn over the window because the model's own call held a whole file: the
    model is sent the call with its file cut to a head and a notice naming the file that
    holds it whole, in its own response otherwise: the call's id, path and provider item id,
    and the reasoning before it with its id and provider (which the Responses API pairs with
    the call; the capability made the response anew and lost them)."""
    body = "".join(
        f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
    )

    def write_file(path: str, content: str) -> str:
        """Write `content` to `path`."""
        return f"wrote {len(content)} characters to {path}"

    thought = ThinkingPart("I write it whole.", id="rs_1", signature="sig", provider_name="openai")
    wrote = ToolCallPart("write_file", {"path": "app/report.py", "content": body}, "w1", id="fc_1")
    model = Scripted(ModelResponse(parts=[thought, wrote]), say("Written."))
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    agent = Agent(model.model, tools=[write_file], capabilities=[offload])
    await agent.run("write the report module", conversation_id="f")

    assert len(model.seen) == 2
    last = model.seen[-1]
    assert tokens(last) < CONFIG.context_window
    (response,) = [m for m in last if isinstance(m, ModelResponse)][:1]
    thinking, sent = response.parts
    assert thinking == thought
    assert isinstance(sent, ToolCallPart) and (sent.tool_call_id, sent.id) == ("w1", "fc_1")
    args = sent.args_as_dict()
    assert args["path"] == "app/report.py"
    assert "<<<TRUNCATED>>>" in args["content"] and body.startswith(args["content"][:200])
    (stored,) = (tmp_path / "ws" / "sessions").glob("*/tool_result-w1_content*.txt")
    assert str(stored) in args["content"] and stored.read_text(encoding="utf-8") == body
    assert body not in "".join(wire(last))

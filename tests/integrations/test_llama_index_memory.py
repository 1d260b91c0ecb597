"""OffloadingMemory under a real LlamaIndex `FunctionAgent`, offline (LlamaIndex's own
`MockFunctionCallingLLM`, scripted): tool outputs stored whole, a long conversation compacted
with nothing lost, a conversation resumed in a new process sending the same bytes, `ctxoffload
show` rebuilding each read, one memory per conversation at a time, and the read-back tools
used from inside the agent."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from frameworks import context_ids, require_framework

require_framework("llama_index.core", "llama_index")

import pytest  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock  # noqa: E402
from llama_index.core.memory import StaticMemoryBlock  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.core.workflow import Context  # noqa: E402
from llama_index_scripted import (  # noqa: E402
    BIG,
    CONFIG,
    HOST_WARNINGS,
    SYSTEM,
    Scripted,
    agent_on,
    call,
    converse,
    dump,
    memory_on,
    say,
    tokens,
    wire,
)

from ctxoffload import (  # noqa: E402
    ConfigError,
    InvalidContent,
    InvalidSessionId,
    LocalWorkspace,
    SessionBusyError,
)
from ctxoffload.integrations.llama_index import (  # noqa: E402
    OffloadingMemory,
    from_llama_index,
    to_llama_index,
)

pytestmark = pytest.mark.filterwarnings(HOST_WARNINGS)


def stored_in(folder: Path, session: str) -> list[Path]:
    return sorted((folder / "sessions" / session).glob("tool_result-*.txt"))


async def test_a_5_mb_tool_output_is_stored_whole_and_the_next_call_fits(tmp_path: Path) -> None:
    assert len(BIG) > 5_000_000
    model = Scripted(call("dump", {}, "call_1"), say("The export finished."))
    memory = memory_on(tmp_path / "ws", "t1")
    await agent_on(memory, model).run("dump the log", memory=memory)
    (stored,) = stored_in(tmp_path / "ws", "t1")
    assert stored.read_text(encoding="utf-8") == BIG
    # The run's step and the memory keep the head and the notice naming the file.
    (result,) = [m for m in model.seen[1] if m.role.value == "tool"]
    assert (result.content or "").startswith(BIG[:200])
    assert stored.name in (result.content or "") and len(result.content or "") < 5_000
    assert tokens(model.seen[1]) < CONFIG.context_window
    kept = await memory.aget_all()
    assert sum(len(m.model_dump_json()) for m in kept) < 20_000
    await memory.aclose()


async def test_a_return_direct_tools_output_is_the_answer_whole(tmp_path: Path) -> None:
    # A `return_direct` tool ends the run with its output as the answer: the program gets it
    # whole (it got the head and a notice before); the tool's message is stored whole, and
    # the conversation going on, the next call is sent under the window.
    model = Scripted(call("dump", {}, "call_1"))
    memory = memory_on(tmp_path / "ws", "d1")
    direct = FunctionTool.from_defaults(dump, return_direct=True)
    agent = agent_on(memory, model, tools=[direct])
    answer = await agent.run("dump the log", memory=memory)
    assert answer.response.content == BIG
    assert len(model.seen) == 1  # (the run ended at the tool)
    (stored,) = stored_in(tmp_path / "ws", "d1")
    assert stored.read_text(encoding="utf-8") == BIG
    model.replies = [say("It was dumped.")]
    await agent.run("and now?", memory=memory)
    assert tokens(model.seen[1]) < CONFIG.context_window
    await memory.aclose()


async def test_a_big_tool_message_put_without_the_wrapper_is_kept_as_its_head(
    tmp_path: Path,
) -> None:
    memory = memory_on(tmp_path / "ws", "t")
    tool = ChatMessage(role="tool", content=BIG, additional_kwargs={"tool_call_id": "call_9"})
    await memory.aput_messages([ChatMessage(role="user", content="dump"), tool])
    stored = tmp_path / "ws" / "sessions" / "t" / "tool_result-call_9.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    (_, kept) = await memory.aget_all()
    assert kept.additional_kwargs["tool_call_id"] == "call_9"
    assert stored.name in (kept.content or "") and len(kept.content or "") < 5_000
    await memory.aclose()


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 100)


async def test_a_big_tool_message_with_an_image_keeps_the_image(tmp_path: Path) -> None:
    """A tool message of a big text and an image, put in the memory: its blocks were replaced
    by one text block, the image lost from the chat store, the reads and the workspace. The
    text is stored whole and cut; the image stays where it was."""
    memory = memory_on(tmp_path / "ws", "t")
    image = ImageBlock(image=PNG, image_mimetype="image/png")
    tool = ChatMessage(
        role="tool",
        blocks=[TextBlock(text=BIG[:50_000]), image],
        additional_kwargs={"tool_call_id": "call_7"},
    )
    await memory.aput_messages([ChatMessage(role="user", content="look"), tool])
    stored = tmp_path / "ws" / "sessions" / "t" / "tool_result-call_7.txt"
    assert stored.read_text(encoding="utf-8") == BIG[:50_000]
    (_, kept) = await memory.aget_all()
    assert [b.block_type for b in kept.blocks] == ["text", "image"]
    assert kept.blocks[1].image == image.image
    assert stored.name in (kept.content or "") and len(kept.content or "") < 5_000
    (_, read) = await memory.aget()
    assert [b.block_type for b in read.blocks] == ["text", "image"]
    await memory.aclose()


async def test_a_wrapped_tool_returning_text_and_an_image_has_its_text_cut(
    tmp_path: Path,
) -> None:
    """A wrapped tool whose output is a 5 MB text and a screenshot was left whole ("media"):
    the next call carried about 1.76 M tokens against a 4,000-token window. The text is
    stored and cut at the tool; the screenshot goes on to the model."""

    def screenshot_page() -> list[object]:
        """The page's text and a screenshot of it."""
        return [TextBlock(text=BIG), ImageBlock(image=PNG, image_mimetype="image/png")]

    model = Scripted(call("screenshot_page", {}, "c1"), say("done"))
    memory = memory_on(tmp_path / "ws", "s")
    await agent_on(memory, model, [screenshot_page]).run("look at the page", memory=memory)
    assert tokens(model.seen[1]) < CONFIG.context_window
    (stored,) = stored_in(tmp_path / "ws", "s")
    assert stored.read_text(encoding="utf-8") == BIG
    (result,) = [m for m in model.seen[1] if m.role.value == "tool"]
    assert stored.name in (result.content or "")
    (kept,) = [m for m in await memory.aget_all() if m.role.value == "tool"]
    assert [b.block_type for b in kept.blocks] == ["text", "image"]
    await memory.aclose()


async def test_the_reads_prefix_is_byte_stable_across_calls(tmp_path: Path) -> None:
    model = Scripted(call("dump", {}, "c1"), call("dump", {}, "c2"), say("Both are stored."))
    memory = memory_on(tmp_path / "ws", "s1")
    await agent_on(memory, model).run("dump the log twice", memory=memory)
    await agent_on(memory, Scripted(say("ok"))).run("again", memory=memory)
    sent = [wire(messages) for messages in model.seen]
    assert len(sent) == 3
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before
    await memory.aclose()


async def test_a_long_conversation_is_compacted_and_what_left_is_in_context_jsonl(
    tmp_path: Path,
) -> None:
    model = Scripted()
    memory = memory_on(tmp_path / "ws", "long")
    await converse(memory, model, range(80))
    everything = await memory.aget_all()
    assert len(everything) == 160  # the chat store keeps every message
    assert max(tokens(messages) for messages in model.seen) < CONFIG.context_window
    last = set(wire(model.seen[-1]))
    left = {
        msg.id
        for msg, line in zip(from_llama_index(everything[:-1]), wire(everything[:-1]), strict=True)
        if line not in last
    }
    assert len(left) > 100
    assert left <= context_ids(tmp_path / "ws", "long")
    await memory.aclose()


async def test_a_resumed_conversation_sends_the_same_messages(tmp_path: Path) -> None:
    control = Scripted()
    unbroken = memory_on(tmp_path / "a", "t")
    await converse(unbroken, control, range(41))
    first = Scripted()
    memory = memory_on(tmp_path / "b", "t")
    await converse(memory, first, range(40))
    await memory.aclose()
    # A new memory and workspace object on the chat store LlamaIndex kept.
    resumed = Scripted()
    again = memory_on(tmp_path / "b", "t")
    await converse(again, resumed, range(40, 41))

    def neutral(lines: list[str], folder: Path) -> list[str]:
        return [line.replace(str(folder), "WS") for line in lines]

    assert neutral(wire(resumed.seen[0]), tmp_path / "b") == neutral(
        wire(control.seen[-1]), tmp_path / "a"
    )
    assert len(resumed.seen[0]) < 80  # it was compacted


def test_a_conversation_resumed_in_a_new_process_sends_the_same_messages(tmp_path: Path) -> None:
    control = Scripted()

    async def unbroken() -> None:
        memory = memory_on(tmp_path / "a", "t")
        await converse(memory, control, range(41))
        await memory.aclose()

    asyncio.run(unbroken())
    script = Path(__file__).with_name("llama_index_resume.py")
    folder, db, out = tmp_path / "b", tmp_path / "chats.db", tmp_path / "sent.json"
    for first, last in ((0, 40), (40, 41)):
        subprocess.run(
            [sys.executable, str(script), str(folder), str(db), str(first), str(last), str(out)],
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    (resumed,) = json.loads(out.read_text())
    expected = [line.replace(str(tmp_path / "a"), "WS") for line in wire(control.seen[-1])]
    assert [line.replace(str(folder), "WS") for line in resumed] == expected
    assert len(resumed) < 80


def test_show_prints_what_each_read_gave_the_agent(tmp_path: Path) -> None:
    """`ctxoffload show --step N`: what the memory's N-th read gave the agent (the agent adds
    its system prompt and the run's own steps to it)."""
    model = Scripted(call("dump", {}, "call_1"), say("The export finished."))
    reads: list[list[ChatMessage]] = []

    async def run() -> None:
        memory = memory_on(tmp_path / "ws", "t1")
        agent = agent_on(memory, model)
        await agent.run("dump the log", memory=memory)
        await agent_on(memory, Scripted(say("ok"))).run("and now?", memory=memory)
        reads.append(await memory.aget())
        await memory.aclose()

    asyncio.run(run())

    def show(*args: str) -> str:
        workdir = str(tmp_path / "ws")
        command = [sys.executable, "-m", "ctxoffload", "show", "t1", "--workdir", workdir]
        return subprocess.run([*command, *args], capture_output=True, text=True, check=True).stdout

    listing = show()
    # Each read is named as what it is, a memory read (the same history read again within a
    # step, `memory read again`), never a model call nor its retry (issue 83, item 2).
    steps = listing.count("· memory read ·")
    assert steps >= 3 and "· model call" not in listing
    shown = json.loads(show("--step", str(steps), "--json"))["messages"]
    sent = from_llama_index(reads[-1])
    assert [m["role"] for m in shown] == [m.role for m in sent]
    assert [str(m["content"]) for m in shown] == [
        str(m.model_dump(mode="json")["content"]) for m in sent
    ]
    full = show("--step", str(steps), "--full")
    assert "tool_result-dump-" in full and len(full) < 20_000
    # A tool message names no tool (LlamaIndex's agents write none): named by its call's.
    assert "<- tool result dump (id call_1)" in full
    assert "<- tool result ?" not in full


async def test_a_second_memory_of_a_conversation_is_refused_while_the_first_is_open(
    tmp_path: Path,
) -> None:
    first = memory_on(tmp_path / "ws", "shared")
    await first.aput(ChatMessage(role="user", content="hello"))
    second = memory_on(tmp_path / "ws", "shared")
    with pytest.raises(SessionBusyError) as refused:
        await second.aget()
    assert "await memory.aclose()" in str(refused.value)
    assert "if_busy" not in str(refused.value)
    await first.aclose()
    assert [m.content for m in await second.aget()] == ["hello"]  # the same conversation
    await second.aclose()


async def test_the_agent_reads_an_offloaded_output_back_with_its_tools(tmp_path: Path) -> None:
    model = Scripted(
        call("dump", {}, "call_1"),
        call("Grep", {"pattern": "batch 123456 done"}, "call_2"),
        say("Batch 123456 is done."),
    )
    memory = memory_on(tmp_path / "ws", "t")
    await agent_on(memory, model).run("was batch 123456 done?", memory=memory)
    grep = [m for m in model.seen[-1] if m.role.value == "tool"][-1]
    assert "export batch 123456 done" in (grep.content or "")
    assert "tool_result-dump-" in (grep.content or "")
    await memory.aclose()


async def test_a_wrapped_tool_that_asks_for_the_workflow_context_still_gets_it(
    tmp_path: Path,
) -> None:
    got: list[object] = []

    async def remember(ctx: Context, note: str) -> str:
        """Remember a note."""
        got.append(ctx)
        return note * 1_000

    # LlamaIndex looks for the `Context` class among the annotations, not for its name (this
    # module's annotations are strings).
    remember.__annotations__ = {"ctx": Context, "note": str, "return": str}

    memory = memory_on(tmp_path / "ws", "t")
    (wrapped,) = memory.offload_tools([FunctionTool.from_defaults(remember)])
    assert isinstance(wrapped, FunctionTool) and wrapped.requires_context
    model = Scripted(call("remember", {"note": "row 7 "}, "call_1"), say("Noted."))
    agent = agent_on(memory, model, tools=[FunctionTool.from_defaults(remember)])
    await agent.run("remember row 7", memory=memory)
    assert len(got) == 1 and isinstance(got[0], Context)
    (stored,) = stored_in(tmp_path / "ws", "t")
    assert stored.read_text(encoding="utf-8") == "row 7 " * 1_000
    await memory.aclose()


def test_messages_round_trip_through_ctxoffload() -> None:
    messages = [
        ChatMessage(role="system", content=SYSTEM),
        ChatMessage(
            role="user", blocks=[TextBlock(text="look"), ImageBlock(url="https://x/y.png")]
        ),
        call("chart", {"n": 1}, "c1"),
        ChatMessage(role="tool", content="a chart", additional_kwargs={"tool_call_id": "c1"}),
    ]
    msgs = from_llama_index(messages)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool"]
    back = to_llama_index(msgs)
    assert [m.role.value for m in back] == ["system", "user", "assistant", "tool"]
    assert back[2].blocks[0].tool_kwargs == {"n": 1}
    assert back[3].additional_kwargs["tool_call_id"] == "c1" and back[3].content == "a chart"


def test_memory_blocks_and_paths_are_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="memory blocks"):
        OffloadingMemory(
            LocalWorkspace(tmp_path / "ws"),
            memory_blocks=[StaticMemoryBlock(name="core", static_content="x")],
        )
    with pytest.raises(ConfigError, match=r"LocalWorkspace\('ws'\)"):
        OffloadingMemory.from_defaults("ws")  # type: ignore[arg-type]
    # An id that is no str: the error every door gives, not pydantic's.
    with pytest.raises(InvalidSessionId, match="session_id must be a str, got int 42"):
        OffloadingMemory.from_defaults(LocalWorkspace(tmp_path / "ws"), session_id=42)  # type: ignore[arg-type]


def test_the_read_back_tools_become_openai_schemas_with_their_arguments_described(
    tmp_path: Path,
) -> None:
    # LlamaIndex refuses a description over 1024 characters when it makes a tool's schema
    # (OpenAI's limit), as its OpenAI LLM does for every call: each tool must pass.
    memory = OffloadingMemory(LocalWorkspace(tmp_path / "ws"), memory=True)
    schemas = {tool.metadata.name: tool.metadata.to_openai_tool() for tool in memory.tools}
    assert set(schemas) == {"Read", "Grep", "Glob", "memory"}
    grep = schemas["Grep"]["function"]
    assert grep["description"] and len(grep["description"]) <= 1024
    assert grep["parameters"]["properties"]["context_lines"]["description"]


async def test_puts_at_once_keep_the_stores_order_so_a_resumed_memory_reads_the_same(
    tmp_path: Path,
) -> None:
    """Six runs ending at once on one memory (six tasks putting their messages): the memory's
    own history took them in the order the tasks finished, its chat store in another, so a
    resumed memory read another history than the live one. Puts now go one at a time."""
    memory = memory_on(tmp_path / "ws", "s")
    await memory.aput(ChatMessage(role="user", content="hello"))
    runs = [
        [
            ChatMessage(role="user", content=f"run {r} asks"),
            ChatMessage(role="assistant", content=f"run {r} answers"),
        ]
        for r in range(6)
    ]
    await asyncio.gather(*(memory.aput_messages(run) for run in runs))
    live = [m.content for m in await memory.aget()]
    await memory.aclose()
    again = memory_on(tmp_path / "ws", "s")
    assert [m.content for m in await again.aget()] == live
    assert sorted(live[1:]) == sorted(m.content for run in runs for m in run)
    await again.aclose()


@pytest.mark.parametrize(
    "put",
    [
        lambda memory: memory.aput("hello"),
        lambda memory: memory.aput({"role": "user", "content": "hi"}),
        lambda memory: memory.aput_messages(["hello"]),
        lambda memory: memory.aput_messages("hello"),
        lambda memory: memory.aset(None),
    ],
    ids=["a string", "an OpenAI dict", "a list of strings", "a string as the list", "None"],
)
async def test_a_message_that_is_no_chat_message_is_refused_saying_what_it_is(
    tmp_path: Path, put: Any
) -> None:
    """`aput("hello")` and the like raised AttributeError: 'str' object has no attribute
    'role' from inside the memory; they are refused as what they are, before anything is
    written."""
    memory = memory_on(tmp_path / "ws", "s")
    with pytest.raises(InvalidContent, match="pass a"):
        await put(memory)
    assert await memory.aget_all() == []
    await memory.aclose()


FILE_BODY = "".join(
    f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
)
"""A module of 1,500 lines a model writes whole in one call (~20,000 tokens)."""


def wrote_the_file(kept_by: str) -> ChatMessage:
    """The model's turn that wrote `FILE_BODY` in one call `w1`, the call kept as LlamaIndex
    keeps it (`kept_by`): a `ToolCallBlock`, or OpenAI's copy in `additional_kwargs`, as its
    OpenAI integration keeps (and sends) it."""
    args = {"path": "app/report.py", "content": FILE_BODY}
    if kept_by == "block":
        return call("write_file", args, "w1")
    function = {"name": "write_file", "arguments": json.dumps(args)}
    raw = {"id": "w1", "type": "function", "function": function}
    return ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [raw]})


def sent_arguments(message: ChatMessage) -> tuple[str, dict[str, Any]]:
    """The id and arguments of the one call of `message`, wherever LlamaIndex keeps it (a
    call held in both places would be sent twice)."""
    blocks = [b for b in message.blocks if b.block_type == "tool_call"]
    raw = message.additional_kwargs.get("tool_calls") or []
    assert len(blocks) + len(raw) == 1
    if blocks:
        return blocks[0].tool_call_id, blocks[0].tool_kwargs
    return raw[0]["id"], json.loads(raw[0]["function"]["arguments"])


@pytest.mark.parametrize("kept_by", ["block", "openai"])
async def test_a_call_that_wrote_a_whole_file_is_sent_cut(tmp_path: Path, kept_by: str) -> None:
    """The newest turn over the window because the model's own call held a whole file: the
    model is sent the call with its file cut to a head and a notice naming the file that
    holds it whole; the call's id and path stay. A call kept in OpenAI's copy
    (`additional_kwargs["tool_calls"]`) was sent whole from there (~20,000 tokens against
    4,000: the memory cut only the blocks, and made the call a block too)."""
    memory = memory_on(tmp_path / "ws", "f")
    await memory.aput_messages(
        [
            ChatMessage(role="user", content="write the report module"),
            wrote_the_file(kept_by),
            ChatMessage(
                role="tool",
                content="wrote it",
                additional_kwargs={"tool_call_id": "w1", "name": "write_file"},
            ),
        ]
    )
    sent = await memory.aget()

    assert tokens(sent) < CONFIG.context_window
    (assistant,) = [m for m in sent if m.role.value == "assistant"]
    call_id, args = sent_arguments(assistant)
    assert call_id == "w1" and args["path"] == "app/report.py"
    assert "<<<TRUNCATED>>>" in args["content"]
    assert FILE_BODY.startswith(args["content"][:200])
    (stored,) = (tmp_path / "ws" / "sessions" / "f").glob("tool_result-w1_content*.txt")
    assert str(stored) in args["content"]
    assert stored.read_text(encoding="utf-8") == FILE_BODY
    assert FILE_BODY not in "".join(wire(sent))
    await memory.aclose()

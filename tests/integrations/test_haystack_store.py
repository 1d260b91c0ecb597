"""WorkspaceResultStore and WorkspaceCompactor under a real Haystack `Agent`, offline (Haystack's
own `MockChatGenerator`): a 5 MB result stored whole through Haystack's `ToolResultOffloadHook`
and the next call under the window, a long run compacted by Haystack's `CompactionHook` with
nothing lost, Haystack's own `ToolResultOffloadCompactor` storing through the store, the
read-back tools used from inside the agent, and the store confined to its session."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

from frameworks import require_framework, run_as_a_user

require_framework("haystack", "haystack")

import pytest  # noqa: E402
from haystack.core.serialization import allow_deserialization_module  # noqa: E402
from haystack.dataclasses import ChatMessage, ChatRole  # noqa: E402
from haystack.hooks.compaction import CompactionHook, ToolResultOffloadCompactor  # noqa: E402
from haystack.hooks.tool_result_offloading import (  # noqa: E402
    RESULT_STORE_CONTEXT_KEY,
    OffloadOverChars,
    ToolResultOffloadHook,
)
from haystack_scripted import (  # noqa: E402
    BIG,
    Scripted,
    agent_with,
    call,
    returning,
    say,
    tokens,
)

from ctxoffload import ConfigError, LocalWorkspace  # noqa: E402
from ctxoffload.integrations.haystack import (  # noqa: E402
    WorkspaceCompactor,
    WorkspaceResultStore,
)

WINDOW = 8_000

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")


def offload_hook(store: WorkspaceResultStore) -> ToolResultOffloadHook:
    return ToolResultOffloadHook(store, {"*": OffloadOverChars(3_000)})


def compaction_hook(compactor: object) -> CompactionHook:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CompactionHook(compactor, context_window=WINDOW)  # type: ignore[arg-type]


def ctxoffload(workdir: Path, *args: str) -> str:
    """What `ctxoffload ARGS... --workdir WORKDIR` prints, run as in a pipe."""
    command = [sys.executable, "-m", "ctxoffload", *args, "--workdir", str(workdir)]
    env = {name: value for name, value in os.environ.items() if name != "COLUMNS"}  # (a pipe)
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def show(workdir: Path, session: str) -> str:
    return ctxoffload(workdir, "show", session)


def test_a_5_mb_result_is_stored_whole_and_the_next_call_fits(tmp_path: Path) -> None:
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="nightly")
    model = Scripted(
        [
            call("fetch", {}, "call_1"),
            call("Grep", {"pattern": "batch 159999 done"}, "call_2"),
            say("The last batch, 159999, is done."),
        ]
    )
    agent = agent_with(
        model, [returning("fetch", [BIG]), *store.tools], {"after_tool": [offload_hook(store)]}
    )
    out = agent.run([ChatMessage.from_user("Did the export finish?")])
    assert out["last_message"].text == "The last batch, 159999, is done."
    (stored,) = (tmp_path / "ws" / "sessions" / "nightly").glob("tool_result-*.txt")
    assert stored.read_text(encoding="utf-8") == BIG
    pointer = str(out["messages"][2].tool_call_result.result)
    assert str(stored) in pointer and len(pointer) < 1_000
    assert tokens(model.seen[1]) < WINDOW
    # The agent's Grep found the last batch in the stored file.
    assert "tool_result-0_fetch_call_1.txt:160000:" in model.seen[2][-1][1]
    listing = show(tmp_path / "ws", "nightly")
    assert "Haystack (WorkspaceResultStore)" in listing.splitlines()[1]
    # The tool by its name, read from Haystack's key, not the door's (issue 83, item 3).
    assert "stored the whole result of fetch (0_fetch_call_1): " in listing
    assert "result of haystack" not in listing
    # What Haystack kept out is counted (issue 83, item 3: stats said 0 tokens kept out and
    # 0 truncations beside the bytes offloaded, ls 0 messages for a session with no log).
    assert "offloaded 1 block of fetch (0_fetch_call_1), " in listing
    (figures,) = json.loads(ctxoffload(tmp_path / "ws", "stats", "nightly", "--json"))["sessions"]
    assert figures["truncations"] == 1
    # (An estimate: 5 MB is counted by its first lines, scaled to its length.)
    assert figures["tokens_kept_out"] > tokens([("tool", BIG)]) // 2
    (row,) = json.loads(ctxoffload(tmp_path / "ws", "ls", "--json"))
    assert row["messages"] is None and row["steps"] is None


@pytest.mark.parametrize("with_ids", [True, False], ids=["ids", "no-ids"])
def test_a_long_run_is_compacted_and_nothing_is_lost(tmp_path: Path, with_ids: bool) -> None:
    """Also where the model's tool calls have no ids (Haystack allows them): read through
    OpenAI's format, such calls became plain texts and nothing was ever compacted."""
    readings = [f"reading {i} of the export: " + f"gauge {i * 7} nominal, " * 60 for i in range(40)]
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="long")
    model = Scripted(
        [
            *(call("fetch", {}, f"call_{i}" if with_ids else None) for i in range(40)),
            say("All 40 readings taken."),
        ]
    )
    hooks = {
        "after_tool": [offload_hook(store)],
        "before_llm": [compaction_hook(WorkspaceCompactor(store))],
    }
    agent = agent_with(model, [returning("fetch", list(readings)), *store.tools], hooks)
    out = agent.run([ChatMessage.from_user("Take 40 readings.")])
    assert out["last_message"].text == "All 40 readings taken."
    assert max(tokens(sent) for sent in model.seen) < WINDOW
    messages = out["messages"]
    summaries = [m for m in messages if "ctxoffload_summary" in m.meta]
    assert summaries and "context.jsonl" in summaries[0].text
    # A tool call never loses its result, nor a result its call.
    calls = {c.id for m in messages for c in m.tool_calls}
    results = {m.tool_call_result.origin.id for m in messages if m.tool_call_result}
    assert calls == results
    # Nothing is lost: each reading is in context.jsonl, or still in the conversation.
    context = (tmp_path / "ws" / "sessions" / "long" / "context.jsonl").read_text()
    kept = json.dumps([m.to_dict() for m in messages])
    assert all(r in json.loads(json.dumps(context)) or r in kept for r in readings)
    assert sum(r in context for r in readings) > 20
    assert "Take 40 readings." in (kept + context)
    assert "compressed" in show(tmp_path / "ws", "long")


def test_a_conversation_resumed_in_a_new_process_sends_what_an_unbroken_one_sends(
    tmp_path: Path,
) -> None:
    """Haystack keeps the conversation in the messages the application saves; a compacted
    conversation saved in one process and run on in another is sent what one process sends
    (the summary it holds is known again as ctxoffload's and folded into the next one)."""
    script = Path(__file__).with_name("haystack_resume.py")

    def run(folder: Path, first: int, count: int, then: int = 0) -> list[list[list[str]]]:
        saved, sent = folder.with_suffix(".saved.json"), folder.with_suffix(".sent.json")
        args = [str(folder), str(saved), str(sent), str(first), str(count), str(then)]
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(sent.read_text())  # type: ignore[no-any-return]

    unbroken = run(tmp_path / "a", 0, 30, then=20)  # one process, two runs
    run(tmp_path / "b", 0, 30)
    resumed = run(tmp_path / "b", 30, 20)  # a new process, given the saved messages

    def neutral(calls: list[list[list[str]]], folder: Path) -> str:
        return json.dumps(calls).replace(str(folder.resolve()), "WS").replace(str(folder), "WS")

    assert neutral(resumed, tmp_path / "b") == neutral(unbroken, tmp_path / "a")
    context = (tmp_path / "b" / "sessions" / "resumed" / "context.jsonl").read_text()
    for i in (0, 12, 31, 38):  # readings of both processes left the conversation whole
        assert f"reading {i} of the export: gauge {i * 7} nominal," in context


def test_haystacks_own_compactor_stores_old_results_through_the_store(tmp_path: Path) -> None:
    readings = [f"reading {i}: " + "gauge nominal, " * 150 for i in range(30)]
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="pruned")
    model = Scripted([*(call("fetch", {}, f"call_{i}") for i in range(30)), say("Done.")])
    hooks = {"before_llm": [compaction_hook(ToolResultOffloadCompactor(store, min_tokens=50))]}
    agent = agent_with(model, [returning("fetch", list(readings)), *store.tools], hooks)
    out = agent.run([ChatMessage.from_user("Take 30 readings.")])
    stored = sorted((tmp_path / "ws" / "sessions" / "pruned").glob("tool_result-*.txt"))
    assert len(stored) > 5
    texts = {p.read_text(encoding="utf-8") for p in stored}
    assert texts <= set(readings)
    pointers = [m for m in out["messages"] if "Tool result offloaded" in str(m.tool_call_result)]
    assert len(pointers) == len(stored)


def test_a_run_writes_the_store_hook_context_gives_it(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    default = WorkspaceResultStore(workspace, session_id="shared-default")
    per_run = WorkspaceResultStore(workspace, session_id="user-42")
    model = Scripted([call("fetch", {}, "call_1"), say("ok")])
    agent = agent_with(model, [returning("fetch", [BIG])], {"after_tool": [offload_hook(default)]})
    agent.run([ChatMessage.from_user("dump")], hook_context={RESULT_STORE_CONTEXT_KEY: per_run})
    assert list((tmp_path / "ws" / "sessions" / "user-42").glob("tool_result-*.txt"))
    assert not (tmp_path / "ws" / "sessions" / "shared-default").exists()


def test_an_async_run_stores_and_compacts_too(tmp_path: Path) -> None:
    readings = [f"reading {i}: " + "gauge nominal, " * 90 for i in range(30)]
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="async")
    model = Scripted(
        [call("fetch", {}, "big"), *(call("fetch", {}, f"call_{i}") for i in range(30)), say("ok")]
    )
    hooks = {
        "after_tool": [offload_hook(store)],
        "before_llm": [compaction_hook(WorkspaceCompactor(store))],
    }
    agent = agent_with(model, [returning("fetch", [BIG, *readings]), *store.tools], hooks)
    out = asyncio.run(agent.run_async([ChatMessage.from_user("go")]))
    assert out["last_message"].text == "ok"
    folder = tmp_path / "ws" / "sessions" / "async"
    assert (folder / "tool_result-0_fetch_big.txt").read_text(encoding="utf-8") == BIG
    assert (folder / "context.jsonl").stat().st_size > 10_000


def test_read_gives_back_what_write_stored_and_nothing_else(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    store = WorkspaceResultStore(workspace, session_id="mine")
    text_ref = store.write(key="3_fetch_call_1.txt", content="héllo\nworld")
    assert Path(text_ref).name == "tool_result-3_fetch_call_1.txt"
    assert store.read(text_ref) == "héllo\nworld"
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    image_ref = store.write(key="3_camera_call_2.png", content=png)
    assert "/data/" in image_ref and image_ref.endswith(".png")
    assert store.read(image_ref) == png
    # Text UTF-8 cannot carry (a lone surrogate) is a tool_result file all the same, and comes
    # back as it was; bytes under a .txt key that are not text stay bytes.
    odd = store.write(key="3_fetch_call_3.txt", content="half \ud800 a pair")
    assert Path(odd).name == "tool_result-3_fetch_call_3.txt"
    assert store.read(odd) == "half \ud800 a pair"
    raw = store.write(key="3_fetch_call_4.txt", content=b"\xff\xfe not text")
    assert store.read(raw) == b"\xff\xfe not text"
    # A second result under one key never overwrites the first.
    again = store.write(key="3_fetch_call_1.txt", content="another")
    assert again != text_ref and store.read(text_ref) == "héllo\nworld"
    # A hostile key stays a file name inside the session.
    hostile = store.write(key="../../../escape.txt", content="x")
    assert Path(hostile).parent == tmp_path / "ws" / "sessions" / "mine"
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    with pytest.raises(ValueError, match="cannot read"):
        store.read(str(outside))
    theirs = WorkspaceResultStore(workspace, session_id="theirs")
    with pytest.raises(ValueError, match="cannot read"):
        theirs.read(text_ref)


def test_the_store_round_trips_through_haystack_serialisation(tmp_path: Path) -> None:
    # Haystack loads only classes of modules it is told to trust.
    allow_deserialization_module("ctxoffload")
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="saved")
    hook = ToolResultOffloadHook.from_dict(offload_hook(store).to_dict())
    assert isinstance(hook.store, WorkspaceResultStore)
    assert hook.store.session_id == "saved"
    assert Path(hook.store.workspace.workdir) == Path(store.workspace.workdir)
    compactor = WorkspaceCompactor.from_dict(WorkspaceCompactor(store).to_dict())
    assert compactor.store.session_id == "saved"


def test_a_workspace_given_to_haystacks_hook_says_once_what_to_pass(tmp_path: Path) -> None:
    # Haystack's hook keeps any store it is given; given the workspace, not the store, it
    # kept a 750 KB result whole, stored nothing, and logged only "'LocalWorkspace' object
    # has no attribute 'write'". Run as a user runs it, with logging as Python leaves it.
    done = run_as_a_user(
        """
from haystack.dataclasses import ChatMessage
from haystack.hooks.tool_result_offloading import OffloadOverChars, ToolResultOffloadHook
from haystack_scripted import BIG, Scripted, agent_with, call, returning, say
from ctxoffload import LocalWorkspace
from ctxoffload.integrations.haystack import WorkspaceResultStore

workspace = LocalWorkspace("ws")
store = WorkspaceResultStore(workspace, session_id="s")
model = Scripted([call("fetch", {}, "c1"), call("fetch", {}, "c2"), say("Done.")])
hook = ToolResultOffloadHook(workspace, {"*": OffloadOverChars(12_000)})  # not the store
agent = agent_with(model, [returning("fetch", [BIG[:750_000]] * 2), *store.tools],
                   {"after_tool": [hook]})
agent.warm_up()
agent.run(messages=[ChatMessage.from_user("Fetch the log twice.")])
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("LocalWorkspace was")]
    assert len(ours) == 1
    assert "Pass WorkspaceResultStore(workspace, session_id=...)" in ours[0]
    assert "Haystack's ToolResultOffloadHook" in ours[0]


def test_wrong_arguments_are_refused_when_built(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"LocalWorkspace\('ws'\)"):
        WorkspaceResultStore("ws")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a WorkspaceResultStore"):
        WorkspaceCompactor(LocalWorkspace(tmp_path))  # type: ignore[arg-type]
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"))
    assert store.session_id.startswith("haystack-")
    assert WorkspaceResultStore(LocalWorkspace(tmp_path / "ws")).session_id != store.session_id


@pytest.mark.parametrize("fails_at", [3, 30], ids=["before any compaction", "after many"])
def test_a_tool_error_too_big_for_the_window_is_sent_as_the_compactors_cut(
    tmp_path: Path, fails_at: int
) -> None:
    """Haystack never offloads an error's text. The compactor cut a 200 KB error to its head
    and notice (stored whole), then gave Haystack back the message whole, matched by its id:
    the next call carried 66,233 tokens against an 8,000-token window (65,424 when nothing
    was old enough to compact yet, where the cut was dropped with the compaction)."""
    from haystack.tools import Tool

    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="err")
    trace = "".join(f"frame {k}: at worker.step (dump)\n" for k in range(6_000))
    done = {"calls": 0}

    def fetch() -> str:
        done["calls"] += 1
        if done["calls"] == fails_at:
            raise RuntimeError(trace)
        return f"reading {done['calls']}: " + "gauge nominal, " * 60

    tool = Tool(
        name="fetch",
        description="Take a reading.",
        parameters={"type": "object", "properties": {}},
        function=fetch,
    )
    model = Scripted([*(call("fetch", {}, f"c{i}") for i in range(fails_at + 2)), say("done")])
    hooks = {
        "after_tool": [offload_hook(store)],
        "before_llm": [compaction_hook(WorkspaceCompactor(store))],
    }
    out = agent_with(model, [tool, *store.tools], hooks).run([ChatMessage.from_user("go")])
    assert out["last_message"].text == "done"
    assert max(tokens(sent) for sent in model.seen) < WINDOW
    folder = tmp_path / "ws" / "sessions" / "err"
    assert any(trace.strip() in p.read_text() for p in folder.glob("tool_result-*.txt"))


PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5d6a1"
        "d60000000049454e44ae426082"
    )
).decode()


def conversation_with_media() -> list[ChatMessage]:
    """A conversation whose old turns hold what OpenAI's format cannot carry: calls without
    ids, a result with an image beside its text, a PDF, and the model's reasoning."""
    from haystack.dataclasses import (
        FileContent,
        ImageContent,
        ReasoningContent,
        TextContent,
        ToolCall,
        ToolCallResult,
    )

    messages = [ChatMessage.from_system("You inspect gauges."), ChatMessage.from_user("Go.")]
    for i in range(12):
        origin = ToolCall(tool_name="snap", arguments={"gauge": i}, id=None)
        messages.append(
            ChatMessage.from_assistant(
                f"Snapping gauge {i}.",
                tool_calls=[origin],
                reasoning=ReasoningContent(
                    reasoning_text=f"gauge {i} is next; thought {i}", extra={"sig": f"s{i}"}
                ),
            )
        )
        result = [
            TextContent(f"gauge {i} reads " + "nominal, " * 300),
            ImageContent(base64_image=PNG, mime_type="image/png"),
            FileContent(
                base64_data=base64.b64encode(f"%PDF-{i}".encode()).decode(),
                mime_type="application/pdf",
                filename=f"g{i}.pdf",
            ),
        ]
        messages.append(
            ChatMessage(
                _role=ChatRole.TOOL,
                _content=[ToolCallResult(result=result, origin=origin, error=False)],
            )
        )
    messages.append(ChatMessage.from_user("Now sum them up."))
    return messages


def test_what_openais_format_cannot_carry_is_compacted_and_kept_whole(tmp_path: Path) -> None:
    """Calls without ids (Haystack allows them), a result's image and file, the model's
    reasoning: read through OpenAI's format, the calls made plain user texts that were never
    compacted as calls, and the image, the file and the reasoning never reached
    context.jsonl. Each is now read as what it is, stored, and the calls stay paired."""
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="media")
    compactor = WorkspaceCompactor(store)
    messages = conversation_with_media()
    out = compactor.compact(messages, 2_000, None)
    assert out is not None and len(out) < len(messages)
    assert any("ctxoffload_summary" in m.meta for m in out)
    # A call never without its result: the kept calls and results are the same objects.
    kept_calls = [c for m in out for c in m.tool_calls]
    kept_results = [m.tool_call_result.origin for m in out if m.tool_call_result]
    assert len(kept_calls) == len(kept_results)
    assert all(any(c is r for r in kept_results) for c in kept_calls)
    folder = tmp_path / "ws" / "sessions" / "media"
    lines = [json.loads(line) for line in (folder / "context.jsonl").read_text().splitlines()]
    blocks = [b for line in lines if isinstance(line.get("content"), list) for b in line["content"]]
    calls = [b for b in blocks if b["type"] == "tool_call"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert calls and {c["id"] for c in calls} == {r["id"] for r in results}
    assert {c["input"]["gauge"] for c in calls} == set(range(len(calls)))
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert [t["thinking"] for t in thinking] == [
        f"gauge {i} is next; thought {i}" for i in range(len(calls))
    ]
    # The image and the file of every result that left are in data/, whole.
    stored = {p.read_bytes() for p in (tmp_path / "ws" / "data").rglob("*") if p.is_file()}
    assert base64.b64decode(PNG) in stored
    assert {f"%PDF-{i}".encode() for i in range(len(calls))} <= stored


def test_a_cut_result_keeps_its_image_in_what_haystack_sends(tmp_path: Path) -> None:
    """A result of text and an image, its text too big for the window, is cut to fit: the
    cut went back as text alone, so the model was no longer sent the image."""
    from haystack.dataclasses import ImageContent, TextContent, ToolCall, ToolCallResult

    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="cut")
    origin = ToolCall(tool_name="snap", arguments={}, id="c1")
    big = "".join(f"line {k}: gauge nominal\n" for k in range(20_000))
    result = ToolCallResult(
        result=[TextContent(big), ImageContent(base64_image=PNG, mime_type="image/png")],
        origin=origin,
        error=False,
    )
    messages = [
        ChatMessage.from_user("Snap it."),
        ChatMessage.from_assistant(tool_calls=[origin]),
        ChatMessage(_role=ChatRole.TOOL, _content=[result]),
    ]
    out = WorkspaceCompactor(store).compact(messages, 4_000, None)
    assert out is not None
    (sent,) = [m for m in out if m.tool_call_result is not None]
    parts = sent.tool_call_result.result
    assert isinstance(parts, list)
    assert [p.base64_image for p in parts if isinstance(p, ImageContent)] == [PNG]
    text = "".join(p.text for p in parts if isinstance(p, TextContent))
    assert len(text) < len(big) // 4 and "tool_result" in text
    assert sent.tool_call_result.origin is origin


def test_a_call_that_wrote_a_whole_file_is_sent_as_the_compactors_cut(tmp_path: Path) -> None:
    """The newest turn over the window because the model's own call held a whole file: the
    compactor cut the call's arguments (each long string stored whole first) and gave
    Haystack back the message whole, so the next call carried the whole file against the
    window. The model is sent the call with its file cut to a head and a notice naming the
    file that holds it whole; the call's id and path stay."""
    from haystack.tools import Tool

    body = "".join(
        f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
    )
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="f")
    tool = Tool(
        name="write_file",
        description="Write `content` to `path`.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
        function=lambda path, content: f"wrote {len(content)} characters to {path}",
    )
    model = Scripted(
        [call("write_file", {"path": "app/report.py", "content": body}, "w1"), say("Written.")]
    )
    hooks = {"before_llm": [compaction_hook(WorkspaceCompactor(store))]}
    out = agent_with(model, [tool, *store.tools], hooks).run(
        [ChatMessage.from_user("write the report module")]
    )
    assert out["last_message"].text == "Written."

    assert len(model.seen) == 2
    assert tokens(model.seen[-1]) < WINDOW
    # (Haystack asked for 0 tokens here: the request stays as the user wrote it.)
    assert [m.text for m in model.sent[-1] if m.is_from("user")] == ["write the report module"]
    (sent,) = [c for m in model.sent[-1] for c in m.tool_calls]
    assert sent.id == "w1" and sent.arguments["path"] == "app/report.py"
    content = sent.arguments["content"]
    assert "<<<TRUNCATED>>>" in content and body.startswith(content[:200])
    (stored,) = (tmp_path / "ws" / "sessions" / "f").glob("tool_result-w1_content*.txt")
    assert str(stored) in content and stored.read_text(encoding="utf-8") == body
